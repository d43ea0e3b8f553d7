"""Background generation jobs for the app: one thread per job, so a run survives leaving the page.

The job writes through the store's per-thread cursor; the page polls `Job.progress` to draw its bar.
"""
from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field
from typing import Callable

from fwsapp.generate import Cancelled, RunConfig, run_generation
from fwsapp.models import LoadedModel
from fwsapp.store import Store


@dataclass
class Job:
    config: RunConfig
    run_id: str
    done: int = 0
    total: int = 0
    status: str = "starting"  # starting, loading model, running, done, cancelled, failed
    error: str | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def finished(self) -> bool:
        return self.status in {"done", "cancelled", "failed"}

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0

    def cancel(self) -> None:
        self.cancel_event.set()


class JobManager:
    """Starts generation jobs and remembers them for the lifetime of the app process."""

    def __init__(self, store: Store, model_loader: Callable[[str], LoadedModel]):
        self.store = store
        self.model_loader = model_loader
        self.jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def start(self, config: RunConfig) -> Job:
        run_id = config.run_id()
        with self._lock:
            current = self.jobs.get(run_id)
            if current is not None and not current.finished:
                return current  # the same run is already going
            job = Job(config=config, run_id=run_id, total=config.n)
            job.thread = threading.Thread(target=self._work, args=(job,), name=f"fwsapp-{run_id}", daemon=True)
            self.jobs[run_id] = job
        job.thread.start()
        return job

    def active(self) -> list[Job]:
        return [job for job in self.jobs.values() if not job.finished]

    def latest(self) -> Job | None:
        return next(reversed(self.jobs.values()), None)

    def _work(self, job: Job) -> None:
        def progress(done: int, total: int) -> None:
            job.done, job.total, job.status = done, total, "running"

        try:
            job.status = "loading model"
            lm = self.model_loader(job.config.model)
            run_generation(job.config, self.store, lm, progress=progress, cancel=job.cancel_event)
            job.status = "done"
        except Cancelled:
            job.status = "cancelled"
        except Exception as error:  # shown on the page; the finished batches stay stored
            job.status = "failed"
            job.error = f"{type(error).__name__}: {error}"
            traceback.print_exc()
