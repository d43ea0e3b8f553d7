"""Options several commands share, and the parser that lists a method's parameters in its --help and takes no
abbreviation of an option."""
from __future__ import annotations

import argparse

from fwsapp.paths import DEFAULT_DB


class CommandParser(argparse.ArgumentParser):
    """A command's parser. It takes no abbreviation of an option (`--raters` is not `--raters-per-item`: a typo must
    not set another option); with `lists_params`, its --help ends with every method's parameters, their valid values
    and help, read from the method registry."""

    lists_params = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})

    def format_help(self) -> str:
        if self.lists_params:
            from fwsapp.watermark.methods import params_help

            self.epilog = params_help()
            self.formatter_class = argparse.RawDescriptionHelpFormatter
        return super().format_help()


def recognizer(parser: argparse.ArgumentParser, what: str = "the disease recognizer", kind: str | None = "disease",
               default: str | None = None) -> None:
    """--recognizer: one of the recognizers of `kind` (None: of any kind)."""
    from fwsapp.entities.recognizers import RECOGNIZERS, default_recognizer

    entries = [entry for entry in RECOGNIZERS if kind is None or entry.kind == kind]
    parser.add_argument("--recognizer", default=default or (kind and default_recognizer(kind)),
                        choices=[entry.name for entry in entries],
                        help=f"{what}: " + "; ".join(f"{entry.name}: {entry.help}" for entry in entries))


def target_options(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--run", action="append", help="a run id (repeatable)")
    target.add_argument("--all", action="store_true", help="every run in the database")


def task_option(parser: argparse.ArgumentParser, what: str) -> None:
    """--task: one of the paper's tasks, each named with its label and dataset (the task registry)."""
    from fwsapp.data.tasks import TASKS

    parser.add_argument("--task", required=True, choices=list(TASKS), help=f"{what}: " + "; ".join(
        f"{task.name} ({task.label}, {task.dataset})" for task in TASKS.values()))


def loading(parser: argparse.ArgumentParser) -> None:
    from fwsapp.models import DTYPES

    parser.add_argument("--device", help="where models run: cpu, cuda or cuda:N (default: the first GPU, else cpu)")
    parser.add_argument("--dtype", choices=DTYPES, help="weights' precision (default: bf16 on a GPU that has it, "
                        "else fp16; fp32 on cpu)")


def loading_given(args) -> list[str]:
    """The options of `loading` given on the command line: refused where the command loads no model."""
    return [option for option, value in (("--device", args.device), ("--dtype", args.dtype)) if value]


def refuse_unused_loading(args, reads_model: bool, why: str) -> None:
    """--device and --dtype refused where the command, as asked, loads no model (`why` says so): they were ignored
    without a word."""
    if (unused := loading_given(args)) and not reads_model:
        raise ValueError(f"{why}, so none is loaded: drop {' and '.join(unused)}.")


# Suffixes that name a format: an --out named for another format than its command writes is refused (a spreadsheet
# program opens JSONL named .csv as broken rows). Any other suffix is the user's choice.
FORMAT_SUFFIXES = {".csv": "CSV", ".jsonl": "JSONL", ".json": "JSON", ".parquet": "Parquet"}


def output_file(parser: argparse.ArgumentParser, help: str, required: bool = False, writes=None) -> None:
    """--out and --force, as every command that writes a file the user names has them: a new file, or with --force a
    regular file replaced whole (`paths.write_output`), checked before any work. `writes`: what the command writes, in
    words, and its suffix ("facts writes JSONL", ".jsonl"), or a function of the arguments giving them; None where the
    suffix chooses the format (export)."""
    parser.add_argument("--out", required=required, help=help)
    parser.add_argument("--force", action="store_true", help="replace --out if it is an existing file")
    parser.set_defaults(out_writes=writes)


def checked_output(args) -> None:
    """Refuse --out at once where writing it later would fail, would replace a file without --force, or where its
    name says another format than the one written."""
    from pathlib import Path

    from fwsapp.paths import replaceable_output

    out = getattr(args, "out", None)
    if not out:
        return
    writes = getattr(args, "out_writes", None)
    if callable(writes):
        writes = writes(args)
    suffix = Path(out).suffix.lower()
    if writes and suffix in FORMAT_SUFFIXES and suffix != writes[1]:
        raise ValueError(f"--out {out} names {FORMAT_SUFFIXES[suffix]}, but {writes[0]}: name it …{writes[1]}.")
    replaceable_output(Path(out), getattr(args, "force", False))


def write_csv(args, frame) -> None:
    """A table to the --out its command was given, as every CSV fwsapp writes (`export.csv_bytes`)."""
    from fwsapp.paths import write_output
    from fwsapp.results.export import csv_bytes

    write_output(args.out, csv_bytes(frame), args.force)


def db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=str(DEFAULT_DB), help=f"DuckDB file (default {DEFAULT_DB})")


def subcommand(subparsers, name: str, help: str, **kwargs) -> argparse.ArgumentParser:
    """A (sub)command's parser whose own --help says what it does: argparse shows `help` only in the list of commands,
    so a command given no description opened its --help with the usage alone."""
    kwargs.setdefault("description", f"{help[0].upper()}{help[1:]}.")
    return subparsers.add_parser(name, help=help, **kwargs)


def command(commands, handler, name: str, models: bool = False, database: bool = True, **kwargs) -> argparse.ArgumentParser:
    """A command's parser (`subcommand`), run by `handler`, with --device and --dtype where it loads models and --db
    where it opens the database."""
    parser = subcommand(commands, name, **kwargs)
    if models:
        loading(parser)
    if database:
        db(parser)
    parser.set_defaults(handler=handler)
    return parser
