"""``needs``: validation with lines, the order of tasks, and which waiting tasks may start."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.task_graph import (
    UNSUCCESSFUL,
    CycleError,
    Need,
    NeedState,
    Ready,
    Skip,
    TaskNeeds,
    Waiting,
    closing_entries,
    readiness,
    task_state,
    task_states,
    topological_order,
    validate_needs,
)

FILE = ".kerrigan/workflows/hil.yml"
S = NeedState


def tasks_of(spec: Mapping[str, Sequence[str]]) -> list[TaskNeeds]:
    """Tasks written one per 10 lines, each need on the lines after its task's: task i on line 10*i+1,
    its j-th need on line 10*i+2+j."""
    found = []
    for index, (task_id, needs) in enumerate(spec.items()):
        line = 10 * index + 1
        entries = tuple(
            Need(need, line + 1 + j, 5, f"tasks[{index}].needs[{j}]") for j, need in enumerate(needs)
        )
        found.append(TaskNeeds(task_id, line, entries))
    return found


def messages(spec: Mapping[str, Sequence[str]]) -> list[tuple[int, str, str]]:
    return [(p.line, p.field, p.message) for p in validate_needs(tasks_of(spec), FILE)]


# -- validation ---------------------------------------------------------------------------------------


def test_valid_needs_have_no_problem() -> None:
    assert messages({"build": [], "flash": ["build"], "smoke": ["flash", "build"]}) == []


def test_unknown_need_suggests_the_closest_task_id() -> None:
    problems = validate_needs(tasks_of({"build": [], "flash": ["biuld"]}), FILE)
    assert [(p.file, p.line, p.column, p.field) for p in problems] == [(FILE, 12, 5, "tasks[1].needs[0]")]
    assert problems[0].message == "unknown task 'biuld'; did you mean 'build'?"


def test_unknown_need_resembling_no_task_lists_the_tasks() -> None:
    assert messages({"build": [], "flash": ["zzz"]}) == [
        (12, "tasks[1].needs[0]", "unknown task 'zzz'; the tasks are build, flash")
    ]


def test_a_task_needing_itself_is_an_error_not_a_cycle() -> None:
    assert messages({"build": ["build"]}) == [(2, "tasks[0].needs[0]", "task 'build' cannot need itself")]


def test_an_entry_listed_twice_names_the_first_line() -> None:
    assert messages({"build": [], "flash": ["build", "build"]}) == [
        (13, "tasks[1].needs[1]", "'build' is listed twice (first on line 12)")
    ]


def test_a_cycle_is_reported_once_on_the_entry_that_closes_it() -> None:
    # a needs b, b needs c, c needs a: the walk from a closes the cycle at c's entry "a".
    assert messages({"a": ["b"], "b": ["c"], "c": ["a"]}) == [
        (22, "tasks[2].needs[0]", "needs make a cycle: a -> b -> c -> a")
    ]


def test_two_cycles_are_each_reported_in_file_order() -> None:
    spec = {"a": ["b"], "b": ["a"], "c": ["d"], "d": ["c"], "e": ["a", "c"]}
    assert messages(spec) == [
        (12, "tasks[1].needs[0]", "needs make a cycle: a -> b -> a"),
        (32, "tasks[3].needs[0]", "needs make a cycle: c -> d -> c"),
    ]


def test_problems_of_every_kind_come_in_file_order() -> None:
    spec = {"a": ["b", "zzz"], "b": ["a", "b"]}
    assert [line for line, _, _ in messages(spec)] == [3, 12, 13]


def test_a_long_cycle_message_is_cut_to_an_annotation_size() -> None:
    ids = [f"task-{index:02d}-" + "x" * 50 for index in range(20)]
    spec = {task: [ids[(index + 1) % len(ids)]] for index, task in enumerate(ids)}
    (problem,) = validate_needs(tasks_of(spec), FILE)
    assert len(problem.message) <= 500
    assert problem.message.startswith("needs make a cycle of 20 tasks: task-00-")
    assert "task-02-" in problem.message  # 20 tasks, 4 of them shown
    assert "(16 more)" in problem.message


def test_the_first_of_tasks_sharing_an_id_counts() -> None:
    tasks = [TaskNeeds("a", 1), TaskNeeds("a", 5, (Need("zzz", 6),))]
    assert validate_needs(tasks, FILE) == ()


# -- order --------------------------------------------------------------------------------------------


def test_topological_order_puts_needs_first_and_keeps_the_written_order_otherwise() -> None:
    needs = {"smoke": ["flash"], "lint": [], "flash": ["build"], "build": []}
    assert topological_order(needs) == ("lint", "build", "flash", "smoke")


def test_topological_order_refuses_a_cycle() -> None:
    with pytest.raises(CycleError, match="a, b"):
        topological_order({"a": ["b"], "b": ["a"], "c": []})


def test_topological_order_refuses_a_need_that_is_not_a_task() -> None:
    with pytest.raises(ValueError, match="'zzz'"):
        topological_order({"a": ["zzz"]})


# -- a task's state from its jobs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        (["succeeded"], S.SUCCEEDED),
        (["succeeded", "succeeded"], S.SUCCEEDED),  # every matrix combination
        (["succeeded", "running"], S.ACTIVE),
        (["queued"], S.ACTIVE),
        (["waiting", "waiting"], S.WAITING),
        (["retried", "succeeded"], S.SUCCEEDED),  # the attempt that replaced a failed one counts
        (["retried", "queued"], S.ACTIVE),
        (["failed", "running"], S.FAILED),  # one combination's final failure fails the task at once
        (["cancelled", "failed"], S.FAILED),  # named by the most telling end
        (["timed_out", "cancelled"], S.TIMED_OUT),
        (["refused_before_start", "succeeded"], S.REFUSED),
        (["skipped", "skipped"], S.SKIPPED),
    ],
)
def test_task_state_from_the_current_attempt_of_every_combination(
    jobs: list[str], expected: NeedState
) -> None:
    assert task_state(jobs) is expected


def test_task_state_refuses_an_unknown_job_state_and_no_job() -> None:
    with pytest.raises(ValueError, match="'paused'"):
        task_state(["paused"])
    with pytest.raises(ValueError, match="without a current job"):
        task_state(["retried"])


def test_task_states_groups_jobs_by_task() -> None:
    jobs = [("build", "succeeded"), ("smoke", "running"), ("build", "failed")]
    assert task_states(jobs) == {"build": S.FAILED, "smoke": S.ACTIVE}


# -- readiness ----------------------------------------------------------------------------------------


def test_a_waiting_task_is_ready_when_every_need_succeeded() -> None:
    needs = {"build": [], "lint": [], "smoke": ["build", "lint"]}
    states = {"build": S.SUCCEEDED, "lint": S.SUCCEEDED, "smoke": S.WAITING}
    assert readiness(needs, states) == {"smoke": Ready()}


def test_a_waiting_task_names_the_needs_it_still_waits_for() -> None:
    needs = {"build": [], "lint": [], "docs": [], "smoke": ["build", "lint", "docs"]}
    states = {"build": S.ACTIVE, "lint": S.SUCCEEDED, "docs": S.ACTIVE, "smoke": S.WAITING}
    assert readiness(needs, states) == {"smoke": Waiting(("build", "docs"))}


def test_only_waiting_tasks_get_a_verdict() -> None:
    needs = {"build": [], "smoke": ["build"]}
    assert readiness(needs, {"build": S.FAILED, "smoke": S.ACTIVE}) == {}


@pytest.mark.parametrize("ended", UNSUCCESSFUL)
def test_a_need_that_ended_without_success_skips_its_dependent(ended: NeedState) -> None:
    verdict = readiness({"build": [], "smoke": ["build"]}, {"build": ended, "smoke": S.WAITING})
    assert verdict == {"smoke": Skip("build", ended)}
    assert str(verdict["smoke"]) == f"skipped: needs build ({ended.value})"


def test_a_failure_skips_the_whole_chain_below_it_at_once_naming_its_cause() -> None:
    needs = {"report": ["smoke"], "smoke": ["flash"], "flash": ["build"], "build": []}
    states = {"build": S.FAILED, "flash": S.WAITING, "smoke": S.WAITING, "report": S.WAITING}
    verdicts = readiness(needs, states)
    assert list(verdicts) == ["flash", "smoke", "report"]  # each after its needs
    assert str(verdicts["flash"]) == "skipped: needs build (failed)"
    assert str(verdicts["smoke"]) == "skipped: needs flash (skipped: build failed)"
    assert str(verdicts["report"]) == "skipped: needs smoke (skipped: build failed)"


def test_a_task_released_now_keeps_its_dependents_waiting() -> None:
    needs = {"build": [], "flash": ["build"], "smoke": ["flash"]}
    states = {"build": S.SUCCEEDED, "flash": S.WAITING, "smoke": S.WAITING}
    assert readiness(needs, states) == {"flash": Ready(), "smoke": Waiting(("flash",))}


def test_a_failure_skips_even_while_another_need_runs() -> None:
    needs = {"build": [], "lint": [], "smoke": ["lint", "build"]}
    states = {"build": S.FAILED, "lint": S.ACTIVE, "smoke": S.WAITING}
    assert readiness(needs, states) == {"smoke": Skip("build", S.FAILED)}


def test_a_need_skipped_earlier_is_named_as_skipped() -> None:
    needs = {"flash": [], "smoke": ["flash"]}
    verdict = readiness(needs, {"flash": S.SKIPPED, "smoke": S.WAITING})["smoke"]
    assert str(verdict) == "skipped: needs flash (skipped)"


def test_matrix_jobs_meet_the_graph_through_their_task() -> None:
    # build has two combinations; one succeeded and one still runs: smoke waits for build.
    jobs = [("build", "succeeded"), ("build", "running"), ("smoke", "waiting")]
    verdicts = readiness({"build": [], "smoke": ["build"]}, task_states(jobs))
    assert verdicts == {"smoke": Waiting(("build",))}


def test_readiness_needs_a_state_for_every_task() -> None:
    with pytest.raises(ValueError, match="smoke"):
        readiness({"build": [], "smoke": ["build"]}, {"build": S.SUCCEEDED})


# -- properties ---------------------------------------------------------------------------------------


def reference_has_cycle(graph: Mapping[str, Sequence[str]]) -> bool:
    """A plain recursive three-colour depth-first search (graphs here are small)."""
    colour: dict[str, int] = {}

    def visit(task: str) -> bool:
        colour[task] = 1
        for need in graph[task]:
            if colour.get(need) == 1 or (need not in colour and visit(need)):
                return True
        colour[task] = 2
        return False

    return any(task not in colour and visit(task) for task in graph)


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, list[str]]:
    """Random graphs of 1-12 tasks, self-needs and repeats left out (validation reports those)."""
    count = draw(st.integers(1, 12))
    ids = [f"t{index}" for index in range(count)]
    graph: dict[str, list[str]] = {}
    for task in ids:
        others = [other for other in ids if other != task]
        graph[task] = draw(st.lists(st.sampled_from(others), unique=True, max_size=4)) if others else []
    return graph


@settings(max_examples=400, deadline=None)
@given(graphs())
def test_cycles_are_found_exactly_when_a_reference_search_finds_one(graph: dict[str, list[str]]) -> None:
    problems = validate_needs(tasks_of(graph), FILE)
    assert bool(problems) == reference_has_cycle(graph)
    assert all(p.message.startswith("needs make a cycle: ") for p in problems)


@settings(max_examples=400, deadline=None)
@given(graphs())
def test_each_reported_cycle_is_real_and_dropping_them_leaves_no_cycle(graph: dict[str, list[str]]) -> None:
    entries = {task: [Need(need, 1) for need in needs] for task, needs in graph.items()}
    found = closing_entries(entries)
    for cycle, need in found:
        assert cycle[0] == cycle[-1] == need.task_id
        assert len(set(cycle)) == len(cycle) - 1
        assert all(b in graph[a] for a, b in pairwise(cycle))
    assert len({cycle for cycle, _ in found}) == len(found)  # each once
    closing = {(cycle[-2], need.task_id) for cycle, need in found}
    rest = {task: [n for n in needs if (task, n) not in closing] for task, needs in graph.items()}
    assert not reference_has_cycle(rest)


def naive_readiness(graph: Mapping[str, Sequence[str]], states: Mapping[str, NeedState]) -> dict[str, str]:
    """The rule applied round after round until nothing changes: quadratic, plainly right."""
    current = dict(states)
    verdicts: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for task, needs in graph.items():
            if current[task] is not NeedState.WAITING or task in verdicts:
                continue
            if any(current[need] in UNSUCCESSFUL for need in needs):
                verdicts[task], current[task], changed = "skip", NeedState.SKIPPED, True
            elif all(current[need] is NeedState.SUCCEEDED for need in needs):
                verdicts[task], current[task], changed = "ready", NeedState.ACTIVE, True
    for task in graph:
        if current[task] is NeedState.WAITING and task not in verdicts:
            verdicts[task] = "waiting"
    return verdicts


@st.composite
def acyclic_with_states(draw: st.DrawFn) -> tuple[dict[str, list[str]], dict[str, NeedState]]:
    count = draw(st.integers(1, 12))
    ids = [f"t{index}" for index in range(count)]
    graph = {
        task: draw(st.lists(st.sampled_from(ids[:index]), unique=True, max_size=3)) if index else []
        for index, task in enumerate(ids)
    }
    order = draw(st.permutations(ids))  # the written order need not be topological
    graph = {task: graph[task] for task in order}
    states = {task: draw(st.sampled_from(list(NeedState))) for task in ids}
    return graph, states


@settings(max_examples=400, deadline=None)
@given(acyclic_with_states())
def test_readiness_agrees_with_the_rule_applied_until_nothing_changes(
    case: tuple[dict[str, list[str]], dict[str, NeedState]],
) -> None:
    graph, states = case
    kinds = {Ready: "ready", Waiting: "waiting", Skip: "skip"}
    verdicts = readiness(graph, states)
    assert {task: kinds[type(verdict)] for task, verdict in verdicts.items()} == naive_readiness(
        graph, states
    )
    for task, verdict in verdicts.items():
        if isinstance(verdict, Waiting):
            assert verdict.on
            assert all(need in graph[task] for need in verdict.on)
