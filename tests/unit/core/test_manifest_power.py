"""The task key ``power``: ``cycle`` (the default) power-cycles the task's boards before its job, ``keep``
leaves a board that is on as it is; anything else, and any ``power`` on a ``board: none`` task, is an error
naming the file, line and field."""

from __future__ import annotations

import textwrap

from kerrigan.core.job_spec import spec_of_task
from kerrigan.core.manifest import ManifestResult, PowerChoice, Workflow, parse_manifest

FILE = ".kerrigan/workflows/w.yml"
HEAD = "name: hil\non: {push: {}}\n"


def parse(text: str) -> ManifestResult:
    return parse_manifest(HEAD + textwrap.dedent(text), FILE)


def workflow(text: str) -> Workflow:
    result = parse(text)
    assert result.errors == (), [str(error) for error in result.errors]
    assert result.workflow is not None
    return result.workflow


def errors(text: str) -> list[tuple[str, int, str, str]]:
    result = parse(text)
    assert result.workflow is None
    return [(problem.file, problem.line, problem.field, problem.message) for problem in result.errors]


def test_a_task_power_cycles_its_boards_unless_it_says_keep() -> None:
    found = workflow(
        """\
        tasks:
          - {id: flash, run: ./flash.sh}
          - {id: soak, run: ./soak.sh, needs: flash, power: keep}
          - {id: again, run: ./again.sh, power: cycle}
        """
    )
    flash, soak, again = found.tasks
    assert (flash.power, soak.power, again.power) == (PowerChoice.CYCLE, PowerChoice.KEEP, PowerChoice.CYCLE)
    assert spec_of_task(soak).power is PowerChoice.KEEP
    assert spec_of_task(flash).power is PowerChoice.CYCLE


def test_every_job_of_a_matrix_task_and_a_gang_keeps_its_power() -> None:
    found = workflow(
        """\
        tasks:
          - id: soak
            run: ./soak.sh
            power: keep
            matrix: {board: [modalix, davinci]}
            requirements: {labels: {kerrigan.board: "{matrix.board}"}}
          - id: pair
            run: ./pair.sh
            power: keep
            devices: {dut: {}, peer: {}}
        """
    )
    assert [task.power for task in found.tasks] == [PowerChoice.KEEP] * 3


def test_a_power_that_is_neither_cycle_nor_keep_is_an_error_on_its_line() -> None:
    assert errors(
        """\
        tasks:
          - id: soak
            run: ./soak.sh
            power: Keep
          - {id: flash, run: ./flash.sh, power: off}
          - {id: other, run: ./other.sh, power: [keep]}
        """
    ) == [
        (FILE, 6, "tasks[0].power", "must be one of cycle, keep, not 'Keep'"),
        (FILE, 7, "tasks[1].power", "must be one of cycle, keep, not 'off'"),
        (FILE, 8, "tasks[2].power", "must be a string, not a list"),
    ]


def test_an_empty_power_is_an_error() -> None:
    assert errors("tasks:\n  - {id: soak, run: ./soak.sh, power: }\n") == [
        (FILE, 4, "tasks[0].power", "must not be empty")
    ]


def test_power_on_a_task_that_holds_no_board_is_an_error() -> None:
    message = "a task with board: none holds no board whose power could be cycled or kept; leave power out"
    assert errors(
        """\
        tasks:
          - {id: build, run: ./build.sh, board: none, power: keep}
          - {id: lint, run: ./lint.sh, board: none, power: cycle}
        """
    ) == [(FILE, 4, "tasks[0].power", message), (FILE, 5, "tasks[1].power", message)]
