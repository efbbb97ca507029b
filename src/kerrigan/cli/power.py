"""``kerrigan power DEVICE cycle|on|off|status``: switch or read the power of a board you hold (its
reservation is yours; System Admins any board), through the lab's server to the board's runner host
(``POST /api/v1/devices/{id}/power``; docs/reservations.md).

It prints the board's power state after the action (``on``, ``off``, ``unknown``) and exits 0; a refusal
(no reservation of the board, a job holds it, its host offline, the switch failed, no answer in time) prints
the server's message and exits 1; usage and connection errors exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Final
from urllib.parse import quote

from kerrigan.cli.api_client import ApiRefusedError, api_call, api_options
from kerrigan.core.device_power import ANSWER_WITHIN_S, PowerAction

EXIT_REFUSED: Final = 1
# The server answers within ANSWER_WITHIN_S (a 504 then); the client waits a little longer for that answer.
CLIENT_WAIT_S: Final = ANSWER_WITHIN_S + 15


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``kerrigan power``."""
    power = commands.add_parser(
        "power",
        help="switch or read the power of a board you hold on a running lab (KERRIGAN_URL, KERRIGAN_TOKEN)",
        description="Switch or read the power of a board whose reservation you hold (System Admins: any "
        "board no job holds), through its runner host's agent; print its state after. Exit status: 0 done, "
        "1 refused or failed (the reason is printed), 2 usage or connection error.",
    )
    power.add_argument("device", metavar="DEVICE", help="the device's id")
    power.add_argument("action", choices=[action.value for action in PowerAction], help="what to do")
    power.add_argument("--json", action="store_true", help="print the API's answer")
    api_options(power)
    power.set_defaults(handler=_power)


def _power(args: argparse.Namespace) -> int:
    path = f"/devices/{quote(args.device, safe='')}/power"
    try:
        body = asyncio.run(
            api_call(args, "POST", path, body={"action": args.action}, timeout_s=CLIENT_WAIT_S)
        )
    except ApiRefusedError as exc:
        print(f"kerrigan power: {exc.message} (HTTP {exc.status})", file=sys.stderr)
        return EXIT_REFUSED
    if args.json:
        print(json.dumps(body, indent=2))
    else:
        print(f"{body.get('device')}: {body.get('state')}")
    return 0
