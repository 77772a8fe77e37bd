"""The run folder: checked before any work, never taken over by mistake, one writer at a time,
written atomically.

**What a run folder is.** A folder is *a run of this package* when everything in it is a
file a run writes (:data:`RUN_FILES`), the lock :data:`LOCK_FILE` (there while a command
writes the folder), the temporary files of an atomic write of one of those
(``.NAME.tmp-PID``), a writability probe (``.attnbook-probe-*``), or a file a file browser
drops into any folder it shows (:data:`IGNORED_FILES`). There is no marker file: a finished
run holds exactly its files. A command writes only into a new folder, an existing *empty*
one (``mktemp -d``, ``tempfile.TemporaryDirectory()``: accepted, it holds nothing to lose),
or a run folder; a folder holding anything else (the current folder of a project, a home
folder, a folder of downloads) is refused, with or without ``--overwrite`` (which deletes only
:data:`RUN_FILES`), also as a ``--resume``'s own folder. An ``--out`` given as an empty
string is refused (a shell variable that expanded to nothing).

**No output over an input.** Every path a command writes is compared, after resolving
links, with every path it reads (:func:`check_outputs`): ``train``'s run files with
``--data`` and ``--resume``'s checkpoint (a resume writes the newer checkpoint of its own run
in place, the one exception, guarded as said in :mod:`attnbook.runs.training`).

**One writer per run folder** (:class:`RunLock`): ``train`` (new or resumed) and ``evaluate``
(which writes ``evaluation.json`` there) hold the folder's lock while they run, and release
it on every exit (done, error, Ctrl-C, SIGTERM). The lock is ``fcntl.flock`` on
:data:`LOCK_FILE`, whose content names the holder (pid, host, command, since when): the
operating system drops it when the holder dies, so a lock left by a killed process (SIGKILL,
a power cut) is recognised and taken over, and the command says so. Where ``flock`` is
missing (Windows) the file is created exclusively, and one naming a process of this host
that no longer runs is taken over. A second command refused by the lock is one line naming
the holder. Under ``torchrun`` only rank 0 writes, so only it takes the lock.

:func:`check_out` refuses a folder that cannot hold the run, or that holds another run
(unless ``overwrite``; a resumed run writes into its own folder), and writes nothing.
:func:`open_out` creates the folder, proves it writable and takes its lock;
:func:`prepare_out` then removes the temporary files a killed run left, and the files of the
run that ``overwrite`` replaces. Every file of a run is written atomically (:func:`write_text`,
:func:`attnbook.train.atomic_write`: a temporary file, then ``os.replace``), so a reader never
sees half of one and a crash leaves the previous one whole.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

from .._files import check_path
from ..train import atomic_write, remove_stale_temp_files
from ..train.checkpoint import _process_exists

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

__all__ = [
    "RUN_FILES",
    "LOCK_FILE",
    "IGNORED_FILES",
    "RunLock",
    "RunLockedError",
    "check_out",
    "check_outputs",
    "check_new_files",
    "foreign_entries",
    "open_out",
    "prepare_out",
    "write_text",
]

# the files a run writes into its folder (and evaluate beside the checkpoint)
RUN_FILES = (
    "checkpoint.pt",
    "metrics.json",
    "history.csv",
    "loss.png",
    "attention.png",
    "evaluation.json",
)
LOCK_FILE = ".attnbook.lock"
# what file browsers write into any folder they show: not the user's work
IGNORED_FILES = (".DS_Store", "Thumbs.db", "desktop.ini")
_PROBE = ".attnbook-probe-"


def _is_run_entry(path: Path) -> bool:
    name = path.name
    if name in RUN_FILES:
        return path.is_file() or not path.exists()  # (a dangling link: replaced, not followed)
    if name in (LOCK_FILE, *IGNORED_FILES) or name.startswith(_PROBE):
        return True
    stem, mark, pid = name.partition(".tmp-")  # an atomic write's temporary file
    return bool(mark) and pid.isdigit() and (stem == LOCK_FILE or stem[1:] in RUN_FILES)


def foreign_entries(folder: Path) -> list[str]:
    """The names in ``folder`` that are not of a run of this package (see the module's
    docstring), sorted; [] for a folder that is a run, an empty one, or none."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if not _is_run_entry(p))


def _foreign_message(flag: str, out: Path, foreign: list[str]) -> str:
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    here = " (the current folder)" if out.resolve() == Path.cwd().resolve() else ""
    return (
        f"{flag} {out}{here} holds files that are not of a run ({shown}): a run is written "
        "only into a new folder, an empty one, or one that holds a run and nothing else; "
        "give a new folder"
    )


def check_outputs(outputs: dict[str, Path], inputs: dict[str, Path | str | None]) -> None:
    """Refuse when a path written (``outputs``: what names it -> the path) is, after
    resolving links, a path read (``inputs``: the option -> its path; None: not given)."""
    read = {
        check_path(what, p).resolve(): what
        for what, p in inputs.items()
        if p is not None and str(p) != ""
    }
    for what, path in outputs.items():
        source = read.get(check_path(what, path).resolve())
        if source is not None:
            raise ValueError(
                f"{what} {path} is {source} {inputs[source]} (the same file, links "
                "resolved): a command never writes over a file it reads"
            )


def check_new_files(
    flag: str, paths: list[Path], checkpoint: str | Path, overwrite: bool = False
) -> None:
    """Files a command writes outside a run folder (``translate --attention-png``): never
    the ``checkpoint`` it reads (links resolved), never a folder, an existing file only with
    ``overwrite``."""
    for path in paths:
        check_outputs({flag: path}, {"--checkpoint": checkpoint})
        if path.is_dir():
            raise ValueError(f"{flag} {path} is a folder; give the file to write")
    existing = [str(p) for p in paths if os.path.lexists(p)]
    if existing and not overwrite:
        raise ValueError(
            f"{flag}: {' and '.join(existing)} already "
            f"{'exists' if len(existing) == 1 else 'exist'}; pass --overwrite to replace it"
        )


def check_out(
    out: Path, overwrite: bool, resume: str | None, inputs: dict | None = None
) -> list[str]:
    """Refuse an --out that cannot hold the run, that holds another run (unless
    --overwrite), or anything that is not of a run, or whose files would be written over the
    run's inputs (``inputs``: option -> path, such as ``{"--data": ...}``). Nothing is
    written. Returns the run files --overwrite will replace."""
    if str(out) == "":
        raise ValueError(
            "--out is an empty string: give the run's folder (did a shell variable expand to "
            "nothing?)"
        )
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file; it wants a folder (new or holding a run)")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"--out {out}: cannot create it, because {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: {existing} is not writable (permission denied)")
    foreign = foreign_entries(out)
    if foreign:
        raise ValueError(_foreign_message("--out", out, foreign))
    same = resume is not None and out.resolve() == Path(resume).resolve().parent
    inputs = dict(inputs or {})
    if same:  # a resume writes its own run's newer checkpoint in place (see training.py)
        inputs.pop("--resume", None)
    check_outputs({f"--out's {name}": out / name for name in RUN_FILES}, inputs)
    held = [name for name in RUN_FILES if (out / name).exists()]
    if same and overwrite:
        raise ValueError(
            f"--overwrite would delete the checkpoint that --resume {resume} "
            "continues; leave --overwrite out, or give another --out"
        )
    if held and not same and not overwrite:
        hint = (
            f", or --resume {out / 'checkpoint.pt'} to continue it"
            if "checkpoint.pt" in held
            else ""
        )
        raise ValueError(
            f"--out {out} already holds a run ({', '.join(held)}); pass "
            f"--overwrite to replace it{hint}"
        )
    return held if overwrite else []


# --------------------------------------------------------------------------------------------
# one writer at a time
# --------------------------------------------------------------------------------------------


class RunLockedError(ValueError):
    """The run folder's lock is held by another process (the message names it)."""


def _describe(holder: dict) -> str:
    if not holder:
        return "another attnbook process (starting: it has not written its name yet)"
    return (
        f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}, running "
        f"{holder.get('command', '?')!r} since {holder.get('since', '?')}"
    )


def _read_holder(text: str) -> dict:
    try:
        holder = json.loads(text)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


class RunLock:
    """The lock of the run folder ``folder``: one writer at a time (see the module's
    docstring). ``command``: what the holder runs, shown to a process it refuses.

    ``acquire()`` takes it or raises :class:`RunLockedError` naming the holder; it returns
    a one-line notice when it took over a lock left by a process that died (else None).
    ``release()`` removes the file and lets go (also on a context manager's exit)."""

    def __init__(self, folder: str | Path, command: str | None = None):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.command = command or " ".join(["python", *sys.argv])[:300]
        self._fd: int | None = None

    def _content(self) -> bytes:
        since = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": self.command,
            "since": since,
        }
        return (json.dumps(holder) + "\n").encode("utf-8")

    def _refuse(self, holder: dict) -> RunLockedError:
        return RunLockedError(
            f"{self.folder} is in use by {_describe(holder)}: one command writes a run folder "
            "at a time; wait for it to end (or stop it), then run this again"
        )

    def _stale_notice(self, holder: dict) -> str | None:
        if not holder:
            return None
        return (
            f"took over the lock of {self.folder}, left by {_describe(holder)}, which ended "
            "without releasing it (killed?)"
        )

    def acquire(self) -> str | None:
        if self._fd is not None:
            raise RuntimeError(f"the lock of {self.folder} is already held by this RunLock")
        try:
            if fcntl is not None:
                return self._acquire_flock()
            return self._acquire_exclusive()
        except OSError as err:
            if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT):
                raise ValueError(
                    f"{self.folder}: cannot write into it ({err.strerror or err})"
                ) from err
            raise

    def _acquire_flock(self) -> str | None:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                os.close(fd)
                if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise self._refuse(_read_holder(text)) from None
                if err.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    return self._acquire_exclusive()  # a file system without flock
                raise
            try:  # the holder we waited for may have removed the file as it let go
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        os.ftruncate(fd, 0)
        os.pwrite(fd, self._content(), 0)
        self._fd = fd
        return self._stale_notice(_read_holder(text)) if text.strip() else None

    def _acquire_exclusive(self) -> str | None:
        """Without flock: create the file exclusively; a file naming a process of this host
        that no longer runs is a stale lock, taken over."""
        notice = None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = _read_holder(self.path.read_text("utf-8", "replace"))
            pid = holder.get("pid")
            if not (
                holder.get("host") == socket.gethostname()
                and isinstance(pid, int)
                and pid != os.getpid()
                and not _process_exists(pid)
            ):
                raise self._refuse(holder) from None
            notice = self._stale_notice(holder)
            tmp = self.path.with_name(f"{LOCK_FILE}.tmp-{os.getpid()}")
            tmp.write_bytes(self._content())
            os.replace(tmp, self.path)
            fd = os.open(self.path, os.O_RDWR)
            if _read_holder(os.pread(fd, 4096, 0).decode()).get("pid") != os.getpid():
                os.close(fd)
                raise self._refuse(_read_holder(self.path.read_text())) from None
            self._fd = fd
            return notice
        os.pwrite(fd, self._content(), 0)
        self._fd = fd
        return notice

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # before letting go: a waiter re-checks the file (see acquire)
        os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
        return False


def open_out(out: Path, command: str | None = None) -> RunLock:
    """Create --out (and its parents), prove it writable and take its lock (a notice of a
    stale lock taken over is in the lock's ``notice``). Returns the held :class:`RunLock`."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=_PROBE):
            pass
    except OSError as err:
        raise ValueError(f"--out {out}: cannot write into it ({err.strerror or err})") from err
    lock = RunLock(out, command)
    lock.notice = lock.acquire()
    return lock


def prepare_out(out: Path, replace: list[str]) -> list[Path]:
    """Create --out, prove it writable, remove temporary files a killed run left, and the
    files of the run that --overwrite replaces. Returns the stale files removed."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=_PROBE):
            pass
    except OSError as err:
        raise ValueError(f"--out {out}: cannot write into it ({err.strerror or err})") from err
    for name in replace:
        (out / name).unlink(missing_ok=True)
    return remove_stale_temp_files(out)


def write_text(path: Path, text: str) -> None:
    """A text file, written atomically (a reader never sees half of it)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))
