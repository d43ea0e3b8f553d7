"""Generation units on a Ray cluster: the executor `generate_runs` uses beyond one machine.

Workers are Ray actors that keep one model loaded: one GPU each on a GPU cluster, one CPU each otherwise. The
driver (this process) sends a worker the units of the model it already holds, keeps at most IN_FLIGHT units
queued per worker, and collects results with `ray.wait` as they finish; `generate_runs` writes each one, so only
the driver touches DuckDB. Units are content-keyed (run id, batch, batch seeds), so a unit's texts are the same
on any worker and a rerun dispatches only what is missing.

Faults: a worker that dies (its process killed, its node removed) is replaced where the cluster has room, and
its units are tried again, at most MAX_TRIES times each. A unit that fails for good (an error in the unit itself,
or tries exhausted) fails its run with the reason; the other runs go on.

Every node needs this project at the same path with its environment (`make install`), as Ray expects of
dependencies; the workers get the driver's PYTHONPATH and cache folder.

Token authentication (on by default for clusters started with `ray start` from Ray 2.59): Ray's driver turns token
mode on by itself only for a cluster it finds without an address. Given an address, `connect` does the same when the
token is where Ray keeps it (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token), and a cluster that refuses
the driver is one line saying what to set, not Ray's log lines.
"""
from __future__ import annotations

import os
import tempfile
import threading
from collections import Counter, deque
from contextlib import contextmanager
from typing import Callable

from fwsapp.generation.generate import InProcess, UnitResult, UnitWork
from fwsapp.generation.run_config import Cancelled
from fwsapp.paths import CACHE_DIR, PROJECT_DIR

MAX_TRIES = 3
IN_FLIGHT = 2  # units queued per worker: the next is ready the moment one finishes
READY_SECONDS = 30  # how long the cluster may take to find room for a worker before the grid goes on without it
# How long a worker that has room may take to start (its process importing torch, on a loaded node) before it is taken
# for broken: slow is not full, so this is not READY_SECONDS.
STARTUP_SECONDS = 600


class GenerationWorker:
    """A Ray actor's body: the units of one model at a time, with that model loaded once."""

    def __init__(self, device: str | None = None, dtype: str | None = None):
        from functools import lru_cache

        from fwsapp.models import load_model

        loader = lru_cache(maxsize=1)(lambda name: load_model(name, device=device, dtype=dtype))
        self.units = InProcess(loader)

    def ready(self) -> int:
        return os.getpid()

    def compute(self, work: UnitWork) -> UnitResult:
        results = []
        self.units.run([work], lambda unit: unit, results.append, lambda note: None)
        return results[0]


class RayConnectionError(RuntimeError):
    """The driver could not join the cluster: one line saying why and what to do."""


AUTH_MODE = "RAY_AUTH_MODE"
# How long the head's address may take to answer before the driver gives up (Ray itself retries for minutes).
CONNECT_SECONDS = float(os.environ.get("FWSAPP_RAY_CONNECT_SECONDS", 30))


def check_reachable(address: str, seconds: float = CONNECT_SECONDS) -> None:
    """One line, within `seconds`, when nothing answers at host:port: Ray would retry for minutes, printing log lines."""
    import socket

    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RayConnectionError(f"--ray {address}: give the head node's HOST:PORT (6379 by default), or 'local'.")
    try:
        with socket.create_connection((host, int(port)), timeout=seconds):
            pass
    except OSError as error:
        reason = "no answer" if isinstance(error, TimeoutError) else (error.strerror or str(error)).lower()
        raise RayConnectionError(f"Nothing answers at {address} ({reason} within {seconds:g} s): start the cluster "
                                 "there (`ray start --head`), or check the address.") from None


@contextmanager
def native_stderr_captured():
    """Ray's C++ core logs straight to file descriptor 2: hold those lines while joining, to read them on a failure
    and to pass them on otherwise."""
    with tempfile.TemporaryFile(mode="w+") as held:
        saved = os.dup(2)
        os.dup2(held.fileno(), 2)
        try:
            yield held
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def connect(address: str) -> None:
    """Join the Ray cluster at `address` ("local" starts one on this machine; a stray RAY_ADDRESS is not read)."""
    import ray

    if ray.is_initialized():
        return
    if address not in ("local", "auto"):
        check_reachable(address)
    if address not in ("local", "auto") and AUTH_MODE not in os.environ:
        # Where a token is where Ray keeps it, token mode, as Ray sets it for a driver without an address (the helper
        # also refreshes the configuration Ray read at import); nothing changes where there is none.
        from ray._private.authentication.authentication_token_setup import maybe_enable_token_auth_if_token_available

        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    with native_stderr_captured() as held:
        try:
            if address not in ("local", "auto"):
                ask_for_the_cluster(address)
            ray.init(address=address, log_to_driver=False, runtime_env={"env_vars": {
                "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_DIR), os.environ.get("PYTHONPATH")])),
                "FWSAPP_CACHE": str(CACHE_DIR),
            }})
            failure = None
        except ConnectionError as error:
            failure = error
        held.seek(0)
        log = held.read()
    if failure is None:
        if log:
            os.write(2, log.encode())
        return
    if "Unauthenticated" in log or "InvalidAuthToken" in log:
        raise authentication_refused(address)
    raise could_not_join(address, failure) from None


def ask_for_the_cluster(address: str) -> None:
    """Ask the head's GCS for the cluster's id before joining: a cluster that refuses this driver's token says so at
    once, where `ray.init` would retry the same refusal for 20 s; an address where no GCS answers is one line too."""
    from ray._raylet import GcsClient
    from ray.exceptions import AuthenticationError, RpcError

    try:
        GcsClient(address=address)
    except AuthenticationError:
        raise authentication_refused(address) from None
    except RpcError as error:
        raise could_not_join(address, error) from None


def could_not_join(address: str, error: Exception) -> RayConnectionError:
    return RayConnectionError(f"Could not join the Ray cluster at {address}: {str(error).splitlines()[0].rstrip('.')}. Check the "
                              "address and that `ray start --head` runs there.")


def authentication_refused(address: str) -> RayConnectionError:
    if os.environ.get(AUTH_MODE) == "token":
        return RayConnectionError(f"The Ray cluster at {address} refused this driver's token: set RAY_AUTH_TOKEN (or "
                                  "~/.ray/auth_token) to the token `ray get-auth-token` prints on its head node.")
    return RayConnectionError(f"The Ray cluster at {address} needs token authentication: put its token in "
                              "~/.ray/auth_token or RAY_AUTH_TOKEN (`ray get-auth-token` on its head node prints it), "
                              "and run again.")


class RayExecutor:
    """Runs units on a Ray cluster's workers; `run` has InProcess's signature and returns failed runs' reasons."""

    def __init__(self, address: str, device: str | None = None, dtype: str | None = None,
                 workers: int | None = None, worker_class: type = GenerationWorker, max_tries: int = MAX_TRIES):
        import ray

        connect(address)
        resources = ray.cluster_resources()
        self.gpus = int(resources.get("GPU", 0))
        self.count = workers or self.gpus or int(resources.get("CPU", 1))
        self.bundle = {"GPU": 1} if self.gpus else {"CPU": 1}  # what one worker holds
        self.actor = ray.remote(num_gpus=self.bundle.get("GPU", 0), num_cpus=self.bundle.get("CPU", 0))(worker_class)
        self.options = (device, dtype)
        self.max_tries = max_tries
        self.retries = 0  # units tried again after a worker died: for the progress line and the tests
        self.workers: list = []
        self.rooms: dict[int, object] = {}  # each worker's placement group, by id(worker)

    def _new_workers(self, count: int) -> list:
        """Up to `count` started workers: as many as the cluster finds room for within READY_SECONDS. Room is reserved
        first (a placement group of one worker's resources each), then every worker that has room starts at once, so
        that a worker slow to start on a loaded node is waited for (STARTUP_SECONDS), not taken for a full cluster."""
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        waiting = {room.ready(): room for room in (placement_group([self.bundle]) for _ in range(count))}
        reserved = set(ray.wait(list(waiting), num_returns=count, timeout=READY_SECONDS)[0])
        unused = [room for ref, room in waiting.items() if ref not in reserved]
        starting = {}
        for ref in reserved:
            worker = self.actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(waiting[ref])).remote(
                *self.options)
            starting[worker.ready.remote()] = (worker, waiting[ref])
        started = set(ray.wait(list(starting), num_returns=len(starting), timeout=STARTUP_SECONDS)[0]) if starting else set()
        workers = []
        for ref, (worker, room) in starting.items():
            if ref in started:
                self.rooms[id(worker)] = room
                workers.append(worker)
            else:  # placed, but not started in time: broken, not slow
                ray.kill(worker)
                unused.append(room)
        for room in unused:
            remove_placement_group(room)
        return workers

    def _release(self, worker) -> None:
        """End a worker and free the room it held."""
        import ray
        from ray.util.placement_group import remove_placement_group

        ray.kill(worker)
        remove_placement_group(self.rooms.pop(id(worker)))

    def run(self, works: list[UnitWork], prepare: Callable[[UnitWork], UnitWork], record: Callable[[UnitResult], None],
            progress: Callable[[str], None], cancel: threading.Event | None = None) -> dict[str, str]:
        if not works:
            return {}
        self.workers = self._new_workers(min(self.count, len(works)))
        try:
            return self._dispatch(works, prepare, record, progress, cancel)
        finally:  # the workers hold their GPU or CPU while alive: free them for the next grid
            for worker in self.workers:
                self._release(worker)
            self.workers = []

    def _dispatch(self, works, prepare, record, progress, cancel) -> dict[str, str]:
        import ray
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError, RayTaskError

        holding = {id(worker): None for worker in self.workers}  # the model each worker has loaded
        pending, in_flight = deque(works), {}
        tries, failures, finished = Counter(), {}, Counter()

        def next_for(worker) -> UnitWork | None:
            busy_plain = {work.plain_key for _, work in in_flight.values()}
            queued = sum(1 for held, _ in in_flight.values() if held is worker)
            candidates = [work for work in pending if work.plain_key not in busy_plain]
            # Its own model first; another model only once the worker is idle (it then loads that model).
            own = [work for work in candidates if work.config.model == holding[id(worker)]]
            chosen = own[0] if own else candidates[0] if candidates and queued == 0 else None
            if chosen is not None:
                pending.remove(chosen)
                holding[id(worker)] = chosen.config.model
            return chosen

        def fail(run_id: str, reason: str) -> None:
            failures.setdefault(run_id, reason)
            for work in [work for work in pending if work.unit.run_id == run_id]:
                pending.remove(work)

        while pending or in_flight:
            if cancel is not None and cancel.is_set():
                pending.clear()
            for slot in range(IN_FLIGHT):  # a unit for every worker before a second for any
                for worker in self.workers:
                    if sum(1 for held, _ in in_flight.values() if held is worker) == slot:
                        work = next_for(worker)
                        if work is not None:
                            in_flight[worker.compute.remote(prepare(work))] = (worker, work)
            if not in_flight:
                if pending and not self.workers:
                    for work in list(pending):
                        fail(work.unit.run_id, "no Ray worker could be placed on the cluster")
                continue
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
            for ref in ready:
                worker, work = in_flight.pop(ref)
                try:
                    result = ray.get(ref)
                except (ActorDiedError, ActorUnavailableError, RayActorError) as error:  # the worker, not the unit
                    tries[work.unit] += 1
                    if tries[work.unit] >= self.max_tries:
                        fail(work.unit.run_id, f"batch {work.unit.batch_index + 1}: its worker died {tries[work.unit]} "
                                               f"times ({_reason(error)})")
                    else:
                        self.retries += 1
                        pending.appendleft(work)
                    self._replace(worker, holding)
                    continue
                except RayTaskError as error:  # the unit itself raised: trying again would raise again
                    fail(work.unit.run_id, f"batch {work.unit.batch_index + 1}: {_reason(error)}")
                    continue
                if work.unit.run_id not in failures:
                    record(result)
                finished[id(worker)] += 1
            progress(f"{sum(finished.values())} units done, {len(pending) + len(in_flight)} to go; per worker "
                     + ", ".join(str(finished[id(worker)]) for worker in self.workers)
                     + (f"; {self.retries} retried" if self.retries else ""))
        if cancel is not None and cancel.is_set():
            raise Cancelled(works[0].unit.run_id)
        return failures

    def _replace(self, dead, holding: dict) -> None:
        """Drop a dead worker (and anything still queued on it), and start another where there is room."""
        if dead not in self.workers:
            return
        self.workers.remove(dead)
        holding.pop(id(dead), None)
        self._release(dead)  # its room too: a node with room for one worker has room for its replacement
        for replacement in self._new_workers(1):
            self.workers.append(replacement)
            holding[id(replacement)] = None

def _reason(error: Exception) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else type(error).__name__)[:300]

