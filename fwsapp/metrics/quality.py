"""Quality scoring for runs: every metric computed once per (run, sample, text kind, metric, config).

`score_run` computes only what the metrics table lacks, so a second call computes nothing. The report's
quality block reads the table back as per-run means.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import pandas as pd

from fwsapp.metrics import f1, main_config, rouge
from fwsapp.metrics.factuality import ALIGNSCORE_NAME, STAND_IN_NAME
from fwsapp.recognizers import DEFAULT_RECOGNIZER

if TYPE_CHECKING:
    from fwsapp.models import LoadedModel

GENERATED_KINDS = ("watermarked", "unwatermarked")
REPORT_METRICS = ("ppl", "simcse", "simcse_reference", "rouge2", "rougeL", "f1", "bertscore")
OFFLINE_METRICS = ("ppl", "simcse", "simcse_reference", "rouge", "f1", "factuality")
ALL_METRICS = OFFLINE_METRICS + ("bertscore",)
# The metrics that need no language model: text overlap, the 22M-parameter sentence encoder and the disease
# recognizer. Quality computes them when it opens, if they are missing and quick; perplexity reads every token
# with a language model and waits to be asked.
MODEL_FREE_METRICS = ("rouge", "f1", "simcse", "simcse_reference", "factuality")
# Seconds per 1,000 characters of a sample's texts (both outputs and the reference) on this machine's 2 CPU cores:
# bench.quality_scoring on 200 meditron QA samples of 2,265 characters (docs/benchmarks.md). An estimate for the page.
SECONDS_PER_1000_CHARACTERS = {"rouge": 0.003, "f1": 0.003, "simcse": 0.030, "simcse_reference": 0.078,
                               "factuality": 0.096}
PPL_CHUNK = 8  # samples per perplexity pass between progress reports and writes


def metric_row(sample_idx: int, kind: str, metric: str, config: str, value) -> dict:
    return {"sample_idx": int(sample_idx), "text_kind": kind, "metric": metric, "config": config,
            "value": None if value is None else float(value)}


def text_metric_rows(generations: list[dict], task_name: str) -> list[dict]:
    """ROUGE-2/L for every task and token F1 for QA, of each generated text against its reference."""
    rows = []
    references = [row["reference"] for row in generations]
    for kind in GENERATED_KINDS:
        outputs = [row[f"{kind}_text"] or "" for row in generations]
        values = rouge.rouge(outputs, references)
        if task_name == "qa":
            values["f1"] = f1.f1(outputs, references)
        for metric, series in values.items():
            config = f1.CONFIG if metric == "f1" else rouge.CONFIG
            rows.extend(metric_row(row["sample_idx"], kind, metric, config, value) for row, value in zip(generations, series))
    return rows


@dataclass
class QualityResources:
    """What the model-based metrics need, loaded on first use."""

    model_loader: Callable[[str], "LoadedModel"]
    oracle: str | None = None  # perplexity model; None = the run's own model (embedded for imports)
    alignscore_checkpoint: str | None = None
    recognizer_name: str = DEFAULT_RECOGNIZER  # the factual-consistency stand-in's disease recognizer
    _encoder: object = field(default=None, repr=False)
    _recognizer: object = field(default=None, repr=False)

    @property
    def encoder_name(self) -> str:
        from fwsapp.encoder import DEFAULT_ENCODER

        return DEFAULT_ENCODER if self._encoder is None else self._encoder.name

    @property
    def encoder(self):
        if self._encoder is None:
            from fwsapp.encoder import load_encoder

            self._encoder = load_encoder()
        return self._encoder

    @property
    def recognizer(self):
        if self._recognizer is None:
            from fwsapp.recognizers import load_recognizer

            self._recognizer = load_recognizer(self.recognizer_name)
        return self._recognizer


def score_run(store, run_id: str, resources: QualityResources, metrics=OFFLINE_METRICS,
              progress: Callable[..., None] | None = None) -> dict[str, int | None]:
    """Compute the metrics a run lacks; returns how many values were computed per metric (None: skipped,
    perplexity of an imported run with no oracle named)."""
    unknown = set(metrics) - set(ALL_METRICS)
    if unknown:
        raise ValueError(f"Unknown metric {', '.join(sorted(unknown))}; choose from {', '.join(ALL_METRICS)}.")
    run = store.run(run_id)
    samples, have = _scorable(store, run_id)
    metrics = metrics_for(run, metrics)
    progress = progress or (lambda done, total, note="": None)
    computed = {}
    # Progress counts samples per metric, so a long perplexity pass moves the bar as it goes.
    for index, metric in enumerate(metrics):
        progress(index * len(samples), len(metrics) * len(samples), metric)
        if metric == "ppl" and perplexity_oracle(run, resources.oracle) is None:
            computed[metric] = None  # skipped: an imported run's perplexity needs an oracle named for it
            continue
        computed[metric] = 0
        for rows, covered in _compute(metric, run, samples, resources, have):
            if rows:
                store.write_rows("metrics", run_id, rows)  # each chunk is kept if the job stops
            computed[metric] += len(rows)
            progress(index * len(samples) + covered, len(metrics) * len(samples), metric)
    progress(len(metrics) * len(samples), len(metrics) * len(samples))
    return computed


def metrics_for(run: dict, metrics) -> list[str]:
    """The metrics that apply to a run: token F1 is QA's."""
    return [metric for metric in metrics if metric != "f1" or run["task"] == "qa"]


def perplexity_oracle(run: dict, oracle: str | None) -> str | None:
    """The model whose perplexity a run gets: the one named, else the run's own generator. An imported run
    has none loaded here, so it gets perplexity only when an oracle is named for it."""
    return oracle or (None if run["imported"] else run["model"])


# Measured (docs/benchmarks.md, quality metrics): the embedded 135M model as oracle scores about 780
# tokens a second on 2 CPU cores; an estimate, not a promise, and roughly proportional to model size.
EMBEDDED_ORACLE_TOKENS_PER_SECOND = 780
CHARS_PER_TOKEN = 4  # a rough count before any tokenizer is loaded


def perplexity_plan(store, run_ids: list[str], oracle: str | None) -> pd.DataFrame:
    """What a perplexity pass would do per run, before it starts: which oracle, whether that is the run's own
    generator (the only case where the values are the paper's kind), and how many texts and tokens remain."""
    rows = []
    for run_id in run_ids:
        run = store.run(run_id)
        chosen = perplexity_oracle(run, oracle)
        samples, have = _scorable(store, run_id)
        resources = QualityResources(model_loader=None, oracle=oracle)
        todo = _missing(samples, have, *stored_as("ppl", run, resources)) if chosen else samples.iloc[0:0]
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
    """What computing some metrics would do: the runs that lack any of them, how many sample × metric values are
    missing, and about how long that takes here."""

    run_ids: list[str]
    values: int
    seconds: float


def missing_work(store, run_ids: list[str], metrics=MODEL_FREE_METRICS) -> MissingWork:
    """The missing values of model-free `metrics` (each with a SECONDS_PER_1000_CHARACTERS rate) in the runs."""
    resources = QualityResources(model_loader=None)
    lacking, values, seconds = [], 0, 0.0
    for run_id in run_ids:
        run = store.run(run_id)
        samples, have = _scorable(store, run_id)
        todo = {metric: _missing(samples, have, *stored_as(metric, run, resources)) for metric in metrics_for(run, metrics)}
        if any(len(missing) for missing in todo.values()):
            lacking.append(run_id)
        values += sum(len(missing) for missing in todo.values())
        seconds += sum(SECONDS_PER_1000_CHARACTERS[metric] / 1000 * sum(
            missing[column].str.len().sum() for column in ("watermarked_text", "unwatermarked_text", "reference"))
            for metric, missing in todo.items())
    return MissingWork(lacking, values, float(seconds))


def _scorable(store, run_id: str) -> tuple[pd.DataFrame, set]:
    """A run's samples that have both outputs, and the (metric, config, sample, kind) values already stored."""
    samples = store.generations(run_id)
    existing = store.metrics([run_id])
    return (samples[samples.watermarked_text.notna() & samples.unwatermarked_text.notna()],
            set(zip(existing.metric, existing.config, existing.sample_idx, existing.text_kind)))


def _missing(samples: pd.DataFrame, have: set, metric: str, config: str, kinds=GENERATED_KINDS) -> pd.DataFrame:
    keep = [
        any((metric, config, row.sample_idx, kind) not in have for kind in kinds) for row in samples.itertuples()
    ]
    return samples[keep]


def stored_as(metric: str, run: dict, resources: QualityResources) -> tuple[str, str, tuple[str, ...]]:
    """(stored metric name, config, text kinds) that a metric's values of a run are kept under, so a value is
    looked for where it was written."""
    from fwsapp.metrics import bertscore, factuality
    from fwsapp.recognizers import recognizer_label

    encoder = f"encoder={resources.encoder_name}"
    if metric == "rouge":
        return "rouge2", rouge.CONFIG, GENERATED_KINDS
    if metric == "f1":
        return "f1", f1.CONFIG, GENERATED_KINDS
    if metric == "ppl":
        return "ppl", f"oracle={perplexity_oracle(run, resources.oracle)}", GENERATED_KINDS
    if metric == "simcse":
        # The paper's SimCSE compares the watermarked text with the unwatermarked one; the unwatermarked text
        # has no such value (its similarity to itself is 1 by definition), so none is stored.
        return "simcse", encoder, ("watermarked",)
    if metric == "simcse_reference":
        return "simcse_reference", encoder, GENERATED_KINDS
    if metric == "factuality":
        config = (f"alignscore;{resources.alignscore_checkpoint}" if resources.alignscore_checkpoint else
                  factuality.stand_in_config(recognizer_label(resources.recognizer_name), resources.encoder_name))
        return "factuality", config, GENERATED_KINDS
    if metric == "bertscore":
        return "bertscore", bertscore.CONFIG, GENERATED_KINDS
    raise AssertionError(metric)


def _compute(metric: str, run: dict, samples: pd.DataFrame, resources: QualityResources, have: set):
    """Yields (rows to write, samples of the run covered so far) as the metric is computed."""
    # Model-based metrics import torch; imports and reports of text metrics should not pay for that.
    from fwsapp.metrics import bertscore, factuality, perplexity, simcse

    name, config, kinds = stored_as(metric, run, resources)
    todo = _missing(samples, have, name, config, kinds)
    if metric in ("rouge", "f1"):
        rows = text_metric_rows(todo.to_dict("records"), run["task"]) if not todo.empty else []
        yield [row for row in rows if (row["metric"] == "f1") == (metric == "f1")], len(samples)
        return
    if todo.empty:
        return
    if metric == "ppl":
        oracle = perplexity_oracle(run, resources.oracle)
        lm = resources.model_loader(oracle)
        own_tokens = oracle == run["model"] and not run["imported"]
        done_before = len(samples) - len(todo)
        for start in range(0, len(todo), PPL_CHUNK):
            chunk, rows = todo.iloc[start:start + PPL_CHUNK], []
            for kind in GENERATED_KINDS:
                pairs = [
                    (lm.tokenizer(row.prompt)["input_ids"], list(getattr(row, f"{kind}_ids")))
                    if own_tokens else perplexity.encode_pair(lm, row.prompt, getattr(row, f"{kind}_text"))
                    for row in chunk.itertuples()
                ]
                values = perplexity.perplexity(lm, pairs)
                rows += [metric_row(row.sample_idx, kind, "ppl", config, value) for row, value in zip(chunk.itertuples(), values)]
            yield rows, done_before + start + len(chunk)
        return
    if metric == "simcse":
        values = simcse.similarity(resources.encoder, todo.watermarked_text.tolist(), todo.unwatermarked_text.tolist())
        yield [metric_row(row.sample_idx, "watermarked", "simcse", config, value)
               for row, value in zip(todo.itertuples(), values)], len(samples)
        return
    if metric == "simcse_reference":
        # Similarity to the reference, measured alike for both texts: what Auto-FWS reads for coherence.
        score = lambda outputs, references: simcse.similarity(resources.encoder, outputs, references)  # noqa: E731
    elif metric == "factuality" and resources.alignscore_checkpoint:
        score = lambda outputs, references: factuality.alignscore(resources.alignscore_checkpoint, outputs, references)  # noqa: E731
    elif metric == "factuality":
        score = lambda outputs, references: factuality.entity_support(  # noqa: E731
            resources.recognizer, resources.encoder, outputs, references)
    else:
        score = bertscore.bertscore_f1
    yield _per_kind(todo, name, config, score), len(samples)


def _per_kind(todo: pd.DataFrame, metric: str, config: str, score) -> list[dict]:
    """A metric of each output of the samples to do against its reference, for both text kinds."""
    rows = []
    for kind in GENERATED_KINDS:
        values = score(todo[f"{kind}_text"].tolist(), todo.reference.tolist())
        rows += [metric_row(row.sample_idx, kind, metric, config, value) for row, value in zip(todo.itertuples(), values)]
    return rows


def factuality_name(config: str | None) -> str | None:
    if config is None:
        return None
    return ALIGNSCORE_NAME if config.startswith("alignscore") else STAND_IN_NAME


def quality_block(metrics: pd.DataFrame) -> dict:
    """The report's quality block for one run: mean per metric and text kind; null where not computed."""
    block, configs = {}, {}
    for metric in REPORT_METRICS + ("factuality",):
        rows = metrics[metrics.metric == metric]
        config = main_config(rows)
        rows = rows[rows.config == config]
        means = {
            kind: (float(rows.loc[rows.text_kind == kind, "value"].mean()) if (rows.text_kind == kind).any() else None)
            for kind in GENERATED_KINDS
        }
        configs[metric] = config
        block[metric] = means if metric != "factuality" else {"name": factuality_name(config), **means}
    block["configs"] = configs
    return block
