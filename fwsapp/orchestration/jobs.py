"""Background jobs for the app (generation, judging): one thread each, so work survives leaving the page.

A job writes through the store's per-thread cursor; the page polls `Job.done`/`Job.total` for its bar, `Job.note`
for the phase under way (converting or loading a model, batch k of n, the metric being computed), and
`Job.elapsed`/`Job.remaining` for the time: the estimate is the job's own measured rate, from its first finished
unit on, so a loaded machine gets a longer one.
"""
from __future__ import annotations

import sys
import threading
import time
import traceback
from datetime import datetime
from dataclasses import dataclass, field
from typing import Callable

from fwsapp import EXPECTED_ERRORS, counted, duration
from fwsapp.orchestration import pipeline
from fwsapp.data.tasks import TASKS
from fwsapp.generation.run_config import Cancelled, RunConfig
from fwsapp.judge.backends import JudgeError
from fwsapp.judge.registry import REQUEST_TIMEOUT_SECONDS
from fwsapp.judge.runner import JudgeSettings
from fwsapp.robustness.attacks import ATTACKS
from fwsapp.models import LoadedModel
from fwsapp.store import Store

Work = Callable[[Callable[[int, int], None], threading.Event], str | None]


def runs_counted(runs) -> str:
    """'1 run', '4 runs': how a job's label and result line count the runs it works on."""
    return counted(len(runs), "run", "runs")


@dataclass
class Job:
    kind: str  # the pipeline step it runs ("generate", "judge", "score", …): the pages find their own jobs by it
    key: str
    label: str
    done: int = 0
    total: int = 0
    note: str = ""  # what is under way inside the current step
    status: str = "starting"  # starting, running, done, cancelled, failed
    message: str | None = None  # the result line, or the error
    why: str = ""  # why it runs, where that is not plain from its label: said beside it to whoever has its page open
    config: RunConfig | None = None  # what a generation job makes, so its page can show it again
    run_ids: tuple[str, ...] = ()  # the runs it generates: none of them may be deleted under it
    finished_at: datetime | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    started: float = field(default_factory=lambda: time.monotonic())
    first_unit: tuple[float, int] | None = None  # (when, done) at the first progress past zero: the rate's origin
    refused: bool = False  # it failed on a check before any work (a ValueError with nothing done): nothing to resume

    @property
    def finished(self) -> bool:
        return self.status in {"done", "cancelled", "failed"}

    def advance(self, done: int, total: int, note: str = "") -> None:
        """A progress report: counts, the phase under way, and the origin of the measured rate."""
        if done > 0 and self.first_unit is None:
            self.first_unit = (time.monotonic(), done)
        self.done, self.total, self.note, self.status = done, total, note, "running"

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float | None:
        """Seconds left at the rate measured since the first finished unit (model loading excluded); None until a
        second report gives a rate."""
        if self.first_unit is None or self.done <= self.first_unit[1] or not self.total:
            return None
        since, done_then = self.first_unit
        rate = (self.done - done_then) / (time.monotonic() - since)
        return max(0.0, (self.total - self.done) / rate)

    def timing(self) -> str:
        """'2 min 10 s elapsed, about 1 min left' (or '…, estimating after the first batch')."""
        left = self.remaining()
        return (f"{duration(self.elapsed())} elapsed, " +
                (f"about {duration(left)} left" if left is not None else "estimating after the first batch"))


    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0

    def cancel(self) -> None:
        self.cancel_event.set()


def generation_label(config: RunConfig) -> str:
    return (f"{config.method} on {TASKS[config.task].label}, {config.model}, {counted(config.n, 'sample', 'samples')} × "
            f"{config.max_new_tokens} tokens, seed {config.seed} (run {config.run_id()})")


class JobManager:
    """Starts jobs and remembers them for the lifetime of the app process."""

    def __init__(self, store: Store, model_loader: Callable[[str], LoadedModel]):
        self.store = store
        self._load = model_loader
        self._running = threading.local()  # the job of the current worker thread, whose phase a model load reports
        self.jobs: dict[str, Job] = {}
        self.sweeps: dict[str, list[str]] = {}  # sweep job key -> its run ids
        self._lock = threading.Lock()

    def start(self, kind: str, key: str, label: str, work: Work) -> Job:
        with self._lock:
            current = self.jobs.get(key)
            if current is not None and not current.finished:
                return current  # the same work is already going
            job = Job(kind=kind, key=key, label=label)
            self.jobs[key] = job
        threading.Thread(target=self._run, args=(job, work), name=f"fwsapp-{kind}", daemon=True).start()
        return job

    def start_generation(self, config: RunConfig, api_key_env: str | None = None) -> Job:
        """Generate a run here, or through the serving engine at `config.server` (its API key read from `api_key_env`,
        the served model's tokenizer `config.tokenizer`, kept with the run)."""
        def work(progress, cancel):
            executor = None
            if config.server is not None:
                from fwsapp.generation.serving import ServingEngine

                executor = ServingEngine(config.server, api_key_env, config.tokenizer)
            [run_id] = pipeline.generate(self.store, [config], self.model_loader, progress, cancel, executor=executor)
            return " ".join([f"Run {run_id}: {counted(config.n, 'sample', 'samples')} generated and scored. See them on the Detect page.",
                             *(executor.notes if executor else [])])

        run_id = config.run_id()
        job = self.start("generate", f"generate:{run_id}", generation_label(config), work)
        job.total = job.total or config.n
        job.config, job.run_ids = config, (run_id,)
        return job

    def start_judge(self, run_ids: list[str], backend_kind: str, judge_model: str | None, base_url: str | None,
                    settings: JudgeSettings, timeout: float = REQUEST_TIMEOUT_SECONDS, api_key: str | None = None) -> Job:
        # The key lives in this closure only: not in the job's key, label or message.
        def work(progress, cancel):
            backend = pipeline.judge_backend(self.model_loader, backend_kind, judge_model, base_url, timeout, api_key)
            outcome = pipeline.judge(self.store, run_ids, self.model_loader, progress, cancel, backend=backend,
                                     settings=settings)
            if outcome.problem():
                raise JudgeError(f"{outcome.problem()} {outcome.describe(backend.model)}")
            return outcome.describe(backend.model)

        key = f"judge:{backend_kind}:{judge_model}:{','.join(run_ids)}"
        return self.start("judge", key, f"Judging {runs_counted(run_ids)} with {judge_model or backend_kind}", work)

    def start_redetect(self, run_id: str, method: str, params: dict, tokenizer_name: str,
                       deduplicate: bool = False) -> Job:
        """Score a run's stored texts again (see redetect.py); a detection set beside its own scores."""
        def work(progress, cancel):
            [result] = pipeline.detect(self.store, [run_id], self.model_loader, progress, cancel, method=method,
                                       params=params, tokenizer=tokenizer_name, deduplicate=deduplicate)
            return (f"Detection set {result.set_id}: run {run_id} scored with {method} and the {result.tokenizer} "
                    f"tokenizer{', each repeated (context, token) pair once' if deduplicate else ''}.")

        key = f"redetect:{run_id}:{method}:{sorted(params.items())}:{tokenizer_name}:{deduplicate}"
        return self.start("redetect", key, f"Re-detecting {run_id} with {method} ({tokenizer_name})", work)

    def start_lengths(self, run_ids: list[str], tokenizer: str | None = None) -> Job:
        """Give runs their scores at every length (see length.py), detecting again from text where needed."""
        def work(progress, cancel):
            sets = pipeline.lengths(self.store, run_ids, self.model_loader, progress, cancel, tokenizer=tokenizer)
            return f"Scores by length for {runs_counted(run_ids)}; {len(sets)} detected again from their text."

        return self.start("lengths", f"lengths:{','.join(run_ids)}", f"Scoring {runs_counted(run_ids)} by length", work)

    def start_length_predictions(self, run_ids: list[str]) -> Job:
        """Predict runs' tokens to detect from their models' entropy (see predicted_length.py)."""
        def work(progress, cancel):
            done = pipeline.predict_lengths(self.store, run_ids, self.model_loader, progress, cancel)
            return f"Tokens to detect predicted for {counted(done, 'answer', 'answers')} of {runs_counted(run_ids)}."

        return self.start("predict", f"predict:{','.join(run_ids)}", f"Predicting {runs_counted(run_ids)} from entropy", work)

    def start_attack(self, run_ids: list[str], attack: str, params: dict, seed: int,
                     normalize: str | None = None, tokenizer: str | None = None) -> Job:
        """Attack runs' watermarked texts and detect them again (see robustness.py)."""
        def work(progress, cancel):
            sets = pipeline.attack(self.store, run_ids, self.model_loader, progress, cancel, attack=attack,
                                   params=params, seed=seed, normalize=normalize, tokenizer=tokenizer)
            attacked = [entry for entry in sets if entry.attack_set]
            table = "Forgery" if ATTACKS[attack].forges else "Method × attack"
            return f"{attack}: {runs_counted(attacked)} attacked and detected again. See the {table} table."

        key = f"attack:{attack}:{sorted(params.items())}:{seed}:{normalize}:{tokenizer}:{','.join(run_ids)}"
        return self.start("attack", key, f"Attacking {runs_counted(run_ids)} with {attack}", work)

    def start_sweep(self, base: RunConfig, grid: dict[str, list]) -> Job:
        configs = pipeline.sweep_configs(base, grid)

        def work(progress, cancel):
            run_ids = pipeline.generate(self.store, configs, self.model_loader, progress, cancel)
            self.sweeps[key] = run_ids
            return f"Sweep finished: {runs_counted(run_ids)}."

        key = f"sweep:{base.run_id()}:{sorted(grid.items())}"
        job = self.start("sweep", key, f"{base.method} sweep over {', '.join(grid)}", work)
        job.total = job.total or sum(config.n for config in configs)
        job.run_ids = tuple(config.run_id() for config in configs)
        return job

    def start_grid(self, spec, address: str | None = None) -> Job:
        """An experiment spec (grid.load_spec): its runs in this process, or on the Ray cluster at `address`,
        then its steps."""
        def work(progress, cancel):
            executor = pipeline.spec_executor(spec, address)
            outcome = pipeline.grid(self.store, spec, self.model_loader, progress, cancel, executor=executor)
            if outcome.judged is not None and outcome.judged.problem():
                raise JudgeError(f"The runs are done; the judge step failed: {outcome.judged.problem()}")
            failed = "; ".join(f"{run_id} failed: {reason}" for run_id, reason in outcome.failed.items())
            return (f"{len(outcome.run_ids) - len(outcome.failed)} of {len(outcome.run_ids)} runs done"
                    + (f", then {', '.join(spec.steps.names())}" if spec.steps.names() else "") + "."
                    + (f" {failed}." if failed else " Open them on the Detect, Quality and Entities pages.")
                    + "".join(f" {note}" for note in getattr(executor, "notes", [])))

        where = (f"through {spec.server.url}" if spec.server else f"on Ray at {address}" if address
                 else "in this process")
        job = self.start("grid", f"grid:{spec.name}", f"{spec.name}: {runs_counted(spec.runs)} {where}", work)
        job.run_ids = tuple(config.run_id() for config in spec.runs)
        return job

    def start_analysis(self, run_ids: list[str], entropy_model: str | None,
                       threshold: float = pipeline.HALLUCINATION_THRESHOLD, recognizer: str | None = None) -> Job:
        """Entropies (references; the texts of imported and served runs with `entropy_model`) and disease entities of each run, found
        by the named `recognizer` (default: the trained tagger)."""
        def work(progress, cancel):
            analysis = pipeline.analyze(self.store, run_ids, self.model_loader, progress, cancel,
                                        entropy_model=entropy_model, threshold=threshold, recognizer=recognizer)
            skipped = analysis.skipped
            note = (f" Entropy skipped for the imported or served runs {', '.join(skipped)}: choose a model for them."
                    if skipped else "")
            return f"Analysed {runs_counted(analysis.entities)} with {analysis.recognizer}.{note}"

        key = f"analyze:{','.join(run_ids)}:{entropy_model}:{threshold}:{recognizer}"
        return self.start("analyze", key, f"Analysing {runs_counted(run_ids)}", work)

    def start_scoring(self, run_ids: list[str], metrics: tuple[str, ...], oracle: str | None,
                      alignscore_checkpoint: str | None) -> Job:
        from fwsapp.quality.registry import METRICS
        from fwsapp.quality.scoring import computed_values

        def work(progress, cancel):
            counts: dict[str, int] = {}  # over the runs that computed a metric rather than skip it
            scored = pipeline.score(self.store, run_ids, self.model_loader, progress, cancel, metrics=metrics,
                                    oracle=oracle, alignscore_checkpoint=alignscore_checkpoint)
            for computed in scored.values():
                for metric, count in computed.items():
                    if count is not None:
                        counts[metric] = counts.get(metric, 0) + count
            skipped: dict[str, list[str]] = {}
            for run_id, computed in scored.items():
                for metric in (metric for metric, count in computed.items() if count is None):
                    skipped.setdefault(metric, []).append(run_id)
            note = "".join(f" {METRICS[metric].label} skipped for {', '.join(runs)}: {METRICS[metric].skipped_because}."
                           for metric, runs in skipped.items())
            summary = computed_values(counts, lambda metric: METRICS[metric].label)
            return summary[0].upper() + summary[1:] + "." + note

        return self.start("score", f"score:{','.join(run_ids)}:{','.join(metrics)}", f"Scoring {runs_counted(run_ids)}", work)

    def model_loader(self, name: str) -> LoadedModel:
        """The app's loader, saying in the running job's progress line that a model is being converted or loaded."""
        from fwsapp.models import loading_phase

        job = getattr(self._running, "job", None)
        if job is not None and not job.finished:
            job.note = loading_phase(name)
        loaded = self._load(name)
        if job is not None and job.note == loading_phase(name):
            job.note = ""
        return loaded

    def running(self) -> list[Job]:
        """Every job under way, oldest first."""
        return [job for job in list(self.jobs.values()) if not job.finished]

    def generating(self, run_id: str) -> Job | None:
        """The running job that generates this run, if any: the run may not be deleted under it."""
        return next((job for job in self.running() if run_id in job.run_ids), None)

    def active(self, kind: str) -> list[Job]:
        return [job for job in self.jobs.values() if job.kind == kind and not job.finished]

    def latest(self, kind: str) -> Job | None:
        return next((job for job in reversed(self.jobs.values()) if job.kind == kind), None)

    def _run(self, job: Job, work: Work) -> None:
        self._running.job = job
        try:
            job.message = work(job.advance, job.cancel_event)
            status = "cancelled" if job.cancel_event.is_set() else "done"
        except Cancelled:
            status = "cancelled"
        except Exception as error:  # shown on the page; finished work stays stored
            status = "failed"
            job.refused = isinstance(error, ValueError) and job.done == 0
            job.message = str(error) if job.refused else f"{type(error).__name__}: {error}"
            if isinstance(error, EXPECTED_ERRORS):  # the server log gets the page's one line
                print(f"fwsapp: {job.label} failed: {job.message}", file=sys.stderr)
            else:
                traceback.print_exc()
        job.finished_at = datetime.now()  # before the status: a page that sees it finished reads the time
        job.status = status
