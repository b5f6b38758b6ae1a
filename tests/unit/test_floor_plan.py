"""The floor plan holds: the picture docs/architecture.md draws is the one the imports have.

Read from the source with `ast` (imports inside functions count; `if TYPE_CHECKING:` imports
do not, as in the import-linter contracts). The layers themselves are the contracts in
pyproject.toml, checked by `lint-imports`; this file checks what a contract cannot say: no loop
between packages, the size of modules and functions, where states are spelled, and that the
module list in docs/architecture.md is the tree's.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from fedqueue.rules import states

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fedqueue"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _type_checking_blocks(tree: ast.Module) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    return skipped


def _imports(name: str, path: Path) -> Iterator[str]:
    tree = _tree(path)
    skipped = _type_checking_blocks(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _group(module: str) -> str:
    """The package (or top-level module) a module belongs to: `fedqueue.storage.outbox` -> storage."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


@cache
def _group_imports() -> dict[str, dict[str, set[str]]]:
    known = {name for name, _ in _modules()}
    graph: dict[str, dict[str, set[str]]] = {}
    for name, path in _modules():
        for target in _imports(name, path):
            if target in known and target != "fedqueue" and _group(target) != _group(name):
                graph.setdefault(_group(name), {}).setdefault(_group(target), set()).add(
                    f"{name} -> {target}"
                )
    return graph


def test_no_package_imports_another_that_imports_it_back_even_inside_functions() -> None:
    graph = _group_imports()

    def reaches(start: str, goal: str) -> bool:
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph.get(todo.pop(), {}):
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    loops = sorted(
        f"{a} -> {b} and back: {sorted(edges)[0]}"
        for a, targets in graph.items()
        for b, edges in targets.items()
        if reaches(b, a)
    )
    assert loops == []


def test_storage_imports_no_flow_no_service_and_no_edge() -> None:
    above = {"outbound", "inbound", "remote", "service", "web", "cli", "client"}
    found = sorted(e for g, es in _group_imports().get("storage", {}).items() if g in above for e in es)
    assert found == []


def test_the_edges_reach_storage_only_through_the_service() -> None:
    graph = _group_imports()
    found = sorted(e for edge in ("web", "cli") for e in graph.get(edge, {}).get("storage", set()))
    assert found == []


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for _, path in _modules()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_60_lines() -> None:
    long = {
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}": lines
        for _, path in _modules()
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert long == {}


#: The states rows and answers are in: a string spelling one of them outside states.py is a second
#: home for the concept. (Outcome labels there, such as `DereferenceOutcome`, are not states: a
#: metric may spell "refused" for its own reason.)
STATE_ENUMS = (
    states.DeliveryState,
    states.OutboxState,
    states.FollowerState,
    states.CircuitState,
    states.RelayState,
    states.InboxAnswer,
)
STATE_VALUES = frozenset(member.value for enum in STATE_ENUMS for member in enum)


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_no_state_is_spelled_outside_states_py_templates_included() -> None:
    spelled: list[str] = []
    for _, path in _modules():
        if path.name == "states.py":
            continue
        tree = _tree(path)
        docstrings = _docstrings(tree)
        spelled += [
            f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in STATE_VALUES
            and id(node) not in docstrings
        ]
    quoted = re.compile("['\"](" + "|".join(sorted(STATE_VALUES)) + ")['\"]")
    for template in sorted((PACKAGE / "templates").glob("*.html")):
        for number, line in enumerate(template.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{template.relative_to(ROOT)}:{number}"
            spelled += [f"{where} {m.group(1)!r}" for m in quoted.finditer(line)]
    assert spelled == []


def _listed_modules() -> set[str]:
    """The modules docs/architecture.md lists: `### fedqueue/pkg/` headings, then `- `name`` bullets."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    listed: set[str] = set()
    package = ""
    for line in section.splitlines():
        if heading := re.match(r"### `(fedqueue(?:/[\w/]+)?)/?`", line):
            package = heading.group(1).rstrip("/").replace("/", ".")
        elif bullet := re.match(r"- `(\w+)`", line):
            listed.add(f"{package}.{bullet.group(1)}")
    return listed


def test_docs_architecture_lists_every_module_and_only_those() -> None:
    tree = {name for name, path in _modules() if path.name != "__init__.py"}
    listed = _listed_modules()
    assert {"missing from the docs": sorted(tree - listed), "listed but absent": sorted(listed - tree)} == {
        "missing from the docs": [],
        "listed but absent": [],
    }
