"""The package's layering, read from its imports: rules below storage, storage below the flows,
the flows below the edges. A new import that breaks a layer fails here, naming both modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "fedqueue"

#: Pure rules: no I/O, `now` passed in. They may import only each other.
RULES = frozenset(
    {
        "fedqueue.errors",
        "fedqueue.states",
        "fedqueue.activitystreams",
        "fedqueue.urls",
        "fedqueue.column_rules",
        "fedqueue.followers_sync_rules",
        "fedqueue.signing.keys",
        "fedqueue.signing.digests",
        "fedqueue.signing.structured_fields",
        "fedqueue.signing.cavage",
        "fedqueue.signing.rfc9421",
        "fedqueue.signing.requests",
        "fedqueue.remote.guard",
        "fedqueue.outbound.intake",
        "fedqueue.outbound.addressing",
        "fedqueue.outbound.actor_rules",
        "fedqueue.outbound.coalesce_rules",
        "fedqueue.outbound.scheme_rules",
        "fedqueue.outbound.outcomes",
        "fedqueue.outbound.backoff",
        "fedqueue.outbound.circuit",
        "fedqueue.outbound.record",
        "fedqueue.outbound.webhook_rules",
        "fedqueue.outbound.waiting",
        "fedqueue.outbound.status_order",
        "fedqueue.inbound.receive_rules",
        "fedqueue.inbound.verify",
        "fedqueue.inbound.signature_schemes",
        "fedqueue.inbound.follows",
        "fedqueue.inbound.forward_rules",
        "fedqueue.inbound.move_rules",
        "fedqueue.web.login_throttle",
    }
)
FLOWS = ("fedqueue.signing", "fedqueue.remote", "fedqueue.outbound", "fedqueue.inbound")
EDGES = ("fedqueue.web", "fedqueue.cli")
#: Third-party packages that do I/O: never in a rule; the database ones only in storage.
IO_LIBRARIES = frozenset({"sqlalchemy", "sqlmodel", "alembic", "asyncpg", "aiosqlite"})
NETWORK_LIBRARIES = frozenset({"httpx", "aiohttp", "starlette", "uvicorn", "jinja2"})


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {_module_name(path) for path in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """The fedqueue modules a file imports, and the top-level names of everything else.

    `from fedqueue.signing import keys` imports the module `fedqueue.signing.keys`;
    `from fedqueue.storage import Store` imports the package `fedqueue.storage` itself.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in NAMES else node.module)
    return found


MODULES = {_module_name(path): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def _within(module: str, packages: tuple[str, ...] | frozenset[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _violations(rule: str) -> list[str]:
    found = []
    for module, imported in MODULES.items():
        ours = {name for name in imported if name in NAMES and name != "fedqueue"}
        top = {name.split(".")[0] for name in imported}
        if rule == "rules are pure" and module in RULES:
            found += [f"{module} imports {name}" for name in sorted(ours - RULES)]
            found += [f"{module} imports {lib}" for lib in sorted(top & (IO_LIBRARIES | NETWORK_LIBRARIES))]
        if rule == "only storage talks to the database" and not _within(module, ("fedqueue.storage",)):
            found += [f"{module} imports {lib}" for lib in sorted(top & IO_LIBRARIES)]
        if rule == "storage imports no flow and no edge" and _within(module, ("fedqueue.storage",)):
            upward = {n for n in ours if _within(n, FLOWS + EDGES) and n not in RULES}
            found += [f"{module} imports {name}" for name in sorted(upward)]
        if rule == "flows import no edge" and _within(module, FLOWS):
            found += [f"{module} imports {name}" for name in sorted(ours) if _within(name, EDGES)]
        if rule == "edges share shapes from below" and _within(module, ("fedqueue.cli",)):
            # The CLI composes the web app (`serve`); it takes nothing else from the web edge.
            web = {n for n in ours if _within(n, ("fedqueue.web",)) and n != "fedqueue.web.app"}
            found += [f"{module} imports {name}" for name in sorted(web)]
        if rule == "edges share shapes from below" and _within(module, ("fedqueue.web",)):
            found += [f"{module} imports {name}" for name in sorted(ours) if _within(name, ("fedqueue.cli",))]
    return found


@pytest.mark.parametrize(
    "rule",
    [
        "rules are pure",
        "only storage talks to the database",
        "storage imports no flow and no edge",
        "flows import no edge",
        "edges share shapes from below",
    ],
)
def test_the_package_keeps_its_layers(rule: str) -> None:
    assert _violations(rule) == []


def test_every_listed_rule_module_exists() -> None:
    assert sorted(RULES - MODULES.keys()) == []
