"""The method registry: every watermark and post-hoc detector fwsapp knows, declared once; importable without torch.

Each entry says what the CLI, the pages, sweeps and detection need to know about a method without
loading it: its name and aliases (the paper's file spellings DIP and EXPEdit), which way its score
points, what the score is called, whether it is a post-hoc detector, the parameters with their
defaults, valid values and one line of help, and the grid of the paper's sweeps. The classes in
`fwsapp/watermark/` bind to their entry (`class KGW(Watermark, info=methods.KGW)`), so nothing about
a method is written twice, and no page or command names a method to special-case it.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Callable, Sequence

from fwsapp.data.tasks import TASKS
from fwsapp.plugins import DeclaredParams, Param, PlugIn, Registry, checked_params, load_implementation
from fwsapp.secret_keys import fingerprint, is_recorded, resolved, variable
from fwsapp.watermark.expected_evidence import GREEN_LIST, GUMBEL, ExpectedEvidence


# A generated token the watermark acted on (`MethodInfo.token_coverage`); any other value is why it did not.
WATERMARKED = "watermarked"
# Why a token of a method whose detector scores exactly the tokens its processor acted on (`coverage=SCORED`) was not.
GATED = "left alone by its gate (unscored by its detector)"
SCORED = "the tokens its own detector scored"  # a `coverage` declaration: no replay, the generation's detection counts


@dataclass(frozen=True)
class GeneratedAnswer:
    """A watermarked answer as a run generated here stores it: its token ids, the next-token entropy before each (raw
    logits, nats), and how many tokens the run's own detection scored."""

    token_ids: Sequence[int]
    entropies: Sequence[float] | None = None
    scored_tokens: int | None = None


@dataclass(frozen=True)
class KeyedDraw:
    """The keyed pseudo-random draw a watermark's detector redraws (its PRF), named with the reference implementation
    it reproduces, as an evidence record states it. `context`: how many tokens before a position seed it, where the
    method's seeding context does not already say (vLLM's, whose own parameter deduplicates its contexts)."""

    name: str
    reference: str
    context: Callable[[dict], int] | None = None


@dataclass(frozen=True, kw_only=True)
class MethodInfo(PlugIn, DeclaredParams):
    """One method's declaration: a plug-in (name, help, implementation, aliases, test parameters, availability) with
    what detection and the pages need to know without loading it. `params` maps each parameter to (default, spec)."""

    params: dict[str, tuple[object, Param | None]]
    threshold_param: str
    # "higher": larger scores mean watermarked (z-scores); "lower": p-values.
    score_direction: str = "higher"
    # A score equal to the threshold is called watermarked (p ≤ threshold), as the reference detector decides: vLLM's,
    # and MarkLLM's ITS-Edit, whose p moves in steps of 1 / n_runs so that equality happens. Otherwise strict.
    threshold_inclusive: bool = False
    score_label: str = "z"
    # Post-hoc detectors watermark nothing; they separate model text from human reference text.
    post_hoc: bool = False
    # The detector runs the model itself (SWEET's entropies, the post-hoc detectors).
    needs_model: bool = False
    # The paper's Figure 5 grid: parameter -> values; empty when the method is not swept.
    sweep_grid: dict[str, list] = field(default_factory=dict)
    # A parameter that, above 0, makes the detector need the model (EntityKGW's entropy gate).
    model_param: str | None = None
    # The method reads token ids against word lists, so it needs the tokenizer (EntityKGW's lexicon).
    needs_tokenizer: bool = False
    # Its score is a z-score (standard normal) or a p-value (uniform) without a watermark, so a threshold has a
    # nominal false-positive rate; False for a score on another scale (DiPmark's green share, SynthID's mean g).
    standard_score: bool = True
    # The parameter that sets its strength, for comparisons at equal detectability (δ, α, tournament depth).
    strength_param: str | None = None
    # Serving engines that apply it themselves, so a run can be generated through one (`generate --server`).
    served_by: tuple[str, ...] = ()
    # How many tokens before a position seed its draw, from its parameters; None where no context seeds it. A seeded
    # method's detection can score each (context, token) pair once (fwsapp.detection.deduplication).
    seeding_context: Callable[[dict], int] | None = None
    # The choice parameter by which its own detector scores a repeated context once (vLLM's deduplicate_contexts),
    # its first choice scoring every one.
    deduplication_param: str | None = None
    # What it marks and its detector counts: "token", or "sentence" (a semantic watermark, generated sentence by
    # sentence with rejection sampling, fwsapp.generation.sentences).
    unit: str = "token"
    # Part of its key is fitted on the references of the run's dataset before the run generates (k-SemStamp's
    # clusters) and stored with the run (`Watermark.fit`), so every later detection of the run uses the same fit.
    fitted_on_references: bool = False
    # The keyed draw its detector redraws; every watermark declares one (post-hoc detectors have none).
    keyed_draw: KeyedDraw | None = None
    # "module:function", torch-free: (params, GeneratedAnswer, decoding settings) -> per token WATERMARKED or why its
    # processor left the token alone (fwsapp.detection.coverage); SCORED where its detector scores exactly the tokens
    # its processor acted on (a gate that needs the model or the tokenizer to replay); None: it acts on every token,
    # greedy or not.
    coverage: str | None = None
    # The closed form of its expected statistic from the model's next-token distributions (predicted tokens to
    # detect, fwsapp.detection.predicted_length); None where there is none here.
    expected_evidence: ExpectedEvidence | None = None
    # The generic check of the science (a small run of the embedded model must show the watermark): tokens per answer,
    # and parameters over `test_params` where those, set for speed, leave too little of the watermark to see.
    science_tokens: int = 16
    science_params: dict = field(default_factory=dict)
    # The parameter counting the null keys of a permutation test whose p-value is the share of them at least as
    # extreme, k / n (MarkLLM's ITS-Edit, without the test's + 1): its p moves in steps of 1 / n, and a p of 0 says
    # that none was, a p below 1 / n, not one too small for a double.
    null_keys_param: str | None = None

    def __post_init__(self):
        problems = self.declaration_problems()
        if problems:
            raise ValueError(f"Method {self.name}: " + "; ".join(problems) + ".")

    def declaration_problems(self) -> list[str]:
        """Where the entry's fields disagree, each problem naming its field: what detection, thresholds, evidence
        records and the length prediction read from the entry must be one consistent story, learnt from the entry
        and not from examples."""
        problems = []
        names = set(self.params)
        if self.score_direction not in ("higher", "lower"):
            problems.append(f"score_direction={self.score_direction!r} must be 'higher' (a z) or 'lower' (a p-value)")
        if self.threshold_param not in names:
            problems.append(f"threshold_param={self.threshold_param!r} is not one of its params")
        if self.score_label == "p" and self.score_direction != "lower":
            problems.append("score_label='p' needs score_direction='lower': a small p-value is the evidence")
        if self.score_label == "z" and self.score_direction != "higher":
            problems.append("score_label='z' needs score_direction='higher': a large z is the evidence")
        if self.standard_score and self.score_label not in ("z", "p"):
            problems.append(f"standard_score=True promises a z or a p-value, and score_label is {self.score_label!r}")
        threshold = self.defaults.get(self.threshold_param)
        if self.score_label == "p" and isinstance(threshold, (int, float)) and not 0 < threshold < 1:
            problems.append(f"threshold_param {self.threshold_param}'s default {threshold} is no p-value in (0, 1)")
        if self.null_keys_param is not None and self.score_label != "p":
            problems.append(f"null_keys_param={self.null_keys_param!r} counts a p-value's null keys, and score_label "
                            f"is {self.score_label!r}")
        for field_name in ("strength_param", "model_param", "deduplication_param", "null_keys_param"):
            value = getattr(self, field_name)
            if value is not None and value not in names:
                problems.append(f"{field_name}={value!r} is not one of its params")
        if self.keyed_draw is not None and self.keyed_draw.context is not None and self.seeding_context is not None:
            problems.append("seeding_context and keyed_draw.context both say how many tokens seed the draw: keep one")
        if self.post_hoc:
            problems += [f"{field_name} is declared, and a post-hoc detector has no watermark to draw, seed or strengthen"
                         for field_name in ("keyed_draw", "seeding_context", "strength_param", "expected_evidence")
                         if getattr(self, field_name) is not None]
        elif self.keyed_draw is None:
            problems.append("a watermark declares its keyed_draw (the PRF its detector redraws, for evidence records), "
                            "e.g. keyed_draw=MARKLLM_GREEN_LIST")
        expected = self.expected_evidence
        if expected is not None:
            if expected.score_label != self.score_label:
                problems.append(f"expected_evidence predicts a {expected.score_label}, and score_label is "
                                f"{self.score_label!r}")
            missing = [name for name in expected.needs_params if name not in names]
            if missing:
                problems.append(f"expected_evidence reads {', '.join(missing)}, which it does not declare in params")
        return problems

    @property
    def evidence(self):
        """The per-token evidence its detector adds up (`fwsapp.watermark.evidence`), declared by the detector class;
        None when the score is no such sum (an alignment, a maximin), so the score at a length needs the prefix
        detected again. Loads the class."""
        return self.load().evidence

    def token_coverage(self, params: dict, answer: GeneratedAnswer, sampling: dict) -> list[str]:
        """Per generated token, WATERMARKED or the reason this method's processor left it alone (`params`: checked)."""
        if self.coverage is None:
            return [WATERMARKED] * len(answer.token_ids)
        if self.coverage == SCORED:
            if answer.scored_tokens is None:
                raise ValueError(f"{self.name}'s coverage is the tokens its detector scored at generation, and this "
                                 "answer has no such count: detect the run again.")
            acted = min(answer.scored_tokens, len(answer.token_ids))
            return [WATERMARKED] * acted + [GATED] * (len(answer.token_ids) - acted)
        return load_implementation(self.coverage)(params, answer, sampling)

    @property
    def secret_params(self) -> tuple[str, ...]:
        """Its keys: the parameters declared secret."""
        return tuple(name for name, spec in self.param_specs.items() if spec is not None and spec.secret)

    def context_width(self, params: dict) -> int | None:
        """How many tokens before a position seed its keyed draw (None: no context seeds it)."""
        width = (self.keyed_draw and self.keyed_draw.context) or self.seeding_context
        return None if width is None else width({**self.defaults, **params})

    def detector_needs_model(self, params: dict) -> bool:
        """Whether detecting with these parameters runs the model."""
        return self.needs_model or (self.model_param is not None and {**self.defaults, **params}[self.model_param] > 0)

    @property
    def detection_kinds(self) -> tuple[str, str]:
        """(positive, negative) text kinds for this method's detection metrics."""
        return ("unwatermarked", "reference") if self.post_hoc else ("watermarked", "unwatermarked")

    def typed_params(self, params: dict) -> dict:
        """`params` in their declared types (`plugins.typed_value`), so one setting has one run id, with each key given
        as `$VAR` recorded as the variable's name and the fingerprint of the key it holds now (checked first as a key
        written out is)."""
        return {key: f"${variable(value)} {fingerprint(self.key_from(key, value))}"
                if key in self.param_specs and self.param_specs[key].names_a_variable(value) else value
                for key, value in DeclaredParams.typed_params(self, params).items()}

    def with_keys(self, params: dict) -> dict:
        """`params` with each key kept in an environment variable read from it (a watermark's own parameters)."""
        return {key: self.key_from(key, value)
                if key in self.param_specs and self.param_specs[key].names_a_variable(value) else value
                for key, value in params.items()}

    def key_from(self, name: str, reference: str) -> int:
        """The key parameter `name` given as `$VAR`, read from the variable and held to the same range as a key written
        out; a message names the parameter and the variable, never the value."""
        spec = self.param_specs[name]
        text = resolved(reference, f"{self.name}'s {name}")
        try:
            key = int(text)
        except ValueError:
            raise ValueError(f"{self.name}'s {name}: ${variable(reference)} does not hold a whole number; set it to the "
                             f"key, a whole number {spec.describe(secret=False)}.") from None
        spec.check(self.name, name, key, shown=f"the key in ${variable(reference)}")
        return key

    def checked_params(self, params: dict) -> dict:
        """The defaults updated with `params`, each checked against its spec (a key given as `$VAR` too, read from its
        variable); a clear error otherwise."""
        merged = checked_params(self.name, self.params, params)
        for key, spec in self.param_specs.items():
            # A `$VAR` just given is read and range-checked now; a recorded one (with its fingerprint) where a
            # watermark is built, so that a page showing a run needs no key.
            if spec.names_a_variable(merged[key]) and not is_recorded(merged[key]):
                self.key_from(key, merged[key])
        return merged

    def threshold(self, params: dict) -> float:
        """The threshold a text's score is held to under these parameters (its own, else the default)."""
        return {**self.defaults, **params}[self.threshold_param]

    def is_watermarked(self, score: float, params: dict) -> bool:
        return bool(beyond_threshold(score, self.threshold(params), self.score_direction, self.threshold_inclusive))

    def changed_params(self, params: dict) -> str:
        """What sets these parameters apart from the defaults, e.g. 'delta=1, gamma=0.25': a readable label."""
        changed = [f"{key}={value:g}" if isinstance(value, float) else f"{key}=${variable(value)}"
                   if key in self.param_specs and self.param_specs[key].names_a_variable(value) else f"{key}={value}"
                   for key, value in sorted(params.items()) if self.defaults.get(key, value) != value
                   or key not in self.defaults]  # a key kept in a variable by the variable's name, not its record
        return ", ".join(changed) or "defaults"

    def settings(self, params: dict) -> str:
        """'delta=1', 'delta=2 (defaults)', 'delta=2, gamma=0.25' or 'defaults': the changed parameters, with the
        method's strength always named, so two runs that differ in strength read apart wherever they sit together."""
        changed = self.changed_params(params)
        strength = self.strength_param
        if not strength or f"{strength}=" in changed:
            return changed
        value = {**self.defaults, **params}[strength]
        named = f"{strength}={value:g}" if isinstance(value, float) else f"{strength}={value}"
        return f"{named} (defaults)" if changed == "defaults" else f"{named}, {changed}"

    def p_resolution(self, params: dict) -> float | None:
        """The step of its p-values where they count null keys (1 / n_runs), so that a p of 0 reads as below it;
        None where its p-value has no steps."""
        return 1 / {**self.defaults, **params}[self.null_keys_param] if self.null_keys_param else None

    def verdict_rule(self, params: dict) -> str:
        """'score > 4.0' or 'p < 0.2': what a text's score must pass to be called watermarked."""
        return f"{self.score_label} {comparison(self.score_direction, self.threshold_inclusive)} {self.threshold(params):g}"


def beyond_threshold(scores, threshold: float, direction: str, inclusive: bool = False):
    """Whether scores (a number or an array) are called watermarked at a threshold: below it for p-values, above it
    for z-scores, and at it only where the method's reference decides so (`MethodInfo.threshold_inclusive`)."""
    if direction == "lower":
        return scores <= threshold if inclusive else scores < threshold
    return scores >= threshold if inclusive else scores > threshold


def comparison(direction: str, inclusive: bool = False) -> str:
    """The sign `beyond_threshold` tests, as a verdict rule writes it: '<', '≤', '>' or '≥'."""
    return ("≤" if inclusive else "<") if direction == "lower" else ("≥" if inclusive else ">")


def tokens_before(param: str, less: int = 0) -> Callable[[dict], int]:
    """A method's seeding context: its parameter `param`, less `less` (SynthID's n-gram holds the token itself); 0 in a
    parameter that may say "the whole context" means every token before."""
    def width(params: dict) -> int:
        return params[param] - less if params[param] else 2**31

    return width


def no_context(params: dict) -> int:
    """One green list for every position (Unigram): a pair is the token alone."""
    return 0


# The keyed draws, as evidence records name them.
MARKLLM_GREEN_LIST = KeyedDraw("torch.randperm of the vocabulary seeded by hash_key × the previous tokens (rng: a GPU's "
                               "generator or a CPU's)", "MarkLLM 0.1.5 KGW")
SHA256_PERMUTATION = KeyedDraw("vocabulary permutation seeded by SHA-256 of the key and the previous tokens",
                               "DiPmark's reference code")
VLLM_PHILOX = KeyedDraw("Philox4x32-10 keyed by the last context_width tokens", "vLLM 0.33.0 v1/watermarking/prfs/philox.py",
                        context=tokens_before("context_width"))
SEMANTIC_REGIONS = KeyedDraw("valid regions drawn from a generator seeded by key × the previous sentence's region",
                             "MarkLLM 0.1.5 SemStamp")

# Parameters several methods share.
RNG_PARAMS = {
    "rng": ("cuda", Param("green-list generator: cuda = MarkLLM on a GPU (the paper), cpu = MarkLLM on a CPU",
                          choices=("cuda", "cpu"))),
    "cuda_blocks": (0, Param("cap on CUDA randperm's grid, as a smaller GPU applies it (0 = none; 492 = RTX 3090 "
                             "at 128,256 tokens)", low=0)),
}
GAMMA = Param("share of the vocabulary that is green", low=0, high=1, open_low=True, open_high=True)
DELTA = Param("logit bias added to green tokens (the literature: 0.5 to 10)", low=0, high=20)
Z_THRESHOLD = Param("z-score above which a text is called watermarked")
# Up to 2^40: the SWEET/EXP seeding multiplies the key by a token-id product below the vocabulary size, and the
# seed must fit a signed 64-bit integer for vocabularies up to 2^23.
KEY = Param("secret key seeding the watermark", low=0, high=2**40, secret=True)
GREEN_LIST_GRID = {"delta": [0.5, 1.0, 2.0], "gamma": [0.1, 0.25, 0.5]}
XI_SOURCES = ("pcg64", "markllm")
ALIGNMENTS = ("first", "all")
SYNTHID_DETECTOR = "mean-score detector (SynthID's Bayesian detector needs training)"

KGW = MethodInfo(
    "KGW", "Kirchenbauer et al. (2023): bias a pseudo-random green list seeded by the previous token.",
    params={"gamma": (0.5, GAMMA), "delta": (2.0, DELTA), "hash_key": (15485863, KEY),
            "prefix_length": (1, Param("tokens before each position that seed its green list", low=1)),
            "z_threshold": (4.0, Z_THRESHOLD), **RNG_PARAMS},
    threshold_param="z_threshold", sweep_grid=GREEN_LIST_GRID, strength_param="delta",
    seeding_context=tokens_before("prefix_length"), implementation="fwsapp.watermark.kgw:KGW",
    keyed_draw=MARKLLM_GREEN_LIST, expected_evidence=GREEN_LIST,
)
SWEET = MethodInfo(
    "SWEET", "Lee et al. (2024): KGW applied and detected only where the next-token entropy exceeds a threshold.",
    params={**KGW.params,
            "entropy_threshold": (0.9, Param("watermark only where the next-token entropy exceeds this (nats)", low=0))},
    threshold_param="z_threshold", needs_model=True, sweep_grid=GREEN_LIST_GRID,
    strength_param="delta", seeding_context=tokens_before("prefix_length"), implementation="fwsapp.watermark.sweet:SWEET",
    keyed_draw=MARKLLM_GREEN_LIST, coverage="fwsapp.watermark.entropy_gate:coverage",
)
DIPMARK = MethodInfo(
    "DiPmark", "Wu et al. (2024): distribution-preserving reweighting along a keyed permutation (unbiased).",
    params={"gamma": (0.5, Param("quantile of the permutation above which a token counts as green", low=0, high=1,
                          open_low=True, open_high=True)),
            "alpha": (0.45, Param("reweighting strength (0 = no watermark, 0.5 = strongest)", low=0, high=0.5)),
            "key": (42, KEY),
            "prefix_length": (5, Param("context tokens hashed into each permutation (0 = the whole context)", low=0)),
            "z_threshold": (1.513, Z_THRESHOLD), **RNG_PARAMS},
    threshold_param="z_threshold", aliases=("DIP",), sweep_grid={"alpha": [0.4, 0.45, 0.5]}, standard_score=False, strength_param="alpha",
    seeding_context=tokens_before("prefix_length"), implementation="fwsapp.watermark.dipmark:DiPmark",
    keyed_draw=SHA256_PERMUTATION,
)
EXP_EDIT = MethodInfo(
    "EXP-edit", "Kuditipudi et al. (2024): exponential-minimum sampling with a keyed sequence; edit-robust p-values.",
    params={"pseudo_length": (256, Param("length of the key sequence ξ", low=1)),
            "sequence_length": (200, Param("tokens aligned at detection (with align=first)", low=1)),
            "n_runs": (100, Param("null keys in the permutation test", low=1)),
            "key": (42, KEY),
            "gamma": (0.0, Param("insertion/deletion cost of the alignment", low=0)),
            "p_threshold": (0.2, Param("p-value below which a text is called watermarked", low=0, high=1, open_low=True)),
            "xi": ("pcg64", Param("key sequence: pcg64 (fast), or markllm to check MarkLLM's EXP-edit texts",
                           choices=XI_SOURCES)),
            "align": ("first", Param("first = the first sequence_length tokens; all = every token, as MarkLLM",
                              choices=ALIGNMENTS))},
    threshold_param="p_threshold", aliases=("EXPEdit",), score_direction="lower", score_label="p",
    sweep_grid={"pseudo_length": [100, 200, 300]},
    implementation="fwsapp.watermark.exp_edit:ExpEdit", test_params={"n_runs": 20},
    keyed_draw=KeyedDraw("key sequence ξ of uniforms drawn from the key (pcg64, or MarkLLM's with xi=markllm)",
                         "Kuditipudi et al.'s reference code"),
)
ENTITY_KGW = MethodInfo(
    "EntityKGW", "KGW that spares medical entities: no bias inside a lexicon name or to a token that starts one; "
                 "detected from the text alone.",
    params={**KGW.params,
            "entropy_threshold": (0.0, Param("also skip steps whose next-token entropy is at most this (nats); 0 = off; "
                                      "above 0 the detector needs the model", low=0)),
            "lexicon": ("mesh", Param("names spared: mesh = MeSH diseases, mesh+drugs = and drug names, or a file with one "
                               "name per line", choices=("mesh", "mesh+drugs"), or_file=True))},
    threshold_param="z_threshold", aliases=("entity-kgw", "EKGW"), sweep_grid={"delta": [0.5, 1.0, 2.0, 4.0]},
    model_param="entropy_threshold", needs_tokenizer=True, strength_param="delta",
    seeding_context=tokens_before("prefix_length"), implementation="fwsapp.watermark.entity_kgw:EntityKGW",
    keyed_draw=MARKLLM_GREEN_LIST, coverage=SCORED,
)
ENTITY_KGW_PREDICTED = MethodInfo(
    "EntityKGW-Predict", "EntityKGW that also predicts entity starts: no bias at a step where the model is likely to "
                         "start a lexicon name; detected with the model.",
    params={**ENTITY_KGW.params,
            "start_mass": (0.25, Param("leave a step unbiased where the model puts at least this probability on tokens "
                                       "that start a lexicon name", low=0, high=1, open_low=True))},
    threshold_param="z_threshold", aliases=("entity-kgw-predict", "EKGW-P"), sweep_grid={"delta": [0.5, 1.0, 2.0, 4.0]},
    needs_model=True, needs_tokenizer=True, strength_param="delta", seeding_context=tokens_before("prefix_length"),
    implementation="fwsapp.watermark.entity_kgw_predicted:EntityKGWPredicted",
    keyed_draw=MARKLLM_GREEN_LIST, coverage=SCORED,
)
UNIGRAM = MethodInfo(
    "Unigram", "Zhao et al. (2024): one fixed green list for all positions, robust to edits.",
    params={"gamma": (0.5, GAMMA), "delta": (2.0, DELTA), "hash_key": (15485863, KEY), "z_threshold": (4.0, Z_THRESHOLD)},
    threshold_param="z_threshold", strength_param="delta",
    seeding_context=no_context, implementation="fwsapp.watermark.unigram:Unigram",
    keyed_draw=KeyedDraw("one green list drawn once from SHA-256 of hash_key", "Zhao et al.'s reference code"),
    expected_evidence=GREEN_LIST,
)
SYNTHID = MethodInfo(
    "SynthID", f"Dathathri et al. (2024): tournament sampling with keyed g-functions; {SYNTHID_DETECTOR}.",
    params={"key": (42, KEY), "depth": (9, Param("tournament layers", low=1)),
            "ngram_len": (5, Param("context n-gram length", low=2)),
            "top_k": (40, Param("candidates in the tournament (0 = the whole vocabulary)", low=0)),
            "mean_threshold": (0.52, Param("mean g-value above which a text is called watermarked", low=0, high=1))},
    threshold_param="mean_threshold", score_label="mean g", standard_score=False,
    strength_param="depth", seeding_context=tokens_before("ngram_len", less=1), implementation="fwsapp.watermark.synthid:SynthID",
    keyed_draw=KeyedDraw("keyed hash of the last ngram_len − 1 tokens into depth g-values",
                         "transformers' SynthIDTextWatermarkLogitsProcessor"),
)
EWD = MethodInfo(
    "EWD", "Lu et al. (2024): KGW's green lists, detected with each token weighted by the spike entropy of its "
           "distribution, so low-entropy tokens count less.",
    params=KGW.params, threshold_param="z_threshold", needs_model=True, strength_param="delta",
    seeding_context=tokens_before("prefix_length"), implementation="fwsapp.watermark.ewd:EWD",
    keyed_draw=MARKLLM_GREEN_LIST,
)
P_THRESHOLD = Param("p-value below which a text is called watermarked", low=0, high=1, open_low=True)
MARKLLM_EXP_UNIFORMS = KeyedDraw("torch.rand of the vocabulary on a CPU generator seeded by hash_key × the product of "
                                 "the previous tokens", "MarkLLM 0.1.5 EXP")
EXP = MethodInfo(
    "EXP", "Aaronson (2023): exponential (Gumbel) sampling, token = argmax r^(1/p) with r keyed by the previous "
           "tokens; distortion-free per step; gamma-distribution p-value.",
    params={"hash_key": (15485863, KEY),
            "prefix_length": (4, Param("tokens before each position that seed its random numbers", low=1)),
            "top_k": (0, Param("sample among the k likeliest tokens (0 = the whole vocabulary)", low=0)),
            "p_threshold": (1e-4, P_THRESHOLD)},
    threshold_param="p_threshold", aliases=("Aaronson", "EXP-Gumbel"), score_direction="lower", score_label="p",
    seeding_context=tokens_before("prefix_length"), implementation="fwsapp.watermark.exp:EXP",
    keyed_draw=MARKLLM_EXP_UNIFORMS, expected_evidence=GUMBEL,
)
PF = MethodInfo(
    "PF", "Zhao et al. (2025): Permute-and-Flip decoding, token = argmax p / r with r keyed by the previous tokens; "
          "gamma-distribution p-value of the summed −log r.",
    params=dict(EXP.params), threshold_param="p_threshold", aliases=("Permute-and-Flip",), score_direction="lower",
    score_label="p", seeding_context=tokens_before("prefix_length"), implementation="fwsapp.watermark.pf:PF",
    keyed_draw=MARKLLM_EXP_UNIFORMS,
)
ITS_EDIT = MethodInfo(
    "ITS-Edit", "Kuditipudi et al. (2024): inverse-transform sampling along a keyed permutation and sequence of "
                "uniforms; edit-robust permutation-test p-values.",
    params={"pseudo_length": (256, Param("length of the key sequence ξ", low=1)),
            "sequence_length": (200, Param("length of MarkLLM's seed draw, which fixes the key (keep 200 to match it)", low=1)),
            "n_runs": (500, Param("null keys in the permutation test", low=1)),
            "key": (42, KEY),
            "p_threshold": (0.1, P_THRESHOLD)},
    threshold_param="p_threshold", aliases=("ITSEdit", "ITS"), score_direction="lower", score_label="p",
    threshold_inclusive=True,
    null_keys_param="n_runs",
    implementation="fwsapp.watermark.its_edit:ITSEdit", test_params={"n_runs": 10, "pseudo_length": 32},
    science_params={"n_runs": 20},
    keyed_draw=KeyedDraw("a keyed permutation and sequence of uniforms from torch's CPU generator", "MarkLLM 0.1.5 ITS-edit"),
)
UNBIASED = MethodInfo(
    "Unbiased", "Hu et al. (2024): γ-reweighting of the distribution along a permutation keyed by SHA-256 of the "
                "context; unbiased over keys; detected by a maximin log-likelihood-ratio score with the model.",
    params={"key": (42, KEY),
            "prefix_length": (5, Param("context tokens hashed into each permutation", low=1)),
            "n_grid": (10, Param("grid points of the maximin LLR score (the p-value bound is n_grid·e^(−score))", low=1,
                          high=1000)),
            "p_threshold": (5e-4, P_THRESHOLD), **RNG_PARAMS},
    threshold_param="p_threshold", score_direction="lower", score_label="p", needs_model=True,
    implementation="fwsapp.watermark.unbiased:Unbiased", test_params={"rng": "cpu", "n_grid": 1},
    keyed_draw=KeyedDraw(SHA256_PERMUTATION.name, "Hu et al.'s reference code", context=tokens_before("prefix_length")),
)
MORPHMARK = MethodInfo(
    "MorphMark", "Wang et al. (2025): KGW's green lists with an adaptive strength: no bias while the green mass is "
                 "below p₀, then a share r(green mass) of the red mass moved to green, rising with it.",
    params={"gamma": (0.5, GAMMA), "hash_key": (15485863, KEY),
            "prefix_length": (1, Param("tokens before each position that seed its green list", low=1)),
            "type": ("exp", Param("how the strength r grows with the green mass P: linear k·P, exp e^(kP) − 1, log ln(kP + 1)",
                           choices=("linear", "exp", "log"))),
            "k_linear": (1.55, Param("k of the linear strength", low=0)),
            "k_exp": (1.3, Param("k of the exponential strength", low=0)),
            "k_log": (2.15, Param("k of the logarithmic strength", low=0)),
            "p_0": (0.15, Param("green mass below which nothing is changed", low=0, high=1)),
            "z_threshold": (2.0, Z_THRESHOLD), **RNG_PARAMS},
    threshold_param="z_threshold",
    seeding_context=tokens_before("prefix_length"), implementation="fwsapp.watermark.morphmark:MorphMark",
    keyed_draw=MARKLLM_GREEN_LIST,
)
VLLM_PARAMS = {
    "key": (42, Param("the secret key of vLLM's --watermark-config", low=0, high=2**64 - 1, secret=True)),
    "context_width": (4, Param("generated tokens before each position that key its Gumbel noise", low=1, high=256)),
    "deduplicate_contexts": ("single_turn", Param(
        "a token whose context came before is sampled and scored without the watermark: none, single_turn (this "
        "answer's tokens) or all (the prompt's too; the first context_width tokens are left unwatermarked)",
        choices=("none", "single_turn", "all"))),
    "p_threshold": (0.01, P_THRESHOLD),
}
VLLM_GUMBEL = MethodInfo(
    "vLLM-Gumbel", "The watermark vLLM 0.33 serves natively (--watermark-config algorithm gumbel): Gumbel-max sampling "
                   "with Philox noise keyed by the last tokens; gamma-distribution p-value, as vLLM's detector.",
    params=VLLM_PARAMS, threshold_param="p_threshold", aliases=("gumbel",), score_direction="lower", score_label="p",
    threshold_inclusive=True,
    served_by=("vLLM",), deduplication_param="deduplicate_contexts", implementation="fwsapp.watermark.vllm_gumbel:VLLMGumbel",
    keyed_draw=VLLM_PHILOX,
    coverage="fwsapp.watermark.vllm_contexts:coverage", expected_evidence=GUMBEL,
)
VLLM_GUMBEL_DUALKEY = MethodInfo(
    "vLLM-Gumbel-DualKey", "vLLM's dual-key Gumbel watermark (algorithm dual_key_gumbel, the one its speculative "
                           "decoding supports): each token keyed by key B with probability alpha, else key A.",
    params={**VLLM_PARAMS, "alpha": (0.1, Param("probability that a token is keyed by key B", low=0, high=1))},
    threshold_param="p_threshold", aliases=("dual_key_gumbel",), score_direction="lower", score_label="p",
    threshold_inclusive=True,
    served_by=("vLLM",), deduplication_param="deduplicate_contexts",
    implementation="fwsapp.watermark.vllm_gumbel:VLLMGumbelDualKey",
    keyed_draw=KeyedDraw("two Philox4x32-10 keys derived from key, each keyed by the last context_width tokens",
                         VLLM_PHILOX.reference, context=VLLM_PHILOX.context),
    coverage="fwsapp.watermark.vllm_contexts:coverage",
)
SEMANTIC_PARAMS = {
    "key": (15485863, Param("secret key: the prime that, times a sentence's region, seeds the next valid regions "
                            "(MarkLLM's prime_P)", low=1, high=2**40, secret=True)),
    "gamma": (0.25, Param("share of the regions valid after each sentence", low=0, high=1, open_low=True, open_high=True)),
    "max_rejections": (100, Param("candidate sentences rejected before one is kept whatever its region (MarkLLM's N_max)",
                                  low=0, high=10_000)),
    "max_seconds": (600.0, Param("seconds an answer may take; past them each sentence is kept whatever its region, and "
                                 "the answer's time says so", low=1, high=86_400)),
    "z_threshold": (3.0, Param("z over sentences above which a text is called watermarked")),
}
SEMSTAMP = MethodInfo(
    "SemStamp", "Hou et al. (NAACL 2024): sentence by sentence, rejection sampling until a sentence's LSH signature of "
                "its embedding falls in the regions the previous sentence keys; paraphrase-robust; z over sentences.",
    params={**SEMANTIC_PARAMS,
            "lsh_dim": (3, Param("LSH hyperplanes d: 2^d regions", low=1, high=16)),
            "margin": (0.01, Param("a sentence is kept only when every hyperplane is at least this far (|cosine|)",
                                   low=0, high=1))},
    threshold_param="z_threshold", aliases=("SEMSTAMP",), needs_tokenizer=True, unit="sentence",
    implementation="fwsapp.watermark.semstamp:SemStamp", test_params={"max_rejections": 0},
    science_tokens=48, science_params={"max_rejections": 4},  # a few sentences, each chosen from candidates
    keyed_draw=SEMANTIC_REGIONS,
)
K_SEMSTAMP = MethodInfo(
    "k-SemStamp", "Hou et al. (ACL Findings 2024): SemStamp with k-means clusters of a task's reference sentences as "
                  "the regions, so they follow the domain's meanings.",
    params={**SEMANTIC_PARAMS,
            "k": (8, Param("clusters (regions)", low=2, high=64)),
            "domain": ("qa", Param("for text outside a run (pasted, the playground): the task whose shipped references "
                                   "the clusters are fitted on; a run fits them on its own dataset's references and "
                                   "keeps them", choices=tuple(TASKS))),
            "margin": (0.01, Param("a sentence is kept only when its second-nearest centroid is this much farther "
                                   "(cosine distance)", low=0, high=2))},
    threshold_param="z_threshold", aliases=("KSEMSTAMP", "k-semstamp"), needs_tokenizer=True, unit="sentence",
    fitted_on_references=True,
    implementation="fwsapp.watermark.k_semstamp:KSemStamp", test_params={"max_rejections": 0},
    science_tokens=48, science_params={"max_rejections": 4},  # a few sentences, each chosen from candidates
    keyed_draw=SEMANTIC_REGIONS,
)
_POST_HOC = {"post_hoc": True, "needs_model": True, "score_label": "score", "threshold_param": "threshold",
             "standard_score": False}
LOGRANK = MethodInfo(
    "LogRank", "Post-hoc: minus the mean log-rank of the tokens under the scoring model (no watermark).",
    params={"threshold": (-1.0, Param("score (minus the mean log-rank) above which a text is called model-written"))},
    **_POST_HOC,
    implementation="fwsapp.watermark.posthoc:LogRank",
)
FAST_DETECTGPT = MethodInfo(
    "Fast-DetectGPT", "Post-hoc: analytic sampling discrepancy under the scoring model itself (no watermark).",
    params={"threshold": (2.0, Param("sampling discrepancy above which a text is called model-written"))}, **_POST_HOC,
    implementation="fwsapp.watermark.posthoc:FastDetectGPT",
)
MASK_MODEL_VARIABLE = "FWSAPP_DETECTGPT_MASK_MODEL"


def _mask_model_unavailable() -> str | None:
    return None if os.environ.get(MASK_MODEL_VARIABLE) else (
        f"it needs a mask-filling model: set {MASK_MODEL_VARIABLE} to a local t5-large (or t5-small) folder")


DETECTGPT = MethodInfo(
    "DetectGPT", "Post-hoc: log-likelihood drop under T5 mask-and-refill perturbations (needs a mask-filling model).",
    params={"perturbations": (20, Param("perturbed copies per text", low=1)),
            "span_length": (2, Param("words per masked span", low=1)),
            "mask_fraction": (0.15, Param("share of words masked", low=0, high=1, open_low=True, open_high=True)),
            "seed": (0, Param("seeds which words are masked", low=0, high=2**31 - 1)),
            "threshold": (1.0, Param("normalised log-likelihood drop above which a text is called model-written"))},
    **_POST_HOC,
    implementation="fwsapp.watermark.posthoc:DetectGPT", test_params={"perturbations": 4},
    unavailable=_mask_model_unavailable,
)

METHODS = Registry("watermark method", [KGW, SWEET, DIPMARK, EXP_EDIT, ENTITY_KGW, ENTITY_KGW_PREDICTED, UNIGRAM,
                                        SYNTHID, EWD, EXP, PF, ITS_EDIT, UNBIASED, MORPHMARK, VLLM_GUMBEL,
                                        VLLM_GUMBEL_DUALKEY, SEMSTAMP, K_SEMSTAMP, LOGRANK, DETECTGPT, FAST_DETECTGPT])


def watermark_names() -> list[str]:
    """The methods that watermark, in declaration order."""
    return [entry.name for entry in METHODS if not entry.post_hoc]


def post_hoc_names() -> list[str]:
    """The post-hoc detectors, which watermark nothing."""
    return [entry.name for entry in METHODS if entry.post_hoc]


def served_names() -> list[str]:
    """The methods a serving engine applies itself, so a run of them can be generated through one."""
    return [entry.name for entry in METHODS if entry.served_by]


def canonical_name(name: str) -> str:
    """The registered spelling of a method name: 'kgw' -> 'KGW', 'expedit' -> 'EXP-edit'."""
    return METHODS.canonical(name)


def info(name: str) -> MethodInfo:
    """A method's declaration, by any spelling."""
    return METHODS[name]


def score_direction(name: str) -> str:
    """A method's score direction; 'higher' for a name fwsapp does not know (an imported detector)."""
    try:
        return info(name).score_direction
    except ValueError:
        return "higher"


def score_label(name: str) -> str:
    """What a method's detection score is: z, p, mean g or a post-hoc score."""
    try:
        return info(name).score_label
    except ValueError:
        return "score"


def p_resolution(name: str, params: dict | str) -> float | None:
    """The step of a run's p-values where its method's p-values count null keys (`MethodInfo.p_resolution`), from the run's
    parameters (a dict, or the JSON a run stores); None for a method fwsapp does not know (an imported detector)."""
    try:
        declared = info(name)
    except ValueError:
        return None
    return declared.p_resolution(json.loads(params) if isinstance(params, str) else params)


def detection_kinds(method: str) -> tuple[str, str]:
    """(positive, negative) text kinds for a method's detection metrics."""
    return info(method).detection_kinds


def sweep_grids() -> dict[str, dict[str, list]]:
    """Each swept method's grid (the paper's Figure 5)."""
    return {entry.name: entry.sweep_grid for entry in METHODS if entry.sweep_grid}


def parse_params(method: str, pairs: list[str] | dict) -> dict:
    """`key=value` strings (or a dict of strings) as typed parameters (`plugins.typed_value`); a key given as `$VAR`
    stays a reference, read from its variable when the run is made."""
    entry = info(method)
    items = dict(pairs.items() if isinstance(pairs, dict) else (split_pair(pair) for pair in pairs))
    unknown = [key for key in items if key not in entry.params]
    if unknown:
        raise ValueError(f"{entry.name} has no parameter '{unknown[0]}'; it has {', '.join(entry.params)}.")
    return DeclaredParams.typed_params(entry, items)


def split_pair(pair: str) -> tuple[str, str]:
    key, sep, value = pair.partition("=")
    if not sep:
        raise ValueError(f"Parameter '{pair}' must look like key=value.")
    return key.strip(), value.strip()


def params_help() -> str:
    """Every method's parameters with default, valid values and help, for `--help`."""
    lines = ["method parameters (--param KEY=VALUE; default, valid values, meaning):"]
    for entry in METHODS:
        lines.append(f"  {entry.name}")
        for key, (default, spec) in entry.params.items():
            detail = f"{entry.valid_values(key)}; {spec.help}" if spec else ""
            lines.append(f"    {key}={default}  {detail}".rstrip())
    return "\n".join(lines)
