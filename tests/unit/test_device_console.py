"""Who may use a board's console (core.device_console), and the store's bounds on one session
(store.consoles): one writer, a watcher that lags cut off alone, keystrokes bounded."""

from __future__ import annotations

from kerrigan.core.device_console import KEYSTROKES_QUEUED, Access, console_access
from kerrigan.core.device_power import Holder
from kerrigan.core.roles import Principal
from kerrigan.store.consoles import Consoles, ConsoleSession


def test_the_holder_and_admins_type_owners_watch_anyone_else_is_told_what_they_lack() -> None:
    held = Holder(login="Rita")
    owners = ("olga",)
    assert console_access(Principal("rita"), "dev-a1", held, owners) is Access.READ_WRITE
    assert console_access(Principal("alice", admin=True), "dev-a1", held, owners) is Access.READ_WRITE
    assert console_access(Principal("OLGA"), "dev-a1", held, owners) is Access.READ_ONLY
    assert console_access(Principal("olga"), "dev-a1", Holder(login="olga"), owners) is Access.READ_WRITE
    refused = console_access(Principal("bob"), "dev-a1", held, owners)
    assert refused == "you do not hold a reservation of dev-a1 and are not an owner of its pool"
    assert not isinstance(refused, Access)
    assert not isinstance(console_access(Principal("bob"), "dev-a1", Holder(), ()), Access)


async def _idle(session: ConsoleSession) -> None:
    await session.ended.wait()


async def test_one_writer_a_lagging_watcher_is_cut_alone_and_keystrokes_are_bounded() -> None:
    consoles = Consoles()
    consoles.watcher_limit = 10
    asked: list[str] = []
    consoles.requested.append(asked.append)
    session = consoles.open("dev-a1", "lab-a-01", _idle)
    assert consoles.open("dev-a1", "lab-a-01", _idle) is session  # joined, not asked again
    assert asked == ["lab-a-01"]
    writer = session.join("rita", Access.READ_WRITE)
    second = session.join("alice", Access.READ_WRITE)
    owner = session.join("olga", Access.READ_ONLY)
    assert (writer.read_only, second.read_only, owner.read_only) == (False, True, True)
    assert session.type(owner, b"x") is not None
    assert session.to_board.empty()

    session.from_board(b"12345")
    assert await writer.next() == b"12345"  # the writer reads
    session.from_board(b"678901")  # 11 bytes waiting for the others: past their limit
    assert second.cut is not None
    assert "too slow" in second.cut
    assert await second.next() is None
    assert await writer.next() == b"678901"

    for _ in range(KEYSTROKES_QUEUED):
        assert session.type(writer, b"k") is None
    assert session.type(writer, b"k") == "keystrokes dropped: typed faster than the board takes them"

    assert consoles.take("lab-a-01") == [session]
    assert consoles.take("lab-a-01") == []
    assert consoles.attach(session.id, "lab-b-01") is None  # another host's
    assert consoles.attach(session.id, "lab-a-01") is session
    assert consoles.attach(session.id, "lab-a-01") is None  # attached once
    for watcher in (writer, second, owner):
        session.leave(watcher)
    assert session.ended.is_set()
    assert session.reason == "the last watcher left"
