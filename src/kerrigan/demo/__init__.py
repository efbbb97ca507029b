"""``kerrigan demo``: the whole path from a push to check runs, on this machine, with nothing to set up.

It makes a SQLite database in a temporary folder, imports the example lab, starts a GitHub stand-in on
loopback holding a repository with example manifests and the scripts their tasks run, starts Kerrigan
against both, a PDU stand-in with a simulated board on an outlet for each device of the online runner hosts
(one of them told to hang at its first boot), and a runner agent for each online host with a devices file
wiring its boards (``power: command``, ``console: command``: neither needs labgrid nor pyserial). It sends a
signed push delivery, waits until the jobs that can run have run, and prints the check runs as GitHub would
show them, then which job the hung board failed and where its retry passed."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import secrets
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import aiohttp
from aiohttp import web
from cryptography.fernet import Fernet
from sqlalchemy import select

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.disk import DiskPolicy
from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.core.lifecycle import BOOT_FAILED, HOLDING_A_DEVICE, JobState
from kerrigan.core.recovery import RECOVERY_TASK
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.runner.devices_file import DevicesFile, load_devices_file
from kerrigan.store.audit import Change
from kerrigan.store.check_runs import behind_count
from kerrigan.store.database import Database, upgrade
from kerrigan.store.deliveries import pending_count
from kerrigan.store.installations import add_repositories, find_repository, upsert_installation
from kerrigan.store.inventory import apply_diff
from kerrigan.store.models import DeviceRow, JobRow
from kerrigan.store.runners import create_runner_token
from kerrigan.store.secrets import Keyring, set_secret
from kerrigan.testing.board import Mode, SimulatedBoard
from kerrigan.testing.board_wiring import wired_device, write_devices_file
from kerrigan.testing.github import GitHubStandIn, signed_headers
from kerrigan.testing.github.schema import find_description
from kerrigan.testing.job_users import spare_job_users
from kerrigan.testing.pdu import GudePdu
from kerrigan.testing.processes import free_port

REPOSITORY = "octo/firmware"
INSTALLATION = 1
SHA = "3f2a9c1e" * 5
HOSTS = ("lab-a-01", "lab-a-02", "lab-b-01")  # the lab's online hosts; lab-b-02 is offline
HUNG = "modalix-redbox"  # its board hangs at its first boot: the job it fails is retried on a peer
BOOT_S = 0.6  # a simulated board's boot, power-on to login prompt
BOOT_TIMEOUT_S = 2  # boot.timeout_s: how long the agent waits for the login prompt before boot_failed


def _data(name: str) -> str:
    return (resources.files("kerrigan.demo") / name).read_text(encoding="utf-8")


def _lab() -> Inventory:
    result = parse_inventory(_data("lab.yml"), "lab.yml")
    assert result.inventory is not None  # the shipped lab is valid; tests keep it so
    return result.inventory


def _workflows() -> dict[str, str]:
    folder = resources.files("kerrigan.demo") / "workflows"
    return {
        f".kerrigan/workflows/{entry.name}": entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".yml")
    }


def _scripts() -> dict[str, str]:
    folder = resources.files("kerrigan.demo") / "scripts"
    return {f"scripts/{entry.name}": entry.read_text(encoding="utf-8") for entry in folder.iterdir()}


async def _prepare_database(url: str, secrets_key: str) -> Database:
    database = Database.connect(url)
    await upgrade(database.engine)
    lab = _lab()
    async with database.sessions() as session, session.begin():
        await apply_diff(session, lab, diff_inventories(Inventory(), lab), Change("demo", database.clock()))
        # The repository is installed, with the secret hil-pipeline's UART suite names.
        installation = await upsert_installation(session, INSTALLATION, "octo", database.clock())
        await add_repositories(session, installation, [(7, REPOSITORY)])
        repository = await find_repository(session, REPOSITORY)
        vpn_key = "demo-vpn-" + secrets.token_hex(8)
        change = Change("octocat", database.clock())
        await set_secret(session, Keyring((secrets_key,)), repository, "LAB_VPN_KEY", vpn_key, change=change)
    return database


def _push() -> dict[str, Any]:
    return {
        "ref": "refs/heads/main",
        "before": "0" * 40,
        "after": SHA,
        "deleted": False,
        "repository": {"id": 7, "name": "firmware", "full_name": REPOSITORY, "owner": {"login": "octo"}},
        "installation": {"id": INSTALLATION},
        "sender": {"login": "octocat", "type": "User"},
        "head_commit": {"id": SHA, "message": "Bring up the UART smoke test"},
    }


def show_check_run(run: dict[str, Any], out: TextIO) -> None:
    """One check run, roughly as GitHub's checks tab shows it."""
    mark = {"success": "✓", "failure": "✗"}.get(str(run.get("conclusion")), "●")
    state = run["status"] if run["status"] != "completed" else f"completed, {run['conclusion']}"
    output = run["output"]
    out.write(f"\n{mark} {run['name']}  ({state})\n  {output['title']}\n  Details: {run['details_url']}\n\n")
    for line in str(output["summary"]).splitlines():
        out.write(f"    {line}\n")
    for annotation in output.get("annotations", []):
        out.write(
            f"  {annotation['annotation_level']}: {annotation['path']}:{annotation['start_line']}: "
            f"{annotation['message']}\n"
        )
    if run.get("actions"):
        out.write(f"  [{'] ['.join(action['label'] for action in run['actions'])}]\n")


def demo_github() -> GitHubStandIn:
    """The GitHub stand-in. Where GitHub's description of its API is beside this checkout and the test
    extras are installed (the project's own tests run so) it checks Kerrigan's requests against it;
    elsewhere it does not, and says nothing: the description and its validator are the project's tests',
    not something a newcomer should have to find or install."""
    validator = importlib.util.find_spec("jsonschema") is not None
    return GitHubStandIn(validate=validator and find_description() is not None)


async def run_demo(out: TextIO = sys.stdout, *, keep_running: bool = False) -> int:
    """Run the demo; returns the exit status."""
    with tempfile.TemporaryDirectory(prefix="kerrigan-demo-") as folder:
        url = f"sqlite+aiosqlite:///{Path(folder) / 'kerrigan.db'}"
        secrets_key = Fernet.generate_key().decode()
        database = await _prepare_database(url, secrets_key)
        await database.close()
        async with demo_github() as github:
            github.add_installation(INSTALLATION, "octo")
            github.add_repository(REPOSITORY, INSTALLATION)
            github.add_member("octo", "rita")  # may sign in (a member of octo) and read octo/firmware
            github.set_permission(REPOSITORY, "rita", "read")
            github.add_commit(REPOSITORY, SHA, _workflows() | _scripts())
            port = free_port()
            secret = secrets.token_hex(16)
            settings = Settings(
                database_url=url,
                host="127.0.0.1",
                port=port,
                public_url=f"http://127.0.0.1:{port}",
                github_api_url=github.url,
                github_app_id=github.app_id,
                github_private_key=github.private_key,
                webhook_secret=secret,
                admins=frozenset({"octocat"}),
                # Sign-in to the pages goes through the stand-in's authorize page: type a login (those
                # the lab does not let in are refused, as on GitHub).
                github_url=github.url,
                github_client_id=github.oauth_client_id,
                github_client_secret=github.oauth_client_secret,
                session_secret=secrets.token_hex(16),
                secrets_keys=(secrets_key,),
            )
            runner = web.AppRunner(create_app(settings), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            boards = contextlib.AsyncExitStack()
            agents_http = aiohttp.ClientSession()
            agents: list[asyncio.Task[None]] = []
            try:
                devices, hung = await _wire_boards(boards, Path(folder))
                server = f"http://127.0.0.1:{port}"
                agents = await _start_agents(url, server, Path(folder), devices, agents_http)
                out.write(
                    f"Kerrigan is running at http://127.0.0.1:{port}, "
                    f"with a GitHub stand-in at {github.url}.\n"
                    f"Pushing {SHA[:12]} to {REPOSITORY}@main, which holds {len(_workflows())} workflows...\n"
                )
                body = json.dumps(_push()).encode()
                async with (
                    aiohttp.ClientSession() as http,
                    http.post(
                        f"http://127.0.0.1:{port}/webhooks/github",
                        data=body,
                        headers=signed_headers(secret, "push", body),
                    ) as response,
                ):
                    out.write(f"The webhook was answered {response.status} {response.reason}.\n")
                await _settle(url)
                out.write(
                    f"Runner agents for {', '.join(HOSTS)} take the jobs their devices can run, "
                    f"driving {sum(len(file.devices) for file in devices.values())} simulated boards on a "
                    f"PDU stand-in through their devices files ({HUNG}'s board is told to hang at its "
                    "first boot)...\n"
                )
                await _jobs_done(url)
                runs = sorted(github.check_runs.values(), key=lambda run: str(run["name"]))
                out.write(f"GitHub now shows {len(runs)} check runs on {SHA[:12]}:\n")
                for run in runs:
                    show_check_run(run, out)
                await _show_boot_failures(url, hung, out)
                if keep_running:
                    base = f"http://127.0.0.1:{port}"
                    out.write(
                        f"\nOpen {base}/ and sign in: the stand-in asks for a login (octocat is a System "
                        "Admin and owns sdk-2-2-som; rita is a member of octo who reads octo/firmware; "
                        f"anyone else is refused). The API is at {base}/api/v1/. Ctrl-C stops.\n"
                    )
                    await asyncio.Event().wait()
            finally:
                for agent in agents:
                    agent.cancel()
                await asyncio.gather(*agents, return_exceptions=True)
                # After the agents: one still stopping (its loops, its jobs) may have a request under way,
                # which closing the session would cut off mid-body.
                await agents_http.close()
                await boards.aclose()
                await runner.cleanup()
    return 0


async def _wire_boards(
    boards: contextlib.AsyncExitStack, folder: Path
) -> tuple[dict[str, DevicesFile], SimulatedBoard]:
    """A PDU stand-in and, on an outlet of it each, a simulated board for every device of the online hosts;
    each host's devices file wiring its boards, read as ``kerrigan runner --devices-file`` reads it, and
    the board that hangs. The power and console are commands (``kerrigan.testing.wires``), so that neither
    labgrid nor pyserial is needed."""
    lab = [device for device in _lab().devices if device.host in HOSTS]
    pdu = GudePdu(outlets=len(lab))
    await pdu.start()
    boards.push_async_callback(pdu.close)
    wiring: dict[str, dict[str, Any]] = {host: {} for host in HOSTS}
    hung = None
    for outlet, device in enumerate(lab, start=1):
        board = SimulatedBoard(boot_s=BOOT_S)
        await board.start(serve_socket=True)
        boards.push_async_callback(board.close)
        board.attach(pdu, outlet)
        if device.id == HUNG:
            _hang_at_first_boot(board, pdu, outlet)
            hung = board
        wiring[device.host][device.id] = wired_device(pdu.url, outlet, board, boot_timeout_s=BOOT_TIMEOUT_S)
    files = {
        host: load_devices_file(write_devices_file(folder / f"devices-{host}.yml", devices))
        for host, devices in wiring.items()
    }
    assert hung is not None  # the shipped lab has it on an online host; tests keep it so
    return files, hung


def _hang_at_first_boot(board: SimulatedBoard, pdu: GudePdu, outlet: int) -> None:
    """The board hangs midway through its kernel at its first power-on and boots at every later one, so
    that a power cycle (a later job's, or a recovery's) brings it back."""
    board.mode = Mode.HANG_AT_BOOT

    def switched(on: bool) -> None:
        if on:  # the board (attached before) has read its mode for this boot: the next one boots
            board.mode = Mode.BOOTS

    pdu.on_switch(outlet, switched)


async def _show_boot_failures(url: str, hung: SimulatedBoard, out: TextIO) -> None:
    """Which job the hung board failed, where its retry ran, and the board's recovery."""
    database = Database.connect(url)
    try:
        async with database.sessions() as session:
            jobs = {job.pk: job for job in (await session.scalars(select(JobRow))).all()}
            found = (
                await session.execute(
                    select(DeviceRow.health, DeviceRow.health_reason).where(DeviceRow.id == HUNG)
                )
            ).first()
    finally:
        await database.close()
    health, reason = (found[0], found[1]) if found is not None else (None, "")
    retries = {job.retry_of: job for job in jobs.values() if job.retry_of is not None}
    out.write(f"\n{HUNG}'s board was told to hang at its first boot, midway through its kernel.\n")
    failed = [job for job in jobs.values() if job.reason == BOOT_FAILED]
    if not failed:
        out.write(f"No job ran on {HUNG}.\n")
    for job in failed:
        out.write(
            f"{job.task_id} ended {BOOT_FAILED} on {job.device_id}: no login prompt within "
            f"{BOOT_TIMEOUT_S} s (its check run shows the console's last lines)"
        )
        retry = retries.get(job.pk)
        while retry is not None and retry.state is JobState.RETRIED and retry.pk in retries:
            retry = retries[retry.pk]
        if retry is None:
            out.write(", and was not retried.\n")
        else:
            out.write(f"; retried on {retry.device_id} ({retry.host}), it {retry.state.value}.\n")
    recoveries = [job for job in jobs.values() if job.task_id == RECOVERY_TASK and job.device_id == HUNG]
    for job in sorted(recoveries, key=lambda job: job.pk):
        out.write(f"Kerrigan recovered {HUNG} before its next job: job {job.pk} power-cycled it, ")
        out.write("it booted" if job.state is JobState.SUCCEEDED else f"it {job.reason or job.state.value}")
        out.write(".\n")
    if health is not None:
        out.write(f"{HUNG}'s health: {health.value}{f' ({reason})' if reason else ''}; ")
    out.write(f"its board is {hung.state.value} now, after {hung.boots} power-on(s).\n")


async def _start_agents(
    url: str, server: str, folder: Path, devices: dict[str, DevicesFile], http: aiohttp.ClientSession
) -> list[asyncio.Task[None]]:
    """A runner agent per online host, each with its own token, work dir and devices file, in this process."""
    database = Database.connect(url)
    try:
        async with database.sessions() as session, session.begin():
            tokens = {host: await create_runner_token(session, host, database.clock()) for host in HOSTS}
    finally:
        await database.close()
    tasks = []
    for host, token in tokens.items():
        settings = AgentSettings(
            server_url=server,
            token=token,
            host_id=host,
            work_dir=folder / "runners" / host,
            disk=DiskPolicy(floor_bytes=0),  # a demo should run on a laptop's disk
            heartbeat_s=1.0,
            kill_grace_s=2.0,
            systemd_scope="never",
            job_users=spare_job_users(),  # each agent its own: they share this machine
            devices_file=devices[host],
        )
        tasks.append(asyncio.create_task(Agent(settings, http).run(), name=f"demo-runner-{host}"))

    return tasks


async def _jobs_done(url: str, timeout: float = 60.0) -> None:
    """Wait until no job holds a device, GitHub shows every session as it is, and nothing has changed for a
    moment: what can run has run."""
    database = Database.connect(url)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last, steady_since = None, loop.time()
        while loop.time() < deadline:
            async with database.sessions() as session:
                states = tuple((await session.execute(select(JobRow.pk, JobRow.state))).all())
                holding = any(state in HOLDING_A_DEVICE for _, state in states)
                behind = await behind_count(session)
            if states != last:
                last, steady_since = states, loop.time()
            if not holding and not behind and loop.time() - steady_since > 2.5:
                return
            await asyncio.sleep(0.1)
    finally:
        await database.close()


async def _settle(url: str, timeout: float = 30.0) -> None:
    database = Database.connect(url)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            async with database.sessions() as session:
                if await pending_count(session) == 0:
                    return
            await asyncio.sleep(0.05)
        raise TimeoutError("the delivery was not processed in time")
    finally:
        await database.close()
