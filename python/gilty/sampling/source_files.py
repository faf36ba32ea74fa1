"""Lines of a target's source files, read as the target itself could read them.

A code object's file name is the target's to choose (``compile(src, "/etc/shadow", "exec")``) and
gilty usually runs as root, so a name is never opened in gilty's own file system. It is resolved
inside the target's root (``/proc/PID/root``: its chroot or container; no symbolic link or ``..``
climbs out), a relative one beneath the target's working directory, and opened by a short-lived
thread holding the target's file-system user, group and groups (``/proc/PID/status``): a file the
target's user could not read is not read. Only a regular file is read (opened non-blocking and
checked after the open, so a FIFO, a socket or a device never blocks or streams), of at most
MAX_FILE_BYTES, each line cut at MAX_LINE_CHARS. Otherwise the lines are left out and the reason is
kept for the report ("source not shown: not a regular file").
"""

from __future__ import annotations

import ctypes
import errno
import io
import os
import stat
import threading
import tokenize

MAX_FILE_BYTES = 4 << 20
MAX_LINE_CHARS = 4096
# A regular file on a stuck network mount may still block a read: the report goes on without it.
READ_TIMEOUT_S = 2.0

# Linux syscall numbers: openat2 has one number on every architecture; setgroups is called directly
# because glibc's wrapper changes the groups of every thread of gilty, not only the reading one.
_SYS_OPENAT2 = 437
_SYS_SETGROUPS = {"x86_64": 116, "aarch64": 159, "riscv64": 159, "loongarch64": 159}
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_RESOLVE_IN_ROOT = 0x10

_REASONS = {
    errno.ENOENT: "no such file in the target's root",
    errno.ENOTDIR: "no such file in the target's root",
    errno.EACCES: "the target's user cannot read it",
    errno.EPERM: "the target's user cannot read it",
    errno.ENXIO: "not a regular file",
    errno.EXDEV: "outside the target's root",
    errno.ELOOP: "a symbolic link loop or a /proc link",
    errno.EAGAIN: "not a regular file",
    errno.ENOSYS: "this kernel cannot open a file inside another process's root (openat2: Linux 5.6)",
}


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


def _reason(err: int) -> str:
    return _REASONS.get(err, f"cannot read it ({os.strerror(err)})")


def target_credentials(pid: int) -> tuple:
    """(fsuid, fsgid, [groups]) of ``pid``: what the kernel checks when the target opens a file."""
    fields = {}
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            key, _, value = line.decode("latin-1").partition(":")
            fields[key] = value.split()
    return int(fields["Uid"][3]), int(fields["Gid"][3]), [int(g) for g in fields.get("Groups", [])]


class _NoCredentials(Exception):
    """This thread could not take the target's user and groups: nothing is read."""


def _become(uid: int, gid: int, groups: list) -> None:
    """This thread only (the thread ends after one read, its credentials with it)."""
    if os.geteuid() != 0 and os.geteuid() == uid:
        return  # an unprivileged gilty attached to its own user's process reads as itself
    c = _c()
    nr = _SYS_SETGROUPS.get(os.uname().machine)
    if nr is None:
        raise _NoCredentials(f"not supported on {os.uname().machine}")
    array = (ctypes.c_uint * max(len(groups), 1))(*groups)
    if c.syscall(ctypes.c_long(nr), ctypes.c_size_t(len(groups)), array) != 0:
        raise _NoCredentials(os.strerror(ctypes.get_errno()))
    # setfsuid/setfsgid return the previous id whatever happens: a second call tells whether it took.
    c.setfsgid(gid)
    c.setfsuid(uid)
    if c.setfsgid(gid) != gid or c.setfsuid(uid) != uid:
        raise _NoCredentials("setfsuid refused")


def _open_and_read(dirfd: int, name: bytes, resolve: int) -> bytes:
    how = _OpenHow(os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0, resolve)
    fd = _c().syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dirfd),
        ctypes.c_char_p(name),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        raise OSError(ctypes.get_errno(), "openat2")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.ENXIO, "not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise OSError(errno.EFBIG, "too large")
        chunks, size = [], 0
        while True:  # st_size may be 0 or stale (/proc, a growing file): the bound holds on what is read
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                raise OSError(errno.EFBIG, "too large")
            chunks.append(chunk)
    finally:
        os.close(fd)


def _split(data: bytes) -> list:
    """Lines as the tokenizer numbers them (its coding cookie honoured, universal newlines)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    try:
        text = data.decode(encoding, errors="replace")
    except LookupError:
        text = data.decode("utf-8", errors="replace")
    return [line[:MAX_LINE_CHARS] for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]


class SourceFiles:
    """The source files of one live target, each read at most once."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._files: dict = {}  # file name -> (lines or None, reason)
        self._creds = None

    def lines(self, filename: str, first: int, last: int) -> tuple:
        """({line number: text} for first..last, "") or ({}, why the file is not shown; "" for a
        name that is no file, such as ``<string>``)."""
        if filename not in self._files:
            self._files[filename] = self._read(filename)
        lines, reason = self._files[filename]
        if lines is None:
            return {}, reason
        return {n: lines[n - 1] for n in range(max(first, 1), min(last, len(lines)) + 1)}, ""

    def _read(self, filename: str) -> tuple:
        if not filename or filename.startswith("<"):
            return None, ""
        if "\0" in filename:
            return None, "not a file name"
        absolute = filename.startswith("/")
        # The target's root and working directory are opened as gilty (the target's user may not
        # see its own /proc links as the reading thread will); only the file is opened as the target.
        try:
            if self._creds is None:
                self._creds = target_credentials(self.pid)
            dirfd = os.open(f"/proc/{self.pid}/{'root' if absolute else 'cwd'}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, ProcessLookupError):
            return None, "the target exited before its source was read"
        except OSError as e:
            return None, f"gilty cannot open the target's root ({os.strerror(e.errno or errno.EIO)})"
        except (LookupError, ValueError):
            return None, "the target's credentials cannot be read"
        result: list = [None, "reading it took too long"]

        def read() -> None:
            try:
                _become(*self._creds)
                data = _open_and_read(
                    dirfd,
                    os.fsencode(filename.lstrip("/") or "."),
                    _RESOLVE_NO_MAGICLINKS | (_RESOLVE_IN_ROOT if absolute else _RESOLVE_BENEATH),
                )
                result[:] = [_split(data), ""]
            except OSError as e:
                if e.errno == errno.EFBIG:
                    result[:] = [None, f"larger than {MAX_FILE_BYTES >> 20} MB"]
                elif e.errno in (errno.ENOENT, errno.ENOTDIR, errno.EXDEV) and not absolute:
                    result[:] = [None, "no such file beneath the target's working directory"]
                else:
                    result[:] = [None, _reason(e.errno or errno.EIO)]
            except _NoCredentials as e:
                result[:] = [None, f"gilty cannot read as the target's user ({e})"]
            except Exception as e:  # noqa: BLE001 - a report line, never a failed report
                result[:] = [None, f"cannot read it ({type(e).__name__})"]

        thread = threading.Thread(target=read, name="gilty-source-read", daemon=True)
        thread.start()
        thread.join(READ_TIMEOUT_S)
        if not thread.is_alive():
            os.close(dirfd)  # else the stuck thread still needs it
        return tuple(result)
