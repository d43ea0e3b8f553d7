"""The package's layout: the folder tree is the pipeline, and layers only import downward.

pages → interfaces (cli, ui) → orchestration (the pipeline and its runners) → the domain stages → store → the
foundation (paths, plug-in declarations, the sample-size rule). A stage may use another stage; nothing below imports
anything above it, and the store imports nothing but the foundation.
"""
import ast
import re

import pytest

from tests.conftest import PROJECT

FOUNDATION = {"fwsapp", "fwsapp.paths", "fwsapp.plugins", "fwsapp.sample_size", "fwsapp.secret_keys"}
STAGES = ("models", "data", "watermark", "generation", "detection", "robustness", "quality", "judge", "entities",
          "human", "results")
LAYERS = {  # subpackage (or foundation module) -> rank; higher ranks may import lower ones
    **{module: 0 for module in FOUNDATION},
    "fwsapp.store": 1,
    **{f"fwsapp.{stage}": 2 for stage in STAGES},
    "fwsapp.orchestration": 3,
    "fwsapp.cli": 4, "fwsapp.ui": 4, "fwsapp.service": 4, "fwsapp.__main__": 4,
}


def module_name(path) -> str:
    parts = list(path.relative_to(PROJECT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    if module in FOUNDATION:
        return module
    parts = module.split(".")
    return ".".join(parts[:2])


def imported_modules(path) -> set[str]:
    """Every fwsapp module a file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "fwsapp"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "fwsapp":
            found.add(node.module)
    return found


MODULES = sorted(PROJECT.joinpath("fwsapp").rglob("*.py"))


def test_every_module_belongs_to_a_layer_and_the_top_level_holds_only_the_foundation():
    unplaced = [module_name(path) for path in MODULES if layer_of(module_name(path)) not in LAYERS]
    assert unplaced == []
    top_level = {module_name(path) for path in PROJECT.joinpath("fwsapp").glob("*.py")}
    assert top_level == FOUNDATION | {"fwsapp.__main__"}


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_layers_only_import_downward(path):
    source = module_name(path)
    upward = [target for target in imported_modules(path)
              if LAYERS[layer_of(target)] > LAYERS[layer_of(source)]]
    assert upward == [], f"{source} imports a layer above it"


def test_the_store_imports_nothing_above_the_foundation():
    for path in PROJECT.joinpath("fwsapp", "store").rglob("*.py"):
        assert {layer_of(target) for target in imported_modules(path)} <= FOUNDATION | {"fwsapp.store"}, path


def test_pages_hold_no_sql_and_nothing_imports_a_page():
    for path in MODULES:
        assert "pages" not in {target.split(".")[0] for target in imported_modules(path)}
    for path in PROJECT.joinpath("pages").glob("*.py"):
        assert not re.search(r"\b(SELECT|INSERT|DELETE FROM|UPDATE)\b .* (FROM|INTO|SET|WHERE)\b", path.read_text()), path


def test_the_readme_architecture_names_every_package_and_module_of_the_tree():
    architecture = PROJECT.joinpath("README.md").read_text().split("## Architecture", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in architecture.splitlines() if line.startswith("| `")]
    named = {name for cell in first_cells for name in re.findall(r"`(fwsapp/[\w/]+(?:\.py)?)`", cell)}
    packages = {f"fwsapp/{path.relative_to(PROJECT / 'fwsapp').parts[0]}/" for path in MODULES
                if path.parent != PROJECT / "fwsapp"}
    top_level = {f"fwsapp/{path.name}" for path in PROJECT.joinpath("fwsapp").glob("*.py")} - {"fwsapp/__init__.py",
                                                                                              "fwsapp/__main__.py"}
    assert packages | top_level <= named
    assert [name for name in named if not PROJECT.joinpath(name).exists()] == []


PAGE_FUNCTION_LINES = 80


@pytest.mark.parametrize("path", sorted((PROJECT / "pages").glob("*.py")) + [PROJECT / "app.py"],
                         ids=lambda path: path.name)
def test_a_page_is_sections_no_function_over_80_lines_and_each_says_what_it_draws(path):
    """A reader finds a page's parts by name: each function is short and its docstring says what it draws."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            lines = node.end_lineno - node.lineno + 1
            assert lines <= PAGE_FUNCTION_LINES, f"{path.name}: {node.name}() is {lines} lines; split it into sections"
            if lines > 10:
                assert ast.get_docstring(node), f"{path.name}: {node.name}() needs a docstring saying what it draws"
