"""Where a test failed, as a file and line of the repository, or nowhere.

A result names a place in an attribute (``file="tests/test_uart.py" line="41"``) or in the failure's text:
pytest's ``tests/test_uart.py:42: AssertionError``, Go's ``uart_test.go:17:``, a Java frame's
``(UartTest.java:42)``, a C assertion's ``/work/ws/tests/src/timing.c:64:``, a Python traceback's
``File "tests/helpers.py", line 9``. :class:`Locator` makes such a path repository-relative: it strips the
job's workspace prefix, resolves ``.`` and ``..`` lexically and refuses a path that is still absolute or
climbs out of the repository. When the caller knows the repository's files, a bare file name (Go and Java
print only that) is matched to the one file of that name, or to the one whose folders the test's class or
package names; a path that matches no file is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

# ``path:line`` where the path starts a line or follows a space, a quote or a bracket; it needs an
# extension starting with a letter, which keeps times (``12:30``), versions (``1.2:3``) and addresses
# (``host:8080``) out.
_PATH_CHARACTER: Final = r"""[^\s:()"'\[\]<>|]"""
_COLON_LOCATION: Final = re.compile(
    rf"""(?:^|(?<=[\s("'\[]))"""
    rf"(?P<path>{_PATH_CHARACTER}+(?<!\.)\.[A-Za-z][A-Za-z0-9_+-]{{0,9}}):(?P<line>\d{{1,9}})(?![\d.])",
    re.MULTILINE,
)
_PYTHON_FRAME: Final = re.compile(r'File "(?P<path>[^"\n]+)", line (?P<line>\d{1,9})')
_SCAN_LIMIT: Final = 200  # locations read from one text: a traceback names far fewer


@dataclass(frozen=True, slots=True)
class Location:
    """A line of a file of the repository: ``path`` relative to its top, ``/``-separated; ``line`` from 1."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def _index(files: Iterable[str]) -> dict[str, tuple[str, ...]]:
    by_name: dict[str, list[str]] = {}
    for path in files:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    return {name: tuple(paths) for name, paths in by_name.items()}


@dataclass(frozen=True, slots=True)
class Locator:
    """Makes the paths a job's results name relative to the repository.

    ``workspace`` is the absolute folder the job ran in (the repository's top); ``files``, when given, every
    file of the repository at the commit, so that only those are ever named.
    """

    workspace: str = ""
    files: frozenset[str] | None = None
    _by_name: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", _index(self.files or ()))

    def relative(self, path: str, hint: str = "") -> str | None:
        """``path`` relative to the repository, or ``None`` when it is not a file of it.

        ``hint`` is the test's class or package (``com.acme.fw.UartTest``, ``github.com/acme/fw/uart``):
        it chooses between files of the same name.
        """
        path = path.strip().replace("\\", "/")
        workspace = self.workspace.replace("\\", "/").rstrip("/")
        if workspace and path.startswith(workspace + "/"):
            path = path[len(workspace) + 1 :]
        if path.startswith("/") or re.match(r"[A-Za-z]:/", path) or "\0" in path:
            return None
        parts: list[str] = []
        for part in path.split("/"):
            if part == "..":
                if not parts:
                    return None  # out of the repository
                parts.pop()
            elif part not in ("", "."):
                parts.append(part)
        if not parts:
            return None
        relative = "/".join(parts)
        if self.files is None or relative in self.files:
            return relative
        return self._by_suffix(relative, hint)

    def _by_suffix(self, relative: str, hint: str) -> str | None:
        found = [
            path
            for path in self._by_name.get(relative.rsplit("/", 1)[-1], ())
            if path == relative or path.endswith("/" + relative)
        ]
        if len(found) <= 1:
            return found[0] if found else None
        # Several files of that name: the one whose folders end as the test's package (Go:
        # ``github.com/acme/fw/uart`` and ``uart/``) or its class's package (Java: ``com.acme.fw.UartTest``
        # and ``com/acme/fw/``) does.
        words = [word for word in re.split(r"[./]", hint) if word]
        scores = {
            path: max(_shared_tail(path.split("/")[:-1], words[:cut]) for cut in (None, -1)) for path in found
        }
        best = max(scores.values())
        chosen = [path for path, score in scores.items() if score == best]
        return chosen[0] if best and len(chosen) == 1 else None


def _shared_tail(left: list[str], right: list[str]) -> int:
    count = 0
    while count < min(len(left), len(right)) and left[-1 - count] == right[-1 - count]:
        count += 1
    return count


def locations_in(text: str) -> list[tuple[str, int]]:
    """Every (path, line) the text names, in the order it names them (at most a few hundred)."""
    found: list[tuple[int, str, int]] = []
    for pattern in (_COLON_LOCATION, _PYTHON_FRAME):
        for match in pattern.finditer(text):
            found.append((match.start(), match["path"], int(match["line"])))
            if len(found) >= 2 * _SCAN_LIMIT:
                break
    found.sort()
    return [(path, line) for _, path, line in found[-_SCAN_LIMIT:] if line >= 1]


def locate(
    locator: Locator, text: str, *, file: str = "", line: int | None = None, hint: str = ""
) -> Location | None:
    """Where a test failed: the first place its failure text names in the test's own file, else its
    ``file`` and ``line`` attributes, else the first place in the text that is in the repository.

    The first, because each dialect lists the test's own frame before those it called into (pytest and
    Python tracebacks go outermost first and Java's innermost first, but below the test's frame are only the
    runner's) and Go's first logged line is its first failure. The text wins over the ``line`` attribute:
    that is where the test starts (and pytest's counts from 0), the text names the line that failed.
    """
    own = locator.relative(file, hint) if file else None
    named = [
        Location(relative, number)
        for path, number in locations_in(text)
        if (relative := locator.relative(path, hint)) is not None
    ]
    if own is not None:
        in_own = [place for place in named if place.path == own]
        if in_own:
            return in_own[0]
        if line is not None and line >= 1:
            return Location(own, line)
    if not named:
        return None
    # A test's class or module names its file (``tests.test_uart`` and ``tests/test_uart.py``): prefer the
    # places in it to those in helpers and fixtures the failure passed through.
    words = set(re.split(r"[./:]", hint))
    in_test = [place for place in named if place.path.rsplit("/", 1)[-1].rsplit(".", 1)[0] in words]
    return (in_test or named)[0]
