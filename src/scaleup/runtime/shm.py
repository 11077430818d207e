"""Shared-memory segments on ``/dev/shm``: names, trust checks, lifetime, reclaiming dead runs.

Segments are plain files in a tmpfs (``/dev/shm``, or ``$SCALEUP_SHM_DIR``) mapped with
``mmap(MAP_SHARED)``: every rank maps every peer's segment, so the mappings form one pooled
address space. We deliberately do not use ``multiprocessing.shared_memory``: under ``fork`` all
ranks share one ``resource_tracker`` and Python 3.11 has no ``track=False``, so attach/unregister
races log ``KeyError`` tracebacks and a killed run leaks segments. Instead names are predictable
and owned by the launcher::

    scaleup-<launcher pid>-<8 random hex>-ctrl          the control block
    scaleup-<launcher pid>-<8 random hex>-r<rank>-a<k>  allocation k of rank <rank>

/dev/shm is shared by every user (mode 1777), so a name is never trusted: a segment is created
``O_CREAT | O_EXCL | O_NOFOLLOW`` with mode 0600, and attached ``O_NOFOLLOW`` and then checked
with ``fstat`` (a regular file, owned by this user, private, large enough). A file squatting a
name fails that run with one :class:`~scaleup.errors.TransportError` line.

Lifetime. Whoever creates a segment unlinks it when freed or closed; the launcher unlinks every
name under its run prefix after reaping the workers (the control block last). Every process of a
run holds a shared ``flock`` on the control block while it maps it, so a run is dead when its
launcher pid is gone and that lock can be taken exclusively (or the control block is gone);
:func:`reclaim_dead_runs` (called at the start of every launch, and by ``scaleup run --cleanup``)
unlinks the segments of dead runs, this user's files only. A foreign file never stops the
cleanup of the rest.

The control block's layout and the waits on it are in :mod:`scaleup.runtime.control`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import re
import secrets
import stat
from pathlib import Path

from scaleup.errors import TransportError
from scaleup.runtime.control import ControlBlock, Waiter
from scaleup.units import format_bytes_approx

# ControlBlock and Waiter are re-exported: runtime.execute imports them from here.
__all__ = [
    "PREFIX",
    "ControlBlock",
    "Segment",
    "Waiter",
    "check_free_space",
    "list_segments",
    "new_run_prefix",
    "open_control",
    "reclaim_dead_runs",
    "shm_dir",
    "unlink_run",
]

PREFIX = "scaleup-"
_RUN_RE = re.compile(rf"^({re.escape(PREFIX)}(\d+)-[0-9a-f]{{8}}-)")


def shm_dir() -> Path:
    """Directory holding the segments: ``$SCALEUP_SHM_DIR`` or ``/dev/shm``."""
    return Path(os.environ.get("SCALEUP_SHM_DIR", "/dev/shm"))


def new_run_prefix(pid: int | None = None) -> str:
    """A unique name prefix for one launch: ``scaleup-<pid>-<random>-``."""
    return f"{PREFIX}{os.getpid() if pid is None else pid}-{secrets.token_hex(4)}-"


def list_segments(prefix: str = PREFIX) -> list[str]:
    """Names of the segments in :func:`shm_dir` that start with ``prefix``."""
    directory = shm_dir()
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(prefix))


def _owned(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid()


def unlink_run(prefix: str) -> list[str]:
    """Unlink this user's segments named ``prefix...`` (the control block last); their names.

    Files of other users are left alone, and an error on one name does not stop the others.
    """
    match = _RUN_RE.match(prefix)
    if match is None or match.end() != len(prefix):
        raise TransportError(f"refusing to unlink with prefix {prefix!r}")
    names = sorted(list_segments(prefix), key=lambda name: name == prefix + "ctrl")
    removed = []
    for name in names:
        path = shm_dir() / name
        try:
            if _owned(os.lstat(path)):
                os.unlink(path)
                removed.append(name)
        except OSError:
            continue
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purpose (its parent just has not reaped it yet)
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return True
    return fields[0] != "Z"


def _run_alive(prefix: str, pid: int) -> bool:
    """False only when the run's launcher is gone and no process maps its control block."""
    if _pid_alive(pid):
        return True
    try:
        fd = os.open(shm_dir() / (prefix + "ctrl"), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell (a symlink, no permission): leave it
    try:
        if not _owned(os.fstat(fd)):
            return True
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: a process of the run still holds it
        return True
    finally:
        os.close(fd)
    return False


def reclaim_dead_runs() -> list[str]:
    """Unlink this user's segments of runs whose processes are all gone; the names removed."""
    runs: dict[str, int] = {}
    for name in list_segments(PREFIX):
        match = _RUN_RE.match(name)
        if match:
            runs[match.group(1)] = int(match.group(2))
    removed: list[str] = []
    for prefix, pid in sorted(runs.items()):
        if not _run_alive(prefix, pid):
            removed += unlink_run(prefix)
    return removed


def check_free_space(nbytes: int, what: str) -> None:
    """Raise :class:`TransportError` when :func:`shm_dir` has less than ``nbytes`` free.

    tmpfs commits pages on first touch, so a segment larger than the free space maps fine and
    kills its rank with SIGBUS later; this turns that into an error before anything is created.
    """
    try:
        st = os.statvfs(shm_dir())
    except OSError as error:
        raise TransportError(f"cannot read free space of {shm_dir()}: {error}") from error
    free_bytes = st.f_bavail * st.f_frsize
    if nbytes > free_bytes:
        raise TransportError(
            f"{what} needs {format_bytes_approx(nbytes)} in {shm_dir()}, "
            f"which has {format_bytes_approx(free_bytes)} free"
        )


def _squatter(path: Path) -> str:
    """What occupies ``path``, in words."""
    try:
        st = os.lstat(path)
    except OSError:
        return "it vanished"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link is there"
    if not _owned(st):
        return f"a file of uid {st.st_uid} is there"
    return "a file of this user is there (a leftover?)"


class Segment:
    """One mapped shared-memory file: create it (owner) or attach to it (peer)."""

    def __init__(self, name: str, nbytes: int, *, create: bool) -> None:
        self.name = name
        self.nbytes = int(nbytes)
        self.path = shm_dir() / name
        self.owner = create
        size = max(self.nbytes, 8)
        flags = os.O_RDWR | os.O_NOFOLLOW
        try:
            fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL if create else flags, 0o600)
        except FileExistsError:
            raise TransportError(
                f"cannot create segment {name}: {_squatter(self.path)}", source=str(self.path)
            ) from None
        except OSError as error:
            why = _squatter(self.path) if error.errno == errno.ELOOP else error.strerror
            raise TransportError(
                f"cannot {'create' if create else 'attach'} segment {name}: {why}",
                source=str(self.path),
            ) from error
        try:
            if create:
                os.fchmod(fd, 0o600)
                os.ftruncate(fd, size)  # sparse: pages are committed on first touch
            else:
                self._check(os.fstat(fd), size)
            self.mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def _check(self, st: os.stat_result, size: int) -> None:
        why = None
        if not stat.S_ISREG(st.st_mode):
            why = "not a regular file"
        elif not _owned(st):
            why = f"owned by uid {st.st_uid}, not by this user"
        elif st.st_mode & 0o077:
            why = f"mode {st.st_mode & 0o777:o} lets other users in"
        elif st.st_size < size:
            why = f"{st.st_size} bytes, expected {size}"
        if why:
            raise TransportError(f"refusing segment {self.name}: {why}", source=str(self.path))

    def hold(self) -> None:
        """Take a shared lock for as long as this process maps it: the run is alive."""
        fcntl.flock(self.fd, fcntl.LOCK_SH)

    def unlink(self) -> None:
        """Remove the name (the mapping stays valid until every process unmaps it)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def close(self) -> None:
        """Unmap and close; numpy views still alive keep the mapping (then it is left to exit)."""
        with contextlib.suppress(BufferError):
            self.mm.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


def open_control(prefix: str, world_size: int, *, create: bool) -> tuple[Segment, ControlBlock]:
    """The run's control block: created by the launcher, attached by a rank; held while mapped."""
    segment = Segment(prefix + "ctrl", ControlBlock.size_bytes(world_size), create=create)
    segment.hold()
    return segment, ControlBlock(segment.mm, world_size)
