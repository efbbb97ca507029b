"""The layers of DESIGN.md: imports point downward only, and ``kerrigan.core`` stays pure."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "kerrigan"

# Rank of each top-level part of the package; a module may import parts of a lower rank, and itself.
RANKS = {
    "core": 1,
    "store": 2,
    "github": 3,
    "dispatch": 3,
    "web": 3,
    "runner": 4,
    "app": 5,
    "demo": 6,
    "cli": 7,
    "__main__": 8,  # python -m kerrigan: the command line
    # Settings are a plain frozen dataclass that adapters are handed; the core never sees them.
    "config": 2,
    # The process's Prometheus counters: the adapters count into them; the store's facts reach them
    # through the application, which listens.
    "metrics": 2,
    # One logging set-up (structlog over the standard library) for every process but the runner's.
    "logs": 2,
}
# The runner agent reaches the server only over HTTP: of Kerrigan, it imports the core alone.
ALLOWED_BELOW = {"runner": {"core"}}
# Shipped fakes and builders may use anything; nothing but tests (and the demo, which runs on them) may
# use them.
TESTING = "testing"
SHIPS_FAKES = {"demo"}

CORE_FORBIDDEN_MODULES = {
    "aiohttp",
    "sqlalchemy",
    "alembic",
    "gidgethub",
    "asyncio",
    "asyncpg",
    "aiosqlite",
    "os",
    "pathlib",
    "io",
    "shutil",
    "tempfile",
    "glob",
    "socket",
    "subprocess",
    "time",
    "random",
    "requests",
    "httpx",
    "urllib",
    "http",
    "sqlite3",
    "threading",
    "multiprocessing",
    "logging",
}
CORE_FORBIDDEN_CALLS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
}
CORE_FORBIDDEN_NAMES = {"open", "input", "print", "exec", "eval", "__import__"}


def part_of(module: str) -> str | None:
    """``kerrigan.store.models`` -> ``store``; ``None`` for modules outside Kerrigan."""
    parts = module.split(".")
    if parts[0] != "kerrigan":
        return None
    return parts[1] if len(parts) > 1 else ""


def imported_modules(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """Every (line, absolute module name) a module's source imports."""
    package = module.rsplit(".", 1)[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            if name == "kerrigan":  # ``from kerrigan import store`` imports the part ``store``
                found += [
                    (node.lineno, f"kerrigan.{alias.name}")
                    for alias in node.names
                    if alias.name in RANKS or alias.name == TESTING
                ]
    return found


def layer_violations(source: str, module: str) -> list[str]:
    """Why ``source`` (the text of ``module``) breaks the layering, one line per import."""
    tree = ast.parse(source)
    here = part_of(module)
    problems = []
    for line, name in imported_modules(tree, module):
        there = part_of(name)
        if here is None or there in (None, "", here):
            continue
        if there == TESTING:
            if here not in SHIPS_FAKES:
                problems.append(f"{module}:{line} imports {name}: only tests may use kerrigan.testing")
            continue
        if here in (TESTING, ""):
            continue
        if here in ALLOWED_BELOW:
            if there not in ALLOWED_BELOW[here]:
                problems.append(
                    f"{module}:{line} imports {name}: {here} may import only "
                    f"{', '.join(sorted(ALLOWED_BELOW[here]))}"
                )
            continue
        if RANKS.get(there, 99) >= RANKS.get(here, 0):
            problems.append(f"{module}:{line} imports {name}: {here} may not import {there}")
    return problems


def purity_violations(source: str, module: str) -> list[str]:
    """Why ``source`` of a core module is not pure: I/O libraries, file access or clock reads."""
    tree = ast.parse(source)
    problems = []
    for line, name in imported_modules(tree, module):
        if name.split(".")[0] in CORE_FORBIDDEN_MODULES:
            problems.append(f"{module}:{line} imports {name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in CORE_FORBIDDEN_NAMES:
            problems.append(f"{module}:{node.lineno} uses {node.id}()")
        if isinstance(node, ast.Attribute):
            owner = node.value
            owner_name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
            if (owner_name, node.attr) in CORE_FORBIDDEN_CALLS:
                problems.append(f"{module}:{node.lineno} reads the clock ({owner_name}.{node.attr})")
    return problems


def modules() -> list[tuple[str, str]]:
    """(module name, source) for every module of the package."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        found.append((name, path.read_text(encoding="utf-8")))
    return found


def test_the_package_is_where_the_layering_test_looks() -> None:
    names = [name for name, _ in modules()]
    assert "kerrigan.core.matching" in names
    assert "kerrigan.cli" in names


def test_imports_point_down_the_layers() -> None:
    problems = [problem for name, source in modules() for problem in layer_violations(source, name)]
    assert problems == []


def test_core_does_no_io_and_reads_no_clock() -> None:
    problems = [
        problem
        for name, source in modules()
        if part_of(name) == "core"
        for problem in purity_violations(source, name)
    ]
    assert problems == []


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("import aiohttp\n", "kerrigan.core.x", "imports aiohttp"),
        ("from sqlalchemy.orm import Session\n", "kerrigan.core.x", "imports sqlalchemy.orm"),
        ("import asyncio\n", "kerrigan.core.x", "imports asyncio"),
        ("from pathlib import Path\n", "kerrigan.core.x", "imports pathlib"),
        ("text = open('f').read()\n", "kerrigan.core.x", "uses open()"),
        ("import datetime\nnow = datetime.datetime.now()\n", "kerrigan.core.x", "reads the clock"),
        ("from datetime import datetime\nnow = datetime.now()\n", "kerrigan.core.x", "reads the clock"),
    ],
)
def test_purity_check_catches_io_in_core(source: str, module: str, expected: str) -> None:
    problems = purity_violations(source, module)
    assert any(expected in problem for problem in problems), problems


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("from kerrigan.store import models\n", "kerrigan.core.x"),
        ("import kerrigan.web.api\n", "kerrigan.store.x"),
        ("from kerrigan.store.models import Pool\n", "kerrigan.runner.agent"),
        ("from kerrigan.github import checks\n", "kerrigan.runner.agent"),
        ("from kerrigan.app import create_app\n", "kerrigan.web.views"),
        ("from kerrigan.testing.labs import synthetic_lab\n", "kerrigan.core.x"),
        ("from ..store import models\n", "kerrigan.core.matching"),
        ("from kerrigan import store\n", "kerrigan.core.matching"),
    ],
)
def test_layer_check_catches_upward_imports(source: str, module: str) -> None:
    assert layer_violations(source, module)


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("from kerrigan.core.labels import validate_key\n", "kerrigan.store.x"),
        ("from kerrigan.core import matching\n", "kerrigan.runner.agent"),
        ("from kerrigan.store import models\n", "kerrigan.web.api"),
        ("from . import labels\n", "kerrigan.core.matching"),
        ("import yaml\n", "kerrigan.core.x"),
    ],
)
def test_layer_check_allows_downward_imports(source: str, module: str) -> None:
    assert layer_violations(source, module) == []
    if module.startswith("kerrigan.core"):
        assert purity_violations(source, module) == []
