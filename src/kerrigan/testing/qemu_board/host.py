"""What a QEMU board needs of its host: ``qemu-system-x86_64``, a kernel to boot, a static busybox, and
whether KVM runs here."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
from pathlib import Path
from typing import Final

from kerrigan.testing.qemu_board.initramfs import BUSYBOX, busybox_problem

QEMU: Final = "qemu-system-x86_64"
KERNEL_ENV: Final = "KERRIGAN_QEMU_KERNEL"
CACHED_KERNEL: Final = Path("/var/cache/kerrigan-qemu/vmlinuz")
MEMORY_MB: Final = 128
KVM_GET_API_VERSION: Final = 0xAE00
KVM_API_VERSION: Final = 12
KVM_PROBE_S: Final = 5.0


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
    return busybox_problem(busybox)


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
