"""The reference the documentation site prints, built from what is registered and from the parser, never kept by hand:
one table per plug-in axis (its entries, their parameters with defaults, valid values and help, and what each axis
declares besides) and each command's `--help`. `docs/hooks.py` fills a page's `<!-- reference: NAME -->` marker with
`reference(NAME)` when MkDocs builds the site, so a new plug-in or option is in the site with no edit to it.
"""
from __future__ import annotations

import os
import re
from typing import Callable

from fwsapp.entities.recognizers import KINDS, RECOGNIZERS
from fwsapp.judge.registry import JUDGE_BACKENDS
from fwsapp.plugins import Registry
from fwsapp.quality.registry import METRICS
from fwsapp.robustness.attacks import ATTACKS
from fwsapp.watermark import methods

MARKER = re.compile(r"<!-- reference: ([\w-]+) -->")
Columns = dict[str, Callable[[object], str]]


def cell(text) -> str:
    """A Markdown table cell: a pipe escaped, lines joined."""
    return " ".join(str(text).split()).replace("|", "\\|")


def named(entry) -> str:
    return f"`{entry.name}`" + (f" ({', '.join(f'`{alias}`' for alias in entry.aliases)})" if entry.aliases else "")


def parameters(entry) -> str:
    """Each parameter as `name=default`: its valid values, its help (a key's default is never printed)."""
    rows = []
    for key, (default, spec) in getattr(entry, "params", {}).items():
        shown = "a key" if spec is not None and spec.secret else default
        what = entry.valid_values(key) + (f": {spec.help}" if spec is not None and spec.help else "")
        rows.append(f"`{key}={shown}` {what}")
    return "<br>".join(cell(row) for row in rows) or "none"


def needs(entry) -> str:
    return ", ".join(entry.needs) or "nothing"


def method_score(entry) -> str:
    return f"{entry.score_label}, {entry.score_direction} is watermarked; {entry.verdict_rule({})}"


def keyed_draw(entry) -> str:
    return f"{entry.keyed_draw.name} ({entry.keyed_draw.reference})" if entry.keyed_draw else "none (post hoc)"


# What each axis declares beyond name, help, parameters and needs, as columns.
AXES: dict[str, tuple[Registry, Columns]] = {
    "methods": (methods.METHODS, {
        "score and verdict": method_score,
        "strength": lambda entry: f"`{entry.strength_param}`" if entry.strength_param else "",
        "keyed draw": keyed_draw,
        "unit": lambda entry: entry.unit,
    }),
    "attacks": (ATTACKS, {
        "edits": lambda entry: entry.edits,
        "keeps": lambda entry: entry.protects or "",
        "strength": lambda entry: f"`{entry.strength}`" if entry.strength else "",
    }),
    "metrics": (METRICS, {
        "label": lambda entry: entry.label,
        "columns": lambda entry: ", ".join(f"`{column.name}`" for column in entry.columns) or f"`{entry.name}`",
        "by default": lambda entry: "yes" if entry.by_default else "no",
    }),
    "recognizers": (RECOGNIZERS, {
        "kind": lambda entry: entry.kind,
        "normalised to": lambda entry: KINDS[entry.kind].normaliser,
    }),
    "judge-backends": (JUDGE_BACKENDS, {
        "model": lambda entry: entry.default_model or "named by you",
        "key from": lambda entry: f"`${entry.key_env}`" if entry.key_env else "",
    }),
}


def registry_table(axis: str) -> str:
    """One axis's registry as a Markdown table, in declaration order; the first row is the default unless it names one."""
    registry, extra = AXES[axis]
    header = ["name (aliases)", "what", *extra, "parameters", "needs"]
    rows = [[named(entry) + (" (default)" if entry.name == registry.default else ""), cell(entry.help),
             *(cell(column(entry)) for column in extra.values()), parameters(entry), cell(needs(entry))]
            for entry in registry]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def cli_reference() -> str:
    """Every command's `--help`, as the terminal prints it at 100 columns, under a heading of its own."""
    from fwsapp.cli import build_parser

    width = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = build_parser()
        commands = parser._subparsers._group_actions[0].choices
        parts = [f"```text\n{parser.format_help().rstrip()}\n```"]
        parts += [f"### `python -m fwsapp {name}`\n\n```text\n{command.format_help().rstrip()}\n```"
                  for name, command in commands.items()]
    finally:
        if width is None:
            os.environ.pop("COLUMNS")
        else:
            os.environ["COLUMNS"] = width
    return "\n\n".join(parts)


def reference(name: str) -> str:
    if name == "cli":
        return cli_reference()
    if name not in AXES:
        raise ValueError(f"Unknown reference '{name}': choose one of cli, {', '.join(AXES)}.")
    return registry_table(name)


def filled(markdown: str) -> str:
    """A page with each `<!-- reference: NAME -->` marker replaced by that reference."""
    return MARKER.sub(lambda found: reference(found.group(1)), markdown)
