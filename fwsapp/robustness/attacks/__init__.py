"""The attack registry: every edit fwsapp applies to watermarked texts before detecting them again, declared once;
importable without torch.

An entry gives the attack's parameters (default, valid values, one line of help; the published presets are the
defaults), what it edits (`edits`: "words", "characters", "spans" or "mentions"), whether `keep_entities` applies (a
word or character edit never touches a recognised disease mention; an LLM rewrite is told to keep them), and its
class ("module:Class", loaded on use). `attack --attack`, the grid's [steps] attack, the Robustness page and the
generic tests in tests/test_attacks.py read it; a new attack is its module plus one entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module

from fwsapp.judge.registry import JUDGE_BACKENDS
from fwsapp.plugins import DeclaredParams, Param, PlugIn, Registry, checked_params
from fwsapp.entities.recognizers import MODEL_FREE_RECOGNIZER, RECOGNIZERS

RATIO = "share of the words edited"
KEEP_ENTITIES = (False, Param("leave every disease mention the recognizer finds verbatim (the facts stay)",
                              choices=(False, True)))
RECOGNIZER = (MODEL_FREE_RECOGNIZER, Param("the disease recognizer for keep_entities, entity-swap and entity "
                                           "survival", choices=tuple(RECOGNIZERS.names())))


def _data_missing(module: str):
    """An availability check: the data files `fwsapp.robustness.attacks.<module>` reads (its `missing()`), loaded on use."""
    return lambda: import_module(f"fwsapp.robustness.attacks.{module}").missing()


def share(help: str) -> Param:
    return Param(help, low=0, high=1)


@dataclass(frozen=True)
class AttackPlugIn(PlugIn, DeclaredParams):
    params: dict[str, tuple[object, Param | None]] = field(default_factory=dict)
    edits: str = "words"  # what it edits: "words", "characters", "spans", "mentions", or the whole "text" (an LLM)
    # The parameter that sets its strength (0 leaves the text as it is): the x axis of detection against strength.
    strength: str | None = None
    # The presets the literature reports (MarkMyWords' p values), for the grid and the benchmark.
    presets: tuple[float, ...] = ()
    # The attacked text is another text with watermarked words pasted in (copy-paste): at zero strength it is that
    # other text, where any other attack leaves the watermarked text as it is.
    hosts_the_watermark: bool = False

    @property
    def keeps_entities(self) -> bool:
        """Whether keep_entities leaves every mention byte for byte (an LLM is only asked to)."""
        return "keep_entities" in self.params and self.edits != "text"

    def checked_params(self, params: dict) -> dict:
        """The defaults updated with `params` (strings from the command line typed as the defaults are), checked."""
        return checked_params(self.name, self.params, {key: self._typed(key, value) for key, value in params.items()})

    def _typed(self, key: str, value):
        """`value` in its declared type, so one setting has one attack set: 2 is 2.0 where a share is declared."""
        if key not in self.params:
            return value
        default = self.params[key][0]
        if not isinstance(value, str):
            if isinstance(default, int) and not isinstance(default, bool) and isinstance(value, float) \
                    and not value.is_integer():
                raise ValueError(f"{self.name}: {key}={value!r} must be a whole number.")
            whole = isinstance(value, float) and value.is_integer() and isinstance(default, int)
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool) and not isinstance(default, bool)
            return int(value) if whole else float(value) if numeric and isinstance(default, float) else value
        if isinstance(default, bool):
            if value.lower() in ("true", "1", "yes"):
                return True
            if value.lower() in ("false", "0", "no"):
                return False
            raise ValueError(f"{self.name}: {key}={value!r} must be true or false.")
        if isinstance(default, (int, float)):
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"{self.name}: {key}={value!r} must be a number.") from None
            if isinstance(default, int) and not number.is_integer():
                raise ValueError(f"{self.name}: {key}={value!r} must be a whole number.")
            return type(default)(number)
        return value

    def label(self, params: dict) -> str:
        """'synonym (ratio=0.25, keep_entities)': the attack and what sets it apart from its defaults."""
        changed = [key if value is True else f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"
                   for key, value in sorted(params.items()) if self.defaults.get(key) != value]
        return f"{self.name} ({', '.join(changed)})" if changed else self.name


MARKLLM_PARAPHRASE_PROMPT = "Please rewrite the following text: "


def _rewriter(**own) -> dict:
    """An LLM attack's parameters: where the model is, how it samples, and its own."""
    return {"backend": (JUDGE_BACKENDS.default, Param("who rewrites: a judge backend (local = the loaded model)",
                                                      choices=tuple(JUDGE_BACKENDS.names()))),
            "model": ("", Param("the backend's model (empty: its default)")),
            "base_url": ("", Param("the server's URL, for an OpenAI-compatible backend")),
            **own,
            "temperature": (0.2, Param("sampling temperature (MarkLLM's 0.2)", low=0, high=2)),
            "max_tokens": (512, Param("most tokens in each reply", low=1)),
            "keep_entities": (False, Param("tell the model to keep every disease mention verbatim",
                                           choices=(False, True))),
            "recognizer": RECOGNIZER}


def _words(strength_help: str, default: float) -> dict:
    return {"ratio": (default, share(strength_help)), "keep_entities": KEEP_ENTITIES, "recognizer": RECOGNIZER}


ATTACKS = Registry("attack", [
    AttackPlugIn(
        "word-deletion", "delete a share of the words at random (MarkLLM's WordDeletion, ratio 0.3)",
        "fwsapp.robustness.attacks.word_deletion:WordDeletion", params=_words("share of the words deleted", 0.3),
        strength="ratio", presets=(0.1, 0.3, 0.5)),
    AttackPlugIn(
        "synonym", "replace a share of the words by a WordNet synonym (MarkLLM's SynonymSubstitution, ratio 0.5)",
        "fwsapp.robustness.attacks.synonym:SynonymSubstitution", params=_words("share of the words replaced", 0.5),
        unavailable=_data_missing("wordnet"),
        strength="ratio", presets=(0.25, 0.5, 0.75, 1.0)),
    AttackPlugIn(
        "typo", "replace each character, with probability p, by a neighbour on a QWERTY keyboard (HELM's typos, as "
                "MarkMyWords applies them, p 0.05 or 0.1)",
        "fwsapp.robustness.attacks.typo:Typo", params={"p": (0.05, share("chance that a letter is mistyped")),
                                             "keep_entities": KEEP_ENTITIES, "recognizer": RECOGNIZER},
        edits="characters", strength="p", presets=(0.05, 0.1)),
    AttackPlugIn(
        "misspelling", "replace each word that has a common misspelling, with probability p, by one (HELM's list from "
                       "Wikipedia, as MarkMyWords applies it, p 0.25 or 0.5)",
        "fwsapp.robustness.attacks.misspelling:Misspelling",
        params={"p": (0.25, share("chance that a word with a common misspelling is misspelt")),
                "keep_entities": KEEP_ENTITIES, "recognizer": RECOGNIZER},
        unavailable=_data_missing("misspelling"),
        strength="p", presets=(0.25, 0.5)),
    AttackPlugIn(
        "swap", "swap each word, with probability p, with the next one (MarkMyWords' swap, p 0.05 or 0.1)",
        "fwsapp.robustness.attacks.swap:Swap", params={"p": (0.05, share("chance that a word swaps with the next")),
                                             "keep_entities": KEEP_ENTITIES, "recognizer": RECOGNIZER},
        strength="p", presets=(0.05, 0.1)),
    AttackPlugIn(
        "lowercase", "the whole text in lower case (HELM's lowercase perturbation)", "fwsapp.robustness.attacks.lowercase:Lowercase",
        params={"keep_entities": KEEP_ENTITIES, "recognizer": RECOGNIZER}, edits="characters"),
    AttackPlugIn(
        "contraction", "contract what can be (\"do not\" → \"don't\"; HELM's contraction perturbation)",
        "fwsapp.robustness.attacks.contraction:Contraction",
        params={"keep_entities": KEEP_ENTITIES, "recognizer": RECOGNIZER}),
    AttackPlugIn(
        "homoglyph", "replace a share of the letters by Unicode look-alikes (Cyrillic а for Latin a); detect with "
                     "--normalize homoglyphs to map them back",
        "fwsapp.robustness.attacks.homoglyph:Homoglyph", params={"ratio": (0.1, share("share of the letters that have a "
                                                                             "look-alike replaced")),
                                                       "keep_entities": KEEP_ENTITIES,
                                                       "recognizer": RECOGNIZER},
        edits="characters", strength="ratio", presets=(0.05, 0.1, 0.25)),
    AttackPlugIn(
        "copy-paste", "paste k spans of the watermarked text, each a share of it, over the same words of the "
                      "unwatermarked text or the reference (lm-watermarking's copy-paste, k-t type)",
        "fwsapp.robustness.attacks.copy_paste:CopyPaste",
        params={"spans": (3, Param("watermarked spans pasted (k)", low=1)),
                "span_share": (0.25, share("each span's length, as a share of the watermarked text's words")),
                "into": ("unwatermarked", Param("the text the spans are pasted into",
                                                choices=("unwatermarked", "reference"))),
                "recognizer": RECOGNIZER},
        edits="spans", strength="span_share", presets=(0.1, 0.25), hosts_the_watermark=True),
    AttackPlugIn(
        "entity-swap", "replace k recognised disease mentions by other MeSH disease names: an injected factual error",
        "fwsapp.robustness.attacks.entity_swap:EntitySwap",
        params={"k": (2, Param("disease mentions replaced (fewer where the text has fewer)", low=0)),
                "recognizer": RECOGNIZER},
        edits="mentions", strength="k", presets=(1, 2, 4)),
    AttackPlugIn(
        "paraphrase", "the text rewritten by a language model with MarkLLM's prompt at temperature 0.2, through a "
                      "judge backend (local model, OpenAI, or an OpenAI-compatible server)",
        "fwsapp.robustness.attacks.paraphrase:Paraphrase", needs=("backend",), edits="text", test_params={"max_tokens": 8},
        params=_rewriter(prompt=(MARKLLM_PARAPHRASE_PROMPT, Param("the instruction before the text")))),
    AttackPlugIn(
        "translate", "round-trip translation, English → language → English, by a language model through a judge "
                     "backend",
        "fwsapp.robustness.attacks.translate:Translate", needs=("backend",), edits="text", test_params={"max_tokens": 8},
        params=_rewriter(language=("French", Param("the language of the round trip")))),
])
DEFAULT_SEED = 0


def attacks_help() -> str:
    """Every attack's parameters with default, valid values and help, for `attack --help`."""
    lines = ["attacks and their parameters (--param KEY=VALUE; default, valid values, meaning):"]
    for entry in ATTACKS:
        lines.append(f"  {entry.name}: {entry.help}")
        for key, (default, spec) in entry.params.items():
            lines.append(f"    {key}={default}  {spec.describe()}; {spec.help}" if spec else f"    {key}={default}")
    return "\n".join(lines)
