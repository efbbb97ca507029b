"""Reading YAML documents node by node, so that every value keeps its text and its line.

Scalars are taken as written: the node's source text, never what a YAML 1.1 loader would turn it into
(``1.10`` stays ``"1.10"``, ``on`` stays ``"on"``). Every problem found is collected with the file, line and
field it concerns, and reading goes on, so a user sees all their mistakes at once.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

import yaml

from kerrigan.core.quoting import SHOWN, quote

_Loader: Final[type[yaml.SafeLoader]] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NULL_TAG: Final = "tag:yaml.org,2002:null"
_INT_TAG: Final = "tag:yaml.org,2002:int"
_DECIMAL: Final = re.compile(r"[-+]?[0-9]+")
_MAX_DIGITS: Final = 18  # a bound of any field has fewer; a number of more is out of range, whatever it is
MAX_MESSAGE: Final = 500  # characters of a problem's message


@dataclass(frozen=True, slots=True)
class Problem:
    """A validation error or warning, placed in its file."""

    file: str
    line: int
    column: int
    field: str
    message: str

    def as_dict(self) -> dict[str, object]:
        """The JSON form used by ``kerrigan explain`` and the API."""
        return {
            "path": self.file,
            "line": self.line,
            "column": self.column,
            "field": self.field,
            "message": self.message,
        }

    def __str__(self) -> str:
        where = f"{self.field}: " if self.field else ""
        return f"{self.file}:{self.line}:{self.column}: {where}{self.message}"


def suggest(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to a misspelt ``word``, if one is close enough."""
    matches = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def join_field(parent: str, child: str | int) -> str:
    """``scheduling`` + ``labels`` -> ``scheduling.labels``; ``tasks`` + 0 -> ``tasks[0]``."""
    if isinstance(child, int):
        return f"{parent}[{child}]"
    return f"{parent}.{child}" if parent else child


class SourceReader:
    """Walks a composed YAML document and collects problems instead of raising."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []

    # -- reporting ---------------------------------------------------------------------------------

    def _problem(self, node: yaml.Node | None, field: str, message: str) -> Problem:
        line = node.start_mark.line + 1 if node is not None else 1
        column = node.start_mark.column + 1 if node is not None else 1
        return Problem(self.file, line, column, field, _cut(message))

    def error(self, node: yaml.Node | None, field: str, message: str) -> None:
        """Record an error at ``node``."""
        self.errors.append(self._problem(node, field, message))

    def error_at(self, line: int, field: str, message: str) -> None:
        """Record an error at a line already known (the start of the line)."""
        self.errors.append(Problem(self.file, line, 1, field, _cut(message)))

    def warning(self, node: yaml.Node | None, field: str, message: str) -> None:
        """Record a warning (a deprecation) at ``node``."""
        self.warnings.append(self._problem(node, field, message))

    def sorted_errors(self) -> tuple[Problem, ...]:
        """The errors in the order they stand in the file."""
        return tuple(sorted(self.errors, key=lambda p: (p.line, p.column)))

    def sorted_warnings(self) -> tuple[Problem, ...]:
        """The warnings in the order they stand in the file."""
        return tuple(sorted(self.warnings, key=lambda p: (p.line, p.column)))

    # -- documents ---------------------------------------------------------------------------------

    def compose(self, text: str, what: str, *, max_nodes: int | None = None) -> yaml.Node | None:
        """Parse ``text`` into a single node tree, or record why it is not valid YAML.

        With ``max_nodes``, a document of more nodes than that, counting each alias as the nodes it stands
        for, is refused: a few lines of aliases can otherwise stand for billions of values.
        """
        try:
            nodes = list(yaml.compose_all(text, Loader=_Loader))
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else 1
            column = mark.column + 1 if mark is not None else 1
            reason = exc.problem or exc.context or "not valid YAML"
            self.errors.append(Problem(self.file, line, column, "", f"not valid YAML: {reason}"))
            return None
        except yaml.YAMLError as exc:
            self.errors.append(Problem(self.file, 1, 1, "", f"not valid YAML: {exc}"))
            return None
        except UnicodeError:
            self.errors.append(Problem(self.file, 1, 1, "", "not valid YAML: the text is not valid Unicode"))
            return None
        except RecursionError:
            # libyaml stops at 1,000 levels itself; the pure-Python loader (where libyaml is absent) recurses.
            self.errors.append(Problem(self.file, 1, 1, "", "not valid YAML: nested too deeply"))
            return None
        nodes = [node for node in nodes if node is not None]
        if not nodes:
            self.errors.append(Problem(self.file, 1, 1, "", f"the {what} is empty"))
            return None
        if len(nodes) > 1:
            self.error(nodes[1], "", f"a {what} holds one YAML document; this file has {len(nodes)}")
        if max_nodes is not None:
            size, loop = expanded_size(nodes[0], max_nodes)
            if loop is not None:
                self.error(
                    loop, "", f"this alias stands for a part of the {what} that holds it: no end to it"
                )
                return None
            if size > max_nodes:
                self.error(
                    nodes[0],
                    "",
                    f"the {what} holds more than {max_nodes:,} keys and values "
                    "(counting what each alias stands for)",
                )
                return None
        return nodes[0]

    # -- shapes ------------------------------------------------------------------------------------

    def mapping(
        self, node: yaml.Node, field: str, allowed: Iterable[str] | None = None
    ) -> dict[str, tuple[yaml.Node, yaml.Node]] | None:
        """The entries of a mapping by key text, checking for duplicates and (optionally) unknown keys."""
        if not isinstance(node, yaml.MappingNode):
            self.error(node, field, f"must be a mapping, not {describe(node)}")
            return None
        allowed_set = set(allowed) if allowed is not None else None
        entries: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.error(key_node, field, "keys must be plain strings")
                continue
            key = key_node.value
            child = join_field(field, key)
            if key in entries:
                first = entries[key][0].start_mark.line + 1
                self.error(key_node, child, f"duplicate key {quote(key)} (first set on line {first})")
                continue
            if allowed_set is not None and key not in allowed_set:
                hint = suggest(key, allowed_set) if len(key) <= SHOWN else None
                known = ", ".join(sorted(allowed_set))
                message = f"unknown key {quote(key)}"
                message += f"; did you mean {hint!r}?" if hint else f"; expected one of: {known}"
                self.error(key_node, child, message)
                continue
            entries[key] = (key_node, value_node)
        return entries

    def sequence(self, node: yaml.Node, field: str) -> list[yaml.Node] | None:
        """The items of a sequence, or ``None`` (with an error) if ``node`` is not one."""
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, field, f"must be a list, not {describe(node)}")
            return None
        return list(node.value)

    def string(self, node: yaml.Node, field: str, *, allow_empty: bool = False) -> str | None:
        """A scalar's text as written; null is an error, and so is ``""`` unless ``allow_empty``."""
        if not isinstance(node, yaml.ScalarNode):
            self.error(node, field, f"must be a string, not {describe(node)}")
            return None
        if is_null(node) or (node.value == "" and not allow_empty):
            self.error(node, field, "must not be empty")
            return None
        return str(node.value)

    def integer(self, node: yaml.Node, field: str, *, minimum: int, maximum: int) -> int | None:
        """A whole number within bounds (every field has both: what the system can hold is finite)."""
        if (
            not isinstance(node, yaml.ScalarNode)
            or node.tag != _INT_TAG
            or _DECIMAL.fullmatch(str(node.value)) is None
        ):
            self.error(node, field, f"must be a whole number, not {describe(node)}")
            return None
        text = str(node.value)
        digits = text.lstrip("+-").lstrip("0")
        if len(digits) > _MAX_DIGITS:
            # Far beyond any bound, and perhaps beyond what int() converts (4,300 digits): never converted.
            if text.startswith("-"):
                self.error(node, field, f"{shorten_number(text)} is too small: at least {minimum}")
            else:
                self.error(node, field, f"{shorten_number(text)} is too large: at most {maximum}")
            return None
        value = int(digits or "0") * (-1 if text.startswith("-") else 1)
        if value < minimum or value > maximum:
            self.error(node, field, f"must be {minimum} to {maximum}, not {value}")
            return None
        return value

    def choice(self, node: yaml.Node, field: str, choices: Iterable[str]) -> str | None:
        """A string from a fixed set."""
        value = self.string(node, field)
        options = list(choices)
        if value is not None and value not in options:
            self.error(node, field, f"must be one of {', '.join(options)}, not {quote(value)}")
            return None
        return value

    def strings(
        self, node: yaml.Node, field: str, *, scalar_ok: bool = True, allow_empty: bool = False
    ) -> Iterator[tuple[yaml.Node, str, str]]:
        """Each (node, field, text) of a list of strings; a lone string counts as a list of one."""
        if scalar_ok and isinstance(node, yaml.ScalarNode) and not is_null(node):
            text = self.string(node, field, allow_empty=allow_empty)
            if text is not None:
                yield node, field, text
            return
        items = self.sequence(node, field)
        for index, item in enumerate(items or ()):
            item_field = join_field(field, index)
            text = self.string(item, item_field, allow_empty=allow_empty)
            if text is not None:
                yield item, item_field, text


def is_null(node: yaml.Node) -> bool:
    """Whether a node is YAML's null (``~``, ``null`` or nothing at all)."""
    return isinstance(node, yaml.ScalarNode) and node.tag == _NULL_TAG


def describe(node: yaml.Node) -> str:
    """A short description of a node's type for error messages."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if is_null(node):
        return "nothing (null)"
    return quote(str(node.value))


def _cut(message: str) -> str:
    # A message may quote what was written, and that may be megabytes; a check-run annotation holds 64 KB.
    if len(message) <= MAX_MESSAGE:
        return message
    return f"{message[: MAX_MESSAGE - 40]}… (cut short: {len(message)} characters)"


def shorten_number(text: str) -> str:
    """A long number as ``999…9 (5000 digits)``."""
    sign = "-" if text.startswith("-") else ""
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) <= _MAX_DIGITS:
        return sign + (digits or "0")
    return f"{sign}{digits[:3]}…{digits[-1]} ({len(digits)} digits)"


def expanded_size(root: yaml.Node, limit: int) -> tuple[int, yaml.Node | None]:
    """How many nodes ``root`` stands for with its aliases expanded (``limit + 1`` for more than ``limit``),
    and the node through which an alias leads back into itself (``None`` when none does).

    No recursion: the tree may be deep.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            on_path.discard(id(node))
            sizes[id(node)] = min(limit + 1, 1 + sum(sizes[id(child)] for child in _children(node)))
            continue
        if id(node) in sizes:
            continue
        on_path.add(id(node))
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                return limit + 1, child
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)], None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def line_of(node: yaml.Node) -> int:
    """The 1-based line a node starts on."""
    return int(node.start_mark.line) + 1
