"""The server's memory while it takes hostile JUnit files: ``kerrigan serve`` as its own process, a runner
host's calls made over loopback as an agent makes them.

A push starts a session of one job; this script takes the job as runner host ``rig-01`` (register, poll,
accept, start), sends 20 results files of 16 MiB each, the most a job may send, each crafted to cost the
parser what it can (the shapes of ``bench_junit.py --crafted``), then ends the job. The server's resident
memory (``VmRSS``) and its peak (``VmHWM``) are read from ``/proc`` after it starts, after each file, once
the check run that shows the results has been sent, and after the session page (which lists the tests) was
read. The GitHub stand-in runs as a process of its own.

    python benchmarks/bench_results_memory.py
    python benchmarks/bench_results_memory.py --quick   # 5 files
    python benchmarks/bench_results_memory.py --shape fat_tests   # 20 files of one shape

The Helm chart gives the server's pod 512 MiB; the target (issue 25) is a server that stays under 300 MiB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import aiohttp

from bench_junit import CRAFTED  # beside this script: python puts its folder on the path
from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.core.job_files import RESULTS_MAX_BYTES, RESULTS_MAX_FILES
from kerrigan.runner.server import RUNNER_CAPABILITIES, ServerClient
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, upgrade
from kerrigan.store.inventory import apply_diff
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import find_sessions
from kerrigan.testing.github import push_payload, signed_headers
from kerrigan.testing.processes import serve_with_github

SECRET = "bench-secret"  # noqa: S105 -- the stand-in's webhook secret
REPO = "octo/firmware"
SHA = "a" * 40
TARGET_MIB = 300
INVENTORY = """
hosts:
  - id: rig-01
pools:
  - id: bench
    name: Bench rig
    owners: [octocat]
    devices:
      - {id: board-a, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
"""
MANIFEST = """
name: results
on: {push: {branches: [main]}}
tasks:
  - id: hostile
    run: "true"
    vcpus: 1
    results: "results/*.xml"
"""


def memory_of(port: int) -> tuple[int, int]:
    """``(VmRSS, VmHWM)`` in KiB of the ``kerrigan serve`` on ``port`` (found by its environment)."""
    for folder in Path("/proc").iterdir():
        if not folder.name.isdigit():
            continue
        try:
            environ = (folder / "environ").read_bytes().split(b"\0")
            command = (folder / "cmdline").read_bytes()
            status = (folder / "status").read_text()
        except OSError:
            continue
        if b"serve" in command and f"KERRIGAN_PORT={port}".encode() in environ:
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
    raise LookupError(f"no kerrigan serve on port {port}")


async def session_done(database: Database, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with database.sessions() as db:
            found = await find_sessions(db, REPO, head_sha=SHA)
        if found and found[0].conclusion is not None:
            return found[0].id
        await asyncio.sleep(0.2)
    raise TimeoutError("the session did not end")


async def run(files: int, shapes: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="kerrigan-bench-") as folder_name:
        folder = Path(folder_name)
        url = f"sqlite+aiosqlite:///{folder / 'kerrigan.db'}"
        database = Database.connect(url)
        await upgrade(database.engine)
        inventory = parse_inventory(INVENTORY, "inventory.yml").inventory
        assert inventory is not None
        async with database.sessions() as session, session.begin():
            change = Change("bench", database.clock())
            await apply_diff(session, inventory, diff_inventories(Inventory(), inventory), change)
            token = await create_runner_token(session, "rig-01", database.clock())
        repository = folder / "repository"
        (repository / ".kerrigan" / "workflows").mkdir(parents=True)
        (repository / ".kerrigan" / "workflows" / "results.yml").write_text(MANIFEST, encoding="utf-8")
        try:
            async with serve_with_github(
                folder,
                database_url=url,
                repository=REPO,
                workflows=None,
                files=repository,
                webhook_secret=SECRET,
                environment={"KERRIGAN_PUBLIC_READ": "1"},  # the session page, without signing in
                github_arguments=["--public"],  # of a public repository: anyone may read its sessions
            ) as served:
                port = int(served.base.rsplit(":", 1)[1])
                await take_the_job(served.base, token, port, database, files, shapes)
        finally:
            await database.close()


async def take_the_job(  # noqa: PLR0917 -- the lab and what to send
    base: str, token: str, port: int, database: Database, files: int, shapes: list[str]
) -> None:
    started = memory_of(port)
    print(f"server started: RSS {started[0] >> 10} MiB (peak {started[1] >> 10} MiB)")
    async with aiohttp.ClientSession() as http:
        body = json.dumps(push_payload(REPO, SHA)).encode()
        async with http.post(
            f"{base}/webhooks/github", data=body, headers=signed_headers(SECRET, "push", body)
        ) as answer:
            assert answer.status == 202, answer.status
        server = ServerClient(http, base, token)
        await server.call(
            "POST",
            "/register",
            {
                "protocol": [1],
                "capabilities": sorted(RUNNER_CAPABILITIES),
                "resources": {"vcpus": 4, "max_weight": 4, "max_queue_depth": 4},
                "devices": {"board-a": "present"},
            },
        )
        offers: list[dict[str, object]] = []
        deadline = time.monotonic() + 60
        while not offers and time.monotonic() < deadline:
            await server.heartbeat({"resources": {"vcpus": 4}, "devices": {"board-a": "present"}})
            offers = list((await server.poll(2)).get("offers") or [])
        assert offers, "no offer came"
        job_id = str(offers[0]["id"])
        await server.job(job_id, "accept")
        await server.job(job_id, "start")
        for index in range(files):
            name = shapes[index % len(shapes)]
            data = CRAFTED[name](RESULTS_MAX_BYTES)
            began = time.monotonic()
            answer = await server.results(job_id, f"results/{index:02d}-{name}.xml", data, len(data), "/w")
            took = time.monotonic() - began
            del data
            rss, peak = memory_of(port)
            problems = "; ".join(str(problem)[:70] for problem in answer.get("problems") or [])
            print(
                f"file {index + 1:2d} {name:<15} {took:5.1f} s  RSS {rss >> 10:5d} MiB  "
                f"peak {peak >> 10:5d} MiB  tests {answer.get('tests')!s:>7}  {problems}"
            )
        await server.job(job_id, "finish", {"exit_status": 0})
        session_id = await session_done(database, 120)
        await asyncio.sleep(3)  # the reconciler renders the check run from every stored file
        rss, peak = memory_of(port)
        print(f"after the check run: RSS {rss >> 10} MiB, peak {peak >> 10} MiB")
        async with http.get(f"{base}/sessions/{session_id}") as page:
            size = len(await page.read())
            assert page.status == 200, page.status
        rss, peak = memory_of(port)
        print(f"after the session page ({size >> 10:,} KiB): RSS {rss >> 10} MiB, peak {peak >> 10} MiB")
        print(f"{'met' if peak >> 10 < TARGET_MIB else 'missed'}: peak under {TARGET_MIB} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 files instead of 20")
    parser.add_argument(
        "--shape", choices=sorted(CRAFTED), help="every file of this shape (default: each in turn)"
    )
    args = parser.parse_args()
    asyncio.run(run(5 if args.quick else RESULTS_MAX_FILES, [args.shape] if args.shape else list(CRAFTED)))


if __name__ == "__main__":
    main()
