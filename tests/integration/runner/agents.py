"""Real runner agents against the harness's server, in the test's event loop: the ``agents`` fixture's
factory (tests/integration/conftest.py), starting an agent per runner host of the lab, waiting for a check
run, the commits the agents run, and the job rows and output the tests look at."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select

from kerrigan.runner.agent import Agent
from kerrigan.store.jobs import output
from kerrigan.store.models import JobRow
from kerrigan.store.runners import create_runner_token
from tests.integration.github.conftest import Harness, manifest_files

SMOKE = (
    "#!/bin/sh\n"
    'echo "smoke on $KERRIGAN_DEVICE_ID ($KERRIGAN_DEVICE_BOARD)"\n'
    'echo "token ${GITHUB_TOKEN:+set}"\n'
)
BOOT = '#!/bin/sh\necho "boot $GITHUB_REPOSITORY@$GITHUB_SHA cpus $KERRIGAN_CPUS"\nexit 0\n'

AgentFactory = Callable[..., Agent]


async def tokens(harness: Harness, *hosts: str) -> dict[str, str]:
    found = {}
    async with harness.database.sessions() as session, session.begin():
        for host in hosts:
            found[host] = await create_runner_token(session, host, harness.database.clock())
    return found


async def job_rows(harness: Harness) -> list[JobRow]:
    async with harness.database.sessions() as session:
        return list((await session.scalars(select(JobRow).order_by(JobRow.pk))).all())


async def job_output(harness: Harness, job_pk: int) -> str:
    async with harness.database.sessions() as session:
        return "".join(data for _, data in await output(session, job_pk))


async def start_both(harness: Harness, agents: AgentFactory, **overrides: Any) -> list[Agent]:
    """An agent for each of the lab's runner hosts lab-a-01 and lab-a-02."""
    hosts = await tokens(harness, "lab-a-01", "lab-a-02")
    return [agents(host, token, **overrides) for host, token in hosts.items()]


async def completed(harness: Harness, run: dict[str, Any], timeout: float = 30) -> None:
    """Wait until the check run is completed."""

    async def done() -> bool:
        return bool(harness.github.check_runs[run["id"]]["status"] == "completed")

    await harness.wait_until(done, timeout=timeout)


def markers(tmp_path: Path, name: str) -> list[Path]:
    """The files named ``name`` jobs wrote in their workspaces (the one place outside their private /tmp
    a job user may write and the test may read)."""
    return sorted(tmp_path.glob(f"*/workspaces/*/{name}"))


def smoke_commit(smoke: str = SMOKE, boot: str = BOOT) -> dict[str, str]:
    return manifest_files("hil-smoke.yml") | {"scripts/smoke.sh": smoke, "scripts/boot.sh": boot}


def big_claim_commit(vcpus: int) -> dict[str, str]:
    manifest = (
        "name: big\n"
        "on: {push: {branches: [main]}}\n"
        "scheduling:\n"
        "  labels: {sdk: '2.2.0', form_factor: som}\n"
        "  queue_wait_limit_s: 600\n"
        "tasks:\n"
        "  - id: build\n"
        "    run: ./scripts/smoke.sh\n"
        f"    vcpus: {vcpus}\n"
        "    requirements: {tags: [uart-debug]}\n"
    )
    return {".kerrigan/workflows/big.yml": manifest, "scripts/smoke.sh": SMOKE}


# The results workflow: a job that fails, leaving JUnit results (a failure on its line, a skip), a broken
# file and a link out of its workspace.
RESULTS = """\
name: results
on: {push: {branches: [main]}}
scheduling:
  labels: {form_factor: som, sdk: "2.2.0"}
tasks:
  - id: hil
    run: ./scripts/hil.sh
    vcpus: 1
    results: ["results/*.xml", "missing/*.xml"]
"""
HIL = """\
#!/bin/sh
mkdir -p results
cat > results/uart.xml <<XML
<?xml version="1.0"?>
<testsuite name="uart">
  <testcase classname="tests.test_uart" name="test_baud" time="0.5"/>
  <testcase classname="tests.test_uart" name="test_echo" time="1.25">
    <failure message="assert 'x' == 'y'">$PWD/tests/test_uart.py:42: AssertionError</failure>
  </testcase>
  <testcase classname="tests.test_uart" name="test_dma"><skipped message="no DMA here"/></testcase>
</testsuite>
XML
printf '<testsuite><testcase name="cut"' > results/broken.xml
ln -s /etc/passwd results/passwd.xml
exit 1
"""
