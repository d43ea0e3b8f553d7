"""How many CPU threads a model's work uses, on a machine other work shares.

torch's OpenMP threads spin while they wait. On a 2-core machine at load 8-10, a generate of 2 texts × 16 tokens took
311 s with torch's default 2 threads and 71 s with one (issue 48): the spinning threads fought the other work for the
same cores. The policy, applied before each generation and each teacher-forced pass (so a long job follows the load as
it changes):

- intra-op threads sized to the cores other work leaves free: the cores less the load average over the last minute
  (fwsapp's own work counted as one), at least 1, at most the cores;
- OpenMP threads wait passively (OMP_WAIT_POLICY=PASSIVE, set before torch is imported where it is not set already),
  so a waiting thread sleeps instead of spinning;
- FWSAPP_THREADS=N fixes the count (a GPU server, or a measurement).

bench/threads.py measures it against fixed counts, quiet and loaded (docs/benchmarks.md).
"""
from __future__ import annotations

import os

THREADS_VARIABLE = "FWSAPP_THREADS"


def policy_threads(cores: int | None = None, load: float | None = None) -> int:
    """The intra-op threads for the next piece of work: FWSAPP_THREADS if set, else the cores the load leaves free."""
    fixed = os.environ.get(THREADS_VARIABLE)
    if fixed:
        return max(1, int(fixed))
    cores = cores or os.cpu_count() or 1
    load = os.getloadavg()[0] if load is None else load
    free = cores - max(load - 1.0, 0.0)  # the load includes this process's own work, about one core of it
    return max(1, min(cores, int(round(free))))


def adapt() -> int:
    """Set torch's intra-op threads by the policy; returns the count."""
    import torch

    threads = policy_threads()
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads
