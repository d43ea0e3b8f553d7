"""`grid`: an experiment spec's whole grid, here or on a Ray cluster."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from fwsapp import counted
from fwsapp.cli.options import command, refuse_unused_loading
from fwsapp.judge.keys import confirmed_judge_key
from fwsapp.cli.terminal import model_loader, progress_bar, table_text


def register(commands) -> None:
    grid = command(commands, cmd_grid, "grid", models=True,
        help="run an experiment spec (TOML): its grid of runs, then its score, analyze and judge steps",
        description="Runs every run of the spec that is not stored yet, in this process or on a Ray cluster, then "
                    "the spec's steps. A rerun does only what is missing. See experiments/*.toml.")
    grid.add_argument("spec", help="the spec file, e.g. experiments/demo.toml")
    grid.add_argument("--ray", metavar="ADDRESS", help="run the units on the Ray cluster at ADDRESS (host:port, or "
                      "'local' to start one here); without it, in this process")
    grid.add_argument("--dry-run", action="store_true", help="print the runs and the work still missing; do nothing")
    grid.add_argument("--yes", action="store_true", help="go on with a grid of more than 10,000 runs")
    grid.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding the judge step's key; "
                      "where the spec names one (api_key_env), the same name, to confirm it")
    grid.add_argument("--server-key-env", metavar="VAR", help="the environment variable holding the API key of the "
                      "spec's [server], if it wants one (a spec never names a secret to send)")


def cmd_grid(args) -> int:
    from fwsapp.cli.attack import attacked_lines
    from fwsapp.cli.entities import analysis_lines
    from fwsapp.cli.quality import scored_lines
    from fwsapp.orchestration import pipeline
    from fwsapp.orchestration.grid import load_spec, plan
    from fwsapp.judge.backends import api_key_from_environment
    from fwsapp.judge.registry import JUDGE_BACKENDS
    from fwsapp.store import Store

    spec = load_spec(args.spec, allow_large=args.yes)  # every key checked before anything else
    if spec.server:
        refuse_unused_loading(args, spec.loads_model_here(), f"{args.spec} generates through the serving engine at "
                              f"{spec.server.url}, and none of its detectors and steps reads a model here")
    api_key = confirmed_judge_key(args.spec, spec.steps.judge, args.api_key_env)
    judge_backend = JUDGE_BACKENDS[spec.steps.judge.backend] if spec.steps.judge else None
    if judge_backend and "key" in judge_backend.needs and not (api_key or os.environ.get(judge_backend.key_env)
                                                                or api_key_from_environment()):
        raise ValueError(f"{args.spec}: [steps] judge uses {judge_backend.menu_label}, and no key is set: set "
                         f"{judge_backend.key_env} before the grid starts (it would fail after generation).")
    if args.dry_run:
        store = Store(args.db, read_only=True) if Path(args.db).exists() else None
        table = plan(spec, store)
        print(table_text(table))
        print(f"{counted(len(table), 'run', 'runs')}; {int(table['units missing'].sum())} of {int(table['units'].sum())} units to generate"
              + (f"; then {', '.join(spec.steps.names())}" if spec.steps.names() else ""))
        return 0
    executor = pipeline.spec_executor(spec, args.ray, args.server_key_env, args.device, args.dtype)
    if spec.server:
        for model in dict.fromkeys(config.model for config in spec.runs):
            executor.served_model(model)  # each model served, before the database is opened
    store = Store(args.db)
    with progress_bar(f"grid {Path(args.spec).name}", "sample") as progress:
        outcome = pipeline.grid(store, spec, model_loader(args), progress, executor=executor, api_key=api_key)
    for note in getattr(executor, "notes", []):
        print(f"note: {note}", file=sys.stderr)
    for run_id in outcome.run_ids:
        print(f"{run_id}: " + (f"failed: {outcome.failed[run_id]}" if run_id in outcome.failed else "done"))
    # Each step as its own command says it: a grid that printed "done" alone left what its steps did to the report.
    steps = [*scored_lines(outcome.scored), *(analysis_lines(outcome.analysis) if outcome.analysis else []),
             *([outcome.judged.describe(outcome.judge_model)] if outcome.judged is not None else []),
             *attacked_lines(store, outcome.attacked)]
    for line in steps:
        print(line)
    if outcome.judged is not None and outcome.judged.problem():  # as `judge` says it, and with its exit code
        print(f"error: judge step: {outcome.judged.problem()}", file=sys.stderr)
        return 1
    return 1 if outcome.failed else 0
