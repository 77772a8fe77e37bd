"""What a run folder says about its run: ``metrics.json``, ``history.csv``, and the figures.

:func:`run_metrics` gathers the run's final numbers (the last losses, exact match, the test
split's scores, the config), :func:`write_outputs` writes them with the history of every
logged step, the loss curves (:func:`loss_figure`) and the cross-attention of a test input
(:func:`attention_figure`) into the run's folder, each file atomically and ``metrics.json``
last, so that :func:`report_complete` tells a finished run from one stopped while writing
them (``--resume`` finishes that one).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import torch

from .._signals import phase
from ..data import EOS, Vocab
from ..evaluate import generate
from ..seq2seq import attention_map
from ..train import HISTORY_KEYS, Trainer, atomic_write
from .folder import write_text

__all__ = [
    "run_metrics",
    "write_outputs",
    "write_metrics",
    "report_complete",
    "new_figure",
    "save_figure",
    "loss_figure",
    "attention_figure",
]


def run_metrics(trainer: Trainer, task, kind: str, n_params: int, test: dict | None) -> dict:
    """The numbers of ``metrics.json``: the run's last losses and scores (``test``: the test
    split's, if it was evaluated), its speed, and its config."""
    history = trainer.history
    last_loss = next(
        (r["train_loss"] for r in reversed(history) if r["train_loss"] is not None), None
    )
    last_eval = next((r for r in reversed(history) if r["val_loss"] is not None), {})
    metrics = {
        "task": task.name if trainer.meta["task"] != "tsv" else "tsv",
        "model": kind,
        "device": str(trainer.device),
        "world_size": trainer.world_size,
        "amp": str(trainer.amp_dtype).replace("torch.", "") if trainer.amp_dtype else None,
        "parameters": n_params,
        "steps": trainer.step,
        "seconds": round(trainer.elapsed, 3),
        "steps_per_second": round(trainer.step / trainer.elapsed, 3) if trainer.elapsed else None,
        "train_loss": last_loss,
        "val_loss": last_eval.get("val_loss"),
        "token_accuracy": last_eval.get("token_accuracy"),
        "exact_match": last_eval.get("exact_match"),
        "val_examples": min(len(task.val), trainer.config.eval_examples or len(task.val)),
        "interrupted": trainer.interrupted,
    }
    if test is not None:
        metrics.update(
            test_loss=test["val_loss"],
            test_token_accuracy=test["token_accuracy"],
            test_exact_match=test["exact_match"],
            test_examples=len(task.test),
        )
    metrics["config"] = trainer.config.to_dict()
    return metrics


def write_outputs(out: Path, trainer: Trainer, model, task, metrics: dict) -> None:
    """Write ``history.csv``, ``loss.png``, ``attention.png`` (for a model with
    cross-attention) and, last, ``metrics.json`` into the run folder ``out``, each
    atomically. ``metrics.json`` comes last: a run whose ``metrics.json`` names its
    checkpoint's step and no interruption has all its files (:func:`report_complete`)."""
    phase("write:history.csv")
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=HISTORY_KEYS)
    writer.writeheader()
    writer.writerows(
        {k: ("" if row.get(k) is None else row[k]) for k in HISTORY_KEYS} for row in trainer.history
    )
    write_text(out / "history.csv", table.getvalue())
    phase("write:loss.png")
    loss_figure(trainer.history, out / "loss.png", f"{metrics['model']} on {metrics['task']}")
    pairs = task.test or task.val
    phase("write:attention.png")
    if pairs:  # drawn when the model has cross-attention
        source = pairs[0][0]
        attention_figure(
            model,
            source,
            trainer.src_vocab,
            trainer.tgt_vocab,
            1,
            2 * len(trainer.src_vocab.tokenize(source)) + 10,
            out / "attention.png",
        )
    write_metrics(out, metrics)


def write_metrics(out: Path, metrics: dict) -> None:
    """``metrics.json`` into the run folder ``out``, atomically."""
    phase("write:metrics.json")
    write_text(out / "metrics.json", json.dumps(metrics, indent=2) + "\n")


def report_complete(out: Path, step: int) -> bool:
    """Whether the run folder ``out`` holds the whole report of its checkpoint's ``step``:
    a ``metrics.json`` of that step that names no interruption (written last, see
    :func:`write_outputs`), ``history.csv`` and ``loss.png``. A run stopped after its last
    step, while writing these, is not complete: ``--resume`` finishes it."""
    try:
        metrics = json.loads((out / "metrics.json").read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(metrics, dict)
        and metrics.get("steps") == step
        and metrics.get("interrupted") is None
        and all((out / name).is_file() for name in ("history.csv", "loss.png"))
    )


def new_figure(figsize: tuple[float, float]):
    """A matplotlib figure with one axes that draws off screen, made without pyplot: the
    caller's backend and open figures (a notebook's, say) stay as they were. Returns
    ``(fig, ax)``."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots()


def save_figure(fig, path: Path) -> None:
    """``fig`` to ``path`` (its format from the suffix, png by default), atomically."""
    kind = Path(path).suffix.lstrip(".").lower() or "png"
    atomic_write(path, lambda f: fig.savefig(f, format=kind, dpi=100))


def loss_figure(history: list[dict], path: Path, title: str) -> None:
    """The training and validation losses of ``history`` (and its exact match, on a second
    axis) to ``path``."""
    fig, ax = new_figure((7.5, 4.2))
    train = [(r["step"], r["train_loss"]) for r in history if r["train_loss"] is not None]
    val = [(r["step"], r["val_loss"]) for r in history if r["val_loss"] is not None]
    em = [(r["step"], r["exact_match"]) for r in history if r["exact_match"] is not None]
    if train:
        ax.plot(*zip(*train, strict=True), label="training loss (label-smoothed)")
    if val:
        ax.plot(*zip(*val, strict=True), "o-", label="validation loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss per token")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    handles = ax.get_legend_handles_labels()[0]
    if em:
        ax2 = ax.twinx()
        handles += ax2.plot(
            *zip(*em, strict=True),
            "s--",
            color="tab:green",
            label="validation exact match (right axis)",
        )
        ax2.set_ylim(-0.02, 1.02)
        ax2.set_ylabel("exact match")
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    ax.set_title(title)
    fig.tight_layout()
    save_figure(fig, path)


def attention_figure(
    model, source: str, src_vocab: Vocab, tgt_vocab: Vocab, beam: int, max_len: int, path: Path
) -> str | None:
    """Decode ``source``, draw its cross-attention to ``path``; return the output text (None,
    and no picture, for a model without cross-attention)."""
    from ..viz import heatmap

    device = next(model.parameters()).device
    src = torch.tensor([src_vocab.encode(source)], dtype=torch.long, device=device)  # (1, S)
    ids, attention = generate(model, src, max_len=max_len, beam=beam, return_attention=True)
    if "cross" not in attention:
        return None
    n_maps = attention["cross"].shape[2] * attention["cross"].shape[3]  # layers x heads
    weights = attention_map(attention["cross"][0])  # (L, S): last layer, mean over heads
    out_ids = ids[0].tolist()
    n = out_ids.index(EOS) + 1 if EOS in out_ids else len(out_ids)
    y_labels = [tgt_vocab.itos[i] for i in out_ids[:n]]
    x_labels = [src_vocab.itos[i] for i in src[0].tolist()]
    fig, ax = new_figure((max(4.0, 0.32 * len(x_labels) + 2), max(3.0, 0.32 * len(y_labels) + 1.5)))
    heatmap(
        weights[:n].float().cpu(),
        ["␣" if x == " " else x for x in x_labels],
        y_labels,
        ax=ax,
        annotate=False,
        vmin=0.0,
        vmax=1.0,
        title="cross-attention" + (" (last layer, mean over heads)" if n_maps > 1 else ""),
        xlabel="source",
        ylabel="output",
    )
    fig.tight_layout()
    save_figure(fig, path)
    return tgt_vocab.decode(out_ids)
