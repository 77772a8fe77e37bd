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

import dataclasses
import math
import sys
from pathlib import Path

import torch

from ..train import DEFAULT_STEPS, TrainConfig, Trainer, init_distributed, scheduled_lr
from ..utils import seed_everything
from .folder import check_out, prepare_out
from .models import build_model, check_lengths_fit, model_kwargs_from
from .options import TRAIN_DEFAULTS, check_values, resolve_options, train_config
from .report import run_metrics, write_outputs
from .tasks import build_task, data_identity, task_kwargs_from

__all__ = ["Run", "train_run", "train_resolved", "lr_changes"]


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
    ``overwrite=True`` (or it is the folder of ``resume``); ``out``, the data and the model's
    length limit are checked before the first step; every file is written atomically. An
    error raises (ValueError, FileNotFoundError, :class:`attnbook.train.CheckpointError`, a
    :class:`attnbook.train.NonFiniteLossError` when training diverges) and leaves the folder's
    saved files as they were. Returns the :class:`Run`.
    """
    unknown = sorted(set(options) - set(TRAIN_DEFAULTS) - {"data"})
    if unknown:
        raise TypeError(
            f"train_run() got unknown options {unknown}: the options are the names of "
            "attnbook.runs.TRAIN_DEFAULTS, and data"
        )
    given = {**options, "task": task, "out": None if out is None else str(out)}
    check_values(given)
    resolved, ckpt, changes = resolve_options(given, None if resume is None else str(resume))
    return train_resolved(resolved, ckpt, changes, None if resume is None else str(resume))


def train_resolved(options: dict, ckpt: dict | None, changes: list, resume: str | None) -> Run:
    """Train with resolved ``options`` (:func:`~attnbook.runs.options.resolve_options` made
    them, with the checkpoint ``ckpt`` of ``resume`` and the ``changes`` it reports)."""
    out = Path(options["out"])
    replace = check_out(out, bool(options["overwrite"]), resume)
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
    trainer = Trainer(
        model,
        task.train,
        task.val,
        config,
        src_vocab=task.src_vocab,
        tgt_vocab=task.tgt_vocab,
        meta=meta,
    )
    if ckpt is not None:
        trainer.load_checkpoint(ckpt)
        if trainer.total_steps is not None and trainer.step >= trainer.total_steps:
            raise ValueError(
                f"{resume} is at step {trainer.step}, the end of its run of "
                f"{trainer.total_steps} steps; give --steps (or --epochs) beyond "
                f"step {trainer.step} to train further"
            )
        changes += lr_changes(trainer, ckpt)
        if rank == 0:  # said even with --quiet: it changes the result
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
    n_params = sum(p.numel() for p in model.parameters())
    say(
        f"{kind} ({n_params:,} parameters) on {task.name}: {len(task.train)} training pairs, "
        f"device {trainer.device}"
        + (f", {world_size} processes" if world_size > 1 else "")
        + (f", amp {trainer.amp_dtype}" if trainer.amp_dtype else ""),
        flush=True,
    )
    trainer.fit()
    metrics = None
    if rank == 0:
        test = None
        if task.test and not trainer.interrupted:
            test = trainer.evaluate(task.test, max_examples=None)
        metrics = run_metrics(trainer, task, kind, n_params, test)
        write_outputs(out, trainer, model, task, metrics)
        if trainer.interrupted:  # said even with --quiet
            print(
                f"interrupted ({trainer.interrupted}) at step {trainer.step}; checkpoint saved: "
                f"{out / 'checkpoint.pt'}; continue with --resume {out / 'checkpoint.pt'}",
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
