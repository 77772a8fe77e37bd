"""Paths a caller gives: checked for what they are before anything opens them.

One piece of code for one idea: every reader of a user's file (a corpus, a checkpoint) and
every writer of one (a picture, an ONNX file) asks here first, so that a folder, a named pipe
(FIFO), a device (``/dev/zero``, ``/dev/null``, ``/dev/full``), a socket, a dangling symbolic
link, a link loop, a NUL byte in the path, an unreadable, empty or huge file, or a path of the
wrong type is one clear sentence naming the argument (or the command line's option), the path
and what it wants, never a hang, a traceback or an error from deep inside a library.

- :func:`check_path`: the argument is a ``str`` or an ``os.PathLike`` naming a path (no NUL
  byte, not empty); returns a :class:`~pathlib.Path`.
- :func:`check_input_file`: the path names a regular file that can be read (and, by option,
  is not empty and not over a size limit). It reads the file's type with ``os.stat`` and never
  opens it: opening a FIFO blocks until a writer comes.
- :func:`open_input_file`: the same check, then the file opened without blocking
  (``O_NONBLOCK``) and its type read again from the open descriptor, so that a file swapped for
  a FIFO between the check and the open is refused too.
- :func:`check_output_file`: the path can be written as a regular file: not a folder, a
  device, a FIFO or a link to nothing, and its folder (or the first folder above it that
  exists, the rest being made) is a folder that can be written.

Errors: ``TypeError`` (not a path), ``FileNotFoundError`` (nothing there), ``ValueError``
(anything else), each one line.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path

__all__ = ["check_path", "check_input_file", "open_input_file", "check_output_file", "file_kind"]


def file_kind(mode: int) -> str:
    """What an ``os.stat`` mode names, in words: "a regular file", "a folder", "a named pipe
    (FIFO)", "a character device", ..."""
    for test, words in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return words
    return "not a regular file"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def check_path(name: str, path) -> Path:
    """``path`` as a :class:`~pathlib.Path`: a ``str`` or ``os.PathLike`` naming a path, with no
    NUL byte (no system call takes one) and not empty. ``name``: the argument or option."""
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"{name} must be a path (a str or a pathlib.Path), got {type(path).__name__} "
            f"{path!r:.60}"
        )
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a path as a str, got {type(text).__name__} {text!r:.60}")
    if "\0" in text:
        raise ValueError(f"{name} {text!r:.80} holds a NUL byte (\\0), which no path can hold")
    if not text:
        raise ValueError(f"{name} is an empty path (''); it wants the name of a file or folder")
    return Path(text)


def _missing(name: str, path: Path, what: str) -> OSError:
    """The error for a path ``os.stat`` cannot follow: a link to nothing, a link loop, a file
    where a folder should be, a name too long, a folder that cannot be searched, or nothing."""
    try:
        os.stat(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        if err.errno == errno.ELOOP:
            return ValueError(f"{name} {path} is a symbolic link loop; it wants {what}")
        if err.errno == errno.ENOTDIR:
            above = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
            where = f" ({above} is a file, not a folder)" if above is not None else ""
            return FileNotFoundError(f"{name} {path} does not exist{where}; it wants {what}")
        if err.errno == errno.ENAMETOOLONG:
            return ValueError(f"{name} {str(path)!r:.80} is too long a name for this system")
        if err.errno in (errno.EACCES, errno.EPERM):
            return ValueError(f"{name} {path} cannot be reached (permission denied)")
        return ValueError(f"{name} {path}: {err.strerror or err}")
    else:
        return None
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return FileNotFoundError(
                f"{name} {path} is a symbolic link to {os.readlink(path)}, which does not "
                f"exist; it wants {what}"
            )
    except OSError:
        pass
    return FileNotFoundError(f"{name} {path} does not exist (no such file); it wants {what}")


def _check_regular(
    name: str,
    path: Path,
    st: os.stat_result,
    what: str,
    max_bytes: int | None,
    allow_empty: bool,
    too_big: str = "",
) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{name} {path} is a folder; it wants {what}")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{name} {path} is {file_kind(st.st_mode)}; it wants {what}")
    if not allow_empty and st.st_size == 0:
        raise ValueError(f"{name} {path} is empty (0 bytes); it wants {what}")
    if max_bytes is not None and st.st_size > max_bytes:
        raise ValueError(
            f"{name} {path} is {_size(st.st_size)}, more than the {_size(max_bytes)} it reads "
            f"at most{too_big}"
        )


def check_input_file(
    name: str,
    path,
    what: str,
    *,
    max_bytes: int | None = None,
    allow_empty: bool = False,
    too_big: str = "",
) -> Path:
    """Check that ``path`` names a regular file this process can read, without opening it;
    return it as a :class:`~pathlib.Path`. ``name``: the argument or option (``"path"``,
    ``"--data"``); ``what``: what it wants, for the message ("a file of source<TAB>target
    lines"); ``max_bytes``: the largest size it reads (``too_big``: what the message then adds,
    such as how to read a part); ``allow_empty``: whether 0 bytes will do.
    """
    path = check_path(name, path)
    try:
        st = os.stat(path)
    except OSError:
        raise _missing(name, path, what) from None
    _check_regular(name, path, st, what, max_bytes, allow_empty, too_big)
    if not os.access(path, os.R_OK):
        raise ValueError(f"{name} {path} cannot be read (permission denied)")
    return path


def open_input_file(
    name: str,
    path,
    what: str,
    *,
    max_bytes: int | None = None,
    allow_empty: bool = False,
    too_big: str = "",
) -> io.BufferedReader:
    """:func:`check_input_file`, then ``path`` opened for reading in binary (the caller closes
    it: ``with open_input_file(...) as f``). It is opened with ``O_NONBLOCK`` and its type read
    again from the descriptor, so a FIFO put in its place after the check is refused, not
    waited on."""
    path = check_input_file(
        name, path, what, max_bytes=max_bytes, allow_empty=allow_empty, too_big=too_big
    )
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno in (errno.EACCES, errno.EPERM):
            raise ValueError(f"{name} {path} cannot be read (permission denied)") from None
        raise _missing(name, path, what) or ValueError(
            f"{name} {path} cannot be opened ({err.strerror or err})"
        ) from None
    try:
        _check_regular(name, path, os.fstat(fd), what, max_bytes, allow_empty, too_big)
        if getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)  # a regular file: reads as usual from here
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_output_file(name: str, path, what: str) -> Path:
    """Check that ``path`` can be written as a regular file: if something is there, it is a
    regular file this process may write (not a folder, a FIFO, a device such as ``/dev/full``
    or ``/dev/null``, a socket, a link to nothing or a link loop); the nearest folder above it
    that exists (the rest would be made) is a folder this process may write in. Returns it as
    a :class:`~pathlib.Path`. Writes nothing."""
    path = check_path(name, path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
        if os.path.islink(path):
            raise ValueError(
                f"{name} {path} is a symbolic link to {os.readlink(path)}, which does not "
                f"exist; it wants {what}"
            ) from None
    except OSError as err:
        if err.errno == errno.ENOTDIR:
            st = None  # a file where a folder should be: found below
        else:
            error = _missing(name, path, what)
            raise (error if error is not None else ValueError(f"{name} {path}: {err}")) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ValueError(f"{name} {path} is a folder; it wants {what}")
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{name} {path} is {file_kind(st.st_mode)}; it wants {what}")
        if not os.access(path, os.W_OK):
            raise ValueError(f"{name} {path} cannot be written (permission denied)")
    for folder in path.absolute().parents:
        try:
            folder_st = os.stat(folder)
        except FileNotFoundError:
            continue
        except OSError as err:
            if err.errno == errno.ENOTDIR:
                continue  # a file further up: found on the way up
            raise ValueError(
                f"{name} {path}: its folder {folder} cannot be reached ({err.strerror or err})"
            ) from None
        if not stat.S_ISDIR(folder_st.st_mode):
            raise ValueError(
                f"{name} {path}: {folder} is {file_kind(folder_st.st_mode)}, not a folder; it "
                f"wants {what}"
            )
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(
                f"{name} {path}: cannot write in the folder {folder} (permission denied)"
            )
        break
    return path
