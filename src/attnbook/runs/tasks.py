"""The task of a run, and its data file: built from the run's options, found again on resume.

:func:`task_kwargs_from` turns a run's options into the task's arguments (a checkpoint stores
them), :func:`build_task` makes the task: a synthetic one (:func:`attnbook.data.make_task`),
dates between two languages (:func:`attnbook.languages.make_dates_between`), or a user's TSV
file (:func:`attnbook.data.load_tsv`). A TSV run remembers its file by path, by path relative
to the run's folder and by content (:func:`data_identity`); :func:`find_data` finds it again
and refuses a file whose content changed, since its split would differ.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from .._files import check_input_file, check_path
from ..data import Vocab, file_sha256, load_tsv, make_task, normalise_text
from ..languages import make_dates_between
from ..train import CheckpointError
from ..train.checkpoint import CHECKPOINT_WANTS

__all__ = [
    "task_kwargs_from",
    "build_task",
    "normalise_input",
    "check_data_file",
    "check_checkpoint_file",
    "find_data",
    "data_identity",
]


def task_kwargs_from(o: dict) -> dict:
    """The arguments of the task that the run options ``o`` describe (what :func:`build_task`
    takes)."""
    if o["task"] == "tsv":
        kw = {
            "path": str(Path(o["data"]).resolve()),
            "level": o["level"],
            "lower": o["lower"],
            "seed": o["seed"],
        }
        kw.update({k: o[k] for k in ("max_len", "max_pairs") if o[k] is not None})
        if (o.get("encoding") or "utf-8") != "utf-8":
            kw["encoding"] = o["encoding"]
        return kw
    kw = {"n_train": o["n_train"], "n_val": o["n_val"], "n_test": o["n_test"], "seed": o["seed"]}
    options = {k: o[k] for k in ("min_len", "max_len", "n_symbols") if o[k] is not None}
    langs = (o.get("src_lang"), o.get("tgt_lang"))
    if any(langs):
        if not all(langs):
            raise ValueError("--src-lang and --tgt-lang go together: give both, or neither")
        options.update(src=langs[0], tgt=langs[1])
    return {**kw, **options}


def build_task(name: str, kwargs: dict):
    """The task ``name`` (copy, reverse, sort, dates or tsv) made with ``kwargs``."""
    if name == "tsv":
        kw = dict(kwargs)
        path = Path(kw.pop("path"))
        check_data_file(path)
        try:
            return load_tsv(path, **kw)
        except OSError as err:  # unreadable: permissions, a device error
            raise ValueError(f"--data {path}: cannot read it ({err.strerror or err})") from err
    kw = dict(kwargs)
    sizes = kw.pop("n_train"), kw.pop("n_val"), kw.pop("n_test")
    if "src" in kw:  # dates between two languages (attnbook.languages)
        return make_dates_between(kw.pop("src"), kw.pop("tgt"), *sizes, **kw)
    return make_task(name, *sizes, **kw)


def normalise_input(text: str, vocab: Vocab, meta: dict) -> str:
    """Treat a typed input as the training data were treated (tsv: tokenised, lower-cased)."""
    if meta.get("task") != "tsv":
        return text
    return normalise_text(text, vocab.level, meta["task_kwargs"].get("lower", False))


def check_data_file(path) -> Path:
    """Refuse a --data path that is not a readable, non-empty regular file (a folder, a FIFO, a
    device, a link to nothing: :func:`attnbook._files.check_input_file`, which opens nothing);
    return it as a Path."""
    return check_input_file("--data", path, "a regular file of source<TAB>target lines")


def check_checkpoint_file(option: str, path) -> Path:
    """Refuse a ``--checkpoint`` or ``--resume`` path (``option`` names which) that is not a
    readable, non-empty regular file, with a :class:`CheckpointError` naming the option, before
    :func:`attnbook.train.load_checkpoint` opens it; return it as a Path."""
    try:
        return check_input_file(option, path, CHECKPOINT_WANTS)
    except (OSError, ValueError) as err:
        raise CheckpointError(str(err)) from None


def find_data(ckpt: dict, ckpt_path, given: str | None) -> Path:
    """The data file of a tsv run, for --resume and evaluate: ``given`` (--data, the user's
    choice, used even if its content changed, with a warning), else where the run found it,
    else beside the run (the stored path relative to the checkpoint's folder, then the file's
    name there). A file whose content differs from the trained one is refused unless given."""
    meta = ckpt.get("meta") or {}
    stored = meta.get("data") or {"path": (meta.get("task_kwargs") or {}).get("path")}
    digest = stored.get("sha256")
    folder = Path(ckpt_path).resolve().parent
    if given is not None:
        path = Path(given)
        check_data_file(path)
        if digest and file_sha256(path) != digest:
            print(
                f"warning: --data {path} is not the file this run was trained on (sha256 "
                f"{file_sha256(path)[:12]}, not {digest[:12]}): its train/validation/test "
                "split differs, so test pairs may now be in training",
                file=sys.stderr,
            )
        return path
    candidates = [Path(stored["path"])] if stored.get("path") else []
    if stored.get("relative"):
        candidates.append(folder / stored["relative"])
    if stored.get("path"):
        candidates.append(folder / Path(stored["path"]).name)
    for path in dict.fromkeys(candidates):
        if path.is_file():
            if digest and file_sha256(path) != digest:
                raise CheckpointError(
                    f"the run's data file {path} has changed since it was trained (sha256 "
                    f"{digest[:12]} then, {file_sha256(path)[:12]} now): its split would "
                    "differ and test pairs could leak into training; restore the file, or pass "
                    f"--data {path} to use it as it is now"
                )
            return path
    places = " nor at ".join(map(str, dict.fromkeys(candidates)))
    raise CheckpointError(
        f"the run's data file is not at {places}; pass --data FILE to say where it is now"
    )


def data_identity(path: str, out: Path) -> dict:
    """What a checkpoint stores of a tsv file: where it was, where relative to the run's
    folder, and its content's hash."""
    path = check_path("path", path).resolve()
    identity = {"path": str(path), "sha256": file_sha256(path)}
    with contextlib.suppress(ValueError):  # another drive (Windows)
        identity["relative"] = os.path.relpath(path, out.resolve())
    return identity
