"""A job's console, a log of its own: stored in order with arrival times, numbered apart from its output,
capped, masked and pruned as output is (on SQLite, and on PostgreSQL when asked)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from kerrigan.core.log_streams import LogStream
from kerrigan.core.masking import Masker
from kerrigan.store import jobs
from kerrigan.store.database import Database
from kerrigan.store.history import timed_output_chunks
from kerrigan.store.jobs.output import Appended, LogGapError, append_log, append_output
from kerrigan.store.models import JobConsoleRow, JobRow
from kerrigan.store.retention import prune_history
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_job_lifecycle import offer_one

HOST = "lab-a-01"
SECRET = "hunter2-very-secret"


async def console(db: Database, job: int, seq: int, offset: int, data: str, **kwargs: object) -> Appended:
    async with db.sessions() as session, session.begin():
        return await append_log(
            session,
            str(job),
            HOST,
            LogStream.CONSOLE,
            seq=seq,
            byte_offset=offset,
            data=data,
            at=db.clock(),
            **kwargs,  # type: ignore[arg-type]
        )


async def read(db: Database, job: int, stream: LogStream) -> list[tuple[str, object]]:
    async with db.sessions() as session:
        return [chunk async for chunk in timed_output_chunks(session, job, stream)]


async def test_console_chunks_are_numbered_apart_from_the_output_and_kept_with_arrival_times(
    db: Database, clock: FakeClock
) -> None:
    job = await offer_one(db)
    first = db.clock()
    assert await console(db, job, 0, 0, "U-Boot 2024.01\r\n") == Appended(1)
    async with db.sessions() as session, session.begin():  # the output's own seq 0, after the console's
        assert await append_output(session, str(job), HOST, seq=0, byte_offset=0, data="boot\n") == Appended(
            1
        )
    clock.advance(2)
    assert await console(db, job, 1, 16, "login: ") == Appended(2)
    assert await console(db, job, 1, 16, "login: ") == Appended(2)  # a repeat is acknowledged again
    with pytest.raises(LogGapError) as gap:
        await console(db, job, 3, 99, "lost")
    assert gap.value.expected_seq == 2
    shown = await read(db, job, LogStream.CONSOLE)
    assert [data for data, _ in shown] == ["U-Boot 2024.01\r\n", "login: "]
    assert [at for _, at in shown] == [first, first + timedelta(seconds=2)]
    assert [data for data, _ in await read(db, job, LogStream.OUTPUT)] == ["boot\n"]
    async with db.sessions() as session:
        row = await session.get(JobRow, job)
        assert row is not None
        assert (row.next_seq, row.log_bytes, row.console_next_seq, row.console_bytes) == (1, 5, 2, 23)
        assert await jobs.output_tail(session, job, stream=LogStream.CONSOLE) == "U-Boot 2024.01\r\nlogin: "
        assert await jobs.output_tails(session, [job], stream=LogStream.CONSOLE) == {
            job: "U-Boot 2024.01\r\nlogin: "
        }


async def test_a_flooding_console_is_cut_at_the_cap_and_its_output_is_not(db: Database) -> None:
    job = await offer_one(db)
    assert await console(db, job, 0, 0, "a" * 600, max_bytes=1024) == Appended(1)
    assert await console(db, job, 1, 600, "b" * 600, max_bytes=1024) == Appended(2, cut=True)
    assert await console(db, job, 2, 1200, "c" * 600, max_bytes=1024) == Appended(3, cut=True)
    shown = "".join(data for data, _ in await read(db, job, LogStream.CONSOLE))
    assert shown == "a" * 600 + "b" * 424 + "\n[console cut at 1 KiB (KERRIGAN_OUTPUT_MAX_BYTES)]\n"
    async with db.sessions() as session, session.begin():
        assert await append_output(
            session, str(job), HOST, seq=0, byte_offset=0, data="ok\n", max_bytes=1024
        ) == Appended(1)


async def test_the_jobs_secrets_are_masked_before_a_console_chunk_is_stored(db: Database) -> None:
    job = await offer_one(db)
    masker = Masker.for_secrets({"LAB_VPN_KEY": SECRET})
    sent = f"vpn key is {SECRET}\r\n"
    assert await console(db, job, 0, 0, sent, masker=masker) == Appended(1)
    # The runner's offsets stay the runner's: the next chunk follows what it sent, not what was stored.
    assert await console(db, job, 1, len(sent.encode()), "ok\r\n", masker=masker) == Appended(2)
    async with db.sessions() as session:
        stored = list((await session.scalars(select(JobConsoleRow.data).order_by(JobConsoleRow.seq))).all())
    assert stored == ["vpn key is ***\r\n", "ok\r\n"]
    assert not any(SECRET in data for data in stored)


async def test_retention_deletes_a_jobs_console_with_its_output(db: Database) -> None:
    job = await offer_one(db)
    await console(db, job, 0, 0, "U-Boot\r\n")
    async with db.sessions() as session, session.begin():
        row = await session.get(JobRow, job)
        assert row is not None
        row.finished_at = db.clock() - timedelta(days=40)
    async with db.sessions() as session, session.begin():
        pruned = await prune_history(
            session, sessions_before=None, output_before=db.clock() - timedelta(days=30)
        )
    assert pruned.output_jobs == 1  # a job with only a console is found too
    async with db.sessions() as session:
        assert await session.scalar(select(func.count()).select_from(JobConsoleRow)) == 0
