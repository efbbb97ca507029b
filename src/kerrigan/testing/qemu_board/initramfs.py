"""The QEMU board's initramfs: a static busybox, its init and a getty, packed as a newc cpio archive."""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

BUSYBOX: Final = Path("/bin/busybox")
HOSTNAME: Final = "kerrigan-qemu"
BANNER: Final = "Welcome to Kerrigan's QEMU board"
LOGIN: Final = f"{HOSTNAME} login: "
PROMPT: Final = f"root@{HOSTNAME}# "


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
    problem = busybox_problem(busybox)
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


def busybox_problem(busybox: Path) -> str | None:
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
