"""What a job that holds no device (``board: none``) finds in its environment: everything a job gets but
the device's variables, which it has not (not empty: absent)."""

from __future__ import annotations

from kerrigan.runner.processes import job_environment

OFFER = {
    "id": "7",
    "session": "s",
    "task": "build",
    "repository": "octo/firmware",
    "sha": "a" * 40,
    "device": None,
    "board": None,
    "labels": {},
    "devices": [],
    "env": {"MODE": "release"},
    "workflow_run_id": 9,
    "github": {"token": "ghs_x", "api_url": "http://github.test"},
}


def test_a_boardless_job_gets_no_device_variable_at_all() -> None:
    env = job_environment(OFFER, (2, 3), {"PATH": "/bin", "KERRIGAN_DEVICE_ID": "from the agent"})
    assert not [name for name in env if name.startswith(("KERRIGAN_DEVICE", "KERRIGAN_DEVICES"))]


def test_a_boardless_job_gets_everything_else_a_job_gets() -> None:
    env = job_environment(OFFER, (2, 3), {"PATH": "/bin"})
    assert {name: env[name] for name in env if name != "PATH"} == {
        "CI": "true",
        "KERRIGAN": "true",
        "GITHUB_REPOSITORY": "octo/firmware",
        "GITHUB_SHA": "a" * 40,
        "GITHUB_API_URL": "http://github.test",
        "GITHUB_TOKEN": "ghs_x",
        "KERRIGAN_JOB_ID": "7",
        "KERRIGAN_SESSION_ID": "s",
        "KERRIGAN_TASK_ID": "build",
        "KERRIGAN_CPUS": "2-3",
        "KERRIGAN_WORKFLOW_RUN_ID": "9",
        "MODE": "release",
    }
