"""The attack registry: every edit fwsapp applies to watermarked texts before detecting them again, declared once;
importable without torch.

An entry gives the attack's parameters (default, valid values, one line of help; the published presets are the
defaults), what it edits (`edits`, one of EDITS), what `keep_entities` acts on where it applies (`protects`, one of
PROTECTS: a word that overlaps a recognised disease mention, the mention's characters, or an instruction to an LLM),
the stored text it reads besides the watermarked one (`host_text_param`: copy-paste's `into`), and its class
("module:Class", loaded on use). keep_entities and a recognizer follow from the declaration: an attack that neither
keeps nor swaps mentions has no recognizer. Each declaration is checked when the entry is made, so an inconsistent one
fails at import, not at run time. `attack --attack`, the grid's [steps] attack, the Robustness page and the
generic tests in tests/test_attacks.py read it; a new attack is its module plus one entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module

from fwsapp.judge.registry import JUDGE_BACKENDS
from fwsapp.plugins import DeclaredParams, Param, PlugIn, Registry, checked_params
from fwsapp.entities.recognizers import KINDS, MODEL_FREE_RECOGNIZER, default_recognizer, recognizers_of

# What an attack edits: words, characters, pasted spans, disease mentions, the whole text (an LLM's rewrite), or nothing
# of a watermarked text: it writes new answers that pass for watermarked (a forgery).
EDITS = ("words", "characters", "spans", "mentions", "text", "answers")
# What keep_entities keeps where a mention is: every word that overlaps one, the mention's own characters byte for
# byte, or an instruction to the rewriting model, which it may not follow.
PROTECTS = {
    "words": "no word that overlaps a disease mention the recognizer finds is edited",
    "characters": "every disease mention the recognizer finds is kept byte for byte",
    "instruction": "the model is told to keep every disease mention the recognizer finds verbatim",
}
# Stored texts an attack may read besides the watermarked one (copy-paste's host).
HOST_TEXTS = ("unwatermarked", "reference")


def recognizer_param(kind: str) -> tuple[str, Param]:
    """The recognizer parameter of an attack that reads `kind` mentions: the kind's model-free recognizer by default."""
    help = f"the {kind} recognizer that finds the mentions the attack keeps or swaps (and their survival)"
    return default_recognizer(kind, model_free=True), Param(help, choices=tuple(recognizers_of(kind)))


def keep_entities(protects: str) -> tuple[bool, Param]:
    """The keep_entities parameter of an attack whose protection acts as PROTECTS[protects] says."""
    return False, Param(f"keep the facts: {PROTECTS[protects]}", choices=(False, True))


def _data_missing(module: str):
    """An availability check: the data files the module `module` reads (its `missing()`), loaded on use."""
    return lambda: import_module(module).missing()


def share(help: str) -> Param:
    return Param(help, low=0, high=1)


@dataclass(frozen=True)
class AttackPlugIn(PlugIn, DeclaredParams):
    params: dict[str, tuple[object, Param | None]] = field(default_factory=dict)
    edits: str = "words"  # one of EDITS
    # What keep_entities acts on (a key of PROTECTS); None when the attack has no keep_entities.
    protects: str | None = None  # adds keep_entities (and the recognizer) to its parameters
    # The parameter that sets its strength (0 leaves the text as it is): the x axis of detection against strength.
    strength: str | None = None
    # The presets the literature reports (MarkMyWords' p values), for the grid and the benchmark.
    presets: tuple[float, ...] = ()
    # A parameter whose value names the stored text (one of HOST_TEXTS) that the watermarked spans are pasted into:
    # the attacked text is that other text, so at zero strength it is unwatermarked, where any other attack leaves the
    # watermarked text as it is.
    host_text_param: str | None = None
    # The parameter that says how many of the run's watermarked answers it learns from: an attack that observes writes
    # answers of its own to the run's other prompts (edits="answers"), and their detection rate is its forgery success.
    observes: str | None = None
    # The kind of fact (recognizers.KINDS) whose mentions it keeps or edits.
    mentions: str = "disease"

    def __post_init__(self):
        # keep_entities and the recognizer follow from the declaration, so no entry can forget or misname them.
        implied = {**({"keep_entities": keep_entities(self.protects)} if self.protects in PROTECTS else {}),
                   **({"recognizer": recognizer_param(self.mentions)} if self.uses_mentions else {})}
        object.__setattr__(self, "params", {**self.params, **implied})
        problems = []
        if self.edits not in EDITS:
            problems.append(f"edits={self.edits!r} is none of {', '.join(EDITS)}")
        if self.protects is not None and self.protects not in PROTECTS:
            problems.append(f"protects={self.protects!r} is none of {', '.join(PROTECTS)}")
        if "keep_entities" in self.params and self.protects is None:
            problems.append("keep_entities is implied by `protects` (what it keeps), not declared as a parameter")
        if "recognizer" in self.params and not self.uses_mentions:
            problems.append("a recognizer is implied by `protects` or edits='mentions'; it reads no mentions")
        host = self.params.get(self.host_text_param, (None, None))[1] if self.host_text_param else None
        if self.host_text_param and not (host and host.choices and set(host.choices) <= set(HOST_TEXTS)):
            problems.append(f"{self.host_text_param} must be a parameter whose choices are among {', '.join(HOST_TEXTS)}")
        if (self.observes is not None) != (self.edits == "answers") or (self.observes and self.observes not in self.params):
            problems.append("an attack that writes answers (edits='answers') names the parameter it observes by, "
                            "one of its parameters, and only such an attack does")
        if self.strength is not None and self.strength not in self.params:
            problems.append(f"its strength {self.strength!r} is not one of its parameters")
        if problems:
            raise ValueError(f"The attack '{self.name}' is declared inconsistently: {'; '.join(problems)}.")

    @property
    def uses_mentions(self) -> bool:
        """Whether it needs the recognised disease mentions: to keep them, or to edit them."""
        return self.protects is not None or self.edits == "mentions"

    @property
    def fact(self) -> str:
        """What its mentions are, named as a change of them is: "disease", "drug" or "dose"."""
        return KINDS[self.mentions].change

    @property
    def keeps_entities(self) -> bool:
        """Whether keep_entities leaves every mention byte for byte (an LLM is only asked to)."""
        return self.protects in ("words", "characters")

    @property
    def forges(self) -> bool:
        """Whether it forges the watermark (writes answers that pass for watermarked) rather than removing it."""
        return self.observes is not None

    @property
    def hosts_the_watermark(self) -> bool:
        return self.host_text_param is not None

    @property
    def spans_are(self) -> str:
        """What the spans an attacked text carries are: watermarked words pasted into a host, or text put in (entity
        swap's disease names), which changes the facts."""
        return "pasted" if self.hosts_the_watermark else "inserted"

    def host_text(self, params: dict) -> str | None:
        """The stored text kind these parameters paste into, or None."""
        return params[self.host_text_param] if self.host_text_param else None

    def recognizer(self, params: dict) -> str:
        """The recognizer that finds the mentions it keeps or swaps, which also counts their survival; the model-free
        default for an attack that reads none."""
        return params.get("recognizer", self.params["recognizer"][0] if "recognizer" in self.params
                          else MODEL_FREE_RECOGNIZER)

    def reads_model(self, checked: dict) -> bool:
        """Whether attacking with these checked parameters loads a language model here: a forger's adversary, or an LLM
        attack through the in-process backend (one through a server loads none)."""
        return "model" in self.needs or ("backend" in self.needs and JUDGE_BACKENDS[checked["backend"]].in_process)

    def checked_params(self, params: dict) -> dict:
        """The defaults updated with `params` (strings from the command line typed as the defaults are), checked; an
        LLM attack's backend has what it needs (a server's URL and model), in the attack's own parameter names."""
        checked = checked_params(self.name, self.params, self.typed_params(params))
        if "backend" in self.needs:
            from fwsapp.judge.registry import JUDGE_BACKENDS

            backend = JUDGE_BACKENDS[checked["backend"]]
            missing = [param for need, param in (("base_url", "base_url"), ("model_name", "model"))
                       if need in backend.needs and not checked.get(param)]
            if missing:
                raise ValueError(f"{self.name} through the {backend.name} backend needs {' and '.join(missing)}: the "
                                 "server's base URL (e.g. base_url=http://localhost:8000/v1) and the model it serves "
                                 "(model=NAME).")
            if unused := backend.unused_setting(checked.get("base_url"), None):
                raise ValueError(f"{self.name}: {unused}")
        return checked

    def label(self, params: dict) -> str:
        """'synonym (ratio=0.25, keep_entities)': the attack, its strength always, and what else sets it apart from
        its defaults."""
        shown = [key if value is True else f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"
                 for key, value in sorted({**self.defaults, **params}.items())
                 if key == self.strength or self.defaults.get(key) != value or key not in self.defaults]
        return f"{self.name} ({', '.join(shown)})" if shown else self.name


MARKLLM_PARAPHRASE_PROMPT = "Please rewrite the following text: "


def _rewriter(**own) -> dict:
    """An LLM attack's parameters: where the model is, how it samples, and its own."""
    return {"backend": (JUDGE_BACKENDS.default, Param("who rewrites: a judge backend (local = the loaded model)",
                                                      choices=tuple(JUDGE_BACKENDS.names()))),
            "model": ("", Param("the backend's model (empty: its default)")),
            "base_url": ("", Param("the server's URL, for an OpenAI-compatible backend")),
            **own,
            "temperature": (0.2, Param("sampling temperature (MarkLLM's 0.2)", low=0, high=2)),
            "max_tokens": (512, Param("most tokens in each reply", low=1))}


def _words(strength_help: str, default: float) -> dict:
    return {"ratio": (default, share(strength_help))}


ATTACKS = Registry("attack", [
    AttackPlugIn(
        "word-deletion", "delete a share of the words at random: exactly int(ratio × words), or each word with "
                         "probability ratio as MarkLLM's WordDeletion does (draw=markllm); ratio 0.3",
        "fwsapp.robustness.attacks.word_deletion:WordDeletion",
        params={**_words("share of the words deleted", 0.3),
                "draw": ("exact", Param("exact: int(ratio × words) words drawn without replacement; markllm: each word "
                                        "with probability ratio (MarkLLM 0.1.5)", choices=("exact", "markllm")))},
        strength="ratio", presets=(0.1, 0.3, 0.5), protects="words"),
    AttackPlugIn(
        "synonym", "replace a share of the words by a WordNet synonym (MarkLLM's SynonymSubstitution, ratio 0.5)",
        "fwsapp.robustness.attacks.synonym:SynonymSubstitution", params=_words("share of the words replaced", 0.5),
        unavailable=_data_missing("fwsapp.data.wordnet"),
        strength="ratio", presets=(0.25, 0.5, 0.75, 1.0), protects="words"),
    AttackPlugIn(
        "typo", "replace each character, with probability p, by a neighbour on a QWERTY keyboard (HELM's typos, as "
                "MarkMyWords applies them, p 0.05 or 0.1)",
        "fwsapp.robustness.attacks.typo:Typo", params={"p": (0.05, share("chance that a letter is mistyped"))},
        edits="characters", strength="p", presets=(0.05, 0.1), protects="characters"),
    AttackPlugIn(
        "misspelling", "replace each word that has a common misspelling, with probability p, by one (HELM's list from "
                       "Wikipedia, as MarkMyWords applies it, p 0.25 or 0.5)",
        "fwsapp.robustness.attacks.misspelling:Misspelling",
        params={"p": (0.25, share("chance that a word with a common misspelling is misspelt"))},
        unavailable=_data_missing("fwsapp.robustness.attacks.misspelling"),
        strength="p", presets=(0.25, 0.5), protects="characters"),
    AttackPlugIn(
        "swap", "swap each word, with probability p, with the next one (MarkMyWords' swap, p 0.05 or 0.1)",
        "fwsapp.robustness.attacks.swap:Swap", params={"p": (0.05, share("chance that a word swaps with the next"))},
        strength="p", presets=(0.05, 0.1), protects="words"),
    AttackPlugIn(
        "lowercase", "the whole text in lower case (HELM's lowercase perturbation)", "fwsapp.robustness.attacks.lowercase:Lowercase",
        edits="characters", protects="characters"),
    AttackPlugIn(
        "contraction", "contract what can be (\"do not\" → \"don't\"; HELM's contraction perturbation)",
        "fwsapp.robustness.attacks.contraction:Contraction",
        protects="characters"),
    AttackPlugIn(
        "homoglyph", "replace a share of the letters by Unicode look-alikes (Cyrillic а for Latin a); detect with "
                     "--normalize homoglyphs to map them back",
        "fwsapp.robustness.attacks.homoglyph:Homoglyph", params={"ratio": (0.1, share("share of the letters that have a "
                                                                             "look-alike replaced"))},
        edits="characters", strength="ratio", presets=(0.05, 0.1, 0.25), protects="characters"),
    AttackPlugIn(
        "copy-paste", "paste k spans of the watermarked text, each a share of it, over the same words of the "
                      "unwatermarked text or the reference (lm-watermarking's copy-paste, k-t type)",
        "fwsapp.robustness.attacks.copy_paste:CopyPaste",
        params={"spans": (3, Param("watermarked spans pasted (k)", low=1)),
                "span_share": (0.25, share("each span's length, as a share of the watermarked text's words")),
                "into": ("unwatermarked", Param("the text the spans are pasted into", choices=HOST_TEXTS))},
        edits="spans", strength="span_share", presets=(0.1, 0.25), host_text_param="into"),
    AttackPlugIn(
        "entity-swap", "replace k recognised disease mentions by other MeSH disease names: an injected factual error",
        "fwsapp.robustness.attacks.entity_swap:EntitySwap",
        params={"k": (2, Param("disease mentions replaced (fewer where the text has fewer)", low=0))},
        edits="mentions", strength="k", presets=(1, 2, 4)),
    AttackPlugIn(
        "drug-swap", "replace k recognised drug mentions by other drugs' generic names: an injected factual error",
        "fwsapp.robustness.attacks.drug_swap:DrugSwap",
        params={"k": (2, Param("drug mentions replaced (fewer where the text has fewer)", low=0))},
        edits="mentions", strength="k", presets=(1, 2, 4), mentions="chemical"),
    AttackPlugIn(
        "dose-change", "multiply or divide k recognised doses by a factor (a tenfold error by default): an injected "
                       "factual error", "fwsapp.robustness.attacks.dose_change:DoseChange",
        params={"k": (1, Param("doses changed (fewer where the text has fewer)", low=0)),
                "factor": (10.0, Param("how many times larger or smaller each changed dose is", low=1.0, high=1000.0))},
        edits="mentions", strength="k", presets=(1, 2), mentions="dose"),
    AttackPlugIn(
        "paraphrase", "the text rewritten by a language model with MarkLLM's prompt at temperature 0.2, through a "
                      "judge backend (local model, OpenAI, or an OpenAI-compatible server)",
        "fwsapp.robustness.attacks.paraphrase:Paraphrase", needs=("backend",), edits="text", test_params={"max_tokens": 8},
        params=_rewriter(prompt=(MARKLLM_PARAPHRASE_PROMPT, Param("the instruction before the text"))), protects="instruction"),
    AttackPlugIn(
        "translate", "round-trip translation, English → language → English, by a language model through a judge "
                     "backend",
        "fwsapp.robustness.attacks.translate:Translate", needs=("backend",), edits="text", test_params={"max_tokens": 8},
        params=_rewriter(language=("French", Param("the language of the round trip"))), protects="instruction"),
    AttackPlugIn(
        "spoofing", "watermark stealing (Jovanović et al., ICML 2024; MarkLLM's STEAL): learn which tokens the watermark "
                    "favours after each context from observed watermarked answers, against the unwatermarked answers to "
                    "the same prompts, then write answers to other prompts with the adversary's own model biased toward "
                    "them; forgery, not removal: its detection rate is the share of forged answers attributed to the "
                    "watermark",
        "fwsapp.robustness.attacks.spoofing:Spoofing",
        params={"observed": (100, Param("watermarked answers the adversary observes and learns from", low=1)),
                "forgeries": (32, Param("answers forged, to prompts the adversary did not observe", low=1)),
                "strength": (4.0, Param("logit bias toward the tokens learned to be favoured (MarkLLM's spoofer "
                                        "strength)", low=0, high=20)),
                "adversary": ("", Param("the adversary's own model (empty: the embedded one)")),
                "min_count": (2, Param("times a token must follow a context in the watermarked answers to be learned "
                                       "(MarkLLM's min_wm_count_nonempty)", low=1)),
                "clip": (2.0, Param("frequency ratio (watermarked / unwatermarked) at which a token counts as surely "
                                    "favoured (MarkLLM's clip_at)", low=1, open_low=True))},
        edits="answers", observes="observed", strength="observed", presets=(100, 1000, 5000), needs=("model",),
        test_params={"observed": 1, "forgeries": 1}),
])
DEFAULT_SEED = 0


def attacks_help() -> str:
    """Every attack's parameters with default, valid values and help, for `attack --help`."""
    lines = ["attacks and their parameters (--param KEY=VALUE; default, valid values, meaning):"]
    for entry in ATTACKS:
        lines.append(f"  {entry.name}: {entry.help}")
        for key, (default, spec) in entry.params.items():
            lines.append(f"    {key}={default}  {entry.valid_values(key)}; {spec.help}" if spec else f"    {key}={default}")
    return "\n".join(lines)


def mention_kinds() -> list[str]:
    """The kinds of mention the attacks keep or swap, named as a change of them is ("disease", "drug", ...)."""
    return list(dict.fromkeys(entry.fact for entry in ATTACKS if entry.uses_mentions))
