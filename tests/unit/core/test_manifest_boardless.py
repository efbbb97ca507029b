"""The task key ``board: none``: a task that holds no device and runs on a runner host; what it may ask for
(the runner hosts, by ``kerrigan.host``), and every mistake on its line."""

from __future__ import annotations

import textwrap

import pytest

from kerrigan.core.manifest import ManifestResult, Workflow, parse_manifest

FILE = ".kerrigan/workflows/w.yml"
HEAD = "name: hil\non: {push: {}}\n"


def parse(text: str) -> ManifestResult:
    return parse_manifest(HEAD + textwrap.dedent(text), FILE)


def workflow(text: str) -> Workflow:
    result = parse(text)
    assert result.errors == (), [str(error) for error in result.errors]
    assert result.workflow is not None
    return result.workflow


def errors(text: str) -> list[tuple[int, str, str]]:
    result = parse(text)
    assert result.workflow is None
    return [(problem.line, problem.field, problem.message) for problem in result.errors]


def test_a_task_with_board_none_holds_no_device_and_keeps_its_vcpus() -> None:
    found = workflow(
        """\
        tasks:
          - {id: build, run: ./build.sh, board: none, vcpus: 8}
          - {id: test, run: ./test.sh, needs: build}
        """
    )
    build, test = found.tasks
    assert build.boardless
    assert build.vcpus == 8
    assert not test.boardless


def test_a_boardless_task_may_ask_for_runner_hosts_by_kerrigan_host_one_of_as_labels_work() -> None:
    found = workflow(
        """\
        scheduling:
          labels: {sdk: "2.2.0", kerrigan.host: [lab-a-01, lab-a-02, lab-b-01]}
          tags: [uart-debug]
        tasks:
          - id: build
            run: ./build.sh
            board: none
            requirements: {labels: {kerrigan.host: [lab-a-02, lab-b-01]}}
          - {id: lint, run: ./lint.sh, board: none}
        """
    )
    build, lint = found.tasks
    # The session's board labels and tags are a device's: a task that holds none takes only its hosts.
    assert build.requirements.as_dict() == {"labels": {"kerrigan.host": ["lab-a-02", "lab-b-01"]}, "tags": []}
    assert lint.requirements.as_dict() == {
        "labels": {"kerrigan.host": ["lab-a-01", "lab-a-02", "lab-b-01"]},
        "tags": [],
    }


def test_a_boardless_matrix_task_may_name_its_host_from_the_matrix() -> None:
    found = workflow(
        """\
        tasks:
          - id: build
            run: ./build.sh
            board: none
            matrix: {host: [lab-a-01, lab-b-01]}
            requirements: {labels: {kerrigan.host: "{matrix.host}"}}
        """
    )
    assert [task.requirements.labels["kerrigan.host"].values for task in found.tasks] == [
        ("lab-a-01",),
        ("lab-b-01",),
    ]
    assert all(task.boardless for task in found.tasks)


@pytest.mark.parametrize(
    ("written", "message"),
    [
        (
            "modalix",
            "'modalix' is not a value of board: the only one is none (the task holds no device and runs "
            "on a runner host); to ask for a board, write requirements: {labels: {kerrigan.board: modalix}}",
        ),
        ("None", "'None' is not a value of board: write none, in lower case"),
        (
            "dev/kit",
            "'dev/kit' is not a value of board: the only one is none (the task holds no device and runs on "
            "a runner host); to ask for a board, write requirements: {labels: {kerrigan.board: BOARD}}",
        ),
        ("", "needs a value: none (the task holds no device and runs on a runner host), or leave it out"),
        ("~", "needs a value: none (the task holds no device and runs on a runner host), or leave it out"),
        ("[none]", "must be a string, not a list"),
        (
            "false",
            "'false' is not a value of board: the only one is none (the task holds no device and runs on "
            "a runner host); to ask for a board, write requirements: {labels: {kerrigan.board: false}}",
        ),
    ],
)
def test_board_takes_only_none_and_says_how_to_ask_for_a_board(written: str, message: str) -> None:
    found = errors(
        f"""\
        tasks:
          - id: build
            run: ./build.sh
            board: {written}
        """
    )
    assert found == [(6, "tasks[0].board", message)]


def test_a_boardless_task_with_devices_is_refused_on_the_board_line() -> None:
    found = errors(
        """\
        tasks:
          - id: build
            run: ./build.sh
            board: none
            devices:
              dut: {labels: {kerrigan.board: modalix}}
              peer: {labels: {kerrigan.board: davinci}}
        """
    )
    assert found == [
        (
            6,
            "tasks[0].board",
            "a task with board: none holds no device, so it cannot also name devices (a gang); "
            "leave one of them out",
        )
    ]


def test_a_boardless_task_asking_a_device_label_or_tag_is_refused_on_that_line() -> None:
    found = errors(
        """\
        tasks:
          - id: build
            run: ./build.sh
            board: none
            requirements:
              labels:
                kerrigan.host: lab-a-01
                sdk: "2.2.0"
                kerrigan.board: modalix
              tags: [uart-debug]
        """
    )
    assert found == [
        (
            10,
            "tasks[0].requirements.labels.sdk",
            "label 'sdk' is a device's, and a task with board: none holds no device: its requirements "
            "may name only kerrigan.host (the runner hosts it may run on)",
        ),
        (
            11,
            "tasks[0].requirements.labels.kerrigan.board",
            "label 'kerrigan.board' is a device's, and a task with board: none holds no device: its "
            "requirements may name only kerrigan.host (the runner hosts it may run on)",
        ),
        (
            12,
            "tasks[0].requirements.tags[0]",
            "tag 'uart-debug' is a device's, and a task with board: none holds no device: its "
            "requirements may name only kerrigan.host (the runner hosts it may run on)",
        ),
    ]


def test_a_boardless_tasks_host_that_the_session_rules_out_is_a_conflict_naming_both_places() -> None:
    found = errors(
        """\
        scheduling:
          labels: {kerrigan.host: lab-a-01}
        tasks:
          - id: build
            run: ./build.sh
            board: none
            requirements: {labels: {kerrigan.host: lab-b-01}}
        """
    )
    assert [(line, field) for line, field, _ in found] == [(9, "tasks[0].requirements.labels.kerrigan.host")]
    assert "scheduling.labels.kerrigan.host (line 4) allows lab-a-01" in found[0][2]


def test_a_matrix_mistake_of_a_boardless_task_is_reported_once() -> None:
    found = errors(
        """\
        tasks:
          - id: build
            run: ./build.sh
            board: none
            matrix: {host: [lab-a-01, lab-b-01]}
            requirements: {labels: {sdk: "{matrix.host}"}}
        """
    )
    assert [(line, field) for line, field, _ in found] == [(8, "tasks[0].requirements.labels.sdk")]
