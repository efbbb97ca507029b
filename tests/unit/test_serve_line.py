"""What ``kerrigan serve`` says once it listens: where, on which database (never its password), and how many
worker processes handle deliveries."""

from __future__ import annotations

import pytest

from kerrigan.cli.serve import serving_line
from kerrigan.config import Settings


def test_the_line_names_the_address_the_database_and_the_workers() -> None:
    settings = Settings(host="0.0.0.0", port=8080, database_url="sqlite+aiosqlite:///./kerrigan.db")
    assert serving_line(settings, 2) == (
        "kerrigan serve: listening on http://0.0.0.0:8080; database sqlite+aiosqlite:///./kerrigan.db; "
        "2 worker processes"
    )


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://kerrigan:s3cr3t-pw@db.lab:5432/kerrigan",
        "postgresql+asyncpg://kerrigan@db.lab/kerrigan?password=s3cr3t-pw",
        "postgresql+asyncpg://kerrigan:s3cr3t%2Dpw@db.lab/kerrigan",
    ],
)
def test_the_database_s_password_is_never_in_the_line(url: str) -> None:
    line = serving_line(Settings(database_url=url), 1)
    assert "s3cr3t" not in line
    assert "database postgresql+asyncpg://kerrigan:***@db.lab" in line or "password=***" in line
    assert line.endswith("; 1 worker process")


@pytest.mark.parametrize(
    ("workers", "process_deliveries", "said"),
    [
        (0, True, "no worker process: this one handles deliveries"),
        (0, False, "no worker process: KERRIGAN_WORKERS=none leaves deliveries to workers run apart"),
    ],
)
def test_without_workers_the_line_says_who_handles_deliveries(
    workers: int, process_deliveries: bool, said: str
) -> None:
    line = serving_line(Settings(process_deliveries=process_deliveries), workers)
    assert line.endswith(f"; {said}")


def test_an_ipv6_address_is_bracketed() -> None:
    assert "listening on http://[::1]:8080;" in serving_line(Settings(host="::1", port=8080), 1)
