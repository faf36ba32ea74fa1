"""Writing an output file the way a tool run as root must.

gilty runs as root beside other users' processes, often in shared directories such as /tmp. So:

- the temporary file has no name (``O_TMPFILE``) until it is whole, then is linked into place
  (``linkat`` through /proc/self/fd); where the filesystem cannot, it gets an unpredictable name made
  with ``O_EXCL|O_NOFOLLOW`` and mode 0600. Nothing another user planted is ever opened, and a
  SIGKILL mid-write leaves nothing behind.
- the directory is reached one component at a time, and a symlink among them is followed only when
  trusted (below): a link another user planted (/tmp/reports -> /etc) is refused, not followed.
- ``-o`` naming a symlink writes what it points to only when every link on the way is trusted (owned
  by gilty's user, or by the owner of the directory holding it, as the kernel's
  ``fs.protected_symlinks`` has it) and the end is a regular file (replaced in its own directory, the
  link kept), gilty's own stdout or stderr (``-o /dev/stdout``: written in place), or a terminal or
  other character device. A FIFO is written only when ``-o`` names it itself, or it is gilty's stdout.

``check`` is called before anything is recorded, ``write_file`` at the end: both classify the path the
same way, so a path that changed in between is judged again.
"""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False

from gilty._errors import EXIT_USAGE, CommandError

if TYPE_CHECKING:
    from typing import Iterable, Optional, Union

MAX_LINKS = 40  # the kernel's own limit on links followed in one lookup

# What a path resolves to, and how it is written.
REPLACE = "replace"  # a regular file (or none yet): a new file renamed over it, in its directory
IN_PLACE = "in place"  # a terminal, device or FIFO the user named: opened and written, never renamed
STREAM = "stream"  # gilty's own stdout or stderr: written to that descriptor


class Destination:
    def __init__(self, how: str, path: str, fd: Optional[int] = None) -> None:
        self.how = how
        self.path = path  # REPLACE: the file to replace (a symlink's end); IN_PLACE: the path to open
        self.fd = fd  # STREAM: 1 or 2


def _refuse(path: str, why: str) -> CommandError:
    return CommandError(f"cannot write {path}: {why}", EXIT_USAGE)


def _own_stream(st: os.stat_result) -> Optional[int]:
    """1 or 2 when ``st`` is gilty's own stdout or stderr (what the user redirected them to)."""
    for fd in (1, 2):
        try:
            own = os.fstat(fd)
        except OSError:
            continue
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
            return fd
    return None


def _link_trusted(link: str, link_st: os.stat_result) -> bool:
    """A symlink gilty's user made, or one made by the owner of the directory holding it: not one another
    user planted in a shared directory."""
    if link_st.st_uid == os.geteuid():
        return True
    try:
        return os.stat(os.path.dirname(link) or ".").st_uid == link_st.st_uid
    except OSError:
        return False


def classify(path: str) -> Destination:
    """How ``path`` is written, or a CommandError (exit 2) saying in one line why it is not."""
    if not path:
        raise _refuse("''", "an empty path")
    current = os.path.abspath(path)
    foreign_owners = set()
    followed = False
    for _ in range(MAX_LINKS):
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            if followed:
                raise _refuse(path, f"it is a symlink to {current}, which does not exist (not created through a link)") from None
            return _new_file(path, current)
        except OSError as e:
            raise _refuse(path, e.strerror or str(e)) from None
        if not stat.S_ISLNK(st.st_mode):
            break
        if current.startswith("/proc/"):
            # /proc/self/fd/N and the like: the kernel's own links to open files (/dev/stdout ends here).
            try:
                end = os.stat(current)
            except OSError as e:
                raise _refuse(path, e.strerror or str(e)) from None
            fd = _own_stream(end)
            if fd is not None:
                return Destination(STREAM, path, fd)
            if stat.S_ISCHR(end.st_mode):
                return Destination(IN_PLACE, current)
            raise _refuse(path, "it leads to a file gilty did not open as its stdout or stderr")
        if not _link_trusted(current, st):
            raise _refuse(
                path,
                f"{current} is a symlink of uid {st.st_uid} in a directory it does not own; not followed (remove it or name its target)",
            )
        if st.st_uid != os.geteuid():
            foreign_owners.add(st.st_uid)
        followed = True
        target = os.readlink(current)
        current = os.path.normpath(os.path.join(os.path.realpath(os.path.dirname(current)), target))
    else:
        raise _refuse(path, "too many levels of symbolic links")
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise _refuse(path, "it is a directory" if not followed else f"it is a symlink to the directory {current}")
    if stat.S_ISREG(mode):
        if foreign_owners and foreign_owners != {st.st_uid}:
            raise _refuse(path, f"it is a symlink to {current}, a file its link's owner does not own")
        if followed and not os.access(current, os.W_OK):
            raise _refuse(path, f"it is a symlink to {current}, which is not writable")
        _check_directory(path, os.path.dirname(current))
        return Destination(REPLACE, current)
    fd = _own_stream(st)
    if fd is not None and followed:
        return Destination(STREAM, path, fd)
    if stat.S_ISCHR(mode):
        return Destination(IN_PLACE, current)
    if stat.S_ISFIFO(mode):
        if followed:
            raise _refuse(path, f"it is a symlink to the FIFO {current}; name a FIFO itself to write to it")
        return Destination(IN_PLACE, current)
    raise _refuse(path, "it is not a regular file, a terminal or a FIFO")


def _new_file(path: str, absolute: str) -> Destination:
    _check_directory(path, os.path.dirname(absolute))
    return Destination(REPLACE, absolute)


def _check_directory(path: str, directory: str) -> None:
    fd = open_directory(path, directory)
    try:
        writable = os.access(f"/proc/self/fd/{fd}", os.W_OK | os.X_OK)
    finally:
        os.close(fd)
    if not writable:
        raise _refuse(path, f"the directory {directory} is not writable")


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def open_directory(path: str, directory: str) -> int:
    """An fd of ``directory`` (absolute), reached one component at a time: a symlink on the way is
    followed only when trusted as ``-o``'s own link is (``_link_trusted``), so a link another user
    planted in a shared directory (/tmp/reports -> /etc) cannot send the file elsewhere. The fd is what
    the file is then written through: a component swapped for a link after the check is not followed."""
    parts = [p for p in directory.split("/") if p and p != "."]
    parts.reverse()  # a stack: the next component last
    fd = os.open("/", _DIRECTORY)
    at = "/"
    links = 0
    try:
        while parts:
            name = parts.pop()
            try:
                nfd = os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                raise _refuse(path, f"no directory {os.path.join(at, name)}") from None
            except OSError as e:
                st = _lstat_at(name, fd)
                if st is None or not stat.S_ISLNK(st.st_mode):
                    raise _refuse(path, f"{os.path.join(at, name)}: {e.strerror or e}") from None
                link = os.path.join(at, name)
                if st.st_uid != os.geteuid() and os.fstat(fd).st_uid != st.st_uid:
                    raise _refuse(
                        path,
                        f"{link} is a symlink of uid {st.st_uid} in a directory it does not own; not followed (name its target)",
                    ) from None
                links += 1
                if links > MAX_LINKS:
                    raise _refuse(path, "too many levels of symbolic links") from None
                target = os.readlink(name, dir_fd=fd)
                more = [p for p in target.split("/") if p and p != "."]
                parts.extend(reversed(more))
                if target.startswith("/"):
                    os.close(fd)
                    fd, at = os.open("/", _DIRECTORY), "/"
                continue
            os.close(fd)
            fd = nfd
            # ".." of a directory reached through a link is the link target's parent, as the kernel has it.
            at = os.path.dirname(at) if name == ".." else os.path.join(at, name)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _lstat_at(name: str, dir_fd: int) -> Optional[os.stat_result]:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


def check(path: Optional[str]) -> None:
    """Before any work: refuse in one line (exit 2) an output path that could not be written safely."""
    if path is not None:
        classify(path)


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _random_name(name: str) -> str:
    return f".{name}.{os.urandom(8).hex()}.tmp"


def _open_unnamed(dir_fd: int, name: str) -> tuple:
    """(fd, None) for an O_TMPFILE file, or (fd, temporary name) where the filesystem has no O_TMPFILE."""
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if tmpfile:
        try:
            # O_TMPFILE wants the directory itself as its path: "." relative to the directory's fd.
            return os.open(".", tmpfile | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=dir_fd), None
        except OSError:
            pass  # EOPNOTSUPP, EISDIR (old kernels), EINVAL: a name of our own instead
    for _ in range(8):
        temp = _random_name(name)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.open(temp, flags, 0o600, dir_fd=dir_fd), temp
        except FileExistsError:
            continue
    raise OSError(17, "could not create a temporary file")


def _link_into_place(fd: int, dir_fd: int, name: str, temp: Optional[str]) -> None:
    if temp is None:
        try:
            # Where nothing is at ``name`` yet, the file appears there at once, whole.
            os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)
            return
        except FileExistsError:
            pass
        for _ in range(8):
            candidate = _random_name(name)
            try:
                os.link(f"/proc/self/fd/{fd}", candidate, dst_dir_fd=dir_fd, follow_symlinks=True)
            except FileExistsError:
                continue
            temp = candidate
            break
        else:
            raise OSError(17, "could not name a temporary file")
    try:
        # rename() replaces whatever is at ``name`` (file or symlink) without following it.
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _write_all(fd: int, pieces: Iterable) -> None:
    with os.fdopen(os.dup(fd), "wb", closefd=True) as f:
        for piece in pieces:
            f.write(piece if isinstance(piece, bytes) else piece.encode("utf-8"))


def write_file(path: str, pieces: Iterable[Union[str, bytes]]) -> None:
    """Write ``pieces`` to ``path`` as ``classify`` says; an OSError is one line (exit 1)."""
    dest = classify(path)
    try:
        if dest.how == STREAM:
            sys.stdout.flush()
            _write_all(dest.fd, pieces)
        elif dest.how == IN_PLACE:
            _write_in_place(path, dest.path, pieces)
        else:
            _replace(dest.path, pieces)
    except OSError as e:
        raise CommandError(f"cannot write {path}: {e.strerror or e}") from None


def _write_in_place(path: str, target: str, pieces: Iterable) -> None:
    # O_NOFOLLOW: the path classify() resolved is itself the device or FIFO, not a link swapped in since.
    fd = os.open(target, os.O_WRONLY | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
            raise _refuse(path, "it changed while gilty ran")
        _write_all(fd, pieces)
    finally:
        os.close(fd)


def _replace(target: str, pieces: Iterable) -> None:
    directory, name = os.path.split(os.path.abspath(target))
    dir_fd = open_directory(target, directory)
    try:
        fd, temp = _open_unnamed(dir_fd, name)
        try:
            _write_all(fd, pieces)
            os.fchmod(fd, 0o666 & ~_umask())
            _link_into_place(fd, dir_fd, name, temp)
            temp = None
        finally:
            os.close(fd)
            if temp is not None:
                try:
                    os.unlink(temp, dir_fd=dir_fd)
                except OSError:
                    pass
    finally:
        os.close(dir_fd)


class WritePhase:
    """While a report is rendered and written to a file: Ctrl-C (or SIGTERM) does not abandon it, it is
    finished first and said so. On a terminal, a line on stderr shows a write that lasts over half a
    second (as cli/progress.py shows a recording). Nested phases are one; outside the main thread (no
    signal handlers there) only the line is shown."""

    SIGNALS = ("SIGINT", "SIGTERM")
    SHOW_AFTER_S = 0.5
    _active = None  # the outermost phase under way

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self.interrupted = False
        self._previous: dict = {}
        self._timer = None
        self._outer = False

    def _say(self, text: str) -> None:
        try:
            sys.stderr.write(f"gilty: {text}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def _handle(self, signum, _frame) -> None:
        if not self.interrupted:
            self._say(f"finishing {self.path} before stopping (kill -9 leaves no partial file)")
        self.interrupted = True

    def __enter__(self) -> "WritePhase":
        if self.path is None or WritePhase._active is not None:
            return self
        import signal
        import threading

        WritePhase._active = self
        self._outer = True
        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                sig = getattr(signal, name)
                self._previous[sig] = signal.signal(sig, self._handle)
        try:
            on_terminal = sys.stderr.isatty()
        except (AttributeError, ValueError):
            on_terminal = False
        if on_terminal:
            self._timer = threading.Timer(self.SHOW_AFTER_S, self._say, (f"writing {self.path}...",))
            self._timer.daemon = True
            self._timer.start()
        return self

    @classmethod
    def written(cls) -> None:
        """The file is in place: no "writing" line after the "wrote" one."""
        phase = cls._active
        if phase is not None and phase._timer is not None:
            phase._timer.cancel()

    def __exit__(self, *exc) -> None:
        if not self._outer:
            return
        import signal

        if self._timer is not None:
            self._timer.cancel()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        WritePhase._active = None
