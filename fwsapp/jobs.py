"""Background jobs for the app (generation, judging): one thread each, so work survives leaving the page.

A job writes through the store's per-thread cursor; the page polls `Job.done`/`Job.total` for its bar.
"""
from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field
from typing import Callable

from fwsapp.generate import Cancelled, RunConfig, run_generation
from fwsapp.judge.backends import JudgeError, make_backend
from fwsapp.judge.runner import JudgeSettings, run_judge
from fwsapp.metrics.quality import QualityResources, score_run
from fwsapp.models import EMBEDDED_MODEL, LoadedModel
from fwsapp.store import Store
from fwsapp.sweeps import grid_points, run_sweep

Work = Callable[[Callable[[int, int], None], threading.Event], str | None]


@dataclass
class Job:
    kind: str  # "generate" or "judge"
    key: str
    label: str
    done: int = 0
    total: int = 0
    status: str = "starting"  # starting, running, done, cancelled, failed
    message: str | None = None  # the result line, or the error
    cancel_event: threading.Event = field(default_factory=threading.Event)

    @property
    def finished(self) -> bool:
        return self.status in {"done", "cancelled", "failed"}

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0

    def cancel(self) -> None:
        self.cancel_event.set()


class JobManager:
    """Starts jobs and remembers them for the lifetime of the app process."""

    def __init__(self, store: Store, model_loader: Callable[[str], LoadedModel]):
        self.store = store
        self.model_loader = model_loader
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

    def start_generation(self, config: RunConfig) -> Job:
        def work(progress, cancel):
            run_id = run_generation(config, self.store, self.model_loader(config.model), progress=progress, cancel=cancel)
            return f"Run {run_id}: {config.n} samples generated and scored. See them on the Detect page."

        run_id = config.run_id()
        job = self.start("generate", f"generate:{run_id}", f"Run {run_id}", work)
        job.total = job.total or config.n
        return job

    def start_judge(self, run_ids: list[str], backend_kind: str, judge_model: str | None, base_url: str | None,
                    settings: JudgeSettings, timeout: float = 60.0, api_key: str | None = None) -> Job:
        # The key lives in this closure only: not in the job's key, label or message.
        def work(progress, cancel):
            loaded = self.model_loader(judge_model or EMBEDDED_MODEL) if backend_kind == "local" else None
            backend = make_backend(backend_kind, judge_model, base_url, timeout=timeout, loaded=loaded, api_key=api_key)
            outcome = run_judge(self.store, run_ids, backend, settings, progress=progress, cancel=cancel)
            if outcome.requested and not outcome.judged and not outcome.stopped:
                raise JudgeError("no verdict came back. " + outcome.describe(backend.model))
            return outcome.describe(backend.model)

        key = f"judge:{backend_kind}:{judge_model}:{','.join(run_ids)}"
        return self.start("judge", key, f"Judging {len(run_ids)} run(s) with {judge_model or backend_kind}", work)

    def start_redetect(self, run_id: str, method: str, params: dict, tokenizer_name: str) -> Job:
        """Score a run's stored texts again (see redetect.py); a detection set beside its own scores."""
        def work(progress, cancel):
            from fwsapp.redetect import redetect
            from fwsapp.tokenizers import load_tokenizer
            from fwsapp.watermark import method_class

            tokenizer = load_tokenizer(tokenizer_name)
            lm = self.model_loader(tokenizer_name) if method_class(method).needs_model else None
            set_id = redetect(self.store, run_id, method, params, tokenizer, lm=lm, progress=progress, cancel=cancel)
            return f"Detection set {set_id}: run {run_id} scored with {method} and the {tokenizer_name} tokenizer."

        key = f"redetect:{run_id}:{method}:{sorted(params.items())}:{tokenizer_name}"
        return self.start("redetect", key, f"Re-detecting {run_id} with {method} ({tokenizer_name})", work)

    def start_sweep(self, base: RunConfig, grid: dict[str, list]) -> Job:
        def work(progress, cancel):
            run_ids = run_sweep(base, self.store, self.model_loader(base.model), grid, progress=progress, cancel=cancel)
            self.sweeps[key] = run_ids
            return f"Sweep finished: {len(run_ids)} runs."

        key = f"sweep:{base.run_id()}:{sorted(grid.items())}"
        job = self.start("sweep", key, f"{base.method} sweep over {', '.join(grid)}", work)
        job.total = job.total or len(grid_points(base.method, grid))
        return job

    def start_analysis(self, run_ids: list[str], entropy_model: str | None) -> Job:
        """Entropies (references; imported texts with `entropy_model`) and disease entities of each run."""
        def work(progress, cancel):
            from fwsapp.encoder import load_encoder
            from fwsapp.entities import analyze_run, load_recognizer
            from fwsapp.entropy import compute_entropies

            recognizer, encoder = load_recognizer(), load_encoder()
            skipped = []
            for index, run_id in enumerate(run_ids):
                if cancel.is_set():
                    break
                run = self.store.run(run_id)
                name = entropy_model if run["imported"] else run["model"]
                lm = self.model_loader(name) if name else None
                if lm is not None:
                    compute_entropies(self.store, run_id, lm)
                else:
                    skipped.append(run_id)
                analyze_run(self.store, run_id, recognizer, encoder, lm.tokenizer if lm else None)
                progress(index + 1, len(run_ids))
            note = f" Entropy skipped for imported runs {', '.join(skipped)}: choose a model for them." if skipped else ""
            return f"Analysed {len(run_ids)} run(s).{note}"

        job = self.start("analyze", f"analyze:{','.join(run_ids)}:{entropy_model}", f"Analysing {len(run_ids)} run(s)", work)
        job.total = job.total or len(run_ids)
        return job

    def start_scoring(self, run_ids: list[str], metrics: tuple[str, ...], oracle: str | None,
                      alignscore_checkpoint: str | None) -> Job:
        def work(progress, cancel):
            resources = QualityResources(self.model_loader, oracle=oracle, alignscore_checkpoint=alignscore_checkpoint)
            counts: dict[str, int] = {}
            for index, run_id in enumerate(run_ids):
                if cancel.is_set():
                    break
                step = lambda done, total, index=index: progress(index * len(metrics) + done, len(run_ids) * len(metrics))  # noqa: E731
                for metric, count in score_run(self.store, run_id, resources, metrics, progress=step).items():
                    counts[metric] = counts.get(metric, 0) + count
            return "Computed " + ", ".join(f"{count} {metric}" for metric, count in counts.items()) + " values."

        return self.start("score", f"score:{','.join(run_ids)}:{','.join(metrics)}", f"Scoring {len(run_ids)} run(s)", work)

    def active(self, kind: str) -> list[Job]:
        return [job for job in self.jobs.values() if job.kind == kind and not job.finished]

    def latest(self, kind: str) -> Job | None:
        return next((job for job in reversed(self.jobs.values()) if job.kind == kind), None)

    def _run(self, job: Job, work: Work) -> None:
        def progress(done: int, total: int) -> None:
            job.done, job.total, job.status = done, total, "running"

        try:
            job.message = work(progress, job.cancel_event)
            job.status = "cancelled" if job.cancel_event.is_set() else "done"
        except Cancelled:
            job.status = "cancelled"
        except Exception as error:  # shown on the page; finished work stays stored
            job.status = "failed"
            job.message = f"{type(error).__name__}: {error}"
            traceback.print_exc()
