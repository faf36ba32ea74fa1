"""What an idle thread is blocked in, in words: a lock wait is not a sleep is not an I/O wait."""

from __future__ import annotations

LOCK_WAIT = "lock wait"
SLEEP = "sleep"
IO_WAIT = "I/O wait"
# select() with no descriptors is how Python 3.10's time.sleep() waits; by name alone the two
# cannot be told apart.
SELECT_WAIT = "I/O wait or sleep"
CHILD_WAIT = "child wait"
OTHER = "other"

# An idle futex is a threading.Lock/Condition/Queue wait: CPython's GIL waits are classified
# waiting_gil by the native side before this, so what is left in futex is user-level locking.
_KIND_BY_SYSCALL = {
    "futex": LOCK_WAIT,
    "futex_waitv": LOCK_WAIT,
    "clock_nanosleep": SLEEP,
    "nanosleep": SLEEP,
    "pause": SLEEP,
    "rt_sigsuspend": SLEEP,
    "rt_sigtimedwait": SLEEP,
    "epoll_wait": IO_WAIT,
    "epoll_pwait": IO_WAIT,
    "epoll_pwait2": IO_WAIT,
    "poll": IO_WAIT,
    "ppoll": IO_WAIT,
    "select": SELECT_WAIT,
    "pselect6": SELECT_WAIT,
    "read": IO_WAIT,
    "readv": IO_WAIT,
    "pread64": IO_WAIT,
    "recvfrom": IO_WAIT,
    "recvmsg": IO_WAIT,
    "recvmmsg": IO_WAIT,
    "write": IO_WAIT,
    "writev": IO_WAIT,
    "sendto": IO_WAIT,
    "sendmsg": IO_WAIT,
    "accept": IO_WAIT,
    "accept4": IO_WAIT,
    "connect": IO_WAIT,
    "io_getevents": IO_WAIT,
    "io_uring_enter": IO_WAIT,
    "wait4": CHILD_WAIT,
    "waitid": CHILD_WAIT,
}


def idle_kind(syscall_name: str) -> str:
    """Group a syscall name into lock wait / sleep / I/O wait / I/O wait or sleep / child wait / other."""
    return _KIND_BY_SYSCALL.get(syscall_name, OTHER)


def idle_label(syscall_name: str) -> str:
    """How to show one idle syscall to a person: 'lock wait (futex)', 'sleep (clock_nanosleep)'."""
    kind = idle_kind(syscall_name)
    if kind == OTHER:
        return syscall_name
    return f"{kind} ({syscall_name})"
