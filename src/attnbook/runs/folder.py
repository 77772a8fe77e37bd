"""The run folder: checked before any work, never taken over by mistake, written atomically.

:func:`check_out` refuses a folder that cannot hold the run, or that already holds another
run (unless ``overwrite``; a resumed run writes into its own folder), and writes nothing.
:func:`prepare_out` then creates the folder, proves it writable, removes the temporary files
a killed run left, and the files of the run that ``overwrite`` replaces. Every file of a run
is written atomically (:func:`write_text`, :func:`attnbook.train.atomic_write`: a temporary
file, then ``os.replace``), so a reader never sees half of one and a crash leaves the
previous one whole. :data:`RUN_FILES` are the files a run may hold.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..train import atomic_write, remove_stale_temp_files

__all__ = ["RUN_FILES", "check_out", "prepare_out", "write_text"]

# the files a run writes into its folder (and evaluate beside the checkpoint)
RUN_FILES = (
    "checkpoint.pt",
    "metrics.json",
    "history.csv",
    "loss.png",
    "attention.png",
    "evaluation.json",
)


def check_out(out: Path, overwrite: bool, resume: str | None) -> list[str]:
    """Refuse an --out that cannot hold the run, or that holds another run (unless
    --overwrite). Nothing is written. Returns the run files --overwrite will replace."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file; it wants a folder (new or holding a run)")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"--out {out}: cannot create it, because {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: {existing} is not writable (permission denied)")
    held = [name for name in RUN_FILES if (out / name).exists()]
    same = resume is not None and out.resolve() == Path(resume).resolve().parent
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


def prepare_out(out: Path, replace: list[str]) -> list[Path]:
    """Create --out, prove it writable, remove temporary files a killed run left, and the
    files of the run that --overwrite replaces. Returns the stale files removed."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".attnbook-probe-"):
            pass
    except OSError as err:
        raise ValueError(f"--out {out}: cannot write into it ({err.strerror or err})") from err
    for name in replace:
        (out / name).unlink(missing_ok=True)
    return remove_stale_temp_files(out)


def write_text(path: Path, text: str) -> None:
    """A text file, written atomically (a reader never sees half of it)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))
