"""A task's ``matrix``: one job per combination of values, and ``{matrix.KEY}`` in the task's strings.

``matrix: {board: [modalix, davinci], sdk: ["2.1", "2.2"], exclude: [{board: davinci, sdk: "2.1"}]}``
makes three jobs. The rules, for docs/manifest.md:

- A key is a lowercase letter, then up to 31 lowercase letters, digits or ``_`` (an identifier: it reads
  the same in ``{matrix.KEY}``, and maps one to one onto an environment name should jobs get one).
  ``exclude`` and ``include`` are not keys; at most :data:`MAX_KEYS` keys.
- A key's values are a non-empty list of strings as written (``2.10`` stays ``"2.10"``), each 1-63 printable
  characters, none twice.
- Combinations come in a stable order: keys in the order written, values in the order written, the
  rightmost key varying fastest (as GitHub Actions orders them). ``exclude`` lists partial combinations;
  every combination that matches one of them is dropped. ``include`` is not supported: a value list or
  another task says the same without GitHub's rules for merging entries.
- At most :data:`MAX_COMBINATIONS` combinations per task, counted after ``exclude``.
- In a task with a matrix, ``{matrix.KEY}`` in a requirement's label value or tag, or an ``env`` value,
  is the combination's value; ``{{`` and ``}}`` write a literal brace, and any other brace is an error
  (so ``{board}`` is caught rather than sent to the lab as written). One pass: a value that itself reads
  ``{matrix.x}`` is not expanded again. The ``run`` command is not substituted: shell braces
  (``${VAR}``, ``{a,b}``) would all need doubling; it reads its values from ``env``. In a task without a
  matrix, text is taken as written, and ``{matrix.`` in it is an error.
- A job is shown as ``smoke (board=modalix, sdk=2.2)`` (a value holding ``,=()"\\`` or spaces at
  either end in double quotes, so no two read alike) and stored under :func:`job_key`
  ``smoke[board=modalix,sdk=2.2]``, which fits the store's 63-character task id; a task without a matrix
  keeps its id as its key.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Final

import yaml

from kerrigan.core.labels import MAX_LENGTH as MAX_VALUE
from kerrigan.core.printable import is_printable
from kerrigan.core.quoting import quote
from kerrigan.core.yamlsource import SourceReader, is_null, join_field, line_of, suggest

MAX_COMBINATIONS: Final = 256  # jobs of one task: what GitHub Actions allows a whole matrix
MAX_KEYS: Final = 16
MAX_KEY: Final = 32
MAX_JOB_KEY: Final = 63  # the store's jobs.task_id (store.models.NAME)
DIGEST: Final = 10  # hex digits of a long or unusual combination's digest in its job key
MAX_MATRIX_TASK_ID: Final = MAX_JOB_KEY - len("[~]") - DIGEST  # room left for the shortest job key
# Beyond this product, the combinations are not even listed to count what ``exclude`` drops.
_MAX_PRODUCT: Final = 16 * MAX_COMBINATIONS
_RESERVED: Final = ("exclude", "include")
MARK: Final = "{matrix."

_KEY: Final = re.compile(rf"[a-z][a-z0-9_]{{0,{MAX_KEY - 1}}}")
_NOT_KEY: Final = re.compile(r"[^a-z0-9_]")
_SEPARATOR: Final = re.compile(r'[,=()"\\]')
_BRACE: Final = re.compile(r"[{}]")
_GITHUB_SYNTAX: Final = re.compile(r"\$\{\{\s*matrix\.")
# Values written as is in a job key; other characters leave it readable but hashed (``~`` and a digest).
_SAFE_VALUE: Final = re.compile(r"[A-Za-z0-9._-]+")
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._=,-]")


class TemplateError(ValueError):
    """A string's ``{matrix.KEY}`` placeholders or braces are malformed; the message says how."""


@dataclass(frozen=True, slots=True)
class Axis:
    """One key of a matrix and its values, in the order written."""

    key: str
    values: tuple[str, ...]
    line: int = 1


@dataclass(frozen=True, slots=True)
class Combination:
    """One job's values, a (key, value) pair per key in the matrix's order; empty without a matrix."""

    pairs: tuple[tuple[str, str], ...] = ()

    def values(self) -> dict[str, str]:
        """The values by key, for :meth:`Template.render`."""
        return dict(self.pairs)

    def name(self, task_id: str) -> str:
        """The job as shown: ``smoke (board=modalix, sdk=2.2)``, or ``smoke`` without a matrix."""
        if not self.pairs:
            return task_id
        return f"{task_id} ({', '.join(f'{key}={_shown(value)}' for key, value in self.pairs)})"

    def key(self, task_id: str) -> str:
        """The job's stable key for storage: see :func:`job_key`."""
        return job_key(task_id, self)

    def matches(self, partial: Mapping[str, str]) -> bool:
        """Whether every value of ``partial`` (an ``exclude`` entry) is this combination's."""
        values = dict(self.pairs)
        return all(values.get(key) == value for key, value in partial.items())


@dataclass(frozen=True, slots=True)
class Matrix:
    """A valid ``matrix``: its keys, and the partial combinations ``exclude`` drops."""

    axes: tuple[Axis, ...]
    exclude: tuple[tuple[tuple[str, str], ...], ...] = ()
    line: int = 1

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys in the order written."""
        return tuple(axis.key for axis in self.axes)

    @property
    def product(self) -> int:
        """How many combinations the values make before ``exclude``."""
        return prod(len(axis.values) for axis in self.axes)

    def combinations(self) -> tuple[Combination, ...]:
        """Every combination ``exclude`` leaves, rightmost key varying fastest."""
        keys = self.keys
        excluded = [dict(partial) for partial in self.exclude]
        found = []
        for values in itertools.product(*(axis.values for axis in self.axes)):
            combination = Combination(tuple(zip(keys, values, strict=True)))
            if not any(combination.matches(partial) for partial in excluded):
                found.append(combination)
        return tuple(found)


def _shown(value: str) -> str:
    # Quoted when it holds what separates the name's parts, so no two combinations read alike.
    if value == value.strip() and not _SEPARATOR.search(value):
        return value
    return json.dumps(value, ensure_ascii=False)


def expand(matrix: Matrix | None) -> tuple[Combination, ...]:
    """A task's combinations: one empty combination (one job, keyed by the task id) without a matrix."""
    return matrix.combinations() if matrix is not None else (Combination(),)


def job_key(task_id: str, combination: Combination) -> str:
    """The job's key: ``smoke[board=modalix,sdk=2.2]``, or the task id without a matrix.

    At most :data:`MAX_JOB_KEY` characters, so it fits the column that holds a task id today. When the
    plain form is longer, or a value holds a character other than letters, digits, ``.``, ``_``, ``-``,
    the key keeps as much of it as fits (other characters as ``_``) and ends with ``~`` and a digest of
    the whole combination: ``smoke[board=a_very_long_va~3f2a9c0d1e]``. A task id never holds ``[``,
    so :func:`task_of` gets the task back.
    """
    if not combination.pairs:
        return task_id
    body = ",".join(f"{key}={value}" for key, value in combination.pairs)
    plain = f"{task_id}[{body}]"
    if len(plain) <= MAX_JOB_KEY and all(_SAFE_VALUE.fullmatch(value) for _, value in combination.pairs):
        return plain
    if len(task_id) > MAX_MATRIX_TASK_ID:
        raise ValueError(f"task id {task_id!r} is too long for a matrix job key")
    # A value is printable and a key holds no "=", so "key=value" lines name the combination unambiguously.
    canonical = "\n".join(f"{key}={value}" for key, value in combination.pairs)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:DIGEST]
    room = MAX_JOB_KEY - len(task_id) - len("[~]") - DIGEST
    return f"{task_id}[{_UNSAFE.sub('_', body)[:room]}~{digest}]"


def shown_name(key: str) -> str:
    """A job key as people read it: ``smoke[board=modalix,sdk=2.2]`` is ``smoke (board=modalix, sdk=2.2)``.

    A key whose values were cut or hashed (``~`` and a digest) is shown as it is stored."""
    task, _, rest = key.partition("[")
    if not rest.endswith("]") or "~" in rest:
        return key
    return f"{task} ({rest[:-1].replace(',', ', ')})"


def task_of(key: str) -> str:
    """The task id of a job key (a job key of a task without a matrix is its id)."""
    return key.split("[", 1)[0]


# -- placeholders -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Template:
    """A string with ``{matrix.KEY}`` placeholders: literal text at even places, keys at odd ones."""

    parts: tuple[str, ...]

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys it uses, in order, repeats included."""
        return self.parts[1::2]

    def render(self, values: Mapping[str, str]) -> str:
        """The string for one combination's ``values``."""
        if len(self.parts) == 1:
            return self.parts[0]
        return "".join(values[part] if index % 2 else part for index, part in enumerate(self.parts))


def parse_template(text: str, keys: Sequence[str] | None) -> Template:
    """Read ``text``'s placeholders against the task's matrix ``keys`` (``None``: the task has none).

    Raises :class:`TemplateError` naming the first mistake: an unknown key (with a did-you-mean), a
    placeholder that names none, an unclosed ``{``, a lone ``}``, any other braced word, GitHub's
    ``${{ matrix.KEY }}``.
    """
    if _GITHUB_SYNTAX.search(text):
        raise TemplateError(f"{quote(text)}: GitHub Actions' ${{{{ matrix.KEY }}}} is written {{matrix.KEY}}")
    if keys is None:
        if MARK in text:
            raise TemplateError(f"{quote(text)} uses {{matrix.…}} but the task has no matrix")
        return Template((text,))
    parts: list[str] = []
    literal: list[str] = []
    at = 0
    while (found := _BRACE.search(text, at)) is not None:
        brace = found.start()
        literal.append(text[at:brace])
        if text.startswith(text[brace] * 2, brace):  # "{{" or "}}": a literal brace
            literal.append(text[brace])
            at = brace + 2
            continue
        if text[brace] == "}":
            raise TemplateError(
                f"a lone '}}' at character {brace + 1} of {quote(text)}; write '}}}}' for a literal brace"
            )
        close = text.find("}", brace + 1)
        if close < 0:
            raise TemplateError(
                f"an unclosed '{{' at character {brace + 1} of {quote(text)}; "
                "write '{{' for a literal brace"
            )
        parts += ["".join(literal), _placeholder_key(text[brace + 1 : close], keys)]
        literal = []
        at = close + 1
    literal.append(text[at:])
    parts.append("".join(literal))
    return Template(tuple(parts))


def _placeholder_key(inner: str, keys: Sequence[str]) -> str:
    written = quote("{" + inner + "}")
    known = ", ".join(keys)
    if inner.startswith("matrix."):
        key = inner.removeprefix("matrix.")
        if not key:
            raise TemplateError(f"{written} names no key: write {{matrix.KEY}}, KEY one of {known}")
        if key in keys:
            return key
        hint = suggest(key, keys)
        if hint is not None:
            raise TemplateError(f"{written}: unknown matrix key {quote(key)}; did you mean {hint!r}?")
        raise TemplateError(f"{written}: unknown matrix key {quote(key)}; the matrix has {known}")
    stripped = inner.strip()
    if stripped.startswith("matrix.") and stripped.removeprefix("matrix.") in keys:
        raise TemplateError(f"{written}: write {{{stripped}}}, without spaces")
    if stripped in keys:
        raise TemplateError(f"{written}: did you mean {{matrix.{stripped}}}?")
    raise TemplateError(
        f"{written} is not a placeholder: write {{matrix.KEY}} (KEY one of {known}), "
        "and '{{' or '}}' for a literal brace"
    )


# -- reading the manifest's matrix ---------------------------------------------------------------------


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a matrix key, or ``None`` when it can."""
    if _KEY.fullmatch(key):
        return None
    message = (
        f"{quote(key)} is not a valid matrix key: a lowercase letter, then up to {MAX_KEY - 1} "
        "lowercase letters, digits or '_'"
    )
    candidate = _NOT_KEY.sub("_", key.lower())
    if _KEY.fullmatch(candidate):
        message += f"; did you mean {candidate!r}?"
    return message


def read_matrix(
    reader: SourceReader, node: yaml.Node, field: str, *, task_id: str | None = None
) -> Matrix | None:
    """The matrix written at ``node`` (``field``: ``tasks[0].matrix``), or ``None`` with every problem
    recorded in ``reader``. ``task_id``, when known, is checked for room in the jobs' keys."""
    errors_before = len(reader.errors)
    if is_null(node):
        reader.error(node, field, "is empty: give each key its list of values, or leave matrix out")
        return None
    entries = reader.mapping(node, field)
    if entries is None:
        return None
    axes: list[Axis] = []
    written_keys = [key for key in entries if key not in _RESERVED]
    for key, (key_node, value_node) in entries.items():
        key_field = join_field(field, key)
        if key == "include":
            reader.error(
                key_node,
                key_field,
                "include is not supported: add the values to their keys, use exclude to drop "
                "combinations, or write another task",
            )
        elif key != "exclude":
            problem = key_problem(key)
            if problem is not None:
                reader.error(key_node, key_field, problem)
                continue
            values = _values(reader, value_node, key_field)
            if values:
                axes.append(Axis(key, values, line_of(key_node)))
    if not written_keys:
        reader.error(node, field, "names no key: give each key its list of values")
    if len(written_keys) > MAX_KEYS:
        reader.error(node, field, f"has {len(written_keys)} keys; the limit is {MAX_KEYS}")
    if task_id is not None and len(task_id) > MAX_MATRIX_TASK_ID:
        reader.error(
            node,
            field,
            f"a task with a matrix has an id of at most {MAX_MATRIX_TASK_ID} characters "
            f"(its jobs are stored as ID[KEY=VALUE,…] in {MAX_JOB_KEY}); {quote(task_id)} has {len(task_id)}",
        )
    exclude: tuple[tuple[tuple[str, str], ...], ...] = ()
    if "exclude" in entries:
        exclude = _exclude(reader, entries["exclude"][1], join_field(field, "exclude"), written_keys, axes)
    if len(reader.errors) > errors_before:
        return None
    matrix = Matrix(tuple(axes), exclude, line_of(node))
    if matrix.product > _MAX_PRODUCT:
        reader.error(
            node, field, f"makes {matrix.product:,} combinations; the limit is {MAX_COMBINATIONS} a task"
        )
        return None
    count = len(matrix.combinations())
    if count == 0:
        reader.error(node, field, "exclude drops every combination: the task would have no job")
        return None
    if count > MAX_COMBINATIONS:
        excluded = f" ({matrix.product:,} less {matrix.product - count:,} excluded)" if exclude else ""
        reader.error(
            node,
            field,
            f"makes {count:,} combinations{excluded}; the limit is {MAX_COMBINATIONS} a task",
        )
        return None
    return matrix


def _values(reader: SourceReader, node: yaml.Node, field: str) -> tuple[str, ...]:
    if is_null(node):
        reader.error(node, field, "needs a list of values")
        return ()
    items = reader.sequence(node, field)
    if items is None:
        return ()
    if not items:
        reader.error(node, field, "an empty list makes no combination; give at least one value")
        return ()
    first_line: dict[str, int] = {}  # a set that keeps the order written
    for index, item in enumerate(items):
        item_field = join_field(field, index)
        value = reader.string(item, item_field)
        if value is None:
            continue
        if len(value) > MAX_VALUE:
            reader.error(
                item,
                item_field,
                f"value {quote(value)} is {len(value)} characters long; the limit is {MAX_VALUE}",
            )
        elif not is_printable(value):
            reader.error(item, item_field, f"value {quote(value)} contains a non-printable character")
        elif value in first_line:
            reader.error(
                item, item_field, f"value {quote(value)} is listed twice (first on line {first_line[value]})"
            )
        else:
            first_line[value] = line_of(item)
    return tuple(first_line)


def _exclude(
    reader: SourceReader, node: yaml.Node, field: str, written_keys: Sequence[str], axes: Sequence[Axis]
) -> tuple[tuple[tuple[str, str], ...], ...]:
    values = {axis.key: axis.values for axis in axes}
    found: list[tuple[tuple[str, str], ...]] = []
    for index, item in enumerate(reader.sequence(node, field) or ()):
        item_field = join_field(field, index)
        entries = reader.mapping(item, item_field, written_keys)
        if entries is None:
            continue
        if not entries and isinstance(item, yaml.MappingNode) and not item.value:
            reader.error(item, item_field, "an empty entry would drop every combination")
            continue
        partial: list[tuple[str, str]] = []
        for key, (_, value_node) in entries.items():
            value_field = join_field(item_field, key)
            value = reader.string(value_node, value_field)
            if value is None or key not in values:
                continue  # the key's own problems are reported where it is written
            if value not in values[key]:
                hint = suggest(value, values[key])
                reader.error(
                    value_node,
                    value_field,
                    f"{quote(value)} is not one of {key}'s values"
                    + (f"; did you mean {hint!r}?" if hint else f" ({', '.join(values[key])})"),
                )
                continue
            partial.append((key, value))
        if len(partial) == len(entries):
            found.append(tuple(partial))
    return tuple(found)
