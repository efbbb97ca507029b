"""A board that fails a task 8 times of 10 while its peer passes is named, with its numbers, in the next
failed check run of that task, with a real runner agent and the stand-in. The history is stored first (as
the jobs of the week before would have left it); then a push fails on that board."""

from __future__ import annotations

from datetime import timedelta

from kerrigan.core.inventory import DeviceState
from kerrigan.store.audit import Change
from kerrigan.store.inventory import set_state
from kerrigan.testing.clock import FakeClock
from tests.integration.api.history_rows import Run, add_session
from tests.integration.github.conftest import Harness
from tests.integration.runner.agents import (
    BOOT,
    AgentFactory,
    completed,
    smoke_commit,
    start_both,
)

FAILS_ON_REDBOX = (
    '#!/bin/sh\nif [ "$KERRIGAN_DEVICE_ID" = modalix-redbox ]; then echo "no prompt"; exit 1; fi\necho ok\n'
)


async def test_a_failed_check_run_names_the_suspect_board_with_its_numbers(
    harness: Harness,
    agents: AgentFactory,
    clock: FakeClock,
) -> None:
    db = harness.database
    at = db.clock() - timedelta(days=2)
    async with db.sessions() as session, session.begin():
        for n in range(10):
            failed = n < 8
            run = Run(
                "smoke-som", "modalix-redbox", "failed" if failed else "succeeded", exit_status=int(failed)
            )
            await add_session(session, at, workflow="hil-smoke", runs=(run,))
        for n in range(52):
            run = Run(
                "smoke-som", "modalix-bluebox", "failed" if n == 0 else "succeeded", exit_status=int(n == 0)
            )
            await add_session(session, at, workflow="hil-smoke", runs=(run,))
        # The push's smoke must land on redbox: its peer is out for good (retired), so its suspect retry has
        # no peer to wait for (one in maintenance it would wait for: issue 28) and the failure stands.
        for peer in ("modalix-bluebox", "modalix-greenbox"):  # greenbox: in maintenance in the lab
            change = Change("t", db.clock())
            await set_state(session, peer, DeviceState.RETIRED, "", until=None, change=change)
    clock.advance(31)  # the server's suspects are read again (it may have looked before the history was in)
    await start_both(harness, agents)
    [run] = await harness.push_commit(smoke_commit(smoke=FAILS_ON_REDBOX, boot=BOOT))
    await completed(harness, run, timeout=60)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "failure"
    summary = final["output"]["summary"]
    assert "**Suspect devices**" in summary
    # The push's own failure is counted before its check run is rendered (issue 28): 9 of 11, where the
    # statistics read on a 30 s timer said 8 of 10 before.
    assert (
        "modalix-redbox failed 9 of 11 runs of this task in 7 days; its 1 peer failed 1 of 52: "
        "the device may be at fault, not the code"
    ) in summary
