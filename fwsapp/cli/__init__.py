"""Command line: `python -m fwsapp COMMAND`, one module per command group (`generate`, `runs`, `detect`, `attack`,
`quality`, `judge`, `entities`, `serve`, `study`, `grid`, `doctor`), each adding its commands to the parser. `--help` lists
every command the parser has."""
from __future__ import annotations

import argparse
import sys

from fwsapp import EXPECTED_ERRORS
from fwsapp.cli import attack, detect, doctor, entities, generate, grid, judge, quality, runs, serve, study
from fwsapp.cli.options import CommandParser, checked_output
from fwsapp.cli.terminal import INTERRUPTED, terminate_cleanly

# In the order `--help` lists them: the pipeline's, then the runs', the study's and the setup's.
GROUPS = (generate, detect, attack, quality, judge, entities, serve, runs, grid, study, doctor)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m fwsapp")
    commands = parser.add_subparsers(required=True, metavar="COMMAND", parser_class=CommandParser)
    for group in GROUPS:
        group.register(commands)
    parser.description = ("What an LLM watermark does to the medical facts in a text. Commands: "
                          + ", ".join(commands.choices) + ". `python -m fwsapp COMMAND --help` says more of each.")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with terminate_cleanly():
            checked_output(args)  # a file it could not write, or would replace without --force, before any work
            return args.handler(args)
    except EXPECTED_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Every step writes whole batches in transactions: what was written stays, and a rerun resumes from it.
        print("Interrupted: everything written before it is kept; run the command again to resume.", file=sys.stderr)
        return INTERRUPTED
