"""The documentation: a README that is a front door, and a reference site built with MkDocs whose tables and
command-line reference are generated from the registries and the parser (fwsapp.cli.reference), never kept by hand."""
import os
import re
import subprocess
import sys

import pytest

from fwsapp.cli import reference
from tests.conftest import PROJECT
from tests.toy_plugins import TOY_ATTACK, TOY_BACKEND, TOY_METHOD, TOY_METRIC, TOY_RECOGNIZER

README_LINES = 250
TOYS = {"methods": TOY_METHOD, "attacks": TOY_ATTACK, "metrics": TOY_METRIC, "recognizers": TOY_RECOGNIZER,
        "judge-backends": TOY_BACKEND}


def test_the_readme_is_a_front_door_and_its_links_lead_somewhere():
    readme = (PROJECT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES
    assert "make run" in readme and "make test" in readme and "make docs" in readme
    targets = re.findall(r"\]\(([^)#]+)", readme)
    assert [target for target in targets if not target.startswith("http") and not (PROJECT / target).exists()] == []


@pytest.mark.parametrize("axis", list(reference.AXES))
def test_each_axis_table_has_a_row_per_registered_plug_in_and_a_toy_is_one_more(axis):
    registry, extra = reference.AXES[axis]
    rows = reference.registry_table(axis).splitlines()[2:]
    assert [re.match(r"\| `([^`]+)`", row).group(1) for row in rows] == registry.names()
    assert all(row.count(" | ") == len(extra) + 3 for row in rows)  # between name, what, the axis's columns, parameters, needs
    with registry.registered(TOYS[axis]):
        assert f"| `{TOYS[axis].name}`" in reference.registry_table(axis)


def test_a_key_default_is_never_printed():
    table = reference.registry_table("methods")
    assert "`hash_key=a key`" in table and "15485863" not in table


def test_the_cli_reference_is_each_commands_help():
    from fwsapp.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    text = reference.cli_reference()
    assert [name for name in commands if f"### `python -m fwsapp {name}`" not in text] == []
    assert "--max-new-tokens" in text and "--audit-keys" in text


def test_an_unknown_reference_marker_is_refused_by_name():
    with pytest.raises(ValueError, match="Unknown reference 'nope': choose one of cli, methods"):
        reference.filled("<!-- reference: nope -->")


def test_the_site_builds_strictly_offline_with_the_generated_tables(tmp_path):
    """`mkdocs build --strict`: a broken link or a missing page fails. The built pages carry the generated tables."""
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=PROJECT,
                           capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    methods_page = (site / "methods" / "index.html").read_text()
    assert all(f"<code>{name}</code>" in methods_page for name in reference.AXES["methods"][0].names())
    assert "<!-- reference:" not in (site / "cli" / "index.html").read_text()


def test_the_readmes_finding_is_the_benchmarks_recorded_result():
    """The README's 7B table is `bench.facts_paper`'s pooled result as recorded, every figure to its printed digits."""
    import json

    from fwsapp.entities.recognizers import KINDS

    readme = (PROJECT / "README.md").read_text()
    pooled = json.loads((PROJECT / "bench" / "results" / "facts_paper.json").read_text())["pooled"]
    rows = re.findall(r"^\| [a-z][^|]* \| ([\d.]+) \| ([\d.]+) \| ([−+][\d.]+) \(([−+][\d.]+), ([−+][\d.]+)\) \| ([\d.]+) \|$",
                      readme, re.MULTILINE)
    assert len(rows) == len(pooled) == len(KINDS) + 2  # each kind of fact, negation flips, corrupted terms
    for printed, measured in zip(rows, pooled):
        expected = [measured[name] for name in ("candidate", "baseline", "difference", "low", "high", "p")]
        assert [float(figure.replace("−", "-")) for figure in printed] == \
            [round(value, len(figure.partition(".")[2])) for value, figure in zip(expected, printed)], measured["measure"]
