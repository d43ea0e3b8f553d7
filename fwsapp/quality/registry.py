"""The quality-metric registry: every metric `score` can compute, declared once; importable without torch.

An entry says what the metric needs (`needs`: "model", a language model; "encoder", the sentence encoder;
"recognizer", the disease recognizer; nothing for metrics of the texts alone, which an import computes at once), the
columns its values are stored under (`columns`: ROUGE writes ROUGE-2 and ROUGE-L), each with its label in tables,
which way is better, which of the paper's tables shows it and which FWS aspects it may stand for; which texts get
one (`kinds`), the tasks it applies to, the scoring settings it reads (`reads`: an oracle, an AlignScore checkpoint, a
recognizer; one given that no metric asked for reads is refused), whether `score` computes it when no metric is named
(`by_default`), and for the metrics that read no language model their measured cost
(`seconds_per_1000_characters`), which makes them "model-free": the Quality page computes those when it opens.
`score --metrics`, the grid's [steps] score, the Quality page's tables and downloads, the report's tables, the FWS
page's aspect choices and `doctor` read it. The implementation is a `fwsapp.quality.base.Metric`.
"""
from __future__ import annotations

from dataclasses import dataclass

from fwsapp.entities.recognizers import KINDS
from fwsapp.models import ENCODER_PACKAGE
from fwsapp.plugins import PlugIn, Registry, missing_package

GENERATED_KINDS = ("watermarked", "unwatermarked")
# The scoring settings a metric may read (`reads`), in words: score's --oracle, --alignscore-checkpoint and --recognizer,
# the Quality page's oracle and checkpoint fields.
SCORE_SETTINGS = {"oracle": "a perplexity oracle", "alignscore_checkpoint": "an AlignScore checkpoint",
                  "recognizer": "a disease recognizer"}
# The FWS aspects a metric may stand for (fwsapp.results.fws.ASPECTS; declared here so the registry stays below it).
ASPECTS = ("coherence", "relevance", "factual_accuracy")
# Each aspect, and FWS that weighs them, as every table and chart names it.
ASPECT_LABELS = {"coherence": "Coherence", "relevance": "Relevance", "factual_accuracy": "Factual accuracy", "fws": "FWS"}
# The kinds of clinical fact whose facts a reference does not state are a failure: the clinical facts metric's columns.
UNSTATED_FAILURES = tuple(kind for kind in KINDS.values() if kind.unstated_failure)


@dataclass(frozen=True)
class Column:
    """One value a metric stores per text: its stored name, its label in tables, which way is better, the paper's table
    that shows it (1: detection and fluency, 2: against the reference; None: Table 2's further columns), the FWS
    aspects it may stand for, and those it stands for by default."""

    name: str
    label: str
    lower_is_better: bool = False
    paper_table: int | None = None
    aspects: tuple[str, ...] = ()
    default_for: tuple[str, ...] = ()
    # The clinical failure mode it counts (the report's table of them; Rieff et al. 2026's category where one maps).
    failure_mode: str = ""

    def __post_init__(self):
        if not set(self.default_for) <= set(self.aspects) <= set(ASPECTS):
            raise ValueError(f"The column '{self.name}' stands for aspects among {', '.join(ASPECTS)}, by default only "
                             "for aspects it may stand for.")


@dataclass(frozen=True)
class MetricPlugIn(PlugIn):
    label: str = ""
    # The columns its values are stored under; empty: one column of its own name and label.
    columns: tuple[Column, ...] = ()
    kinds: tuple[str, ...] = GENERATED_KINDS
    tasks: tuple[str, ...] = ()  # empty: every task
    by_default: bool = True
    # Seconds per 1,000 characters of a sample's texts (both outputs and the reference) on this machine's 2 CPU cores,
    # measured by bench.quality_scoring (docs/benchmarks.md); None for a metric that reads with a language model.
    seconds_per_1000_characters: float | None = None
    # Why a run may get no value of it, and what to do (where its implementation's config can be None).
    skipped_because: str = ""
    reads: tuple[str, ...] = ()  # the SCORE_SETTINGS it reads

    def __post_init__(self):
        if not set(self.reads) <= set(SCORE_SETTINGS):
            raise ValueError(f"The metric '{self.name}' reads settings among {', '.join(SCORE_SETTINGS)}.")

    @property
    def stored_columns(self) -> tuple[Column, ...]:
        return self.columns or (Column(self.name, self.label or self.name),)

    @property
    def stored_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.stored_columns)

    @property
    def model_free(self) -> bool:
        return self.seconds_per_1000_characters is not None

    def applies_to(self, task: str) -> bool:
        return not self.tasks or task in self.tasks


METRICS = Registry("metric", [
    MetricPlugIn("ppl", "perplexity of each output under an oracle (the run's own model unless one is named)",
                 "fwsapp.quality.perplexity:Perplexity", needs=("model",), label="Perplexity", reads=("oracle",),
                 columns=(Column("ppl", "PPL", lower_is_better=True, paper_table=1),),
                 skipped_because="the run is imported or served, so its generator is not loaded here: name its "
                                 "oracle (score --oracle MODEL, or the Quality page's oracle field); its values are "
                                 "then that model's, not the generator's"),
    MetricPlugIn("simcse", "cosine similarity of the watermarked output's sentence embedding to the unwatermarked one's",
                 "fwsapp.quality.simcse:SimCSE", label="SimCSE (to the unwatermarked output)", kinds=("watermarked",),
                 columns=(Column("simcse", "SimCSE", paper_table=1),),
                 needs=("encoder",),
                 unavailable=missing_package(ENCODER_PACKAGE), seconds_per_1000_characters=0.030),
    MetricPlugIn("simcse_reference", "cosine similarity of each output's sentence embedding to the reference's",
                 "fwsapp.quality.simcse:SimCSEToReference", label="SimCSE (to the reference)", needs=("encoder",),
                 columns=(Column("simcse_reference", "SimCSE to ref.", aspects=("coherence",), default_for=("coherence",)),),
                 unavailable=missing_package(ENCODER_PACKAGE), seconds_per_1000_characters=0.078),
    MetricPlugIn("rouge", "ROUGE-2 and ROUGE-L F-measure against the reference (rouge-score, no stemmer)",
                 "fwsapp.quality.rouge:ROUGE", label="ROUGE-2/L",
                 columns=(Column("rouge2", "ROUGE-2", paper_table=2, aspects=("relevance", "factual_accuracy")),
                          Column("rougeL", "ROUGE-L", paper_table=2, aspects=("relevance", "coherence"),
                                 default_for=("relevance",))),
                 seconds_per_1000_characters=0.003),
    MetricPlugIn("f1", "token F1 against the reference, SQuAD's normalisation (QA only)", "fwsapp.quality.f1:TokenF1",
                 label="Token F1", tasks=("qa",), seconds_per_1000_characters=0.003,
                 columns=(Column("f1", "F1", paper_table=2, aspects=("relevance",), default_for=("relevance",)),)),
    MetricPlugIn("factuality", "factual consistency with the reference: AlignScore with a checkpoint, else the offline "
                 "stand-in disease-entity support", "fwsapp.quality.factuality:Factuality", label="Factuality",
                 columns=(Column("factuality", "Factuality", paper_table=2, aspects=("factual_accuracy",),
                                 default_for=("factual_accuracy",)),),
                 needs=("encoder", "recognizer"), reads=("alignscore_checkpoint", "recognizer"),
                 unavailable=missing_package(ENCODER_PACKAGE), seconds_per_1000_characters=0.096),
    MetricPlugIn("clinical_facts", "clinical facts against the reference, by concept: "
                 + ", ".join(kind.plural for kind in UNSTATED_FAILURES) + " it does not state, facts whose assertion it "
                 "contradicts, corrupted medical terms (the facts' recognizers)",
                 "fwsapp.quality.clinical_facts:ClinicalFacts", label="Clinical facts", needs=("recognizer",),
                 reads=("recognizer",),
                 # Two taggers over every text: asked for (score --metrics, the Quality page), not run on every open.
                 by_default=False,
                 # A column per kind of fact whose unstated facts are a failure (`FactKind.unstated_failure`).
                 columns=(*(Column(kind.unsupported_column, f"Unsupported {kind.plural} / text", lower_is_better=True,
                                   aspects=("factual_accuracy",), failure_mode=kind.unstated_failure)
                            for kind in UNSTATED_FAILURES),
                          Column("negation_flips", "Negation flips / text", lower_is_better=True,
                                 aspects=("factual_accuracy",), failure_mode="factual error (an assertion flipped)"),
                          Column("corrupted_terms", "Corrupted terms / 1,000 words", lower_is_better=True,
                                 aspects=("coherence", "factual_accuracy"), failure_mode="lexical corruption")),
                 unavailable=missing_package(ENCODER_PACKAGE), seconds_per_1000_characters=0.188),
    MetricPlugIn("bertscore", "BERTScore F1 against the reference with the local MiniLM encoder",
                 "fwsapp.quality.bertscore:BERTScore", label="BERTScore F1", by_default=False, needs=("encoder",),
                 columns=(Column("bertscore", "BERTScore F1", aspects=ASPECTS),),
                 unavailable=missing_package("bert_score")),
])


def default_metrics() -> tuple[str, ...]:
    """What `score` computes when no metric is named."""
    return tuple(entry.name for entry in METRICS if entry.by_default)


def unread_setting(metrics, **given) -> str | None:
    """Why a scoring setting given (SCORE_SETTINGS: `oracle="gpt2"`) would go unread by every metric asked for, and what
    to do; None when each one given is read. A setting no metric reads was computed around without a word."""
    for setting, value in given.items():
        readers = [entry.name for entry in METRICS if setting in entry.reads]
        if value and not set(readers) & set(metrics):
            return (f"No metric asked for ({', '.join(metrics)}) reads {SCORE_SETTINGS[setting]}: add "
                    f"{' or '.join(readers)} to the metrics, or drop {value!r}.")
    return None


def model_free_metrics() -> tuple[str, ...]:
    """The default metrics that read no language model, computed when the Quality page opens (and after an import);
    a model-free metric that is not a default is computed when asked for."""
    return tuple(entry.name for entry in METRICS if entry.model_free and entry.by_default)


def lacking_model_free(task: str, stored: set[str]) -> list[str]:
    """The labels of the metrics opening the Quality page computes (`model_free_metrics`) that apply to `task` and of
    which a run has no value, given the names of the metrics it has values of (`stored`)."""
    return [entry.label for entry in METRICS if entry.model_free and entry.by_default and entry.applies_to(task)
            and not set(entry.stored_names) & stored]


def stored_metrics() -> tuple[str, ...]:
    """Every metric name a value may be stored under, in the registry's order (the report's quality block)."""
    return tuple(name for entry in METRICS for name in entry.stored_names)


def in_stored_order(names) -> list[str]:
    """Stored metric names once each, in the registry's order; any it does not declare after them."""
    order = {name: index for index, name in enumerate(stored_metrics())}
    return sorted(set(names), key=lambda name: (order.get(name, len(order)), name))


def stored_columns(task: str | None = None) -> list[tuple[MetricPlugIn, Column]]:
    """Every registered column in the registry's order, with its metric; with `task`, those of metrics that apply to it."""
    return [(entry, column) for entry in METRICS if task is None or entry.applies_to(task) for column in entry.stored_columns]


def column_label(name: str) -> str:
    """A stored column as tables name it ("ROUGE-L"); a name no metric declares, as it was stored."""
    return next((column.label for _, column in stored_columns() if column.name == name), name)


def column_tasks(name: str) -> tuple[str, ...]:
    """The tasks a stored column's metric applies to; empty: every task."""
    return next((entry.tasks for entry, column in stored_columns() if column.name == name), ())
