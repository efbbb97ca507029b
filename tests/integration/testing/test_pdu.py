"""labgrid's own Gude backend (``labgrid.driver.power.gude``) against the PDU stand-in on loopback.

The backend is synchronous (``requests``), so every call runs in a thread, as Kerrigan's agent runs it off
its event loop."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from types import ModuleType as Backend

import pytest

from kerrigan.testing.pdu import MODEL, GudePdu

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")
from labgrid.driver.exception import ExecutionError
from requests import HTTPError

# Bounds a call the stand-in answers at once; a hang is shown with a much shorter one.
PROMPT_S = 5.0


@pytest.fixture
def gude() -> Backend:
    import importlib

    return importlib.import_module(f"labgrid.driver.power.{MODEL}")


@pytest.fixture
async def pdu() -> AsyncIterator[GudePdu]:
    async with GudePdu(outlets=8) as stand_in:
        yield stand_in


async def power_set(gude: Backend, pdu: GudePdu, index: int, on: bool) -> None:
    await asyncio.wait_for(asyncio.to_thread(gude.power_set, pdu.host, pdu.port, index, on), PROMPT_S)


async def power_get(gude: Backend, pdu: GudePdu, index: int) -> bool:
    state = await asyncio.wait_for(asyncio.to_thread(gude.power_get, pdu.host, pdu.port, index), PROMPT_S)
    assert isinstance(state, bool)
    return state


async def test_labgrid_switches_one_outlet_on_and_off(gude: Backend, pdu: GudePdu) -> None:
    await power_set(gude, pdu, 3, True)
    assert [index for index in range(1, 9) if pdu.is_on(index)] == [3]
    await power_set(gude, pdu, 3, False)
    assert not pdu.is_on(3)
    assert pdu.switches == [(3, True), (3, False)]
    assert [request.path_qs for request in pdu.requests] == [
        "/switch.html?cmd=1&p=3&s=1",
        "/switch.html?cmd=1&p=3&s=0",
    ]


async def test_labgrid_reads_each_outlets_state(gude: Backend, pdu: GudePdu) -> None:
    pdu.switch(2, True)
    pdu.switch(7, True)
    assert [index for index in range(1, 9) if await power_get(gude, pdu, index)] == [2, 7]


async def test_an_outlet_switched_through_labgrid_tells_its_listener(gude: Backend, pdu: GudePdu) -> None:
    heard: list[bool] = []
    pdu.on_switch(5, heard.append)
    await power_set(gude, pdu, 5, True)
    await power_set(gude, pdu, 5, True)  # already on: no change to hear of
    await power_set(gude, pdu, 4, True)  # another outlet
    await power_set(gude, pdu, 5, False)
    assert heard == [True, False]


@pytest.mark.parametrize("status", [500, 503, 404])
async def test_an_error_status_makes_labgrid_raise_and_switches_nothing(
    gude: Backend, pdu: GudePdu, status: int
) -> None:
    pdu.fail(status)
    with pytest.raises(HTTPError) as raised:
        await power_set(gude, pdu, 1, True)
    assert raised.value.response.status_code == status
    with pytest.raises(HTTPError):
        await power_get(gude, pdu, 1)
    assert not pdu.is_on(1)
    assert pdu.switches == []


async def test_a_hanging_pdu_hangs_labgrid_until_its_caller_gives_up(gude: Backend, pdu: GudePdu) -> None:
    # labgrid's backend calls requests without a timeout: only the caller's own bound ends the wait.
    pdu.hang()
    call = asyncio.ensure_future(asyncio.to_thread(gude.power_set, pdu.host, pdu.port, 2, True))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.shield(call), 0.3)
    assert not call.done()
    assert [request.status for request in pdu.requests] == [None]  # received, never answered
    pdu.behave()  # the thread is still blocked in requests: released, it completes and the outlet switches
    await asyncio.wait_for(call, PROMPT_S)
    assert pdu.is_on(2)


async def test_a_slow_pdu_answers_late(gude: Backend, pdu: GudePdu) -> None:
    pdu.slow(0.3)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await power_set(gude, pdu, 1, True)
    assert loop.time() - started >= 0.3
    assert pdu.is_on(1)
    pdu.behave()
    started = loop.time()
    assert await power_get(gude, pdu, 1)
    assert loop.time() - started < 0.3


async def test_a_pdu_with_credentials_refuses_a_call_without_them(gude: Backend) -> None:
    async with GudePdu(outlets=2, credentials=("admin", "s3cret-pdu")) as pdu:
        with pytest.raises(HTTPError) as raised:
            await asyncio.to_thread(gude.power_set, "127.0.0.1", pdu.port, 1, True)
        assert raised.value.response.status_code == 401
        with pytest.raises(HTTPError):
            await asyncio.to_thread(gude.power_set, "admin:wrong@127.0.0.1", pdu.port, 1, True)
        assert not pdu.is_on(1)
        await power_set(gude, pdu, 1, True)  # pdu.host carries them: requests sends them as basic auth
        assert pdu.is_on(1)
        assert pdu.requests[-1].authorization == "Basic " + base64.b64encode(b"admin:s3cret-pdu").decode()
        assert [request.status for request in pdu.requests] == [401, 401, 200]


async def test_labgrid_refuses_an_outlet_the_model_cannot_have(gude: Backend, pdu: GudePdu) -> None:
    with pytest.raises(AssertionError):
        await power_get(gude, pdu, 9)  # Gude units have at most eight outlets; the backend asserts it
    async with GudePdu(outlets=1) as small:
        with pytest.raises(ExecutionError, match="failed to find the port"):
            await power_get(gude, small, 2)


def test_an_outlet_outside_the_pdu_is_refused() -> None:
    pdu = GudePdu(outlets=4)
    with pytest.raises(ValueError, match=r"outlet 5 is not one of 1\.\.4"):
        pdu.switch(5, True)


async def test_closing_a_hanging_pdu_answers_its_caller_at_once(gude: Backend) -> None:
    pdu = GudePdu(outlets=2)
    await pdu.start()
    pdu.hang()
    call = asyncio.ensure_future(asyncio.to_thread(gude.power_get, pdu.host, pdu.port, 1))
    await asyncio.sleep(0.2)
    assert not call.done()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await pdu.close()
    assert await asyncio.wait_for(call, PROMPT_S) is False
    assert loop.time() - started < 1.0
