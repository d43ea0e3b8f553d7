"""Quality scoring for runs: every registered metric (fwsapp.quality.registry) computed once per (run, sample,
text kind, metric, config).

`score_run` computes only what the metrics table lacks, so a second call computes nothing. The report's
quality block reads the table back as per-run means.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import pandas as pd

from fwsapp.quality import main_config_rows
from fwsapp.quality.perplexity import perplexity_oracle
from fwsapp.quality.registry import GENERATED_KINDS, METRICS, default_metrics, model_free_metrics
from fwsapp.entities.recognizers import DEFAULT_RECOGNIZER
from fwsapp.models import DEFAULT_ENCODER
from fwsapp.models.tokenizers import CHARS_PER_TOKEN

if TYPE_CHECKING:
    from fwsapp.models import LoadedModel

__all__ = ["GENERATED_KINDS", "METRICS", "perplexity_oracle"]


@dataclass
class QualityResources:
    """What the model-based metrics need, loaded on first use."""

    model_loader: Callable[[str], "LoadedModel"]
    oracle: str | None = None  # perplexity model; None = the run's own model (embedded for imports)
    alignscore_checkpoint: str | None = None
    recognizer_name: str = DEFAULT_RECOGNIZER  # the factual-consistency stand-in's disease recognizer
    store: object = None  # where a metric reads what another step stored (the facts `analyze` found); None: nothing
    _encoder: object = field(default=None, repr=False)
    _recognizer: object = field(default=None, repr=False)

    @property
    def encoder_name(self) -> str:
        return DEFAULT_ENCODER if self._encoder is None else self._encoder.name

    @property
    def encoder(self):
        if self._encoder is None:
            from fwsapp.models.encoder import load_encoder

            self._encoder = load_encoder()
        return self._encoder

    @property
    def recognizer(self):
        if self._recognizer is None:
            from fwsapp.entities.recognizers import load_recognizer

            self._recognizer = load_recognizer(self.recognizer_name)
        return self._recognizer


def check_metrics(metrics) -> None:
    """A clear error naming the registered metrics, for any metric that is not one."""
    unknown = set(metrics) - set(METRICS.names())
    if unknown:
        raise ValueError(f"Unknown metric {', '.join(sorted(unknown))}; choose from {', '.join(METRICS.names())}.")


def computed_values(counts: dict[str, int | None], named: Callable[[str], str] = str) -> str:
    """What `score_run` did, in words: "computed 1,200 simcse, 1,200 factuality values; rouge, f1 already stored", in
    sample × metric values, as its plan and progress count them. A metric that added nothing had every value stored;
    one skipped (None) is the caller's to explain."""
    added = [f"{count:,} {named(metric)}" for metric, count in counts.items() if count]
    stored = [named(metric) for metric, count in counts.items() if count == 0]
    return (f"computed {', '.join(added)} values" if added else "computed no value") \
        + (f"; {', '.join(stored)} already stored" if stored else "")


@dataclass(frozen=True)
class PlannedMetric:
    """One metric of a run's scoring: the config its values go under (None: skipped, such as perplexity of an imported
    run with no oracle named), the samples that lack them, and how many of those have values under another config (an
    earlier version of a recognizer or of the facts, another encoder or oracle), which tables stop reading once the
    current config has values."""

    metric: str
    config: str | None
    todo: pd.DataFrame
    replaces: int


def scoring_plan(store, run_id: str, resources: QualityResources, metrics=None) -> list[PlannedMetric]:
    """What scoring a run would compute (default: the registry's default metrics), before anything is: per metric
    that applies to its task, the samples that lack its values."""
    metrics = default_metrics() if metrics is None else metrics
    check_metrics(metrics)
    run = store.run(run_id)
    samples, have = _scorable(store, run_id)
    plan = []
    for metric in metrics_for(run, metrics):
        name, config, kinds = stored_as(metric, run, resources)
        todo = samples.iloc[0:0] if config is None else _missing(samples, have, name, config, kinds)
        elsewhere = {sample for stored, other, sample, _ in have if stored == name and other != config}
        plan.append(PlannedMetric(metric, config, todo, int(todo.sample_idx.isin(elsewhere).sum())))
    return plan


def planned_values(plan: list[PlannedMetric]) -> int:
    """The sample × metric values a plan computes: what its progress counts."""
    return sum(len(planned.todo) for planned in plan)


def prepare_plan(store, run_id: str, resources: QualityResources, plan: list[PlannedMetric]) -> None:
    """Load what the plan's metrics need (an oracle model), so a model that cannot load is refused before any value
    is computed or any progress shown."""
    run = store.run(run_id)
    for planned in plan:
        if len(planned.todo):
            implementation_of(planned.metric).prepare(run, resources)


def score_run(store, run_id: str, resources: QualityResources, metrics=None,
              progress: Callable[..., None] | None = None, cancel=None,
              plan: list[PlannedMetric] | None = None) -> dict[str, int | None]:
    """Compute the metrics a run lacks (default: the registry's default metrics; or its `plan`, made before); returns
    how many sample × metric values were computed per metric (None: skipped): the samples scored, whatever the rows
    each stores (ROUGE's two per text), as the plan and the progress count them. `cancel` (an Event) is heard between
    chunks of a metric, within seconds: what was written stays, and a rerun does the rest."""
    plan = scoring_plan(store, run_id, resources, metrics) if plan is None else plan
    run = store.run(run_id)
    progress = progress or (lambda done, total, note="": None)
    # Progress counts the samples × metrics to compute, chunk by chunk, so a long perplexity pass moves the bar as it
    # goes; values already stored and metrics skipped are no work, so a rate and what is left read the work itself.
    total, done, computed = planned_values(plan), 0, {}
    for planned in plan:
        progress(done, total, planned.metric)
        if planned.config is None:
            computed[planned.metric] = None
            continue
        computed[planned.metric] = 0
        implementation = implementation_of(planned.metric)
        for rows, covered in implementation.rows(planned.todo, run, resources, planned.config) if len(planned.todo) else ():
            if rows:
                store.write_rows("metrics", run_id, rows)  # each chunk is kept if the job stops
            computed[planned.metric] = covered
            progress(done + covered, total, planned.metric)
            if cancel is not None and cancel.is_set():
                return computed
        done += len(planned.todo)
    progress(total, total)
    return computed


def implementation_of(metric: str):
    """A registered metric's implementation (fwsapp.quality.base.Metric), bound to its entry."""
    entry = METRICS[metric]
    return entry.load()(entry)


def text_metric_rows(generations: list[dict], task_name: str) -> list[dict]:
    """The values of the metrics that need nothing but the texts (no model, encoder or recognizer) for generations
    given as dicts, as an import stores them at once."""
    todo, run, rows = pd.DataFrame(generations), {"task": task_name, "imported": True}, []
    for entry in METRICS:
        if not entry.needs and entry.applies_to(task_name) and len(todo):
            implementation = implementation_of(entry.name)
            for chunk, _ in implementation.rows(todo, run, None, implementation.config(run, None)):
                rows += chunk
    return rows


def metrics_for(run: dict, metrics) -> list[str]:
    """The metrics that apply to a run's task (token F1 is QA's)."""
    return [metric for metric in metrics if METRICS[metric].applies_to(run["task"])]


# Measured (docs/benchmarks.md, quality metrics): the embedded 135M model as oracle scores about 780
# tokens a second on 2 CPU cores; an estimate, not a promise, and roughly proportional to model size.
EMBEDDED_ORACLE_TOKENS_PER_SECOND = 780


def perplexity_plan(store, run_ids: list[str], oracle: str | None) -> pd.DataFrame:
    """What a perplexity pass would do per run, before it starts: which oracle, whether that is the run's own
    generator (the only case where the values are the paper's kind), and how many texts and tokens remain."""
    rows = []
    for run_id in run_ids:
        run = store.run(run_id)
        chosen = perplexity_oracle(run, oracle)
        samples, have = _scorable(store, run_id)
        resources = QualityResources(model_loader=None, oracle=oracle)
        todo = _missing(samples, have, *stored_as(perplexity_metric(), run, resources)) if chosen else samples.iloc[0:0]
        # Each text is read after its prompt: the prompt twice, each output once.
        characters = (2 * todo.prompt.str.len().sum() + todo.watermarked_text.str.len().sum()
                      + todo.unwatermarked_text.str.len().sum())
        rows.append({
            "run": run_id, "generator": run["model"], "imported": bool(run["imported"]),
            "oracle": chosen or "none (name one)",
            "own generator": chosen is not None and chosen == run["model"] and not run["imported"],
            "samples to score": len(todo), "tokens (about)": int(characters // CHARS_PER_TOKEN),
        })
    return pd.DataFrame(rows)


@dataclass
class MissingWork:
    """What computing some metrics would do: the runs that lack any of them, the metrics some run lacks, how many
    sample × metric values are missing, how many of those replace values stored under another config
    (`PlannedMetric.replaces`), and about how long that takes here."""

    run_ids: list[str]
    metrics: list[str]
    values: int
    seconds: float
    replaces: int


def missing_work(store, run_ids: list[str], metrics=None) -> MissingWork:
    """The missing values of model-free `metrics` (default: all of them; each has a measured rate) in the runs."""
    metrics = model_free_metrics() if metrics is None else metrics
    resources = QualityResources(model_loader=None)
    lacking, lacked, values, seconds, replaces = [], set(), 0, 0.0, 0
    for run_id in run_ids:
        plan = scoring_plan(store, run_id, resources, metrics)
        if planned_values(plan):
            lacking.append(run_id)
        lacked |= {planned.metric for planned in plan if len(planned.todo)}
        values += planned_values(plan)
        replaces += sum(planned.replaces for planned in plan)
        seconds += sum(METRICS[planned.metric].seconds_per_1000_characters / 1000 * sum(
            planned.todo[column].str.len().sum() for column in ("watermarked_text", "unwatermarked_text", "reference"))
            for planned in plan)
    return MissingWork(lacking, [metric for metric in metrics if metric in lacked], values, float(seconds), replaces)


def _scorable(store, run_id: str) -> tuple[pd.DataFrame, set]:
    """A run's samples that have both outputs, and the (metric, config, sample, kind) values already stored."""
    samples = store.generations(run_id)
    existing = store.metrics([run_id])
    return (samples[samples.watermarked_text.notna() & samples.unwatermarked_text.notna()],
            set(zip(existing.metric, existing.config, existing.sample_idx, existing.text_kind)))


def _missing(samples: pd.DataFrame, have: set, metric: str, config: str, kinds=GENERATED_KINDS) -> pd.DataFrame:
    # A boolean Series, not a list: an empty list would select no columns of a run still at 0 samples.
    keep = pd.Series([any((metric, config, row.sample_idx, kind) not in have for kind in kinds)
                      for row in samples.itertuples()], index=samples.index, dtype=bool)
    return samples[keep]


def stored_as(metric: str, run: dict, resources: QualityResources) -> tuple[str, str | None, tuple[str, ...]]:
    """(stored metric name, config, text kinds) that a metric's values of a run are kept under, so a value is
    looked for where it was written."""
    implementation = implementation_of(metric)
    return implementation.entry.stored_names[0], implementation.config(run, resources), implementation.entry.kinds


def read_values(store, run_ids: list[str] | None = None) -> pd.DataFrame:
    """The runs' stored metric values as every table reads them: each run's metric under one config, the one `score`
    writes now (the current recognizers and facts, the run's own perplexity oracle) where it has values, else the one
    with the most values (a named oracle)."""
    metrics = store.metrics(run_ids)
    current = {(run_id, name, config) for run_id in metrics.run_id.unique()
               for name, config in current_configs(store.run(run_id)).items()}
    return main_config_rows(metrics, current)


def current_configs(run: dict) -> dict[str, str | None]:
    """Each stored metric name -> the config `score` writes a run's values under now, with no setting named (None:
    it computes none without one, such as an imported run's perplexity)."""
    resources = QualityResources(model_loader=None)
    return {name: implementation_of(entry.name).config(run, resources) for entry in METRICS
            for name in entry.stored_names}


def other_settings(run: dict, configs: dict[str, str | None]) -> list[str]:
    """The stored metric names whose values, read under `configs` (a quality block's), are not under the config `score`
    writes now: computed under an earlier version of a recognizer or of the facts, or another oracle, encoder or
    checkpoint than the defaults. A report lists them, so a value of code since changed is never read as today's."""
    now = current_configs(run)
    return [name for name, config in configs.items() if config is not None and now.get(name) not in (None, config)]


def perplexity_metric() -> str:
    """The registered metric that reads with a language model the run's own texts: the one a perplexity plan is for."""
    return next(entry.name for entry in METRICS if "model" in entry.needs)


def quality_block(metrics: pd.DataFrame) -> dict:
    """The report's quality block for one run's metric values as `read_values` gives them (one config per metric): mean
    per metric and text kind; null where not computed."""
    block, configs = {}, {}
    for entry in METRICS:
        described = implementation_of(entry.name).describe
        for metric in entry.stored_names:
            rows = metrics[metrics.metric == metric]
            config = str(rows.config.iloc[0]) if len(rows) else None
            means = {
                kind: (float(rows.loc[rows.text_kind == kind, "value"].mean()) if (rows.text_kind == kind).any() else None)
                for kind in GENERATED_KINDS
            }
            configs[metric] = config
            name = described(config)
            block[metric] = means if name is None else {"name": name, **means}
    block["configs"] = configs
    return block
