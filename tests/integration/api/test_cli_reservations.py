"""``kerrigan reserve`` and ``kerrigan reservations`` as a person runs them: the real command in a
subprocess against the application served on loopback (its dispatcher running)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

import pytest

from tests.integration.api.conftest import ADMIN, READER, Api
from tests.integration.api.test_cli_sessions import _lab
from tests.integration.test_cli_explain import ROOT

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


async def started(*args: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KERRIGAN_")} | env
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kerrigan.cli", *args,
        cwd=ROOT, env=environment, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def kerrigan(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await started(*args, env=env)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def granted(api: Api, reservation_id: str) -> None:
    """Wait until the reservation holds its board (a loaded machine's dispatcher may take a few rounds)."""
    for _ in range(300):
        if (await api.get(f"/reservations/{reservation_id}", who=ADMIN)).body["state"] == "active":
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"reservation {reservation_id} was not granted within 30 s")


async def first_line(process: asyncio.subprocess.Process) -> str:
    assert process.stderr is not None
    return (await asyncio.wait_for(process.stderr.readline(), 30)).decode()


async def test_reserve_prints_the_board_its_host_and_labels_and_release_frees_it(api: Api) -> None:
    lab = _lab(api)
    status, out, err = await kerrigan(
        "reserve", "--labels", "sdk=2.1.1", "--for", "2h", "--note", "UART bring-up", env=lab
    )
    assert status == 0, err
    assert out.startswith("reserved dev-b1 on runner host lab-b-01 until ")
    assert "sdk=2.1.1" in out
    reservation = out.split("(reservation ", 1)[1].split(")", 1)[0]
    status, out, _ = await kerrigan("reservations", "list", env=lab)
    assert status == 0
    assert out.splitlines()[0].split() == ["ID", "WHO", "STATE", "DEVICE", "HOST", "UNTIL", "NOTE"]
    assert reservation in out
    assert "UART bring-up" in out
    status, out, _ = await kerrigan("reservations", "extend", reservation, "--by", "30m", env=lab)
    assert status == 0
    assert out.startswith(f"reservation {reservation} now ends at ")
    status, out, _ = await kerrigan("reservations", "show", reservation, env=lab)
    assert status == 0
    assert out.startswith("reserved dev-b1 on runner host lab-b-01 until ")
    # No agent runs here: the board's settings are not reported, and it says so.
    unreported = "  settings: runner host lab-b-01 has not reported them yet"
    assert f"{unreported} (kerrigan reservations show {reservation})" in out
    status, out, _ = await kerrigan("reservations", "release", reservation, env=lab)
    assert (status, out.strip()) == (0, f"released reservation {reservation}: dev-b1 is free for the queue")
    status, out, _ = await kerrigan("reservations", "show", reservation, env=lab)
    assert (status, out.strip()) == (0, f"reservation {reservation}: ended (released)")


async def test_a_waiting_reserve_shows_its_place_and_takes_the_board_once_released(api: Api) -> None:
    lab = _lab(api)
    first = await api.call(
        "POST", "/reservations", who=ADMIN, json={"device": "dev-b1", "duration_s": 600, "wait_s": 60}
    )
    await granted(api, first.body["id"])
    waiting = await started("reserve", "--device", "dev-b1", "--for", "30m", "--wait", "10m", env=lab)
    line = await first_line(waiting)
    assert line.startswith("waiting for a device, position 1: "), line
    assert "dev-b1: device reserved by alice until " in line
    assert (await api.call("DELETE", f"/reservations/{first.body['id']}", who=ADMIN)).status == 200
    out, err = await asyncio.wait_for(waiting.communicate(), 30)
    assert waiting.returncode == 0, err
    assert out.decode().startswith("reserved dev-b1 on runner host lab-b-01")


async def test_ctrl_c_while_waiting_withdraws_the_request(api: Api) -> None:
    lab = _lab(api)
    first = await api.call(
        "POST", "/reservations", who=ADMIN, json={"device": "dev-b1", "duration_s": 600, "wait_s": 60}
    )
    await granted(api, first.body["id"])
    waiting = await started("reserve", "--device", "dev-b1", "--for", "30m", "--wait", "10m", env=lab)
    await first_line(waiting)
    waiting.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(waiting.communicate(), 30)
    assert waiting.returncode == 130
    assert "withdrawn" in err.decode()
    assert "Traceback" not in err.decode()
    mine: Any = (await api.get(f"/reservations?login={READER}&ended=true")).body["items"]
    assert [(item["state"], item["end_reason"]) for item in mine] == [("ended", "released")]


async def test_a_request_nothing_can_match_exits_1_with_every_reason(api: Api) -> None:
    status, out, err = await kerrigan("reserve", "--labels", "form_factor=pcie", "--for", "1h", env=_lab(api))
    assert (status, out) == (1, "")
    assert "no device can ever match" in err
    assert "form_factor expected pcie  [never]" in err
    status, _, err = await kerrigan("reserve", "--device", "dev-b1", "--for", "9h", env=_lab(api))
    assert status == 1
    assert err == (
        "kerrigan reserve: duration_s: must be 1 to 28800 seconds (KERRIGAN_RESERVATION_MAX_S), not 32400 "
        "(HTTP 400)\n"
    )
