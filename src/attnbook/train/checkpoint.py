"""Checkpoints: written atomically, read safely, and what a trainer saves and restores.

A checkpoint holds the model, optimiser, scheduler, grad scaler, every random-number
generator, the position in the batch order, the step and the run's length, the config and the
vocabularies (:meth:`CheckpointMixin.state_dict`). :func:`atomic_write` writes a temporary file and
then ``os.replace``-s it, so a crash while saving leaves the previous checkpoint whole.

Numbers stay numbers (issue 40). Every checkpoint records ``"digest"``, a sha256 over
everything else it holds (:func:`checkpoint_digest`: each tensor's name, dtype, shape and
bytes, and every plain value, in a fixed order), and :func:`load_checkpoint` recomputes it: a
file damaged on disk or in transit (a flipped byte) is refused with a :class:`CheckpointError`
that names it and says it is damaged, never read as a silently different model. A checkpoint
written before digests existed (no ``"digest"`` entry, and only the entries such a checkpoint
has) still loads, unverified beyond what ``torch.load`` checks. The floating-point tensors of
the model and the optimiser are checked finite before every save (:class:`NonFiniteLossError`,
nothing written) and on every load (:class:`CheckpointError`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import math
import os
import pickle
from pathlib import Path

import torch
import torch.distributed as dist

from .._files import open_input_file
from ..data import Vocab
from .runtime import _rng_state, _set_rng_state

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_WANTS",
    "CheckpointError",
    "NonFiniteLossError",
    "checkpoint_digest",
    "DIGEST_KEY",
    "atomic_write",
    "atomic_save",
    "remove_stale_temp_files",
    "load_checkpoint",
    "CheckpointMixin",
]


CHECKPOINT_FORMAT = "attnbook-checkpoint-1"
CHECKPOINT_WANTS = "a checkpoint.pt written by 'python -m attnbook train'"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or that does not fit the model or data at hand."""


class NonFiniteLossError(FloatingPointError):
    """Training diverged: the training loss (``what="training loss"``, found before the update
    of ``step`` is applied), the validation loss or the weights became NaN or infinite.
    Nothing is saved from such a model: ``checkpoint`` is the last good one (None if none),
    written at step ``saved_step``. ``found_at``: the step at which a training loss was read,
    when that came after its update (the trainer reads the losses once per ``log_every``
    steps; None: before the update)."""

    def __init__(
        self,
        step: int,
        loss: float,
        checkpoint: Path | None = None,
        *,
        what: str = "training loss",
        saved_step: int | None = None,
        found_at: int | None = None,
    ):
        self.step, self.loss, self.checkpoint = step, loss, checkpoint
        self.found_at = found_at
        self.what, self.saved_step = what, saved_step
        at = f" (step {saved_step})" if saved_step is not None else ""
        kept = (
            f"the last good checkpoint, {checkpoint}{at}, is kept untouched"
            if checkpoint
            else "no checkpoint was written"
        )
        when = (
            "without saving that model"
            if what != "training loss"
            else "before that update"
            if found_at is None
            else f"when the loss was read, at step {found_at}, without saving the model"
        )
        super().__init__(
            f"the {what} became {loss} at step {step}; training stopped {when} "
            f"({kept}). Try a lower learning rate or lr scale, a longer warm-up, "
            "gradient clipping, or --no-amp"
        )


# --------------------------------------------------------------------------------------------
# checkpoints on disk
# --------------------------------------------------------------------------------------------

_TEMP_MARK = ".tmp-"


def atomic_write(path: str | Path, write) -> Path:
    """Write ``path`` atomically: ``write(f)`` fills a temporary file ``.NAME.tmp-PID`` (binary,
    in the same folder), which is flushed to disk and then ``os.replace``-d over ``path``. A
    failure part-way (an error, a full disk, Ctrl-C) leaves the old ``path`` untouched and
    removes the temporary file; a process killed outright leaves it behind for
    :func:`remove_stale_temp_files`. An ``OSError`` names the file (and says "no space left
    on device" for a full disk)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}{_TEMP_MARK}{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(e, OSError):
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                why = "no space left on device"
            else:
                why = e.strerror or str(e)
            error = OSError(
                f"could not write {path}: {why} (the previous {path.name}, if any, is untouched)"
            )
            error.errno = e.errno
            raise error from e
        raise
    return path


def atomic_save(obj, path: str | Path) -> Path:
    """``torch.save(obj)`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda f: torch.save(obj, f))


def remove_stale_temp_files(folder: str | Path) -> list[Path]:
    """Remove the temporary files (``.NAME.tmp-PID``) that :func:`atomic_write` left in
    ``folder`` when its process was killed (SIGKILL, a power cut): those whose process is
    no longer running. Returns what was removed."""
    removed = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    for tmp in folder.glob(f".*{_TEMP_MARK}*"):
        pid = tmp.name.rpartition(_TEMP_MARK)[2]
        if not pid.isdigit() or (int(pid) != os.getpid() and _process_exists(int(pid))):
            continue
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    return removed


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, as another user's process
        return True
    return True


# --------------------------------------------------------------------------------------------
# the digest and the finite checks
# --------------------------------------------------------------------------------------------

DIGEST_KEY = "digest"
# the entries of a checkpoint written before digests (format 1 through its history): one with
# no digest and any other entry is damaged (its "digest" key itself hit), not an old one
_UNDIGESTED_KEYS = frozenset(
    "format step total_steps elapsed model model_class optimizer scheduler scaler order rng "
    "config vocab history meta world_size epoch position seed batch_size bucket".split()
)
# the entries whose floating-point tensors must be finite (the weights and the optimiser's
# moments: a NaN there is a NaN in the next step)
_FINITE_KEYS = ("model", "optimizer")


def _feed(h, *parts) -> None:
    for part in parts:
        data = part if isinstance(part, bytes) else str(part).encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)


def _digest_walk(h, path: str, obj) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().to("cpu").contiguous().reshape(-1)
        _feed(h, "tensor", path, t.dtype, tuple(obj.shape), t.view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, dict):
        _feed(h, "dict", path, len(obj))
        for key, value in sorted(obj.items(), key=lambda kv: (type(kv[0]).__name__, repr(kv[0]))):
            _digest_walk(h, f"{path}/{type(key).__name__}:{key!r}", value)
        attrs = getattr(obj, "__dict__", None)  # a state_dict's _metadata (module versions)
        if attrs:
            _digest_walk(h, f"{path}@", dict(attrs))
    elif isinstance(obj, (list, tuple)):  # one kind: a round trip may turn tuples to lists
        _feed(h, "sequence", path, len(obj))
        for i, value in enumerate(obj):
            _digest_walk(h, f"{path}[{i}]", value)
    else:
        _feed(h, "value", path, type(obj).__name__, repr(obj))


def checkpoint_digest(ckpt: dict) -> str:
    """``"sha256:..."`` over everything ``ckpt`` holds but its ``"digest"`` entry: every tensor's
    path (``/str:'model'/str:'w_q.weight'``), dtype, shape and bytes, and every plain value's
    path, type and ``repr``, dict entries in sorted order, each field length-prefixed."""
    h = hashlib.sha256()
    _digest_walk(h, "", {k: v for k, v in ckpt.items() if k != DIGEST_KEY})
    return "sha256:" + h.hexdigest()


def _first_non_finite(ckpt: dict) -> str | None:
    """The path of the first floating-point tensor of the model or optimiser state that holds
    a NaN or an infinity (``"model/w_q.weight"``), or None."""
    stack = [(k, ckpt[k]) for k in _FINITE_KEYS if k in ckpt][::-1]
    while stack:
        path, obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            if obj.is_floating_point() and not bool(torch.isfinite(obj).all()):
                return path
        elif isinstance(obj, dict):
            stack.extend((f"{path}/{k}", v) for k, v in reversed(list(obj.items())))
        elif isinstance(obj, (list, tuple)):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(obj))))
    return None


def _verify(ckpt: dict, path: Path) -> None:
    """The digest (if any) and the finite check of a loaded checkpoint."""
    if DIGEST_KEY in ckpt:
        found, computed = ckpt[DIGEST_KEY], checkpoint_digest(ckpt)
        if found != computed:
            shown = found[:19] if isinstance(found, str) else type(found).__name__
            raise CheckpointError(
                f"checkpoint {path} is damaged: what it holds does not match the digest "
                f"written with it ({shown}... recorded, {computed[:19]}... read); restore it "
                "from a copy, or retrain"
            )
    else:
        unknown = sorted(str(k) for k in ckpt if k not in _UNDIGESTED_KEYS)
        if unknown:
            raise CheckpointError(
                f"checkpoint {path} is damaged: it has no digest but holds entries no "
                f"attnbook checkpoint has ({', '.join(unknown)[:80]})"
            )
    bad = _first_non_finite(ckpt)
    if bad is not None:
        raise CheckpointError(
            f"checkpoint {path} holds a non-finite (NaN or infinite) value in {bad}: a model "
            "that diverged, or a damaged file; use an earlier checkpoint, or retrain"
        )


def load_checkpoint(path: str | Path, map_location="cpu") -> dict:
    """Read a checkpoint written by :class:`Trainer`; :class:`CheckpointError` (one clear
    sentence) when the file is missing, unreadable, damaged (its digest does not match), holds
    a non-finite weight or is not an attnbook checkpoint (a folder, a FIFO, a device such as
    ``/dev/zero``, an empty file: :func:`attnbook._files.open_input_file`, which never waits on
    a FIFO); ``TypeError`` when ``path`` is not a path.

    Loaded with ``torch.load(weights_only=True)``: a checkpoint holds tensors and plain
    Python values only, so loading one never runs code from the file. A checkpoint with no
    digest (written by attnbook before issue 40) loads, checked finite but not verified; one
    with a digest is verified (module docstring).
    """
    try:  # a regular, readable, non-empty file; a FIFO or a device is refused, not read
        f = open_input_file("checkpoint", path, CHECKPOINT_WANTS)
    except (OSError, ValueError) as err:
        raise CheckpointError(str(err)) from None
    path = Path(path)
    try:
        with f:
            ckpt = torch.load(f, map_location=map_location, weights_only=True)
    except Exception as e:  # a truncated zip, random bytes, a pickle with code...
        if isinstance(e, pickle.UnpicklingError) or "weights_only" in str(e).lower():
            why = "not a PyTorch checkpoint, or one holding more than tensors and plain values"
        else:
            why = str(e).strip().splitlines()[0][:150] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not a checkpoint: torch.load "
            f"could not read it ({why})"
        ) from e
    found = ckpt.get("format") if isinstance(ckpt, dict) else None
    if (
        isinstance(found, str)
        and found.startswith("attnbook-checkpoint-")
        and found != (CHECKPOINT_FORMAT)
    ):
        raise CheckpointError(
            f"{path} was written by another version of attnbook (checkpoint format "
            f"{found!r}; this version reads {CHECKPOINT_FORMAT!r}): retrain, or load it with "
            "the attnbook version that wrote it"
        )
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"{path} is not an attnbook training checkpoint (it has no "
            f"format={CHECKPOINT_FORMAT!r} entry)"
        )
    _verify(ckpt, path)
    return ckpt


# --------------------------------------------------------------------------------------------
# a trainer's checkpoints
# --------------------------------------------------------------------------------------------


class CheckpointMixin:
    """The checkpoint half of :class:`attnbook.train.Trainer`: what it saves, when it may
    save (only a healthy model) and how it resumes."""

    def _last_saved(self) -> Path | None:
        p = self.checkpoint_path
        return p if p is not None and p.exists() else None

    def _save_if_healthy(self, val_loss: float | None) -> None:
        """Save the checkpoint of ``out_dir`` only from a healthy model: finite weights and a
        finite validation loss (None: not evaluated). Otherwise raise
        :class:`NonFiniteLossError` and keep the last good checkpoint as it is."""
        if self.checkpoint_path is None:
            return
        bad_weights = not all(torch.isfinite(p).all() for p in self.model.parameters())
        bad_loss = val_loss is not None and not math.isfinite(val_loss)
        (bad,) = self._all_reduce(
            [float(bad_weights) + 2.0 * float(bad_loss)],
            op=dist.ReduceOp.MAX if self.world_size > 1 else None,
        )
        if bad:
            what, value = (
                ("validation loss", val_loss)
                if bad_loss or bad >= 2
                else ("model's weights", "non-finite (NaN or inf)")
            )
            raise NonFiniteLossError(
                self.step, value, self._last_saved(), what=what, saved_step=self.saved_step
            )
        self.save_checkpoint()

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict:
        """Everything a checkpoint holds (see the module docstring)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "step": self.step,
            "total_steps": self.total_steps,  # the run's length, whatever set it
            "elapsed": self.elapsed,
            "model": self.model.state_dict(),
            "model_class": type(self.model).__name__,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "order": self.order.state_dict(),
            "rng": _rng_state(),
            "config": self.config.to_dict(),
            "vocab": {"src": self.src_vocab.to_dict(), "tgt": self.tgt_vocab.to_dict()},
            "history": self.history,
            "meta": self.meta,
            "world_size": self.world_size,
        }

    def save_checkpoint(self, path: str | Path | None = None) -> Path | None:
        """Write :meth:`state_dict` atomically to ``path`` (default ``out_dir/checkpoint.pt``),
        with its digest (:func:`checkpoint_digest`).

        Only rank 0 writes; returns the path, or None when nothing was written. A NaN or an
        infinity in the model's weights or the optimiser's state raises
        :class:`NonFiniteLossError` and writes nothing.
        """
        path = self.checkpoint_path if path is None else Path(path)
        if path is None or not self.is_main:
            return None
        state = self.state_dict()
        bad = _first_non_finite(state)
        if bad is not None:
            raise NonFiniteLossError(
                self.step,
                f"non-finite (NaN or inf) in {bad}",
                self._last_saved(),
                what="model's weights" if bad.startswith("model") else "optimiser's state",
                saved_step=self.saved_step,
            )
        digest = checkpoint_digest(state)  # stored second, right after the format
        state = {"format": state.pop("format"), DIGEST_KEY: digest, **state}
        atomic_save(state, path)
        if path == self.checkpoint_path:
            self.saved_step = self.step
        return path

    def load_checkpoint(self, checkpoint: str | Path | dict) -> dict:
        """Restore a checkpoint (a path or a loaded dict) into this trainer, to resume.

        The model must have the same parameters, the data the same size and the vocabularies
        must be equal; otherwise :class:`CheckpointError` says what differs. Returns the dict.
        """
        ckpt = checkpoint if isinstance(checkpoint, dict) else load_checkpoint(checkpoint)
        if ckpt.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError("not an attnbook training checkpoint")
        if ckpt.get("model_class") != type(self.model).__name__:
            raise CheckpointError(
                f"the checkpoint holds a {ckpt.get('model_class')}, not a "
                f"{type(self.model).__name__}"
            )
        vocab = ckpt.get("vocab") or {}
        if vocab and (
            Vocab.from_dict(vocab["src"]) != self.src_vocab
            or Vocab.from_dict(vocab["tgt"]) != self.tgt_vocab
        ):
            raise CheckpointError("the checkpoint's vocabularies differ from this run's")
        try:
            self.model.load_state_dict(ckpt["model"])
        except RuntimeError as e:
            lines = str(e).strip().splitlines()
            raise CheckpointError(
                "the checkpoint's model does not fit this model (different "
                f"sizes or layers): {' '.join(lines[1:3])[:200]}"
            ) from e
        self.optimizer.load_state_dict(_with_kernel(ckpt["optimizer"], self.optimizer))
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.scaler.load_state_dict(ckpt["scaler"])
        self.order.load_state_dict(ckpt["order"])
        _set_rng_state(ckpt["rng"])
        self.step, self.elapsed = int(ckpt["step"]), float(ckpt["elapsed"])
        self.history = list(ckpt.get("history", []))
        self.saved_step = self.step
        return ckpt


def _with_kernel(saved: dict, optimizer: torch.optim.Optimizer) -> dict:
    """The optimiser state ``saved`` with the update kernel (``fused``/``foreach``) that
    ``optimizer`` uses on this machine, whatever the saving run used (foreach before fused
    existed here, another device, an older version: see :mod:`attnbook.train.optimizer`).
    Set before loading, so that torch keeps each ``step`` count where that kernel wants it
    (a fused kernel reads it from the parameter's device)."""
    kernel = {k: optimizer.param_groups[0].get(k) for k in ("fused", "foreach")}
    return {**saved, "param_groups": [{**g, **kernel} for g in saved["param_groups"]]}
