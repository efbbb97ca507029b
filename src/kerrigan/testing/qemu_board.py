"""A real board for the tests: Debian's ``qemu-system-x86_64`` booting Debian's kernel and a busybox
initramfs built here, to a login prompt on its serial console, powered by an outlet of the PDU stand-in.

What :class:`SimulatedBoard` (``kerrigan.testing.board``) scripts, this board does: a kernel prints its own
log, busybox's init mounts the filesystems and prints :data:`BANNER`, its getty prints
``kerrigan-qemu login: ``, ``root`` logs in without a password and a real busybox shell answers (``uname``,
``cat /proc/version``, ``reboot``, ``poweroff``...).

Power: outlet on starts a ``qemu-system-x86_64`` process, off kills it (``SIGKILL``, as a plug pulled), so
labgrid's Gude backend against :class:`~kerrigan.testing.pdu.GudePdu` power-cycles it. A guest ``reboot``
resets the machine inside the same process; ``poweroff`` ends the process while the outlet stays on.

Console: ``socket_url`` (``socket://127.0.0.1:PORT``) is served by this object, not by QEMU, as ser2net
serves a board's UART: it is there whether the board is on or off, so a reader that opens it before power-on
(as the runner's board control does) keeps it across power cycles and hears the boot from its first line.
QEMU's serial port is its stdin and stdout (``-chardev stdio``); what it prints goes to every connection,
what a connection sends is typed in while the board runs and dropped while it is off.

What it needs (:func:`qemu_board_problem` names the piece missing): ``qemu-system-x86_64``, a kernel
(:func:`find_kernel`: ``$KERRIGAN_QEMU_KERNEL``, else :data:`CACHED_KERNEL`, where ``.ci/install-qemu-board``
puts Debian's, else the host's ``/boot/vmlinuz-*``) and a static busybox (``busybox-static``) for
:func:`build_initramfs`. KVM is used when a KVM machine runs (:func:`kvm_boots`), else TCG (slower,
still seconds).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import fcntl
import os
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Protocol

QEMU: Final = "qemu-system-x86_64"
KERNEL_ENV: Final = "KERRIGAN_QEMU_KERNEL"
CACHED_KERNEL: Final = Path("/var/cache/kerrigan-qemu/vmlinuz")
BUSYBOX: Final = Path("/bin/busybox")
HOSTNAME: Final = "kerrigan-qemu"
BANNER: Final = "Welcome to Kerrigan's QEMU board"
LOGIN: Final = f"{HOSTNAME} login: "
PROMPT: Final = f"root@{HOSTNAME}# "
MEMORY_MB: Final = 128
TRANSCRIPT_LINES: Final = 2000
SOCKET_BACKLOG: Final = 1 << 16  # a connection this far behind loses what the board prints, as a slow UART
KVM_GET_API_VERSION: Final = 0xAE00
KVM_API_VERSION: Final = 12
KVM_PROBE_S: Final = 5.0

# -- the initramfs ----------------------------------------------------------------------------------------

INIT: Final = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
hostname {HOSTNAME}
# From here the kernel prints only emergencies (a panic): a late line would land amid the shell's answers.
dmesg -n 1
echo
echo "{BANNER}"
echo
exec /bin/init
"""
# busybox init: getty on the serial port, respawned after each logout; poweroff and reboot as a board's.
INITTAB: Final = """\
ttyS0::respawn:/bin/getty -L 115200 ttyS0 vt100
::ctrlaltdel:/bin/reboot
::shutdown:/bin/umount -a -r
"""
# No password: root logs in at once, as on a lab's image.
PASSWD: Final = "root::0:0:root:/root:/bin/sh\n"  # noqa: S105 -- an empty one, on purpose
GROUP: Final = "root:x:0:\n"
PROFILE: Final = f"export PATH=/bin HOME=/root PS1='{PROMPT}'\ncd /root\n"


class _Kind(enum.IntEnum):
    NONE = 0  # the trailer
    DIRECTORY = 0o040000
    FILE = 0o100000
    SYMLINK = 0o120000
    CHARACTER = 0o020000


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    kind: _Kind
    permissions: int
    data: bytes = b""
    device: tuple[int, int] = (0, 0)  # a character device's major and minor


def build_initramfs(target: Path, busybox: Path = BUSYBOX) -> Path:
    """Write the board's initramfs to ``target``: a cpio archive (newc, uncompressed, which the kernel
    unpacks as it is) holding ``busybox`` and the files around it. Returns ``target``."""
    problem = _busybox_problem(busybox)
    if problem is not None:
        raise FileNotFoundError(problem)
    directory, file, link = _Kind.DIRECTORY, _Kind.FILE, _Kind.SYMLINK
    entries = [
        *(_Entry(name, directory, 0o755) for name in ("bin", "dev", "etc", "proc", "root", "sys", "tmp")),
        # The kernel opens /dev/console for init before anything mounts devtmpfs over /dev.
        _Entry("dev/console", _Kind.CHARACTER, 0o600, device=(5, 1)),
        _Entry("bin/busybox", file, 0o755, busybox.read_bytes()),
        _Entry("bin/sh", link, 0o777, b"busybox"),
        _Entry("init", file, 0o755, INIT.encode()),
        _Entry("etc/inittab", file, 0o644, INITTAB.encode()),
        _Entry("etc/passwd", file, 0o644, PASSWD.encode()),
        _Entry("etc/group", file, 0o644, GROUP.encode()),
        _Entry("etc/profile", file, 0o644, PROFILE.encode()),
        _Entry("etc/hostname", file, 0o644, f"{HOSTNAME}\n".encode()),
    ]
    part = target.with_name(target.name + ".part")
    with part.open("wb") as out:
        for inode, entry in enumerate(entries, start=1):
            _write_cpio(out, inode, entry)
        _write_cpio(out, 0, _Entry("TRAILER!!!", _Kind.NONE, 0))
    part.replace(target)
    return target


def _write_cpio(out: _Writer, inode: int, entry: _Entry) -> None:
    name = entry.name.encode() + b"\0"
    fields = (
        inode,
        entry.kind | entry.permissions,
        0,  # uid
        0,  # gid
        2 if entry.kind is _Kind.DIRECTORY else 1,
        0,  # mtime: the archive is the same from one build to the next
        len(entry.data),
        0,  # the device it came from, major and minor
        0,
        *entry.device,
        len(name),
        0,  # check: newc (070701) has none
    )
    header = b"070701" + b"".join(b"%08X" % value for value in fields)
    out.write(header + name + _padding(len(header) + len(name)))
    out.write(entry.data + _padding(len(entry.data)))


def _padding(length: int) -> bytes:
    return b"\0" * (-length % 4)


class _Writer(Protocol):
    def write(self, data: bytes, /) -> int: ...


def _busybox_problem(busybox: Path) -> str | None:
    """Why ``busybox`` cannot be the initramfs's only binary: missing, or linked against libraries the
    initramfs does not have (Debian's ``busybox`` rather than ``busybox-static``)."""
    try:
        with busybox.open("rb") as binary:
            head = binary.read(64)
            if head[:5] != b"\x7fELF\x02":
                return f"{busybox} is not a 64-bit ELF binary"
            offset, size, count = (
                struct.unpack_from("<Q", head, 0x20)[0],
                *struct.unpack_from("<HH", head, 0x36),
            )
            binary.seek(offset)
            headers = binary.read(size * count)
    except FileNotFoundError:
        return f"no {busybox} (apt-get install busybox-static)"
    for index in range(count):
        if struct.unpack_from("<I", headers, index * size)[0] == 3:  # PT_INTERP: it needs ld.so
            return f"{busybox} is dynamically linked (apt-get install busybox-static)"
    return None


# -- what the board needs ---------------------------------------------------------------------------------


def find_kernel() -> Path | None:
    """The kernel to boot: ``$KERRIGAN_QEMU_KERNEL`` when set (whether or not it is there), else
    :data:`CACHED_KERNEL`, else the newest readable ``/boot/vmlinuz-*``."""
    if given := os.environ.get(KERNEL_ENV):
        return Path(given) if os.access(given, os.R_OK) else None
    if os.access(CACHED_KERNEL, os.R_OK):
        return CACHED_KERNEL
    installed = sorted(path for path in Path("/boot").glob("vmlinuz-*") if os.access(path, os.R_OK))
    return installed[-1] if installed else None


def qemu_board_problem(busybox: Path = BUSYBOX) -> str | None:
    """What is missing for a :class:`QemuBoard` on this host, in words for a skipped test; None when
    nothing is."""
    if shutil.which(QEMU) is None:
        return f"no {QEMU} on PATH (apt-get install qemu-system-x86, or run .ci/install-qemu-board)"
    if find_kernel() is None:
        where = os.environ.get(KERNEL_ENV) or f"{CACHED_KERNEL} or /boot/vmlinuz-*"
        return f"no kernel to boot at {where} (run .ci/install-qemu-board)"
    return _busybox_problem(busybox)


def kvm_opens() -> bool:
    """Whether ``/dev/kvm`` opens and answers KVM's API version (not merely exists)."""
    try:
        device = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return bool(fcntl.ioctl(device, KVM_GET_API_VERSION) == KVM_API_VERSION)
    except OSError:
        return False
    finally:
        os.close(device)


async def kvm_boots(kernel: Path) -> bool:
    """Whether a KVM machine runs ``kernel`` through: with no root to mount it must panic (and, with
    ``-no-reboot``, end) within :data:`KVM_PROBE_S`. ``/dev/kvm`` may open and answer, and the kernel's
    decompressor even print, yet the kernel never run: so it is on a cloud VM whose nested KVM stops at
    "Physical KASLR disabled". Asked once a process."""
    if kernel in _kvm_boots:
        return _kvm_boots[kernel]
    boots = False
    if kvm_opens():
        process = await asyncio.create_subprocess_exec(
            *(QEMU, "-nodefaults", "-no-user-config", "-accel", "kvm", "-m", str(MEMORY_MB), "-no-reboot"),
            *("-display", "none", "-monitor", "none", "-serial", "stdio", "-kernel", str(kernel)),
            *("-append", "console=ttyS0 panic=-1"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert process.stdout is not None
        with contextlib.suppress(TimeoutError):
            said = await asyncio.wait_for(process.stdout.read(), KVM_PROBE_S)
            boots = b"Kernel panic - not syncing" in said
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
    _kvm_boots[kernel] = boots
    return boots


_kvm_boots: dict[Path, bool] = {}


# -- the board --------------------------------------------------------------------------------------------


class Outlet(Protocol):
    """What ``attach`` needs of a PDU: ``kerrigan.testing.pdu.GudePdu`` is one."""

    def on_switch(self, index: int, listener: Callable[[bool], None]) -> None: ...

    def is_on(self, index: int) -> bool: ...


class QemuBoard:
    """A QEMU machine booting ``kernel`` with ``initramfs`` (:func:`build_initramfs`) whose serial console
    is ``socket_url``: ``start`` it on a running loop (which picks KVM when it boots, else TCG), then power
    it (``power`` or an outlet, ``attach``)."""

    def __init__(
        self, kernel: Path, initramfs: Path, *, accelerator: str | None = None, memory_mb: int = MEMORY_MB
    ) -> None:
        self.kernel = kernel
        self.initramfs = initramfs
        self.accelerator = accelerator or ""  # "kvm" or "tcg"; chosen at ``start`` when not given
        self.memory_mb = memory_mb
        self.powered = False  # the supply, as last switched; the machine may have powered itself off
        self.starts = 0  # how many times a machine was started (power-ons; a guest reboot is not one)
        self.exits: list[int] = []  # each machine's exit status: -9 when the power went, 0 after poweroff
        self.transcript: collections.deque[str] = collections.deque(maxlen=TRANSCRIPT_LINES)
        self.socket_url = ""
        self.qemu_errors = ""  # what the last machine wrote to stderr (or why it did not start)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._switching: asyncio.Task[None] | None = None
        self._output: asyncio.Task[None] | None = None
        self._line = bytearray()
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.StreamWriter] = set()
        self._client_tasks: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> bool:
        """Whether a machine process is alive."""
        return self._process is not None and self._process.returncode is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self.running and self._process is not None else None

    def command(self) -> list[str]:
        """The ``qemu-system-x86_64`` command line of one power-on."""
        return [
            QEMU,
            "-nodefaults",
            "-no-user-config",
            "-accel",
            self.accelerator,
            "-m",
            str(self.memory_mb),
            "-smp",
            "1",
            "-display",
            "none",
            "-monitor",
            "none",
            "-chardev",
            "stdio,id=console,signal=off",
            "-serial",
            "chardev:console",
            "-kernel",
            str(self.kernel),
            "-initrd",
            str(self.initramfs),
            "-append",
            "console=ttyS0,115200 rdinit=/init panic=0",
        ]

    # -- life ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve the console on a free port of ``127.0.0.1``; the board is off."""
        self._loop = asyncio.get_running_loop()
        if not self.accelerator:
            self.accelerator = "kvm" if await kvm_boots(self.kernel) else "tcg"
        self._server = await asyncio.start_server(self._serve_client, "127.0.0.1", 0)
        self.socket_url = f"socket://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        """Power off (the machine is killed) and stop serving the console."""
        self.power(False)
        await self.settled()
        if self._server is not None:
            self._server.close()
            for writer in list(self._clients):
                writer.close()
            for task in list(self._client_tasks):
                task.cancel()
            await asyncio.gather(*self._client_tasks, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> QemuBoard:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    # -- power -----------------------------------------------------------------------------------

    def power(self, on: bool) -> None:
        """Switch the board's supply: on starts a machine (unless one runs), off kills it. Switches are
        applied in order; :meth:`settled` waits until they have been."""
        if self._loop is None:
            raise RuntimeError("start the board before powering it")
        self.powered = on
        self._switching = self._loop.create_task(self._switch(on, self._switching))

    def attach(self, pdu: Outlet, index: int) -> None:
        """Power the board from outlet ``index`` of ``pdu``: on when it is on, off when it goes off."""
        pdu.on_switch(index, self.power)
        if pdu.is_on(index):
            self.power(True)

    async def settled(self) -> None:
        """Wait until every switch so far is applied: a machine started, or killed and reaped."""
        if self._switching is not None:
            await asyncio.shield(self._switching)

    async def _switch(self, on: bool, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            with contextlib.suppress(Exception):
                await previous
        if on and not self.running:
            await self._launch()
        elif not on and self._process is not None:
            await self._kill(self._process)

    async def _launch(self) -> None:
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as err:  # no qemu: a board that does not come on, as one with a blown fuse
            self.qemu_errors = f"{QEMU} could not be started: {err}"
            return
        self._process = process
        self.starts += 1
        self._output = asyncio.create_task(self._relay(process))

    async def _kill(self, process: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        if self._output is not None:
            await self._output  # what it printed before it died reaches the readers
            self._output = None

    async def _relay(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        assert process.stderr is not None
        errors = asyncio.create_task(process.stderr.read())
        while data := await process.stdout.read(1 << 16):
            self._print(data)
        self.exits.append(await process.wait())
        self.qemu_errors = (await errors).decode(errors="replace")

    # -- the console -----------------------------------------------------------------------------

    def _print(self, data: bytes) -> None:
        self._line.extend(data)
        while (end := self._line.find(b"\n")) >= 0:
            self.transcript.append(self._line[:end].rstrip(b"\r").decode(errors="replace"))
            del self._line[: end + 1]
        for writer in list(self._clients):
            if writer.transport.get_write_buffer_size() < SOCKET_BACKLOG:
                writer.write(data)

    async def _serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(writer)
        self._client_tasks.add(task)
        try:
            while data := await reader.read(4096):
                self._type(data)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._clients.discard(writer)
            self._client_tasks.discard(task)
            writer.close()

    def _type(self, data: bytes) -> None:
        process = self._process
        if process is None or process.returncode is not None or process.stdin is None:
            return  # off: nobody reads the UART
        with contextlib.suppress(ConnectionError, OSError):
            process.stdin.write(data)
