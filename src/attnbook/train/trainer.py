"""The training loop: :class:`Trainer` and :func:`train_model`, the chapters' one call."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from .. import _signals
from .._checks import check_positive_int, unchecked
from ..data import BOS, EOS, Seq2SeqDataset, TaskData, Vocab, collate
from ..decode import greedy_decode
from ..seq2seq import check_seq2seq
from ..utils import model_device
from .batches import BatchOrder, PaddedData, _as_dataset, _check_fits
from .checkpoint import CheckpointMixin, NonFiniteLossError
from .config import DEFAULT_STEPS, TrainConfig
from .losses import exact_match, label_smoothed_loss
from .optimizer import make_optimizer
from .runtime import _amp_settings, _distributed, _resolve_device, _StopOnSignal
from .schedules import scheduled_lr

__all__ = ["HISTORY_KEYS", "Trainer", "train_model"]


# --------------------------------------------------------------------------------------------
# the trainer
# --------------------------------------------------------------------------------------------


HISTORY_KEYS = (
    "step",
    "epoch",
    "seconds",
    "lr",
    "train_loss",
    "val_loss",
    "token_accuracy",
    "exact_match",
)


class Trainer(CheckpointMixin):
    """Train a seq2seq ``model`` (the interface of :mod:`attnbook.decode`, plus
    ``forward(src (B, S), tgt_in (B, T)) -> logits (B, T, V)``).

    ``train_data`` and ``val_data`` are :class:`attnbook.data.batching.Seq2SeqDataset` s or lists of
    ``(source, target)`` pairs (then ``src_vocab`` and ``tgt_vocab`` are needed); or
    ``train_data`` is a whole :class:`attnbook.data.tasks.TaskData` (its train split, its
    vocabularies and, unless ``val_data`` is given, its val split). Without validation data
    there is no evaluation. ``meta`` is stored in every checkpoint as given (the
    command line keeps the model's constructor arguments and the task there).

    ``fit()`` trains and returns ``history``: one dict a row (keys :data:`HISTORY_KEYS`) every
    ``log_every`` steps and at each evaluation, ``train_loss`` being the mean since the
    previous row and the evaluation keys None where no evaluation ran.
    """

    def __init__(
        self,
        model: nn.Module,
        train_data,
        val_data=None,
        config: TrainConfig | None = None,
        *,
        src_vocab: Vocab | None = None,
        tgt_vocab: Vocab | None = None,
        meta: dict | None = None,
    ):
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        check_seq2seq(model)
        config = TrainConfig() if config is None else config
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        if meta is not None and not isinstance(meta, dict):
            raise TypeError(
                f"meta must be a dict (stored in checkpoints), got {type(meta).__name__}"
            )
        self.config, self.meta = config, dict(meta or {})
        if isinstance(train_data, TaskData):  # a whole task: its splits and vocabs
            task = train_data
            train_data, src_vocab, tgt_vocab = task.train, task.src_vocab, task.tgt_vocab
            val_data = task.val if val_data is None else val_data
        self.train_data = _as_dataset("train_data", train_data, src_vocab, tgt_vocab)
        self.val_data = (
            None
            if val_data is None or len(val_data) == 0
            else _as_dataset("val_data", val_data, src_vocab, tgt_vocab)
        )
        self.src_vocab = src_vocab or self.train_data.src_vocab
        self.tgt_vocab = tgt_vocab or self.train_data.tgt_vocab
        self.pad_id = model.pad_id
        _check_fits(model, {"train_data": self.train_data, "val_data": self.val_data})

        self.rank, self.world_size = _distributed()
        self.is_main = self.rank == 0
        self.device = _resolve_device(config.device, self.world_size)
        if config.batch_size < self.world_size:
            raise ValueError(
                f"batch_size (the global batch) must be >= the number of "
                f"processes, got {config.batch_size} < {self.world_size}"
            )
        self.model = model.to(self.device)
        self.amp_dtype, use_scaler = _amp_settings(self.device, config.amp)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=use_scaler)

        # what runs the training forward pass: compiled and/or wrapped for several processes
        self.train_module: nn.Module = self.model
        if config.compile:
            self.train_module = torch.compile(self.train_module)
        if self.world_size > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.train_module = nn.parallel.DistributedDataParallel(
                self.train_module, device_ids=ids
            )

        self.optimizer = make_optimizer(self.model, config)
        self._clipped = list(self.model.parameters())  # (not a new generator every step)
        self.order = BatchOrder(
            self.train_data.lengths, config.batch_size, config.seed, config.bucket
        )
        # tokens scored per example (target + EOS), to normalise by the global batch's count
        self.n_tokens = [len(tgt) - 1 for _, tgt in self.train_data.items]
        self._padded = PaddedData(self.train_data, self.pad_id)  # batches without collate
        self.total_steps = self._total_steps()
        self.d_model = (
            config.d_model or getattr(model, "d_model", None) or getattr(model, "hidden_dim", None)
        )
        if config.schedule == "noam" and self.d_model is None:
            raise ValueError(
                "schedule='noam' needs d_model: the model has no d_model or "
                "hidden_dim attribute, so set TrainConfig(d_model=...)"
            )
        # the optimiser's base lr is 1, so the schedule gives the learning rate itself
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda i: self.lr_at(i + 1)
        )  # update i + 1 runs with lr_at(i + 1)
        self.step, self.elapsed = 0, 0.0
        self._fit_start = 0  # the step fit() started from
        self._pending: list[tuple[torch.Tensor, int]] = []  # losses not read yet, tokens
        self._losses: list[float] = []  # losses read since the last history row
        self.history: list[dict] = []
        self.interrupted: str | None = None  # "SIGINT" etc. when fit() was stopped
        self._updating = False  # inside an optimiser update (see fit)
        self.checkpoint_path = Path(config.out_dir) / "checkpoint.pt" if config.out_dir else None
        self.saved_step: int | None = None  # the step of the last checkpoint written

    # ------------------------------------------------------------------ set-up helpers

    def _total_steps(self) -> int | None:
        c = self.config
        if c.steps is not None:
            return c.steps
        if c.epochs is not None:
            return c.epochs * len(self.order)
        return None if c.max_seconds is not None else DEFAULT_STEPS

    def lr_at(self, step: int) -> float:
        """The learning rate of update number ``step`` (1 = the first)."""
        return scheduled_lr(self.config, step, self.total_steps, self.d_model)

    def _autocast(self):
        return torch.autocast(
            self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None
        )

    def _batch(self, indices: Sequence[int], dataset: Seq2SeqDataset | None = None):
        if dataset is None:  # a training batch: gathered from the padded matrices
            return self._padded.batch(indices).to(self.device)
        return collate([dataset[i] for i in indices], self.pad_id).to(self.device)

    def _all_reduce(self, values: list[float], op=None) -> list[float]:
        if self.world_size == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=op or dist.ReduceOp.SUM)
        return t.tolist()

    # ------------------------------------------------------------------ one step

    def train_step(self, indices: Sequence[int], *, sync: bool = True) -> float | None:
        """One update on the global batch ``indices``.

        ``sync=True``: returns its mean loss (all processes) and raises
        :class:`~attnbook.train.checkpoint.NonFiniteLossError` *before* touching the weights if
        it is NaN or infinite.
        ``sync=False``: nothing waits for the device (no ``.item()``, no host sync: the model's
        argument checks, which read token ids, step aside after the first step of
        :meth:`fit`); the loss stays on the device until the next step with ``sync=True``
        reads every loss since the last sync at once, and checks them. Returns None.
        :meth:`fit` syncs once per ``log_every`` steps.
        """
        global_tokens = sum(self.n_tokens[i] for i in indices)
        batch = self._batch(indices[self.rank :: self.world_size])  # this rank's share
        if not self.train_module.training:  # (evaluate() puts back the mode it found)
            self.train_module.train()
        with self._autocast(), self._checks():
            logits = self.train_module(batch.src, batch.tgt_in)  # (B, T, V)
            if not isinstance(logits, torch.Tensor) or logits.dim() != 3:
                raise TypeError(
                    f"model(src, tgt_in) must return logits (B, T, V), got {type(logits).__name__}"
                )
            loss_sum = label_smoothed_loss(
                logits, batch.tgt_out, self.pad_id, self.config.label_smoothing, reduction="sum"
            )
        # DDP averages gradients over processes: scale so the result is the global mean
        loss = loss_sum * (self.world_size / global_tokens)
        entry = (loss_sum.detach(), global_tokens)
        mean_loss = self._sync_losses(entry) if sync else None
        self.scaler.scale(loss).backward()
        self._updating = True  # from here on, Ctrl-C must not save half an update
        if self.config.grad_clip is not None:
            self.scaler.unscale_(self.optimizer)
            nn.utils.clip_grad_norm_(self._clipped, self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        if not sync:
            self._pending.append(entry)
        return mean_loss

    def _checks(self):
        """The model's argument checks run on the first step of a :meth:`fit` (the data are
        the trainer's own, checked when it was built), not on later ones."""
        return nullcontext() if self.step == self._fit_start else unchecked()

    def _sync_losses(self, current: tuple[torch.Tensor, int] | None = None) -> float | None:
        """Read the losses of the steps since the last sync and ``current``, the loss sum and
        token count of the step now running (one host sync, one all-reduce); add those of
        the finished steps to ``_losses``; return the current one's mean. A non-finite one
        raises :class:`~attnbook.train.checkpoint.NonFiniteLossError` naming its step: before
        the update if it is the current step's, else after the updates since."""
        pending, self._pending = self._pending, []
        if current is not None:
            pending.append(current)
        if not pending:
            return None
        sums = torch.stack([p for p, _ in pending]).double()  # this process's loss sums
        if self.world_size > 1:
            dist.all_reduce(sums)
        values = [v / tokens for v, (_, tokens) in zip(sums.tolist(), pending, strict=True)]
        for i, value in enumerate(values):
            if not math.isfinite(value):
                step = self.step + 1 - (len(values) - 1 - i)
                raise NonFiniteLossError(
                    step,
                    value,
                    self._last_saved(),
                    saved_step=self.saved_step,
                    found_at=None if i == len(values) - 1 else self.step + 1,
                )
        if current is None:
            self._losses.extend(values)
            return None
        self._losses.extend(values[:-1])
        return values[-1]

    # ------------------------------------------------------------------ the loop

    def fit(self) -> list[dict]:
        """Train until ``steps``/``epochs`` are done, ``max_seconds`` have passed, or Ctrl-C
        (SIGINT) / SIGTERM asks to stop (then a checkpoint is saved and ``interrupted`` names
        the signal). Evaluates every ``eval_every`` steps and at the end. Returns ``history``.

        A signal during the end (the last evaluation and checkpoint, after the last step)
        lets it finish and also sets ``interrupted``: the checkpoint is then of the last step
        and a caller knows it was asked to stop. A second Ctrl-C stops at once: at a step
        boundary the checkpoint is saved; in the middle of an update, or at the end, the
        ``KeyboardInterrupt`` goes up and the previous checkpoint is kept as it was.
        """
        from tqdm.auto import tqdm

        c = self.config
        self.interrupted, self._updating = None, False
        start, last_eval = time.perf_counter(), None
        self._fit_start, self._pending, self._losses = self.step, [], []
        self._clock = (self.elapsed, start)  # seconds before this call, its start
        bar = tqdm(
            total=self.total_steps,
            initial=self.step,
            desc="training",
            unit="step",
            disable=not (c.progress and self.is_main),
            dynamic_ncols=True,
        )
        stop = _StopOnSignal()
        stop.__enter__()  # until the last checkpoint of this call is written (see the end)
        try:
            try:
                while self.total_steps is None or self.step < self.total_steps:
                    out_of_time = (
                        c.max_seconds is not None and time.perf_counter() - start >= c.max_seconds
                    )
                    if self._agree_to_stop(out_of_time or stop.requested is not None):
                        self.interrupted = stop.requested
                        break
                    n = self.step + 1
                    sync = n % c.log_every == 0 or n % c.eval_every == 0 or n == self.total_steps
                    loss = self.train_step(self.order.peek(), sync=sync)
                    self.order.advance()
                    self.step += 1
                    self._updating = False  # the update is complete
                    if loss is not None:
                        self._losses.append(loss)
                    bar.update(1)
                    evaluate_now = self.step % c.eval_every == 0
                    if evaluate_now or self.step % c.log_every == 0:
                        row = self._log_row(self._losses, evaluate_now)
                        self._losses = []
                        last_eval = self.step if evaluate_now else last_eval
                        self._show(bar, row, tqdm.write if evaluate_now else None)
                        if evaluate_now:
                            self._save_if_healthy(row["val_loss"])
            except KeyboardInterrupt:  # a second Ctrl-C, or one outside the main thread
                if self._updating:  # half an update: nothing consistent to save
                    raise
                self.optimizer.zero_grad(set_to_none=True)  # drop a half-done backward pass
                self.interrupted = "KeyboardInterrupt"
            finally:
                bar.close()
            # The end (the last evaluation and checkpoint) is still under the stop handler: a
            # first signal here lets it finish, is recorded in `interrupted`, and the
            # checkpoint is of the last step; a second Ctrl-C raises (the previous checkpoint
            # kept).
            _signals.phase("final", lambda: stop.requested is not None)
            self._sync_losses()  # a run stopped between two syncs
            losses, self._losses = self._losses, []
            final_eval = (
                self.step != last_eval and not self.interrupted and self.val_data is not None
            )
            row = None
            if losses or final_eval:
                row = self._log_row(losses, final_eval)
                self._show(None, row, tqdm.write)
            self.elapsed = self._clock[0] + time.perf_counter() - start
            self._save_if_healthy(row["val_loss"] if row is not None and final_eval else None)
            self.interrupted = self.interrupted or stop.requested
        finally:
            stop.__exit__(None, None, None)
        return self.history

    def _agree_to_stop(self, mine: bool) -> bool:
        """Every process stops at the same step (one asked -> all stop)."""
        if self.world_size == 1:
            return mine
        (anyone,) = self._all_reduce([float(mine)], op=dist.ReduceOp.MAX)
        return anyone > 0

    def _log_row(self, losses: list[float], evaluate: bool) -> dict:
        before, start = self._clock
        row = dict.fromkeys(HISTORY_KEYS)
        row.update(
            step=self.step,
            epoch=round(self.step / len(self.order), 4),
            seconds=round(before + time.perf_counter() - start, 3),
            lr=self.lr_at(self.step) if self.step else None,  # of the last update
            train_loss=sum(losses) / len(losses) if losses else None,
        )
        if evaluate and self.is_main and self.val_data is not None:
            row.update(self.evaluate())
        if self.history and self.history[-1]["step"] == self.step:
            self.history[-1].update({k: v for k, v in row.items() if v is not None})
        else:
            self.history.append(row)
        return self.history[-1]

    def _show(self, bar, row: dict, write) -> None:
        """The bar's postfix keeps the latest loss and the latest evaluation."""
        if not (self.config.progress and self.is_main):
            return
        shown = self.__dict__.setdefault("_shown", {})
        for key, name in (("train_loss", "loss"), ("val_loss", "val"), ("exact_match", "exact")):
            if row[key] is not None:
                shown[name] = f"{100 * row[key]:.1f}%" if name == "exact" else f"{row[key]:.4f}"
        if bar is not None:
            bar.set_postfix(shown, refresh=False)
        if write is not None and row["val_loss"] is not None:
            write(f"step {row['step']}: " + ", ".join(f"{k} {v}" for k, v in shown.items()))

    # ------------------------------------------------------------------ evaluation

    @torch.no_grad()
    def evaluate(
        self, data=None, max_examples: int | None = -1, batch_size: int = 256
    ) -> dict[str, float]:
        """Loss, token accuracy (teacher forcing) and exact match (greedy decoding).

        ``data``: a Seq2SeqDataset or pairs (default: the validation data); ``max_examples``
        caps the examples used (the first ones; default ``config.eval_examples``, None =
        all). ``val_loss`` is the plain cross-entropy per token, without label smoothing.
        """
        data = (
            self.val_data
            if data is None
            else _as_dataset("data", data, self.src_vocab, self.tgt_vocab)
        )
        if data is None:
            raise ValueError("no data to evaluate: the trainer has no val_data; pass data")
        max_examples = self.config.eval_examples if max_examples == -1 else max_examples
        n = len(data) if max_examples is None else min(len(data), max_examples)
        check_positive_int("batch_size", batch_size)
        order = sorted(range(n), key=lambda i: data.lengths[i])  # less padding
        was_training = self.model.training
        self.model.eval()
        loss_sum = tokens = right = exact = 0.0
        for start in range(0, n, batch_size):
            batch = self._batch(order[start : start + batch_size], data)
            logits = self.model(batch.src, batch.tgt_in)  # (B, T, V)
            real = batch.tgt_out != self.pad_id
            loss_sum += label_smoothed_loss(
                logits, batch.tgt_out, self.pad_id, reduction="sum"
            ).item()
            tokens += real.sum().item()
            right += ((logits.argmax(-1) == batch.tgt_out) & real).sum().item()
            predicted = greedy_decode(
                self.model, batch.src, bos_id=BOS, eos_id=EOS, max_len=batch.tgt_out.shape[1]
            )  # (B, <= T)
            exact += exact_match(predicted, batch.tgt_out, self.pad_id).sum().item()
        self.model.train(was_training)
        return {
            "val_loss": loss_sum / tokens,
            "token_accuracy": right / tokens,
            "exact_match": exact / n,
        }


# --------------------------------------------------------------------------------------------
# the chapters' one call
# --------------------------------------------------------------------------------------------


def train_model(
    model: nn.Module,
    task: TaskData,
    steps: int = 500,
    *,
    batch_size: int = 64,
    progress: bool = False,
    return_trainer: bool = False,
    **options,
) -> list[dict] | tuple[list[dict], Trainer]:
    """Train ``model`` on ``task`` (from :func:`attnbook.data.tasks.make_task` or ``load_tsv``) for
    ``steps`` steps on the CPU-friendly defaults and return the history; the last row holds
    the final validation loss, token accuracy and exact match. ``options`` are further
    :class:`~attnbook.train.config.TrainConfig` fields (``lr``, ``schedule``, ``eval_every``,
    ``device`` ...).

    ``return_trainer=True`` returns ``(history, trainer)``: the
    :class:`~attnbook.train.trainer.Trainer` keeps the optimiser's state and the place in the
    data, so ``trainer.state_dict()`` resumes the run later exactly where it stopped (as the
    command line's ``--resume`` does), with more steps.

    The model trains on ``device`` (default ``"auto"``: CUDA, then Apple's MPS, then the CPU)
    and is handed back on the device it came on, also when training stops with an error, so
    the tensors a chapter makes on the CPU work with it afterwards."""
    if not isinstance(return_trainer, bool):
        raise TypeError(
            f"return_trainer must be a bool, got {type(return_trainer).__name__} {return_trainer!r}"
        )
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(task, TaskData):
        raise TypeError(
            f"task must be a TaskData (from make_task or load_tsv), got {type(task).__name__}"
        )
    options.setdefault("eval_every", max(1, -(-steps // 4)))  # 4 evaluations
    options.setdefault("log_every", max(1, min(50, steps // 10)))
    config = TrainConfig(steps=steps, batch_size=batch_size, progress=progress, **options)
    home = model_device(model)
    trainer = Trainer(model, task, config=config)
    try:
        history = trainer.fit()
    finally:
        model.to(home)
    return (history, trainer) if return_trainer else history
