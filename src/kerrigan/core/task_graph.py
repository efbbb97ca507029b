"""Dependencies between a session's tasks (``needs``): their validation, an order, and which waiting tasks
may start.

The two halves meet only through task ids. Validation reads the manifest's ``needs`` per task, before any
matrix expansion: ``needs: [build]`` names the task ``build`` and means every job of it. Readiness reads
each task's state as :func:`task_state` sums up its jobs (every matrix combination, the current attempt of
each), so the same graph serves however many jobs a task has.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from kerrigan.core.lifecycle import JobState
from kerrigan.core.quoting import SHOWN, quote
from kerrigan.core.yamlsource import MAX_MESSAGE, Problem, suggest

_LISTED: Final = 10  # task ids listed after an unknown one that resembles none


class NeedState(enum.StrEnum):
    """Where a task stands, for the tasks that need it."""

    WAITING = "waiting"  # its jobs are held until its own needs succeed
    ACTIVE = "active"  # released to the queue: some job of it has not ended
    SUCCEEDED = "succeeded"  # the current attempt of every job succeeded
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    REFUSED = "refused_before_start"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


# The ends that skip a task's dependents, in the order that names a task whose jobs ended differently.
UNSUCCESSFUL: Final = (
    NeedState.FAILED,
    NeedState.TIMED_OUT,
    NeedState.REFUSED,
    NeedState.CANCELLED,
    NeedState.SKIPPED,
)
_UNSUCCESSFUL: Final = frozenset(UNSUCCESSFUL)

# A job's state as its task's dependents see it; a "retried" attempt does not count.
_FROM_JOB: Final[Mapping[str, NeedState]] = {
    JobState.WAITING: NeedState.WAITING,
    JobState.QUEUED: NeedState.ACTIVE,
    JobState.LEASED: NeedState.ACTIVE,
    JobState.ACCEPTED: NeedState.ACTIVE,
    JobState.RUNNING: NeedState.ACTIVE,
    JobState.SUCCEEDED: NeedState.SUCCEEDED,
    JobState.FAILED: NeedState.FAILED,
    JobState.TIMED_OUT: NeedState.TIMED_OUT,
    JobState.REFUSED_BEFORE_START: NeedState.REFUSED,
    JobState.CANCELLED: NeedState.CANCELLED,
    JobState.SKIPPED: NeedState.SKIPPED,
}


# -- validation ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Need:
    """One entry of a task's ``needs``, where it is written (``field``: ``tasks[2].needs[0]``)."""

    task_id: str
    line: int
    column: int = 1
    field: str = ""


@dataclass(frozen=True, slots=True)
class TaskNeeds:
    """A task's id and its ``needs`` as written."""

    task_id: str
    line: int
    needs: tuple[Need, ...] = ()


def validate_needs(tasks: Sequence[TaskNeeds], file: str) -> tuple[Problem, ...]:
    """Every problem of the tasks' ``needs``, in the order they stand in ``file``.

    An unknown task (with a did-you-mean), a task that needs itself, an entry listed twice, and each cycle:
    every entry that closes one in a depth-first walk (tasks and their needs in the order written) is
    reported once, on its line, with the path ``a -> b -> c -> a`` (each needs the next). Dropping every
    entry so reported leaves no cycle. Of tasks sharing an id (the parser reports those), the first counts.
    """
    known: dict[str, TaskNeeds] = {}
    for task in tasks:
        known.setdefault(task.task_id, task)
    problems: list[Problem] = []
    graph: dict[str, list[Need]] = {}
    for task in known.values():
        first: dict[str, Need] = {}
        edges: list[Need] = []
        for need in task.needs:
            if need.task_id == task.task_id:
                problems.append(_problem(file, need, f"task {quote(task.task_id)} cannot need itself"))
            elif need.task_id in first:
                message = f"{quote(need.task_id)} is listed twice (first on line {first[need.task_id].line})"
                problems.append(_problem(file, need, message))
            else:
                first[need.task_id] = need
                if need.task_id in known:
                    edges.append(need)
                else:
                    problems.append(_problem(file, need, _unknown(need.task_id, known)))
        graph[task.task_id] = edges
    for cycle, need in closing_entries(graph):
        problems.append(_problem(file, need, _cut(f"needs make a cycle: {' -> '.join(cycle)}", cycle)))
    return tuple(sorted(problems, key=lambda p: (p.line, p.column, p.field, p.message)))


def closing_entries(graph: Mapping[str, Sequence[Need]]) -> list[tuple[tuple[str, ...], Need]]:
    """Each entry that closes a cycle in a depth-first walk of ``graph`` (a task's needs, every one a
    task of it), with the cycle from the task it returns to: ``(a, b, c, a)`` for c's entry ``a``.

    These are the walk's back edges: each closes a different cycle, and the graph without them has none.
    No recursion, so a long chain of needs cannot exhaust the stack.
    """
    done: set[str] = set()
    found: list[tuple[tuple[str, ...], Need]] = []
    for root in graph:
        if root in done:
            continue
        path = [root]  # the walk's current path, and where each of its tasks stands on it
        position = {root: 0}
        next_edge = [0]
        while path:
            task, index = path[-1], next_edge[-1]
            edges = graph[task]
            if index == len(edges):
                path.pop()
                next_edge.pop()
                del position[task]
                done.add(task)
                continue
            next_edge[-1] = index + 1
            need = edges[index]
            target = need.task_id
            if target in position:
                found.append(((*path[position[target] :], target), need))
            elif target not in done:
                position[target] = len(path)
                path.append(target)
                next_edge.append(0)
    return found


def _problem(file: str, need: Need, message: str) -> Problem:
    return Problem(file, need.line, need.column, need.field, message)


def _unknown(task_id: str, known: Mapping[str, object]) -> str:
    hint = suggest(task_id, known) if len(task_id) <= SHOWN else None
    if hint is not None:
        return f"unknown task {quote(task_id)}; did you mean {hint!r}?"
    listed = ", ".join(list(known)[:_LISTED]) + (", …" if len(known) > _LISTED else "")
    return f"unknown task {quote(task_id)}; the tasks are {listed}"


def _cut(message: str, cycle: Sequence[str]) -> str:
    # A cycle through many long ids would not fit an annotation's message: keep its ends.
    if len(message) <= MAX_MESSAGE:
        return message
    shown = " -> ".join([*cycle[:3], f"… ({len(cycle) - 5} more) …", *cycle[-2:]])
    return f"needs make a cycle of {len(cycle) - 1} tasks: {shown}"[:MAX_MESSAGE]


# -- order and readiness ------------------------------------------------------------------------------


class CycleError(ValueError):
    """The needs make a cycle: :func:`validate_needs` lets no such manifest through."""


def topological_order(needs: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """Every task after the tasks it needs; tasks free of each other keep the order of ``needs``.

    ``needs`` maps each task to the tasks it needs (``()`` for none), all of them keys. Linear in tasks
    and entries.
    """
    dependents: dict[str, list[str]] = {task: [] for task in needs}
    missing: dict[str, int] = dict.fromkeys(needs, 0)
    for task, its_needs in needs.items():
        for need in dict.fromkeys(its_needs):
            if need not in dependents:
                raise ValueError(f"task {task!r} needs {need!r}, which is not one of the tasks")
            dependents[need].append(task)
            missing[task] += 1
    ready = deque(task for task, count in missing.items() if count == 0)
    order: list[str] = []
    while ready:
        task = ready.popleft()
        order.append(task)
        for dependent in dependents[task]:
            missing[dependent] -= 1
            if missing[dependent] == 0:
                ready.append(dependent)
    if len(order) < len(needs):
        stuck = ", ".join(task for task, count in missing.items() if count > 0)
        raise CycleError(f"the needs of these tasks make a cycle: {stuck}")
    return tuple(order)


@dataclass(frozen=True, slots=True)
class Ready:
    """Every need succeeded: the task's jobs may be queued."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """Some need has not ended: ``on`` are those that have not succeeded, in the order written."""

    on: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Skip:
    """A need ended without success: the task's jobs are skipped.

    ``need`` is the first such need as written, ``state`` how it ended; when that need was itself skipped
    in the same decision, ``cause`` is the task whose end started the chain and ``cause_state`` how it
    ended.
    """

    need: str
    state: NeedState
    cause: str | None = None
    cause_state: NeedState | None = None

    @property
    def reason(self) -> str:
        """``needs build (failed)``; down a chain, ``needs flash (skipped: build failed)``."""
        if self.cause is None:
            return f"needs {self.need} ({self.state})"
        return f"needs {self.need} (skipped: {self.cause} {self.cause_state})"

    def __str__(self) -> str:
        return f"skipped: {self.reason}"


Verdict: TypeAlias = Ready | Waiting | Skip


def readiness(needs: Mapping[str, Sequence[str]], states: Mapping[str, NeedState]) -> dict[str, Verdict]:
    """What each ``waiting`` task may do now: start, go on waiting, or be skipped.

    ``needs`` is the valid graph (every task a key, ``()`` for none), ``states`` each task's state (see
    :func:`task_state`). A task is decided after the tasks it needs, and one decided here counts for its
    own dependents in the same call: a task that may start is active for them, one skipped is skipped,
    so a failure skips the whole chain below it at once. Linear in tasks and entries; the verdicts come
    in that order, each task after its needs.
    """
    missing = [task for task in needs if task not in states]
    if missing:
        raise ValueError(f"no state for tasks {', '.join(missing)}")
    current = dict(states)
    roots: dict[str, tuple[str, NeedState]] = {}  # a task skipped here: the end that started its chain
    verdicts: dict[str, Verdict] = {}
    for task in topological_order(needs):
        if current[task] is not NeedState.WAITING:
            continue
        own = needs[task]
        ended = next((need for need in own if current[need] in _UNSUCCESSFUL), None)
        verdict: Verdict
        if ended is not None:
            root = roots.get(ended)
            verdict = Skip(ended, current[ended], *root) if root else Skip(ended, current[ended])
            roots[task] = root or (ended, current[ended])
            current[task] = NeedState.SKIPPED
        else:
            pending = tuple(need for need in own if current[need] is not NeedState.SUCCEEDED)
            verdict = Waiting(pending) if pending else Ready()
            if not pending:
                current[task] = NeedState.ACTIVE
        verdicts[task] = verdict
    return verdicts


def task_state(job_states: Iterable[str]) -> NeedState:
    """A task's state from the states of its jobs (one per matrix combination, any attempt).

    Call it once retries are decided (the store decides them as a job ends, in the same transaction), so
    that a ``failed`` current attempt is final: ``retried`` attempts are passed over, the attempt that
    replaced one counts. A task ended without success as soon as one job did (named by the first of
    :data:`UNSUCCESSFUL` among them), even while others run; it succeeded when every job did; it is
    waiting while a job is held for its needs, else active.
    """
    seen: set[NeedState] = set()
    for state in job_states:
        if state == JobState.RETRIED:
            continue
        if state not in _FROM_JOB:
            raise ValueError(f"unknown job state {state!r}")
        seen.add(_FROM_JOB[state])
    if not seen:
        raise ValueError("a task without a current job has no state")
    for unsuccessful in UNSUCCESSFUL:
        if unsuccessful in seen:
            return unsuccessful
    if seen == {NeedState.SUCCEEDED}:
        return NeedState.SUCCEEDED
    return NeedState.WAITING if NeedState.WAITING in seen else NeedState.ACTIVE


def task_states(jobs: Iterable[tuple[str, str]]) -> dict[str, NeedState]:
    """Each task's state from its jobs' ``(task id, job state)``, by :func:`task_state`."""
    grouped: dict[str, list[str]] = {}
    for task_id, state in jobs:
        grouped.setdefault(task_id, []).append(state)
    return {task_id: task_state(states) for task_id, states in grouped.items()}
