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

from kerrigan.testing.qemu_board.board import Outlet, QemuBoard
from kerrigan.testing.qemu_board.host import (
    CACHED_KERNEL,
    KERNEL_ENV,
    QEMU,
    find_kernel,
    kvm_boots,
    kvm_opens,
    qemu_board_problem,
)
from kerrigan.testing.qemu_board.initramfs import BANNER, BUSYBOX, HOSTNAME, LOGIN, PROMPT, build_initramfs

__all__ = [
    "BANNER",
    "BUSYBOX",
    "CACHED_KERNEL",
    "HOSTNAME",
    "KERNEL_ENV",
    "LOGIN",
    "PROMPT",
    "QEMU",
    "Outlet",
    "QemuBoard",
    "build_initramfs",
    "find_kernel",
    "kvm_boots",
    "kvm_opens",
    "qemu_board_problem",
]
