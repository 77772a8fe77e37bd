"""A training run into a run folder, from Python as from the command line: :func:`train_run`.

``python -m attnbook train`` is :func:`train_run` with the command line's options; a notebook
gets the same guarantees by calling it. The run's options are resolved
(:func:`attnbook.runs.options.resolve_options`), its folder is checked before any work and
never taken over by mistake (:mod:`attnbook.runs.folder`), its data and model are built and
checked (the model's length limit) before the first step, and it ends with the checkpoint,
``metrics.json``, ``history.csv`` and the figures written atomically
(:mod:`attnbook.runs.report`). A checkpoint is saved only from a healthy model, and on Ctrl-C
or SIGTERM (``Run.interrupted`` says which); ``resume`` continues it exactly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
from pathlib import Path

import torch

from .. import _signals
from ..train import (
    DEFAULT_STEPS,
    CheckpointError,
    TrainConfig,
    Trainer,
    init_distributed,
    load_checkpoint,
    scheduled_lr,
)
from ..utils import seed_everything
from .folder import check_out, open_out, prepare_out
from .models import build_model, check_lengths_fit, model_kwargs_from
from .options import TRAIN_DEFAULTS, check_values, resolve_options, train_config
from .report import report_complete, run_metrics, write_metrics, write_outputs
from .tasks import build_task, data_identity, task_kwargs_from

__all__ = [
    "Run",
    "train_run",
    "train_resolved",
    "lr_changes",
    "file_identity",
    "CheckpointChangedError",
]


@dataclasses.dataclass
class Run:
    """A training run that :func:`train_run` finished or stopped.

    ``out``: its folder; ``options``: its resolved options; ``model``, ``task`` and
    ``trainer`` (its ``history``, ``step``, ...); ``metrics``: what ``metrics.json`` holds
    (None in a process other than the first of a ``torchrun``)."""

    out: Path
    options: dict
    model: torch.nn.Module
    task: object
    trainer: Trainer
    metrics: dict | None

    @property
    def interrupted(self) -> str | None:
        """``"SIGINT"`` or ``"SIGTERM"`` if a signal stopped the run (its checkpoint saved, for
        ``resume``), else None."""
        return self.trainer.interrupted


def train_run(
    out: str | Path | None = None,
    *,
    task: str | None = None,
    resume: str | Path | None = None,
    **options,
) -> Run:
    """Train a model into the run folder ``out``, as ``python -m attnbook train`` does.

    ``task``: copy, reverse, sort, dates or tsv (with ``data``, the file's path); ``options``:
    those of the command line, named as its flags without the dashes (``model="transformer",
    d_model=64, steps=2000, overwrite=True, quiet=True``; :data:`TRAIN_DEFAULTS` lists them
    with their defaults). ``resume``: a run's ``checkpoint.pt``, to continue it exactly (the
    model, data and seed come from it; options given again override the others).

    The guarantees of the command line: an ``out`` that holds a run is refused unless
    ``overwrite=True`` (or it is the folder of ``resume``), and so is one that holds anything
    that is not of a run (:mod:`attnbook.runs.folder`); ``out``, the data and the model's
    length limit are checked before the first step; the folder is locked while the run writes
    it; every file is written atomically. An error raises (ValueError, FileNotFoundError,
    :class:`attnbook.train.CheckpointError`, a :class:`attnbook.train.NonFiniteLossError`
    when training diverges) and leaves the folder's saved files as they were. Returns the
    :class:`Run`.
    """
    unknown = sorted(set(options) - set(TRAIN_DEFAULTS) - {"data"})
    if unknown:
        raise TypeError(
            f"train_run() got unknown options {unknown}: the options are the names of "
            "attnbook.runs.TRAIN_DEFAULTS, and data"
        )
    given = {**options, "task": task, "out": None if out is None else str(out)}
    check_values(given)
    resume = None if resume is None else str(resume)
    seen = file_identity(resume)  # before it is read (see train_resolved)
    resolved, ckpt, changes = resolve_options(given, resume)
    return train_resolved(resolved, ckpt, changes, resume, resume_seen=seen)


def file_identity(path: str | Path | None) -> tuple | None:
    """What tells one version of a file from another without reading it: its device, inode,
    size and modification time (an atomic write makes a new inode). None: no such file."""
    try:
        st = os.stat(path) if path is not None else None
    except (OSError, ValueError):  # ValueError: a NUL byte (the path's own check names it)
        return None
    return None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class CheckpointChangedError(CheckpointError):
    """A run's checkpoint.pt changed on disk since this run read or wrote it: another
    process wrote it. This run does not write over it."""


class _RunTrainer(Trainer):
    """The trainer of a run folder: it writes ``checkpoint.pt`` only over the version it read
    or wrote itself (``expected``, a :func:`file_identity`; None: no file), so that a
    process that did not respect the folder's lock is never silently written over."""

    expected: tuple | None = None
    guarded = False

    def save_checkpoint(self, path=None):
        target = self.checkpoint_path if path is None else Path(path)
        own = self.guarded and self.is_main and target == self.checkpoint_path
        if own and file_identity(target) != self.expected:
            found = _step_of(target)
            raise CheckpointChangedError(
                f"{target} changed on disk since this run "
                f"{'wrote' if self.saved_step else 'read'} it at step {self.saved_step or 0} "
                f"(another process wrote it{f', at step {found}' if found is not None else ''}"
                f"): not written over, so this run's step {self.step} is not saved; resume "
                "the newer one if it is the run to keep"
            )
        written = super().save_checkpoint(path)
        if own and written is not None:
            self.expected = file_identity(target)
        return written


def _step_of(path: Path) -> int | None:
    try:
        return int(load_checkpoint(path)["step"])
    except Exception:
        return None


def _command_line() -> str:
    return "train_run() in " + " ".join(["python", *sys.argv])[:250]


def train_resolved(
    options: dict,
    ckpt: dict | None,
    changes: list,
    resume: str | None,
    *,
    command: str | None = None,
    resume_seen: tuple | None = None,
) -> Run:
    """Train with resolved ``options`` (:func:`~attnbook.runs.options.resolve_options` made
    them, with the checkpoint ``ckpt`` of ``resume`` and the ``changes`` it reports).

    ``command``: what the folder's lock says this process runs; ``resume_seen``: the
    :func:`file_identity` of ``resume`` taken *before* it was read. A resume in the
    checkpoint's own folder writes the newer checkpoint over the one it read, and only over
    that one: if it changed on disk since it was read (another resume ran meanwhile), the
    run is refused before any work; if it changes while the run trains (a process that did
    not take the lock), the save is refused (:class:`CheckpointChangedError`) and the other
    process's checkpoint is kept.

    A run whose checkpoint is at the end of its steps but whose report (test scores,
    ``metrics.json``, ``history.csv``, the figures) was cut by a signal is *finished* by a
    resume without new ``steps``: it writes what is missing.

    Ctrl-C (``KeyboardInterrupt``) or SIGTERM (:class:`attnbook._signals.Terminated`)
    outside the training loop goes up to the caller after the folder's lock is released, a
    folder this call created and left empty is removed, and, when the checkpoint on disk is
    of the trainer's last step, ``metrics.json`` records ``"interrupted"``; the exception's
    ``attnbook_detail`` says what was kept (the command line prints it)."""
    raw_out = options["out"]
    inputs = {"--data": options.get("data") if options.get("task") == "tsv" else None}
    inputs["--resume"] = resume
    out = raw_out if raw_out == "" else Path(raw_out)  # ("" is refused, not the current folder)
    replace = check_out(out, options["overwrite"], resume, inputs)
    out = Path(raw_out)
    if resume is not None and resume_seen is None:
        resume_seen = file_identity(resume)
    in_place = resume is not None and out.resolve() == Path(resume).resolve().parent
    _signals.phase("resolved")  # (the checkpoint read, the folder not locked yet)
    rank = int(os.environ.get("RANK", "0"))  # (before the process group: only rank 0 writes)
    created, lock, state = not out.exists(), None, {}
    try:
        if rank == 0:
            lock = open_out(out, command or _command_line())
            if lock.notice:
                print(lock.notice, file=sys.stderr)
            if in_place and file_identity(resume) != resume_seen:
                found = _step_of(Path(resume))
                raise CheckpointChangedError(
                    f"{resume} changed on disk since this command read it at step "
                    f"{ckpt['step']} (another process wrote it"
                    f"{f', at step {found}' if found is not None else ''}): nothing was "
                    "changed; run the command again to continue from what it holds now"
                )
        _signals.phase("locked")
        return _train(options, ckpt, changes, resume, out, replace, in_place, state)
    except (KeyboardInterrupt, _signals.Terminated) as stop:
        stop.attnbook_detail = _record_stop(stop, out, resume, lock, state)
        raise
    finally:
        if lock is not None:
            lock.release()
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if empty: a run stopped before writing anything


def _record_stop(stop: BaseException, out: Path, resume: str | None, lock, state: dict) -> str:
    """A signal came outside the training loop: record it in ``metrics.json`` when the
    checkpoint on disk is of the trainer's state (``state``: what :func:`_train` built), and
    say what was kept."""
    name = _signals.signal_name(stop)
    trainer = state.get("trainer")
    ckpt_path = out / "checkpoint.pt"
    moved = trainer is not None and (trainer.step != state["loaded_step"] or state["finishing"])
    if moved and lock is not None and trainer.saved_step == trainer.step:
        # the checkpoint on disk is of this state, written by this call: record the stop
        trainer.interrupted = name
        with contextlib.suppress(Exception):  # (best effort: the checkpoint is what counts)
            metrics = run_metrics(trainer, state["task"], state["kind"], state["n_params"], None)
            write_metrics(out, metrics)
        ended = trainer.total_steps is not None and trainer.step >= trainer.total_steps
        return (
            f"; at step {trainer.step}, its checkpoint saved: continue with --resume "
            f"{ckpt_path}" + (" (it finishes the run's report)" if ended else "")
        )
    if resume is not None:
        return f"; {resume} is as it was: --resume {resume} continues it"
    if ckpt_path.exists() and lock is not None:
        step = _step_of(ckpt_path)
        return f"; the checkpoint of step {step} is kept: --resume {ckpt_path} continues it"
    return "; nothing was saved: run the command again"


def _train(options, ckpt, changes, resume, out, replace, in_place, state) -> Run:
    rank, world_size = init_distributed()
    if options["threads"]:
        torch.set_num_threads(options["threads"])
    say = print if rank == 0 and not options["quiet"] else (lambda *a, **k: None)
    seed_everything(options["seed"])
    task = build_task(options["task"], task_kwargs_from(options))
    if not task.val:
        raise ValueError(
            "the task has no validation pairs (--n-val 0 or a tiny file): "
            "training needs some to evaluate on"
        )
    kind, model_kwargs = options["model"], model_kwargs_from(options)
    model = build_model(kind, len(task.src_vocab), len(task.tgt_vocab), model_kwargs)
    check_lengths_fit(task, model, options)
    config = train_config(options, options["device"])
    meta = {
        "model": kind,
        "model_kwargs": model_kwargs,
        "task": options["task"],
        "task_kwargs": task_kwargs_from(options),
        "options": options,
    }
    if options["task"] == "tsv":
        meta["data"] = data_identity(options["data"], out)
    trainer = _RunTrainer(
        model,
        task.train,
        task.val,
        config,
        src_vocab=task.src_vocab,
        tgt_vocab=task.tgt_vocab,
        meta=meta,
    )
    finishing = False
    if ckpt is not None:
        trainer.load_checkpoint(ckpt)
        if trainer.total_steps is not None and trainer.step >= trainer.total_steps:
            if not in_place or report_complete(out, trainer.step):
                raise ValueError(
                    f"{resume} is at step {trainer.step}, the end of its run of "
                    f"{trainer.total_steps} steps; give --steps (or --epochs) beyond "
                    f"step {trainer.step} to train further"
                )
            finishing = True  # stopped after its last step, before its report was written
        changes += lr_changes(trainer, ckpt)
        if rank == 0 and finishing:
            print(
                f"finishing {resume}: its {trainer.step} steps are done, but it was stopped "
                "before its report was written; writing it",
                file=sys.stderr,
            )
        elif rank == 0:  # said even with --quiet: it changes the result
            shown = "; ".join(
                f"{'--' + k.replace('_', '-') if k in TRAIN_DEFAULTS else k} {a} -> {b}"
                for k, a, b in changes
            )
            print(
                f"resuming {resume} at step {trainer.step}"
                + (f"; changed: {shown}" if shown else "; no setting changed"),
                file=sys.stderr,
            )
    if rank == 0:
        for stale in prepare_out(out, replace):
            say(f"removed {stale}, left by a run that was killed")
        if replace:
            say(f"--overwrite: replaced the run in {out} ({', '.join(replace)})")
        trainer.expected = file_identity(trainer.checkpoint_path)
        trainer.guarded = True
    n_params = sum(p.numel() for p in model.parameters())
    state.update(
        trainer=trainer,
        task=task,
        kind=kind,
        n_params=n_params,
        loaded_step=trainer.step,
        finishing=finishing,
    )
    say(
        f"{kind} ({n_params:,} parameters) on {task.name}: {len(task.train)} training pairs, "
        f"device {trainer.device}"
        + (f", {world_size} processes" if world_size > 1 else "")
        + (f", amp {trainer.amp_dtype}" if trainer.amp_dtype else ""),
        flush=True,
    )
    _signals.phase("fit")
    last = trainer.history[-1] if trainer.history else {}
    if not (finishing and last.get("step") == trainer.step and last.get("val_loss") is not None):
        trainer.fit()  # (finishing: only the last evaluation and checkpoint, if they are missing)
    metrics = None
    if rank == 0:
        test = None
        _signals.phase("test")
        if task.test and not trainer.interrupted:
            test = trainer.evaluate(task.test, max_examples=None)
        metrics = run_metrics(trainer, task, kind, n_params, test)
        write_outputs(out, trainer, model, task, metrics)
        _signals.phase("done")
        if trainer.interrupted:  # said even with --quiet
            print(
                f"interrupted ({trainer.interrupted}) at step {trainer.step}; checkpoint saved: "
                f"{out / 'checkpoint.pt'}; continue with --resume {out / 'checkpoint.pt'}"
                + (
                    " (it finishes the run's report)"
                    if trainer.total_steps is not None and trainer.step >= trainer.total_steps
                    else ""
                ),
                file=sys.stderr,
            )
        else:
            shown = {
                k: metrics[k]
                for k in ("train_loss", "val_loss", "exact_match", "test_exact_match")
                if metrics.get(k) is not None
            }
            say(
                f"done: {trainer.step} steps in {trainer.elapsed:.1f} s; "
                + ", ".join(f"{k} {v:.4f}" for k, v in shown.items())
                + f"; wrote {out}/"
            )
    state.clear()
    if world_size > 1:
        torch.distributed.destroy_process_group()
    return Run(out, options, model, task, trainer, metrics)


def lr_changes(trainer: Trainer, ckpt: dict) -> list[tuple]:
    """The step budget and learning rate of the next update, before and after a resume's
    options (a longer run restarts the tail of a cosine schedule, say)."""
    old = TrainConfig.from_dict(ckpt["config"], device=trainer.config.device)
    if "total_steps" in ckpt:  # recorded since the default length changed (1500 -> 1250)
        old_total = ckpt["total_steps"]
    else:
        old_total = (
            old.steps
            if old.steps is not None
            else old.epochs * len(trainer.order)
            if old.epochs is not None
            else None
            if old.max_seconds is not None
            else DEFAULT_STEPS  # the best guess for an older checkpoint of a run given no length
        )
    changes = []
    if old_total != trainer.total_steps:
        changes.append(("total steps", old_total, trainer.total_steps))
    step = trainer.step + 1
    before = scheduled_lr(old, step, old_total or step, trainer.d_model)
    now = trainer.lr_at(step)
    if not math.isclose(before, now, rel_tol=1e-9):
        changes.append((f"learning rate of step {step}", f"{before:.3g}", f"{now:.3g}"))
    return changes
