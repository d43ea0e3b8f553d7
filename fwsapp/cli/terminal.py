"""What every command shares at the terminal: signals that end a command cleanly, a progress bar, the runs a
command targets and the models it loads."""
from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager

INTERRUPTED = 130  # the shell's code for a command ended by Ctrl-C


@contextmanager
def signal_handled(signum: int, handler):
    """`handler` for `signum` while the block runs, the previous one after. Outside the main thread signals cannot be
    caught, and nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)


def terminate_cleanly():
    """`kill` (SIGTERM) ends a command as Ctrl-C does: transactions roll back and partial files are removed, where
    Python's default would stop at once and leave them (a `.partial` output of `recognize`)."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    return signal_handled(signal.SIGTERM, interrupt)


def first_interrupt_stops(stop: threading.Event, what: str):
    """The first Ctrl-C sets `stop` (the step stops starting work and keeps what arrives); a second one interrupts
    at once."""
    def stop_gently(signum, frame):
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print(f"\nStopping: {what} (Ctrl-C again to leave now).", file=sys.stderr)

    return signal_handled(signal.SIGINT, stop_gently)


@contextmanager
def progress_bar(description: str, unit: str):
    """A tqdm bar on stderr, driven by the backend's (done, total) progress callbacks. It appears at the first report
    with work to do, so input refused before any work is one line, with no empty bar before it, and a command with
    nothing left to do (everything stored) draws none."""
    from tqdm import tqdm

    bar = None

    def update(done: int, total: int, note: str = "") -> None:
        nonlocal bar
        if bar is None and not total:
            return
        if bar is None:
            bar = tqdm(desc=description, unit=unit, total=total, file=sys.stderr)  # drawn once made: with its total
        bar.total = total
        bar.n = done
        bar.set_postfix_str(note, refresh=False)
        bar.refresh()

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def table_text(frame, float_format=None) -> str:
    """A table as every command prints it: no index, tasks as people read them ("Question answering"), and "–" where
    there is no value (pandas writes None and NaN)."""
    import numpy as np

    from fwsapp.data.tasks import tasks_named

    frame = tasks_named(frame)
    # A None in a column of objects is written "None" whatever na_rep says; as NaN it is written na_rep.
    frame = frame.apply(lambda column: column.where(column.notna(), np.nan) if column.dtype == object else column)
    return frame.to_string(index=False, na_rep="–", float_format=float_format)


def run_ids(store, args) -> list[str]:
    """The runs a command targets: --all (at least one: an empty database did nothing and said nothing), or each --run
    checked to exist."""
    ids = list(store.runs().run_id) if args.all else args.run
    if args.all and not ids:
        raise ValueError(f"No runs in {store.path}: --all has nothing to work on. `python -m fwsapp generate` or "
                         "`import` stores runs.")
    for run_id in ids:
        store.run(run_id)  # a clear error for an unknown id
    return ids


def model_loader(args):
    """Each model loaded once for the command's lifetime, on the command's --device in its --dtype."""
    from functools import lru_cache

    from fwsapp.models import load_model

    return lru_cache(maxsize=None)(lambda name: load_model(name, device=args.device, dtype=args.dtype))


def detectable(store, targets: list[str], tokenizer: str | None) -> list[str]:
    """The runs of a command over every run that can be detected again here; the others named on stderr, not a
    reason to stop (`pipeline.undetectable`)."""
    from fwsapp.orchestration.pipeline import undetectable

    skipped = undetectable(store, targets, tokenizer)
    for run_id, reason in skipped.items():
        print(f"{run_id}: skipped ({reason})", file=sys.stderr)
    return [run_id for run_id in targets if run_id not in skipped]


def existing_store(path):
    """The database a command that only reads names. One that does not exist is refused, not created: a mistyped --db
    made an empty database, and `runs` and `report` then said there were no runs."""
    from pathlib import Path

    from fwsapp.store import Store

    if not Path(path).exists():
        raise ValueError(f"No database at {path}: pass --db with the path of an fwsapp database, or generate or import "
                         "a run to create one there.")
    return Store(path)


def deletion_confirmed(option: str, question: str, answer: str, yes: bool) -> bool:
    """Whether a deletion goes ahead: at once with --yes; else the person at the terminal types `answer` (the id or
    name) after `question`. Without a terminal and without --yes, refused: nobody is there to answer."""
    if yes:
        return True
    if not sys.stdin.isatty():  # a script or CI
        raise ValueError(f"{option}: no terminal to confirm on; add --yes to delete without asking.")
    if input(f"{question} Type {answer} to confirm: ").strip() == answer:
        return True
    print("Not deleted.")
    return False


def opened_targets(args):
    """The database the command names, and the runs it targets there (each checked to exist)."""
    store = existing_store(args.db)
    return store, run_ids(store, args)
