"""Ctrl-C (SIGINT) and SIGTERM in the command line: at any moment, a clean end.

A command of ``python -m attnbook`` (or the ``attnbook`` script) goes through three states:

- **guarded**, from the package's first import (this module, which calls
  :func:`guard_if_command` when imported) until the command's imports are done: a signal is
  only *recorded*. The imports must not be cut: torch's C code imports numpy and swallows any
  exception it raises, a ``KeyboardInterrupt`` included, and leaves numpy half-initialised; a
  Ctrl-C a quarter of a second after the start was then ignored (the run trained to its
  end), or the command failed later with "maximum recursion depth exceeded", or aborted;
  earlier ones printed a traceback and died by the signal.
- **armed** (:func:`arm`, by :func:`attnbook.cli.main` once its arguments are parsed): a
  signal recorded so far is raised at once, and from then on SIGINT raises
  ``KeyboardInterrupt`` and SIGTERM :class:`Terminated` where the code runs. The first one puts
  both signals back to recording, so the clean-up it unwinds through (the run folder's lock
  released, the run's state written) is not itself cut by a second signal.
- the training loop replaces both by a request to stop at the next step boundary
  (``attnbook.train.runtime._StopOnSignal``), and restores the armed handlers after.

:func:`attnbook.cli.main` catches the exception and prints one line: status 130 (SIGINT) or
143 (SIGTERM). A signal the process was started with ignored (``SIG_IGN``: a background job
of a non-interactive shell ignores SIGINT) stays ignored. Before the interpreter runs the
package's first line (about 20 ms) the operating system's default applies: the process dies
by the signal, which a shell reports as 130 or 143 too.

:func:`phase` is a hook for tests only: with ``ATTNBOOK_TEST_PAUSE_AT`` set in the
environment, each named moment of a command prints ``attnbook-test-phase NAME`` on stderr,
and the one named by the variable also sleeps (up to ``ATTNBOOK_TEST_PAUSE_S`` seconds,
default 30, or until the file ``ATTNBOOK_TEST_PAUSE_UNTIL`` exists) so that a test can send
a signal, or run another command, exactly there. Unset (always, outside tests),
it does nothing.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import PureWindowsPath

__all__ = [
    "Terminated",
    "guard",
    "guard_if_command",
    "arm",
    "settle",
    "signal_name",
    "phase",
    "started_as_command",
]


class Terminated(BaseException):
    """SIGTERM, raised where the code runs (like ``KeyboardInterrupt`` for SIGINT)."""


_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_pending: str | None = None  # the first signal recorded and not yet raised
_saved: dict | None = None  # the handlers guard() replaced


def signal_name(error: BaseException) -> str:
    """``"SIGINT"`` for a ``KeyboardInterrupt``, ``"SIGTERM"`` for :class:`Terminated`."""
    return "SIGTERM" if isinstance(error, Terminated) else "SIGINT"


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _record(signum, frame):
    global _pending
    if _pending is None:
        _pending = signal.Signals(signum).name


def _raise(signum, frame):
    global _pending
    _pending = None
    _install(_record)  # a second signal, while this one unwinds, is only recorded
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated


def _install(handler) -> None:
    for sig in _SIGNALS:
        if _saved is not None and _saved.get(sig) is signal.SIG_IGN:
            continue  # ignored by whoever started the process: stays ignored
        signal.signal(sig, handler)


def _ours() -> bool:
    return signal.getsignal(signal.SIGTERM) in (_record, _raise) or signal.getsignal(
        signal.SIGINT
    ) in (_record, _raise)


def guard() -> dict | None:
    """From now on SIGINT and SIGTERM are recorded, not acted on (main thread only). Returns
    the handlers it replaced, for :func:`settle`; None when the signals were guarded already
    (the command was started as ``python -m attnbook``) or off the main thread."""
    global _saved, _pending
    if not _main_thread() or _ours():
        return None
    _saved = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    _pending = None
    _install(_record)
    return _saved


def started_as_command(argv: list[str] | None = None, orig: list[str] | None = None) -> bool:
    """Whether this process is ``python -m attnbook`` or the ``attnbook`` console script
    (asked while the package is being imported)."""
    argv = sys.argv if argv is None else argv
    orig = getattr(sys, "orig_argv", []) if orig is None else orig
    first = argv[0] if argv else ""
    if first == "-m":  # python -m PACKAGE, while PACKAGE is imported
        for i, arg in enumerate(orig):
            if arg == "-m":
                return orig[i + 1 : i + 2] == ["attnbook"]
            if arg.startswith("-m"):
                return arg == "-mattnbook"
        return False
    return PureWindowsPath(first).name.lower() in ("attnbook", "attnbook.exe")  # / and \\


def guard_if_command() -> None:
    """:func:`guard` when the process was started as the command line (the package's first
    line calls it: its imports load torch); a library import changes nothing."""
    if started_as_command():
        guard()
        phase("imports")


def arm() -> None:
    """The imports are done: raise the signal recorded so far, if any; else from now on
    SIGINT raises ``KeyboardInterrupt`` and SIGTERM :class:`Terminated`."""
    global _pending
    if not _main_thread():
        return
    if _saved is None:  # not guarded (a caller's own handlers): guard them first
        guard()
    pending, _pending = _pending, None
    if pending == "SIGINT":
        raise KeyboardInterrupt
    if pending == "SIGTERM":
        raise Terminated
    _install(_raise)


def settle(saved: dict | None) -> None:
    """The command is over: put back the handlers :func:`guard` replaced (``saved``, its
    result); None (the process is the command, about to exit): record signals until the
    exit, which keeps the command's status."""
    global _saved, _pending
    if not _main_thread():
        return
    if saved is None:  # the process exits next: its interpreter's shutdown resets the
        _install(_record)  # handlers to the default (death by the signal), so block them
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        return
    for sig, handler in saved.items():
        signal.signal(sig, handler)
    _saved, _pending = None, None


# --------------------------------------------------------------------------------------------
# test hook
# --------------------------------------------------------------------------------------------

_PAUSE_AT = os.environ.get("ATTNBOOK_TEST_PAUSE_AT")
_reached: set = set()  # the moments passed (a signal may come before the pause)


def phase(name: str, stop=None) -> None:
    """Test only (``ATTNBOOK_TEST_PAUSE_AT``, see the module's docstring): say that the
    command reached the moment ``name``, and pause there if it is the one named. ``stop``: a
    callable that ends the pause early when true (a stop requested by a signal)."""
    if _PAUSE_AT is None:
        return
    first = name not in _reached
    _reached.add(name)
    print(f"attnbook-test-phase {name}", file=sys.stderr, flush=True)
    if _PAUSE_AT != name or not first:  # once: the clean-up after a signal may pass it again
        return
    end = time.monotonic() + float(os.environ.get("ATTNBOOK_TEST_PAUSE_S", "30"))
    until = os.environ.get("ATTNBOOK_TEST_PAUSE_UNTIL")  # a file whose creation ends it
    while time.monotonic() < end and not (stop is not None and stop()):
        if until and os.path.exists(until):
            break
        time.sleep(0.01)


guard_if_command()  # on import: the package imports this module first (see __init__)
