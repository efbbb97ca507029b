"""Measure a session's stored diagnostics and its page, for a task no device of a 10,000-device lab matches.

The task's ``kerrigan explain`` document (every rejected device with every reason) is built against a
synthetic lab (:func:`kerrigan.testing.labs.synthetic_lab`: 100 pools of 100 devices; ``--quick``: 10 of
100), stored as Kerrigan stores a resolved session (:func:`kerrigan.store.sessions.resolve_session`, in a
real SQLite file), and its page ``/sessions/{id}`` is fetched over HTTP on loopback from the aiohttp app
(public read on), unfiltered and filtered (``?q=``). Printed: the document's JSON size, plain and as stored
(:mod:`kerrigan.core.diagnostics_store`), the time to compact and expand it, and the page's median render
time and HTML size.

Targets (issue 12): stored at most 64 KB (about 1.5 MB plain); the page at most 300 ms and 1.5 MB of HTML.

    python benchmarks/bench_diagnostics.py
    python benchmarks/bench_diagnostics.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer
from sqlalchemy import select

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.diagnostics_store import compact, expand
from kerrigan.core.explain import resolution_json
from kerrigan.core.lifecycle import RetryPolicy, resolution_outcome
from kerrigan.core.matching import resolve
from kerrigan.core.resolution import Resolution
from kerrigan.github.checks import CheckRunBody
from kerrigan.store.database import Database, create_engine, upgrade
from kerrigan.store.models import SessionRow
from kerrigan.store.sessions import create_session, resolve_session
from kerrigan.testing import builders
from kerrigan.testing.labs import synthetic_lab

STORED_TARGET_BYTES = 64 * 1024
PAGE_TARGET_MS = 300
PAGE_TARGET_BYTES = 1_500_000
SESSION = "d1a90000-0000-4000-8000-00000000be9c"


def unschedulable_document(pools: int, per_pool: int) -> dict[str, Any]:
    """The resolution of a task whose label key and tag are misspelt: every device rejected, never."""
    lab = synthetic_lab(pools, per_pool)
    unmatchable = builders.requirements({"form-factor": "som", "sdk": "2.2.0"}, tags=["uart-debgu"])
    task = {"id": "smoke", "line": 3, **resolution_json(resolve(unmatchable, lab, repository="octo/fw"))}
    document: dict[str, Any] = {"workflow": "hil", "file": ".kerrigan/hil.yml", "errors": [], "warnings": []}
    document["tasks"] = [task]
    parsed: dict[str, Any] = json.loads(json.dumps(document))
    return parsed


def median_ms(work: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``work`` in milliseconds, after one untimed call."""
    work()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def median_page(fetch: Callable[[], Awaitable[bytes]], repeat: int) -> tuple[float, int]:
    """The median time to fetch a page, in milliseconds, and its size in bytes."""
    body = await fetch()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        body = await fetch()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), len(body)


async def store(database: Database, document: dict[str, Any]) -> int:
    """Store the session as a resolved, unschedulable one; the size of what the row holds."""
    at = database.clock()
    body = CheckRunBody(
        {"status": "completed", "conclusion": "failure", "output": {"title": "", "summary": ""}}
    )
    async with database.sessions() as db, db.begin():
        # The lab's own (no repository): a reader without a GitHub App to ask may read it.
        await create_session(db, builders.session(SESSION, repository=""), at)
        await resolve_session(
            db,
            SESSION,
            at,
            outcome=resolution_outcome(valid=True, unschedulable=True),
            resolution=Resolution.from_document(document),
            retry=RetryPolicy(infrastructure=2),
            check_run=body.as_json(),
            unschedulable=["smoke"],
        )
    async with database.sessions() as db:
        stored = await db.scalar(select(SessionRow.resolution).where(SessionRow.id == SESSION))
    return len(json.dumps(stored, separators=(",", ":")))


async def pages(url: str, repeat: int, needle: str) -> dict[str, tuple[float, int]]:
    """Fetch the session page, whole and filtered, from a Kerrigan serving ``url``."""
    app = create_app(Settings(database_url=url, public_read=True))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as http:

            def getter(path: str) -> Callable[[], Awaitable[bytes]]:
                async def fetch() -> bytes:
                    async with http.get(server.make_url(path)) as response:
                        assert response.status == 200, f"{path}: {response.status}"
                        return await response.read()

                return fetch

            return {
                "page": await median_page(getter(f"/sessions/{SESSION}"), repeat),
                f"page ?q={needle}": await median_page(getter(f"/sessions/{SESSION}?q={needle}"), repeat),
            }
    finally:
        await server.close()


async def run(pools: int, per_pool: int, repeat: int) -> bool:
    document = unschedulable_document(pools, per_pool)
    devices = len(document["tasks"][0]["rejected_devices"])
    plain = len(json.dumps(document, separators=(",", ":")))
    compacted = compact(document)
    compact_ms = median_ms(lambda: compact(document), repeat)
    expand_ms = median_ms(lambda: expand(compacted), repeat)
    assert expand(compacted) == document, "the round trip is not exact"
    read_ms = median_ms(lambda: Resolution.from_document(document), repeat)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{Path(folder) / 'bench.db'}"
        engine = create_engine(url)
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()
        database = Database.connect(url)
        try:
            stored = await store(database, document)
        finally:
            await database.close()
        needle = document["tasks"][0]["rejected_devices"][-1]["device"]
        rendered = await pages(url, repeat, needle)
    print(f"unschedulable task against {devices:,} devices ({pools} pools of {per_pool})")
    print(f"  diagnostics, plain JSON        {plain / 1024:10.1f} KB")
    stored_ok = stored <= STORED_TARGET_BYTES
    verdict = "ok" if stored_ok else "OVER"
    print(f"  diagnostics, as stored         {stored / 1024:10.1f} KB   target <= 64 KB  {verdict}")
    print(f"  compact / expand               {compact_ms:7.1f} ms / {expand_ms:.1f} ms (median)")
    print(f"  read typed (from_document)     {read_ms:7.1f} ms (median)")
    ok = stored_ok
    for name, (ms, size) in rendered.items():
        fits = ms <= PAGE_TARGET_MS and size <= PAGE_TARGET_BYTES
        ok = ok and fits
        print(
            f"  {name:<30} {ms:7.1f} ms  {size / 1024:8.1f} KB   target <= 300 ms, <= 1.5 MB  "
            f"{'ok' if fits else 'OVER'}"
        )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="1,000 devices, few repeats (for CI)")
    args = parser.parse_args()
    pools, repeat = (10, 3) if args.quick else (100, 15)
    ok = asyncio.run(run(pools, 100, repeat))
    if not ok and not args.quick:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
