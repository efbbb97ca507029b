"""The manifest's pipeline keys: ``env`` (workflow and task), ``needs`` and ``matrix``, each problem on
its line."""

from __future__ import annotations

import json
import textwrap

import pytest

from kerrigan.core.manifest import ManifestResult, Workflow, parse_manifest
from kerrigan.core.manifest.secret_names import unset_secrets

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


def test_env_is_the_workflows_with_the_tasks_laid_over_it_strings_as_written() -> None:
    found = workflow(
        """\
        env: {BAUD: 115200, MODE: fast, FLAG: yes}
        tasks:
          - id: a
            run: ./a.sh
            env: {MODE: slow, VERSION: 2.10}
          - id: b
            run: ./b.sh
        """
    )
    a, b = found.tasks
    assert dict(a.env) == {"BAUD": "115200", "MODE": "slow", "FLAG": "yes", "VERSION": "2.10"}
    assert dict(b.env) == {"BAUD": "115200", "MODE": "fast", "FLAG": "yes"}


def test_env_names_and_values_are_checked_on_their_lines() -> None:
    found = errors(
        """\
        env: {GITHUB_TOKEN: x}
        tasks:
          - id: a
            run: ./a.sh
            env:
              1ST: x
              LIST: [1, 2]
              EMPTY:
              BOARD: "{matrix.board}"
        """
    )
    assert found == [
        (
            3,
            "env.GITHUB_TOKEN",
            "'GITHUB_TOKEN' is not an environment name: names may not start with GITHUB_",
        ),
        (
            8,
            "tasks[0].env.1ST",
            "'1ST' is not an environment name: letters, digits and '_', not starting with a digit",
        ),
        (9, "tasks[0].env.LIST", "must be a string, not a list"),
        (10, "tasks[0].env.EMPTY", "must be a string, not nothing (null)"),
        (11, "tasks[0].env.BOARD", "'{matrix.board}' uses {matrix.…} but the task has no matrix"),
    ]


def test_needs_name_tasks_of_the_workflow_and_make_no_cycle() -> None:
    found = workflow(
        """\
        tasks:
          - {id: build, run: ./b.sh}
          - {id: flash, run: ./f.sh, needs: build}
          - {id: test, run: ./t.sh, needs: [build, flash]}
        """
    )
    assert [task.needs for task in found.tasks] == [(), ("build",), ("build", "flash")]
    found_errors = errors(
        """\
        tasks:
          - {id: build, run: ./b.sh, needs: [test]}
          - {id: flash, run: ./f.sh, needs: [biuld]}
          - {id: test, run: ./t.sh, needs: [build]}
        """
    )
    # The entry that closes the cycle (walking the tasks in the order written) carries it.
    assert [(line, field) for line, field, _ in found_errors] == [
        (5, "tasks[1].needs[0]"),
        (6, "tasks[2].needs[0]"),
    ]
    assert "did you mean 'build'?" in found_errors[0][2]
    assert "cycle: build -> test -> build" in found_errors[1][2]


def test_a_matrix_makes_a_job_per_combination_with_its_values_in_requirements_and_env() -> None:
    found = workflow(
        """\
        tasks:
          - id: smoke
            run: ./smoke.sh
            matrix: {board: [modalix, davinci], sdk: ["2.1", "2.2"], exclude: [{board: davinci, sdk: "2.1"}]}
            requirements: {labels: {board: "{matrix.board}"}, tags: ["sdk-{matrix.sdk}"]}
            env: {BOARD: "{matrix.board}", BRACES: "{{x}}"}
        """
    )
    assert [task.id for task in found.tasks] == [
        "smoke[board=modalix,sdk=2.1]",
        "smoke[board=modalix,sdk=2.2]",
        "smoke[board=davinci,sdk=2.2]",
    ]
    assert found.tasks[0].name == "smoke (board=modalix, sdk=2.1)"
    assert {task.task_id for task in found.tasks} == {"smoke"}
    last = found.tasks[-1]
    assert last.requirements.labels["board"].values == ("davinci",)
    assert [tag.tag for tag in last.requirements.tags] == ["sdk-2.2"]
    assert dict(last.env) == {"BOARD": "davinci", "BRACES": "{x}"}


def test_a_matrix_placeholder_mistake_is_reported_once_on_its_line() -> None:
    found = errors(
        """\
        tasks:
          - id: smoke
            run: ./smoke.sh
            matrix: {board: [modalix, davinci, zynq]}
            requirements: {labels: {board: "{matrix.bord}"}}
        """
    )
    assert found == [
        (
            7,
            "tasks[0].requirements.labels.board",
            "'{matrix.bord}': unknown matrix key 'bord'; did you mean 'board'?",
        )
    ]


def test_a_workflow_of_too_many_jobs_is_refused() -> None:
    values = ", ".join(f"v{i}" for i in range(200))
    tasks = "".join(f"  - {{id: t{n}, run: ./t.sh, matrix: {{k: [{values}]}}}}\n" for n in range(6))
    found = errors("tasks:\n" + tasks)
    assert found == [(4, "tasks", "make 1,200 jobs, every matrix expanded; the limit is 1,024")]


def test_secrets_are_names_stored_upper_case_each_once() -> None:
    found = workflow(
        """\
        tasks:
          - {id: a, run: ./a.sh, secrets: [lab_vpn_key, SIGNING_TOKEN]}
          - {id: b, run: ./b.sh, secrets: LAB_VPN_KEY}
        """
    )
    assert [task.secrets for task in found.tasks] == [("LAB_VPN_KEY", "SIGNING_TOKEN"), ("LAB_VPN_KEY",)]
    assert errors(
        """\
        tasks:
          - {id: a, run: ./a.sh, secrets: [vpn, VPN, GITHUB_TOKEN, 9lives]}
        """
    ) == [
        (4, "tasks[0].secrets[1]", "secret VPN is listed twice (first on line 4)"),
        (4, "tasks[0].secrets[2]", "'GITHUB_TOKEN' is not a secret name: names may not start with GITHUB_"),
        (
            4,
            "tasks[0].secrets[3]",
            "'9lives' is not a secret name: letters, digits and '_', not starting with a digit",
        ),
    ]


def test_results_globs_stay_in_the_workspace() -> None:
    found = workflow("tasks:\n  - {id: a, run: ./a.sh, results: ['results/*.xml', '**/TEST-*.xml']}\n")
    assert found.tasks[0].results == ("results/*.xml", "**/TEST-*.xml")
    assert [
        (field, message)
        for _, field, message in errors(
            "tasks:\n  - {id: a, run: ./a.sh, results: ['/etc/*.xml', '../x.xml', 'a\\b.xml']}\n"
        )
    ] == [
        (
            "tasks[0].results[0]",
            "'/etc/*.xml' is absolute: paths are relative to the job's workspace (the repository)",
        ),
        ("tasks[0].results[1]", "'../x.xml' climbs out of the workspace with '..'"),
        ("tasks[0].results[2]", "'a\\\\b.xml' holds a NUL or a backslash: write folders with '/'"),
    ]


def test_artifacts_download_from_the_triggering_run_into_a_folder_and_upload_globs() -> None:
    found = workflow(
        """\
        tasks:
          - id: a
            run: ./a.sh
            artifacts:
              download: [{workflow_run: firmware-image, path: build/}, {workflow_run: symbols}]
              upload: ["logs/**", console.log]
        """
    )
    assert found.tasks[0].artifacts.as_dict() == {
        "download": [{"name": "firmware-image", "path": "build"}, {"name": "symbols", "path": "."}],
        "upload": ["logs/**", "console.log"],
    }
    assert errors(
        """\
        tasks:
          - id: a
            run: ./a.sh
            artifacts:
              download: [{path: build}, {workflow_run: "a/b"}, {workflow_run: x, path: "../up"}]
              uplod: [x]
        """
    ) == [
        (
            7,
            "tasks[0].artifacts.download[0].workflow_run",
            "is required: the name of the artifact in the triggering run",
        ),
        (
            7,
            "tasks[0].artifacts.download[1].workflow_run",
            "'a/b' is not an artifact name: 1-255 printable characters, none of \" / \\ : < > | * ?",
        ),
        (7, "tasks[0].artifacts.download[2].path", "'../up' climbs out of the workspace with '..'"),
        (8, "tasks[0].artifacts.uplod", "unknown key 'uplod'; did you mean 'upload'?"),
    ]


def test_devices_name_roles_each_with_its_requirements_over_the_tasks() -> None:
    found = workflow(
        """\
        scheduling: {labels: {site: lab-a}}
        tasks:
          - id: pair
            run: ./pair.sh
            matrix: {board: [modalix, davinci]}
            requirements: {tags: [uart]}
            devices:
              dut: {labels: {board: "{matrix.board}"}}
              peer: {labels: {board: davinci}, tags: [wifi]}
          - id: alone
            run: ./alone.sh
        """
    )
    first, second, alone = found.tasks
    assert [role.name for role in first.devices] == ["dut", "peer"]
    dut, peer = first.devices
    assert dut.requirements.as_dict() == {
        "labels": {"site": ["lab-a"], "board": ["modalix"]},
        "tags": ["uart"],
    }
    assert peer.requirements.as_dict() == {
        "labels": {"site": ["lab-a"], "board": ["davinci"]},
        "tags": ["uart", "wifi"],
    }
    assert second.devices[0].requirements.labels["board"].values == ("davinci",)
    assert first.requirements.as_dict() == {"labels": {"site": ["lab-a"]}, "tags": ["uart"]}
    assert alone.devices == ()


def test_devices_mistakes_are_reported_on_their_lines() -> None:
    found = errors(
        """\
        scheduling: {labels: {board: modalix}}
        tasks:
          - id: bad
            run: ./x.sh
            devices:
              DUT: {}
              peer: 3
              host: {lables: {board: x}}
          - id: one
            run: ./x.sh
            devices: {dut: {}}
          - id: clash
            run: ./x.sh
            devices:
              dut: {}
              peer: {labels: {board: davinci}}
        """
    )
    assert found[:3] == [
        (
            8,
            "tasks[0].devices.DUT",
            "'DUT' is not a role name: 1-32 of lowercase letters, digits and '_', starting with a letter"
            " (it names the job's variable KERRIGAN_DEVICE_<ROLE>_ID)",
        ),
        (9, "tasks[0].devices.peer", "must be a requirements block ({labels: {...}, tags: [...]}) or empty"),
        (
            13,
            "tasks[1].devices",
            "names 1 role(s); a gang has 2 to 8 (one device is the task's own requirements)",
        ),
    ]
    # A role's labels that the session's cannot meet: on the role's line, naming both places.
    assert found[3:] == [
        (
            18,
            "tasks[2].devices.peer.labels.board",
            "label 'board' cannot be satisfied: scheduling.labels.board (line 3) allows modalix but "
            "tasks[2].devices.peer.labels.board (line 18) allows davinci; no value is in both",
        )
    ]  # the bad role names of tasks[0] hide its valid role's unknown key: that role is not read


def test_a_session_may_hold_its_largest_gang() -> None:
    gang = textwrap.dedent(
        """\
        tasks:
          - id: solo
            run: ./solo.sh
          - id: trio
            run: ./trio.sh
            devices: {a: {}, b: {}, c: {}}
        """
    )
    assert workflow(gang).scheduling.max_devkits == 3  # the default of 1 grows to the largest gang
    assert workflow("scheduling: {max_devkits: 4}\n" + gang).scheduling.max_devkits == 4
    assert errors("scheduling: {max_devkits: 2}\n" + gang) == [
        (
            9,
            "tasks[1].devices",
            "task trio takes 3 devices at once, but scheduling.max_devkits (line 3) lets the session hold "
            "2; set max_devkits to 3 or more",
        )
    ]


def test_the_max_devkits_error_names_the_gangs_place_after_a_broken_task() -> None:
    found = errors(
        """\
        scheduling: {max_devkits: 1}
        tasks:
          - id: broken
            run: ./x.sh
            vcpus: many
          - id: pair
            run: ./pair.sh
            devices: {dut: {}, peer: {}}
        """
    )
    assert [(line, field) for line, field, _ in found] == [(7, "tasks[0].vcpus"), (10, "tasks[1].devices")]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("..", "'..' climbs out of the workspace with '..'"),
        ("../..", "'../..' climbs out of the workspace with '..'"),
        ("./..", "'./..' climbs out of the workspace with '..'"),
        ("../../../../../..", "'../../../../../..' climbs out of the workspace with '..'"),
        (".//../", "'.//../' climbs out of the workspace with '..'"),
        ("a/../../x", "'a/../../x' climbs out of the workspace with '..'"),
        ("build/..", "'build/..' climbs out of the workspace with '..'"),
        ("/etc", "'/etc' is absolute: paths are relative to the job's workspace (the repository)"),
        ("/", "'/' is absolute: paths are relative to the job's workspace (the repository)"),
        ("/..", "'/..' is absolute: paths are relative to the job's workspace (the repository)"),
        ("~/x", "'~/x' is absolute: paths are relative to the job's workspace (the repository)"),
        ("a\\..\\..", "'a\\\\..\\\\..' holds a NUL or a backslash: write folders with '/'"),
        ("out/*", "'out/*' is a glob: give the folder to unpack into"),
    ],
)
def test_an_artifacts_folder_out_of_the_workspace_is_refused_on_its_line(path: str, message: str) -> None:
    text = f"""\
        tasks:
          - id: a
            run: ./a.sh
            artifacts:
              download:
                - workflow_run: firmware-image
                  path: {json.dumps(path)}
        """
    result = parse(text)
    assert result.workflow is None
    assert [(p.file, p.line, p.field, p.message) for p in result.errors] == [
        (FILE, 9, "tasks[0].artifacts.download[0].path", message)
    ]


@pytest.mark.parametrize(
    ("path", "folder"),
    [(".", "."), ("./", "."), ("build/", "build"), ("./build//out/", "build/out"), ("a/./b", "a/b")],
)
def test_an_artifacts_folder_is_kept_as_its_parts_below_the_workspace(path: str, folder: str) -> None:
    found = workflow(
        f"""\
        tasks:
          - id: a
            run: ./a.sh
            artifacts: {{download: [{{workflow_run: firmware-image, path: {json.dumps(path)}}}]}}
        """
    )
    assert found.tasks[0].artifacts.download[0].path == folder


SECRETS_MANIFEST = """\
name: vpn
on: [push]
tasks:
  - id: one
    run: ./a.sh
    secrets: [lab_vpn_key, SIGNING_KEY]
  - id: two
    run: ./b.sh
    secrets:
      - signing_key
      - flash_token
"""


def test_a_secret_the_repository_lacks_is_an_error_on_its_first_line_once() -> None:
    result = unset_secrets(parse_manifest(SECRETS_MANIFEST, "vpn.yml"), {"LAB_VPN_KEY"}, "octo/firmware")
    assert result.workflow is None
    assert [(p.line, p.field, p.message.split(":")[0]) for p in result.errors] == [
        (6, "tasks[0].secrets[1]", "secret SIGNING_KEY is not set for octo/firmware"),
        (11, "tasks[1].secrets[1]", "secret FLASH_TOKEN is not set for octo/firmware"),
    ]
    assert "kerrigan secrets set octo/firmware FLASH_TOKEN" in result.errors[1].message


def test_a_manifest_whose_secrets_are_all_set_is_left_as_it_is() -> None:
    parsed = parse_manifest(SECRETS_MANIFEST, "vpn.yml")
    assert unset_secrets(parsed, {"LAB_VPN_KEY", "SIGNING_KEY", "FLASH_TOKEN"}, "octo/firmware") is parsed
