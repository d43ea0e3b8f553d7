"""Hyperparameter sweeps (the paper's Figure 5): one stored run per grid point, same data and seed."""
from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from typing import Callable

from fwsapp.generate import RunConfig, run_generation
from fwsapp.methods import canonical_name

GRIDS = {
    "KGW": {"delta": [0.5, 1.0, 2.0], "gamma": [0.1, 0.25, 0.5]},
    "SWEET": {"delta": [0.5, 1.0, 2.0], "gamma": [0.1, 0.25, 0.5]},
    "EXP-edit": {"pseudo_length": [100, 200, 300]},
    "DiPmark": {"alpha": [0.4, 0.45, 0.5]},
}


def grid_points(method: str, grid: dict[str, list] | None = None) -> list[dict]:
    """Every combination of the grid's values, as parameter dicts."""
    grid = grid or GRIDS[canonical_name(method)]
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[key] for key in keys))]


def run_sweep(base: RunConfig, store, lm, grid: dict[str, list] | None = None,
              progress: Callable[[int, int], None] | None = None, cancel: threading.Event | None = None) -> list[str]:
    """Generate one run per grid point (finished points are skipped); returns the run ids in grid order."""
    points = grid_points(base.method, grid)
    run_ids = []
    for index, point in enumerate(points):
        if cancel is not None and cancel.is_set():
            break
        config = replace(base, params={**base.params, **point})
        run_ids.append(run_generation(config, store, lm, cancel=cancel))
        if progress:
            progress(index + 1, len(points))
    return run_ids
