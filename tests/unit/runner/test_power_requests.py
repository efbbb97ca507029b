"""The line protocol of a job's power socket, and ``kerrigan device power`` outside a job."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from kerrigan.cli import device, main
from kerrigan.runner.boards.power_requests import (
    PowerAnswer,
    PowerOp,
    PowerRequest,
    PowerState,
    RequestError,
)


def test_a_request_goes_and_comes_back_whole() -> None:
    request = PowerRequest(PowerOp.CYCLE, "dut")
    assert request.line() == b'{"op": "cycle", "role": "dut"}\n'
    assert PowerRequest.parse(request.line()) == request
    assert PowerRequest.parse(b'{"op": "status"}') == PowerRequest(PowerOp.STATUS)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b"cycle", "a request is one JSON object on a line"),
        (b"[1]", "a request is one JSON object on a line"),
        (b"\xff\xfe", "a request is one JSON object on a line"),
        (b'{"op": "explode"}', "op must be one of cycle, on, off, status"),
        (b'{"op": "on", "host": "pdu"}', "unknown key 'host' (a request has op and role)"),
        (b'{"op": "on", "role": 7}', "role must be a role's name"),
        (b'{"op": "on", "role": ""}', "role must be a role's name"),
    ],
)
def test_a_line_that_is_no_request_says_why(line: bytes, said: str) -> None:
    with pytest.raises(RequestError) as caught:
        PowerRequest.parse(line)
    assert str(caught.value) == said


def test_answers_go_and_come_back_whole() -> None:
    assert PowerAnswer(state=PowerState.ON).line() == b'{"ok": true, "state": "on"}\n'
    assert PowerAnswer.parse(b'{"ok": true, "state": "unknown"}') == PowerAnswer(state=PowerState.UNKNOWN)
    refused = PowerAnswer.parse(b'{"ok": false, "error": "refused"}')
    assert not refused.ok
    assert refused.error == "refused"
    with pytest.raises(RequestError):
        PowerAnswer.parse(b'{"ok": true, "state": "exploded"}')


def test_kerrigan_device_power_outside_a_job_says_so_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KERRIGAN_DEVICE_SOCKET", raising=False)
    assert main(["device", "power", "status"]) == 2
    assert capsys.readouterr().err == (
        "kerrigan device: power: KERRIGAN_DEVICE_SOCKET is not set: run it in a job on a board with power\n"
    )


def test_kerrigan_device_power_with_no_agent_listening_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KERRIGAN_DEVICE_SOCKET", "/nonexistent/device.sock")
    assert main(["device", "power", "on"]) == 1
    assert capsys.readouterr().err == (
        "kerrigan device power on: cannot reach the agent at /nonexistent/device.sock: "
        "No such file or directory\n"
    )


def test_kerrigan_device_power_reads_a_refusal_sent_before_its_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The agent answers another uid's connection at once and hangs up without reading it: the request's
    # send then fails (a broken pipe), and the refusal waiting to be read must still be what is said.
    path = tmp_path / "device.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    hung_up = threading.Event()

    def refuse() -> None:
        connection, _ = listener.accept()
        connection.sendall(PowerAnswer(error="refused: this socket is another job's").line())
        connection.close()
        hung_up.set()

    agent = threading.Thread(target=refuse)
    agent.start()
    connect = device.connect

    def connected_then_hung_up_on(sock: socket.socket, at: str) -> None:
        connect(sock, at)
        assert hung_up.wait(10)

    monkeypatch.setattr(device, "connect", connected_then_hung_up_on)
    monkeypatch.setenv("KERRIGAN_DEVICE_SOCKET", str(path))
    try:
        assert main(["device", "power", "off"]) == 1
    finally:
        agent.join()
        listener.close()
    assert capsys.readouterr().err == "kerrigan device power off: refused: this socket is another job's\n"
