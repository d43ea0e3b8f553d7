"""The generation job: unwatermarked and watermarked outputs for N samples, batched, seeded, resumable.

Batches are fixed by the config (sample i is always in batch i // batch_size) and each batch draws
from its own seed, so a run resumed after a crash produces the same texts as one that never stopped.
Each finished batch is written, with its detection scores, in one transaction.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
import warnings
from dataclasses import dataclass, replace
from typing import Callable

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from fwsapp.data.loaders import load_dataset
from fwsapp.models.teacher_forcing import token_entropy
from fwsapp.models import LoadedModel
from fwsapp.detection.length import MIN_TOKENS, detected_record, unscorable_record
from fwsapp.generation.batch import GeneratedBatch
from fwsapp.generation.run_config import Cancelled, RunConfig, plain_identity
from fwsapp.models import threads
from fwsapp.store import Store
from fwsapp.watermark import methods
from fwsapp import one_line
from fwsapp.watermark.base import Detection, GenerationBatch, Watermark
from fwsapp.watermark.factory import create, method_class

# How many of a dataset's references a method fitted on references (k-SemStamp) fits on: its first, in order.
FIT_REFERENCES = 1000

# progress(samples done, samples in all, what is under way inside the current batch)
ProgressCallback = Callable[[int, int, str], None]


class EntropyRecorder(LogitsProcessor):
    """Records the entropy (nats) of the model's next-token distribution at each step, per row.

    It runs first among the custom processors: after generate's own constraints, before the watermark
    and the sampling warpers.
    """

    def __init__(self, on_step: Callable[[int], None] | None = None):
        self.steps: list[torch.Tensor] = []
        self.on_step = on_step

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.steps.append(token_entropy(scores))
        if self.on_step is not None:
            self.on_step(len(self.steps))
        return scores


def generate_batch(
    lm: LoadedModel,
    prompts: list[str],
    max_new_tokens: int,
    sampling: dict,
    seed: int,
    watermark: Watermark | None = None,
    on_step: Callable[[int], None] | None = None,
    processors: tuple[LogitsProcessor, ...] = (),
) -> GeneratedBatch:
    """Generate for a batch of prompts, left-padded; returns new tokens only, cut at end of sequence.
    `on_step(tokens so far)` is called at each decoding step; `processors` change the logits besides a watermark's
    (a forger's learned bias)."""
    if watermark is not None and watermark.info.unit == "sentence":
        from fwsapp.generation.sentences import generate_sentences

        if lm.device.type == "cpu":
            threads.adapt()
        return generate_sentences(lm, watermark, prompts, max_new_tokens, sampling, seed, _stop_ids(lm), EntropyRecorder,
                                  on_step)
    tokenizer = lm.tokenizer
    encoded = tokenizer(prompts, return_tensors="pt", padding=True).to(lm.device)
    recorder = EntropyRecorder(on_step)
    extra = watermark.generation_kwargs(GenerationBatch(len(prompts), seed, sampling, [
        row[mask.bool()].tolist() for row, mask in zip(encoded["input_ids"], encoded["attention_mask"])])) if watermark else {}
    processors = LogitsProcessorList([recorder, *processors] + list(extra.pop("logits_processor", [])))
    torch.manual_seed(seed)
    if lm.device.type == "cpu":
        threads.adapt()
    started = time.perf_counter()
    with torch.inference_mode():
        output = lm.model.generate(
            **encoded,
            logits_processor=processors,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            **sampling,
            **extra,
        )
    seconds = time.perf_counter() - started
    new_tokens = output[:, encoded["input_ids"].shape[1]:].tolist()
    entropies = torch.stack(recorder.steps, dim=1).tolist() if recorder.steps else [[] for _ in prompts]
    stop_ids = _stop_ids(lm)
    token_ids, row_entropies = [], []
    for tokens, entropy in zip(new_tokens, entropies):
        length = next((i for i, token in enumerate(tokens) if token in stop_ids), len(tokens))
        token_ids.append(tokens[:length])
        row_entropies.append([round(value, 5) for value in entropy[:length]])
    texts = tokenizer.batch_decode(token_ids, skip_special_tokens=True)
    return GeneratedBatch(texts, token_ids, row_entropies, seconds)


def _stop_ids(lm: LoadedModel) -> set[int]:
    eos = lm.model.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
    ids.add(lm.tokenizer.eos_token_id)
    return {token for token in ids if token is not None}


def stored_plain_batch(store: Store, config: RunConfig, indices: list[int]) -> GeneratedBatch | None:
    """The unwatermarked batch of `indices` from a stored run with the same plain identity, if one has them all."""
    wanted = config.plain_identity()
    for run_id, identity in store.generated_configs().items():
        if run_id == config.run_id() or plain_identity(identity) != wanted:
            continue
        rows = store.generation_rows(run_id, indices)
        if len(rows) == len(indices) and all(isinstance(row["unwatermarked_text"], str) for row in rows):
            return GeneratedBatch(
                texts=[row["unwatermarked_text"] for row in rows],
                token_ids=[[int(token) for token in row["unwatermarked_ids"]] for row in rows],
                entropies=[[float(value) for value in row["unwatermarked_entropy"]] for row in rows],
                seconds=sum(row["unwatermarked_seconds"] or 0.0 for row in rows))
    return None


def generation_row(index: int, sample, plain: GeneratedBatch, marked: GeneratedBatch | None, offset: int,
                   batch_size: int) -> dict:
    """A generations-table row; the watermarked columns stay empty for post-hoc detectors."""
    row = {
        "sample_idx": index, "prompt": sample.prompt, "reference": sample.reference,
        "unwatermarked_text": plain.texts[offset], "unwatermarked_ids": plain.token_ids[offset],
        "unwatermarked_entropy": plain.entropies[offset], "unwatermarked_seconds": plain.text_time(offset, batch_size),
    }
    if marked is not None:
        row.update(
            watermarked_text=marked.texts[offset], watermarked_ids=marked.token_ids[offset],
            watermarked_entropy=marked.entropies[offset],
            watermarked_seconds=marked.text_time(offset, batch_size),
        )
        if marked.rejections is not None:
            row["watermarked_rejections"] = marked.rejections[offset]
    return row


def _prompt_limit(lm: LoadedModel, max_new_tokens: int) -> int:
    """Prompt tokens that fit: the model's context less the new tokens."""
    context = getattr(lm.model.config, "max_position_embeddings", None) or 2048
    room = context - max_new_tokens - 8  # a few tokens for the special ones the tokenizer adds
    if room < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens} does not fit the model's context of {context} tokens.")
    return room


def _capped_prompt(lm: LoadedModel, prompt: str, limit: int, index: int) -> str:
    """The prompt, cut from the left to `limit` tokens when longer, with a warning naming the sample."""
    if len(prompt) <= limit:  # a token spans at least one character: no need to count
        return prompt
    ids = lm.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    if len(ids) <= limit:
        return prompt
    warnings.warn(f"sample {index}: the prompt has {len(ids):,} tokens, more than the {limit:,} that fit before the "
                  f"new tokens; its first {len(ids) - limit:,} tokens were dropped.", stacklevel=2)
    return lm.tokenizer.decode(ids[-limit:])


def batch_seed(seed: int, batch_index: int, kind: str) -> int:
    digest = hashlib.sha256(f"{seed}:{batch_index}:{kind}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


@dataclass(frozen=True)
class Unit:
    """One batch of one run: what a worker computes and the driver writes. Batch i holds samples
    i·batch_size onwards and draws from seeds of (seed, i), so a unit's texts are the same wherever it runs."""

    run_id: str
    batch_index: int
    indices: tuple[int, ...]


@dataclass
class UnitWork:
    """Everything a unit's outputs depend on, so a worker needs no store: the config, the samples, and the
    unwatermarked batch when a stored run with the same prompts and seed holds it already."""

    config: RunConfig
    unit: Unit
    samples: list
    plain: GeneratedBatch | None = None

    @property
    def plain_key(self) -> tuple[str, int]:
        """Units with equal keys have the same unwatermarked batch."""
        return json.dumps(self.config.plain_identity(), sort_keys=True), self.unit.batch_index


@dataclass
class UnitResult:
    unit: Unit
    method: str
    rows: list[dict]
    found: list[tuple[int, str, Detection]]  # (sample, text kind, its detection, per-token flags included)
    params: dict  # the detector's
    # (sample, text kind) of the texts too short to score (an empty answer): stored without a score.
    unscorable: frozenset = frozenset()

    @property
    def detections(self) -> list[dict]:
        """The detections-table rows."""
        return [unscorable_record(index, kind, self.method) if (index, kind) in self.unscorable
                else detected_record(index, kind, self.method, result, self.params) for index, kind, result in self.found]


def run_watermark(lm: LoadedModel, config: RunConfig) -> Watermark:
    return create(config.method, lm.vocab_size, config.params, lm=lm, fitted=config.fitted)


def compute_unit(lm: LoadedModel, watermark: Watermark, work: UnitWork,
                 on_step: Callable[[str, int], None] | None = None) -> UnitResult:
    """Generate and detect one unit (a worker's side: no store). `on_step(text kind, token)` follows decoding."""
    config, unit = work.config, work.unit
    limit = _prompt_limit(lm, config.max_new_tokens)
    prompts = [_capped_prompt(lm, sample.prompt, limit, index) for index, sample in zip(unit.indices, work.samples)]
    sampling = config.resolved_sampling()

    def stepper(kind: str):
        return (lambda step: on_step(kind, step)) if on_step else None

    # Another method's run on the same prompts and seed already holds this batch's unwatermarked texts:
    # comparing methods then costs one unwatermarked generation, and every method meets the same baseline.
    plain = work.plain or generate_batch(lm, prompts, config.max_new_tokens, sampling,
                                         batch_seed(config.seed, unit.batch_index, "u"), on_step=stepper("unwatermarked"))
    # Post-hoc detectors add nothing at generation: their positives are model text, negatives the reference.
    marked = None if watermark.post_hoc else generate_batch(
        lm, prompts, config.max_new_tokens, sampling, batch_seed(config.seed, unit.batch_index, "w"), watermark,
        on_step=stepper("watermarked"))
    return detected_unit(work, watermark, plain, marked, [lm.tokenizer(sample.prompt)["input_ids"] for sample in work.samples],
                         lambda text: lm.tokenizer(text, add_special_tokens=False)["input_ids"])


def detected_unit(work: UnitWork, watermark: Watermark, plain: GeneratedBatch, marked: GeneratedBatch | None,
                  prompt_ids: list[list[int]], encode: Callable[[str], list[int]]) -> UnitResult:
    """A unit's rows and detections, from its generated batches; `prompt_ids` are each prompt's tokens as the generator
    read them (the context some detectors start from), `encode` tokenises a reference."""
    unit = work.unit
    rows, scored = [], []  # scored: (sample, text kind, token ids, context ids)
    for offset, (index, sample) in enumerate(zip(unit.indices, work.samples)):
        rows.append(generation_row(index, sample, plain, marked, offset, len(unit.indices)))
        context = prompt_ids[offset]
        scored.append((index, "unwatermarked", plain.token_ids[offset], context))
        if marked is not None:
            scored.append((index, "watermarked", marked.token_ids[offset], context))
        else:
            scored.append((index, "reference", encode(sample.reference), context))
    found = watermark.detect_many([(token_ids, context) for _, _, token_ids, context in scored])
    return UnitResult(unit, work.config.method, rows,
                      [(index, kind, result) for (index, kind, _, _), result in zip(scored, found)],
                      watermark.recorded_params,
                      frozenset((index, kind) for index, kind, token_ids, _ in scored if len(token_ids) < MIN_TOKENS))


def plan_units(store: Store, config: RunConfig) -> list[UnitWork]:
    """Create the run if it is new and list the units it still lacks (the driver's side)."""
    run_id = config.run_id()
    samples = config.samples()
    declared = methods.info(config.method)
    kept = {**config.identity(), **({"tokenizer": config.tokenizer} if config.tokenizer else {})}
    store.ensure_run(
        run_id, kept, model=config.model, task=config.task, method=config.method,
        params=declared.checked_params(config.params), seed=config.seed, n=len(samples),
        score_direction=declared.score_direction,
    )
    done = store.finished_samples(run_id)
    if declared.fitted_on_references:
        config = replace(config, fitted=run_fit(store, config, started=bool(done)))
    works = []
    for batch_index, start in enumerate(range(0, len(samples), config.batch_size)):
        indices = tuple(range(start, min(start + config.batch_size, len(samples))))
        if not all(index in done for index in indices):
            works.append(UnitWork(config, Unit(run_id, batch_index, indices), [samples[index] for index in indices]))
    return works


def run_fit(store: Store, config: RunConfig, started: bool) -> dict | None:
    """The run's stored fit, fitted first (on the first FIT_REFERENCES references of its dataset) when it has none and
    has generated nothing yet (`started`: some samples are stored)."""
    run_id = config.run_id()
    stored = store.run_fit(run_id)
    if stored is None and started:
        return None  # generated before runs kept a fit: with the domain's shipped clusters, as its detection still is
    if stored is None:
        references = [sample.reference for sample in load_dataset(config.task, config.dataset)[:FIT_REFERENCES]
                      if sample.reference.strip()]
        fitted = method_class(config.method).fit(references, methods.info(config.method).checked_params(config.params))
        stored = store.keep_run_fit(run_id, fitted)
    return stored


def with_stored_plain(store: Store, work: UnitWork) -> UnitWork:
    """The unit with its unwatermarked batch taken from the store where another run holds it."""
    return replace(work, plain=stored_plain_batch(store, work.config, list(work.unit.indices)))


class InProcess:
    """Runs units one after another in this process, with the caller's model loader."""

    def __init__(self, model_loader: Callable[[str], LoadedModel]):
        self.model_loader = model_loader
        self._watermarks: dict[str, Watermark] = {}  # per run, for the model in use
        self._lm: LoadedModel | None = None

    def run(self, works: list[UnitWork], prepare: Callable[[UnitWork], UnitWork], record: Callable[[UnitResult], None],
            progress: Callable[[str], None], cancel: threading.Event | None = None) -> dict[str, str]:
        """Compute and record each unit in order; returns no failures (an error stops the job, as it should here)."""
        for work in works:
            if cancel is not None and cancel.is_set():
                raise Cancelled(work.unit.run_id)
            if work.config.server is not None:  # its texts must come from its engine, not a model loaded here
                raise ValueError(f"Run {work.unit.run_id} is generated through the serving engine at "
                                 f"{work.config.server}, not in this process.")
            lm = self.model_loader(work.config.model)
            if lm is not self._lm:  # another model: its runs' watermarks must not keep the last one in memory
                self._watermarks.clear()
                self._lm = lm
            if work.unit.run_id not in self._watermarks:
                self._watermarks[work.unit.run_id] = run_watermark(lm, work.config)
            batches = -(-work.config.n // work.config.batch_size)

            def note(kind: str, step: int, work=work, batches=batches) -> None:
                progress(f"batch {work.unit.batch_index + 1} of {batches}: {kind} text, token {step} of "
                         f"{work.config.max_new_tokens}")

            record(compute_unit(lm, self._watermarks[work.unit.run_id], prepare(work), note))
        return {}


def generate_runs(store: Store, configs: list[RunConfig], executor, progress: ProgressCallback | None = None,
                  cancel: threading.Event | None = None) -> list[str]:
    """Generate (or finish) one run per config with `executor` (InProcess, or a Ray cluster's); returns their ids.
    Only this function writes: each unit's rows as it arrives, then each run's status (failed with its reason
    where a unit failed for good). Progress counts samples over all the runs."""
    for config in configs:
        config.samples()  # every dataset and n checked before the first run is created or model loaded
    works = [work for config in configs for work in plan_units(store, config)]
    run_ids = [config.run_id() for config in configs]
    started = list(dict.fromkeys(work.unit.run_id for work in works))
    for run_id in started:  # a complete run is not touched: a rerun writes nothing
        store.set_status(run_id, "running")
    total = sum(config.n for config in configs)
    done = [total - sum(len(work.unit.indices) for work in works)]
    report = progress or (lambda done_count, all_count, note="": None)
    report(done[0], total)

    def record(result: UnitResult) -> None:
        store.write_batch(result.unit.run_id, result.rows, result.detections)
        done[0] += len(result.unit.indices)
        report(done[0], total)

    try:
        failures = executor.run(works, lambda work: with_stored_plain(store, work), record,
                                lambda note: report(done[0], total, note), cancel)
    except Cancelled as cancelled:
        store.set_status(str(cancelled), "cancelled")
        raise
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (the CLI's): stopped, as a cancel stops it, none left 'running'
        for run_id in started:
            if store.has_run(run_id) and store.run(run_id)["status"] == "running":
                store.set_status(run_id, "cancelled", "interrupted: run the same command again to resume")
        raise
    except Exception as error:  # a model that cannot be loaded, a run deleted meanwhile: none is left 'running'
        for run_id in started:
            if store.has_run(run_id) and store.run(run_id)["status"] == "running":
                store.set_status(run_id, "failed", one_line(error))
        raise
    for run_id in dict.fromkeys(run_ids):
        store.set_status(run_id, "failed" if run_id in failures else "done", failures.get(run_id))
    return run_ids


def run_generation(
    config: RunConfig,
    store: Store,
    lm: LoadedModel,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> str:
    """Generate (or finish) a run in this process with a loaded model; returns its id."""
    [run_id] = generate_runs(store, [config], InProcess(lambda name: lm), progress, cancel)
    return run_id
