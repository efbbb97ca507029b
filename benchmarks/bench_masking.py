"""Time masking a job's output (:mod:`kerrigan.core.masking`): 50 secrets and a private key, 64 KiB chunks.

Synthetic log text as a HIL job prints it (timestamps, levels, serial-console lines, hex dumps, paths), 64 MiB
(``--quick``: 8 MiB), the per-job output cap, cut into 64 KiB chunks as the agent reads them. The job holds
50 secrets of 16 to 64 bytes (token characters) and an OpenSSH-style private key; a few secrets are printed
through the log, some across a chunk boundary, the key once whole and once line by line with ``\\r\\n``.
Measured, in the same run:

- the masker: every chunk through :meth:`OutputMasker.feed`, then :meth:`~OutputMasker.flush`;
- the baseline of doing nothing: each chunk copied;
- a naive per-chunk ``re.sub`` of the same patterns (longest first), over the first eighth of the text
  (it is slow): it also misses every secret cut by a chunk boundary, and the run counts those there;
- the masker on output where a 4-byte piece of a secret is on every line (a secret holding the date of the
  timestamps), so its filter lets every line through to a comparison: the slow case.

The masker's output must hold no secret. Target (issue 15): at least 50 MB/s with 50 secrets.

    python benchmarks/bench_masking.py
    python benchmarks/bench_masking.py --quick
"""

from __future__ import annotations

import argparse
import os
import random
import re
import string
import time
from collections.abc import Callable

from kerrigan.core.masking import Masker, OutputMasker, patterns_of

TARGET_MB_S = 50.0
CHUNK = 64 * 1024
MIB = 1024 * 1024
TOKEN_CHARACTERS = string.ascii_letters + string.digits + "_-"
WORDS = (
    "boot",
    "kernel",
    "flash",
    "image",
    "uart0",
    "console",
    "serial",
    "baud",
    "115200",
    "device",
    "firmware",
    "test",
    "passed",
    "failed",
    "retry",
    "timeout",
    "reset",
    "power",
    "relay",
    "modalix",
    "davinci",
    "bootloader",
    "u-boot",
    "dtb",
    "rootfs",
    "mount",
    "eth0",
    "link",
    "up",
    "down",
    "dhcp",
    "lease",
    "assert",
    "expected",
    "got",
    "ok",
    "[",
    "OK",
    "]",
    "Started",
    "Reached",
    "target",
    "/dev/ttyUSB0",
    "/sys/class/gpio",
    "i2c",
    "spi",
)
LEVELS = ("INFO", "DEBUG", "WARNING", "ERROR", "TRACE")


def secret_values(count: int, rng: random.Random) -> dict[str, str]:
    """``count`` secrets of 16 to 64 token characters, and a private key of 25 lines."""
    secrets = {
        f"SECRET_{index:02d}": "".join(rng.choices(TOKEN_CHARACTERS, k=rng.randint(16, 64)))
        for index in range(count)
    }
    body = "".join(rng.choices(string.ascii_letters + string.digits + "+/", k=70 * 25))
    lines = [body[at : at + 70] for at in range(0, len(body), 70)]
    secrets["DEPLOY_KEY"] = "\n".join(
        ["-----BEGIN OPENSSH PRIVATE KEY-----", *lines, "-----END OPENSSH PRIVATE KEY-----", ""]
    )
    return secrets


def log_line(number: int, rng: random.Random) -> str:
    """One line of a HIL job's log."""
    stamp = f"2026-05-01T12:{number // 60_000 % 60:02d}:{number // 1000 % 60:02d}.{number % 1000:03d}Z"
    kind = rng.random()
    if kind < 0.1:
        words = " ".join(f"{rng.getrandbits(32):08x}" for _ in range(8))
        return f"{stamp} DEBUG dump 0x{rng.getrandbits(32):08x}: {words}"
    if kind < 0.2:
        return f"[{number / 1000:12.6f}] {' '.join(rng.choices(WORDS, k=rng.randint(3, 10)))}"
    return f"{stamp} {rng.choice(LEVELS)} {' '.join(rng.choices(WORDS, k=rng.randint(3, 14)))}"


def log_text(size: int, secrets: dict[str, str], rng: random.Random) -> tuple[bytes, int]:
    """About ``size`` bytes of log with a few secrets in it; and how many were printed."""
    values = [value for name, value in secrets.items() if name != "DEPLOY_KEY"]
    key = secrets["DEPLOY_KEY"]
    lines, length, printed, number = [], 0, 0, 0
    while length < size:
        if rng.random() < 0.0005:
            line = f"export TOKEN={rng.choice(values)} # from the environment"
            printed += 1
        else:
            line = log_line(number, rng)
        lines.append(line)
        length += len(line) + 1
        number += 1
    lines.insert(len(lines) // 3, key)
    lines.insert(2 * len(lines) // 3, key.replace("\n", "\r\n"))
    text = "\n".join(lines).encode()
    # and some across a chunk boundary, where a per-chunk search cannot see them
    for boundary in range(CHUNK, len(text) - CHUNK, len(text) // 32 // CHUNK * CHUNK or CHUNK):
        value = rng.choice(values).encode()
        at = boundary - rng.randint(1, len(value) - 1)
        text = text[:at] + value + text[at + len(value) :]
        printed += 1
    return text, printed + 2


def chunks_of(text: bytes) -> list[bytes]:
    return [text[at : at + CHUNK] for at in range(0, len(text), CHUNK)]


def masked(masker: Masker, chunks: list[bytes]) -> bytes:
    stream = OutputMasker(masker)
    return b"".join([*map(stream.feed, chunks), stream.flush()])


def timed(work: Callable[[], bytes], rounds: int) -> tuple[float, float, bytes]:
    """The best wall and CPU seconds of ``rounds`` calls of ``work``, and what it returned."""
    best_wall = best_cpu = float("inf")
    result = b""
    for _ in range(rounds):
        started, cpu_started = time.perf_counter(), time.thread_time()
        result = work()
        best_wall = min(best_wall, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.thread_time() - cpu_started)
    return best_wall, best_cpu, result


def mb_s(size: int, seconds: float) -> float:
    return size / seconds / 1e6


def main() -> None:
    """Run the benchmark and print the figures and whether the target is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 MiB of output instead of 64 MiB")
    args = parser.parse_args()
    size, rounds = (8 * MIB, 2) if args.quick else (64 * MIB, 3)
    rng = random.Random(15)
    secrets = secret_values(50, rng)
    masker = Masker.for_secrets(secrets)
    text, printed = log_text(size, secrets, rng)
    chunks = chunks_of(text)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other work slows the figures)")
    print(
        f"{len(secrets) - 1} secrets of 16-64 bytes and a {len(secrets['DEPLOY_KEY'])}-byte key: "
        f"{len(masker.patterns)} patterns (values, key lines, base64 at 3 alignments), longest "
        f"{masker.longest} bytes; {len(text) / MIB:.0f} MiB of log in {len(chunks)} chunks of 64 KiB, "
        f"{printed} secrets printed in it"
    )

    copy_s, _, _ = timed(lambda: b"".join([bytes(bytearray(chunk)) for chunk in chunks]), rounds)
    print(f"baseline, chunks copied: {mb_s(len(text), copy_s):,.0f} MB/s")

    search = re.compile(b"|".join(map(re.escape, sorted(masker.patterns, key=len, reverse=True))))
    naive_chunks = chunks[: max(len(chunks) // 8, 1)]
    naive_size = sum(map(len, naive_chunks))
    naive_s, _, naive_out = timed(lambda: b"".join(search.sub(b"***", chunk) for chunk in naive_chunks), 1)
    naive_rate = mb_s(naive_size, naive_s)
    missed = sum(value.encode() in naive_out for value in secrets.values())
    print(
        f"baseline, naive re.sub per chunk: {naive_rate:.1f} MB/s (over the first {naive_size / MIB:.0f} "
        f"MiB), and it left {missed} secrets in clear there (cut by a chunk boundary)"
    )

    masker_s, masker_cpu_s, out = timed(lambda: masked(masker, chunks), rounds)
    rate = mb_s(len(text), masker_s)
    print(
        f"masker: {rate:.0f} MB/s (CPU {mb_s(len(text), masker_cpu_s):.0f} MB/s), "
        f"{out.count(b'***')} masks; {rate / naive_rate:.0f}x the naive re.sub"
    )
    leaked = [name for name, value in secrets.items() if any(p in out for p in patterns_of(value))]
    print(f"secrets left in the masker's output: {len(leaked)} {' '.join(leaked)}")

    # The slow case: every timestamp holds pieces of one secret.
    crowded = Masker.for_secrets({**secrets, "SECRET_YEAR": "x2026-05-01Tsecret"})
    crowded_s, _, _ = timed(lambda: masked(crowded, chunks[: len(naive_chunks)]), 1)
    print(
        f"masker, a piece of a secret on every line (the filter lets each through): "
        f"{mb_s(naive_size, crowded_s):.1f} MB/s (over {naive_size / MIB:.0f} MiB)"
    )
    met = rate >= TARGET_MB_S and not leaked
    print(
        f"{'met' if met else 'missed'}: masker >= {TARGET_MB_S:.0f} MB/s with 50 secrets, none left in clear"
    )


if __name__ == "__main__":
    main()
