"""Commands a devices file can wire a simulated board with, on a host without labgrid or pyserial.

``power: {command: ...}`` and ``console: {command: ...}`` take argv lists; these are such commands, run as
``python -m kerrigan.testing.wires``:

- ``outlet URL INDEX on|off|status`` switches (or asks about) outlet ``INDEX`` of the PDU stand-in at ``URL``
  (``kerrigan.testing.pdu.GudePdu``'s ``url``) with the two GETs Gude's interface answers; ``status`` exits 0
  when the outlet is on, 1 when it is off. An error status or no answer exits 2.
- ``console HOST:PORT`` is a board's console on stdin and stdout: it connects to a simulated board's
  ``socket_url`` (``SimulatedBoard.start(serve_socket=True)``), copies what the board prints to stdout and
  what comes on stdin to the board, and ends when either side closes.

The standard library alone, and little of it (not urllib.request), so that a power call starts quickly: the
agent runs one per switch.
"""

from __future__ import annotations

import http.client
import os
import re
import selectors
import socket
import sys
from urllib.parse import urlsplit

TIMEOUT_S = 10.0
USAGE = "usage: python -m kerrigan.testing.wires outlet URL INDEX on|off|status | console HOST:PORT"


def outlet(url: str, index: int, action: str) -> int:
    """Switch outlet ``index`` on or off, or ask whether it is on; the exit status."""
    if action == "status":
        path = "/"
    elif action in ("on", "off"):
        path = f"/switch.html?cmd=1&p={index}&s={1 if action == 'on' else 0}"
    else:
        sys.stderr.write(USAGE + "\n")
        return 2
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=TIMEOUT_S)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        page = response.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as err:
        sys.stderr.write(f"PDU at {url}: {err}" + "\n")
        return 2
    finally:
        connection.close()
    if response.status != 200:
        sys.stderr.write(f"PDU at {url}: answered {response.status} {response.reason}" + "\n")
        return 2
    found = re.search(rf"Power Port {index}</td><td>(ON|OFF)<", page)
    if found is None:
        sys.stderr.write(f"PDU at {url}: no outlet {index} on its status page" + "\n")
        return 2
    sys.stdout.write(found[1].lower() + "\n")
    return 0 if action != "status" or found[1] == "ON" else 1


def console(address: str) -> int:
    """Bridge stdin and stdout to the board's console socket until either side closes."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as board:
        board.settimeout(None)
        selector = selectors.DefaultSelector()
        selector.register(board, selectors.EVENT_READ)
        selector.register(sys.stdin.fileno(), selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj is board:
                    data = board.recv(65536)
                    if not data:
                        return 0
                    os.write(sys.stdout.fileno(), data)
                else:
                    data = os.read(sys.stdin.fileno(), 65536)
                    if not data:
                        return 0
                    board.sendall(data)


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "outlet" and argv[2].isdigit():
        return outlet(argv[1], int(argv[2]), argv[3])
    if len(argv) == 2 and argv[0] == "console" and argv[1].rpartition(":")[2].isdigit():
        try:
            return console(argv[1])
        except OSError as err:
            sys.stderr.write(f"console {argv[1]}: {err}" + "\n")
            return 2
    sys.stderr.write(USAGE + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
