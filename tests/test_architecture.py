"""The package's layout: the folder tree is the pipeline, and every import goes down the stage order.

`STAGE_ORDER` is that order, declared once, lowest first: the foundation modules, the store, the models, the datasets,
the clinical language (recognizers and facts, which a method like EntityKGW needs), the watermarks, their detection,
the quality metrics, generation, the judge, the attacks (which may rewrite through a judge backend and score with a
metric), the results that set runs side by side, the clinicians' study, the orchestration that runs the steps, and the
interfaces. A module may import its own stage and any stage before it, never one after: function-level imports are
held to it too, and no module imports itself back through another (no loop). There is no exception list.
"""
import ast
import re

import pytest

from tests.conftest import PROJECT

STAGE_ORDER = (
    # the foundation: modules at the package's top level, each its own stage
    "fwsapp.paths", "fwsapp.network", "fwsapp.secret_keys", "fwsapp.plugins", "fwsapp.sample_size", "fwsapp",
    "fwsapp.store", "fwsapp.models", "fwsapp.data", "fwsapp.entities", "fwsapp.watermark", "fwsapp.detection",
    "fwsapp.quality", "fwsapp.generation", "fwsapp.judge", "fwsapp.robustness", "fwsapp.results", "fwsapp.human",
    "fwsapp.orchestration",
    # the interfaces
    "fwsapp.service", "fwsapp.ui", "fwsapp.cli", "fwsapp.__main__",
)
RANK = {stage: rank for rank, stage in enumerate(STAGE_ORDER)}
FOUNDATION = set(STAGE_ORDER[:STAGE_ORDER.index("fwsapp") + 1])


def module_name(path) -> str:
    parts = list(path.relative_to(PROJECT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """The stage a module belongs to: a foundation module is its own, any other is its subpackage."""
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


def test_every_module_belongs_to_a_stage_and_the_top_level_holds_only_the_foundation():
    unplaced = [module_name(path) for path in MODULES if layer_of(module_name(path)) not in RANK]
    assert unplaced == []
    top_level = {module_name(path) for path in PROJECT.joinpath("fwsapp").glob("*.py")}
    assert top_level == FOUNDATION | {"fwsapp.__main__"}


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_every_import_goes_down_the_stage_order(path):
    source = module_name(path)
    upward = [target for target in imported_modules(path) if RANK[layer_of(target)] > RANK[layer_of(source)]]
    assert upward == [], f"{source} ({layer_of(source)}) imports a later stage: move the concept to its stage"


def module_graph() -> dict[str, set[str]]:
    """Module -> the fwsapp modules it imports (a name imported from a package that is a module counts as that module)."""
    names = {module_name(path) for path in MODULES}
    graph = {}
    for path in MODULES:
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "fwsapp":
                targets |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in names else node.module
                            for alias in node.names}
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name in names}
        graph[module_name(path)] = targets & names
    return graph


def test_no_import_loop_among_modules():
    """No import loop among modules, function-level imports included (Tarjan's strongly connected components)."""
    graph, index, low, stack, loops = module_graph(), {}, {}, [], []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                loops.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert loops == []


def test_pages_hold_no_sql_and_nothing_imports_a_page():
    for path in MODULES:
        assert "pages" not in {target.split(".")[0] for target in imported_modules(path)}
    for path in PROJECT.joinpath("pages").glob("*.py"):
        assert not re.search(r"\b(SELECT|INSERT|DELETE FROM|UPDATE)\b .* (FROM|INTO|SET|WHERE)\b", path.read_text()), path


def test_every_download_on_a_page_goes_through_the_widget_that_does_not_rerun_the_app():
    direct = [path.name for path in [*PROJECT.joinpath("pages").glob("*.py"), PROJECT / "app.py"]
              if "download_button(" in path.read_text()]
    assert direct == []


def test_the_architecture_page_names_every_package_and_module_of_the_tree():
    architecture = PROJECT.joinpath("docs", "architecture.md").read_text()
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
