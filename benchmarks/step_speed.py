"""One training step of :class:`attnbook.Transformer` against ``torch.nn.Transformer`` of the
same size (issue 18: the package must stay at 1.0x or faster, median, side by side).

Forward, label-smoothed loss, backward and an AdamW step on the same batches of dates, the two
models timed in alternating rounds in one process (the order flips every round), median steps
per second over the rounds. The reference is ``train_speed.TorchReference``: ``nn.Transformer``
holding a copy of our weights (``attnbook.transformer.to_torch_transformer``) in the same
embeddings, positions and output layer; before timing, both give the same logits (to 1e-4).
Ours runs as :class:`attnbook.train.Trainer` runs it after its first step: argument checks off
(``attnbook._checks.unchecked``; the trainer checks its data once), and also with the checks on,
as a direct call from user code runs it.

Run from the repository root (about five minutes on 2 CPU cores)::

    flock /tmp/attnbook-cpu.lock .venv/bin/python benchmarks/step_speed.py

It writes ``benchmarks/results/step_speed.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from _machine import machine_info, measured_on, run_command
from train_speed import TorchReference

from attnbook._checks import unchecked
from attnbook.data import PAD, Seq2SeqDataset, collate, make_task
from attnbook.train import BatchOrder, label_smoothed_loss
from attnbook.transformer import Transformer

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = [
    # the command line's default model
    {"d_model": 64, "n_heads": 4, "n_layers": 1, "d_ff": 256, "norm_first": True},
    # issue 18's model (decode_speed.py)
    {"d_model": 128, "n_heads": 4, "n_layers": 2, "d_ff": 512, "norm_first": False},
]
NAMES = ("attnbook (trainer)", "attnbook (checked)", "torch.nn.Transformer")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=15, help="alternating timing rounds")
    p.add_argument("--steps-per-round", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--out", type=Path, default=RESULTS)
    return p.parse_args(argv)


def measure(sizes: dict, rounds: int, steps_per_round: int, batch_size: int) -> dict:
    task = make_task("dates", 5000, 10, 10, seed=0)
    torch.manual_seed(0)
    ours = Transformer(len(task.src_vocab), len(task.tgt_vocab), dropout=0.0, max_len=512, **sizes)
    reference = TorchReference(ours)
    data = Seq2SeqDataset(task.train, task.src_vocab, task.tgt_vocab)
    order = BatchOrder(data.lengths, batch_size, seed=0)
    batches = []
    for _ in range(steps_per_round):
        batches.append(collate([data[i] for i in order.peek()]))
        order.advance()
    b = batches[0]
    real = (b.tgt_out != PAD).unsqueeze(-1)
    with torch.no_grad():
        gap = (reference(b.src, b.tgt_in) * real - ours(b.src, b.tgt_in) * real).abs().max()
    if gap.item() > 1e-4:
        raise AssertionError(f"the two models disagree by {gap.item()}: not a fair comparison")
    # the two "attnbook" entries train the same model object: that is fine for timing
    models = {NAMES[0]: ours, NAMES[1]: ours, NAMES[2]: reference}
    optimizers = {
        NAMES[0]: torch.optim.AdamW(ours.parameters(), lr=1e-3),
        NAMES[2]: torch.optim.AdamW(reference.parameters(), lr=1e-3),
    }
    optimizers[NAMES[1]] = optimizers[NAMES[0]]

    def one_round(name: str) -> float:
        model, opt = models[name], optimizers[name]
        model.train()
        context = unchecked() if name == NAMES[0] else _Nothing()
        t0 = time.perf_counter()
        for b in batches:
            with context:
                logits = model(b.src, b.tgt_in)
                loss = label_smoothed_loss(logits, b.tgt_out, PAD, 0.1, reduction="sum")
            opt.zero_grad(set_to_none=True)
            (loss / (b.tgt_out != PAD).sum()).backward()
            opt.step()
        return len(batches) / (time.perf_counter() - t0)

    for name in NAMES:  # warm up
        one_round(name)
    speeds = {name: [] for name in NAMES}
    for r in range(rounds):
        for name in NAMES if r % 2 == 0 else NAMES[::-1]:
            speeds[name].append(one_round(name))
    median = {k: statistics.median(v) for k, v in speeds.items()}
    theirs = speeds[NAMES[2]]
    return {
        "sizes": sizes,
        "batch_size": batch_size,
        "parameters": sum(p.numel() for p in ours.parameters()),
        "reference_parameters": sum(p.numel() for p in reference.parameters()),
        "max_gap": gap.item(),
        "steps_per_second": median,
        "all_rounds": speeds,
        "ratio": {k: median[k] / median[NAMES[2]] for k in NAMES[:2]},
        "ratio_of_rounds": {
            k: statistics.median(a / b for a, b in zip(speeds[k], theirs, strict=True))
            for k in NAMES[:2]
        },
    }


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def markdown(results: dict) -> str:
    lines = [
        "# One training step: attnbook.Transformer against torch.nn.Transformer",
        "",
        measured_on(results),
        "",
        "Forward, label-smoothed loss, backward and an AdamW step on the same "
        f"{results['batch_size']} dates a batch, {results['steps_per_round']} steps a round, "
        f"{results['rounds']} rounds alternating between the models (order flipped every "
        "round); median steps per second. *trainer*: as `attnbook.train.Trainer` runs the "
        "model after its first step (argument checks off: it checked its data once); "
        "*checked*: every call checks its arguments at the API edge, as a direct call does. "
        "Ratio = ours / torch (above 1: ours is faster); the last column is the median of "
        "the round-by-round ratios.",
        "",
        "| sizes | parameters | torch steps/s | ours (trainer) steps/s | ratio | "
        "ours (checked) steps/s | ratio | ratio of rounds (trainer / checked) |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results["rows"]:
        s, v, q, rr = r["sizes"], r["steps_per_second"], r["ratio"], r["ratio_of_rounds"]
        lines.append(
            f"| d_model {s['d_model']}, {s['n_heads']} heads, {s['n_layers']}+{s['n_layers']} "
            f"layers, d_ff {s['d_ff']}, {'pre' if s['norm_first'] else 'post'}-LN | "
            f"{r['parameters']:,} | {v[NAMES[2]]:.1f} | {v[NAMES[0]]:.1f} | "
            f"**{q[NAMES[0]]:.2f}** | {v[NAMES[1]]:.1f} | {q[NAMES[1]]:.2f} | "
            f"{rr[NAMES[0]]:.2f} / {rr[NAMES[1]]:.2f} |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> dict:
    args = parse_args(argv)
    results = {
        "machine": machine_info(),
        "command": run_command("step_speed.py", argv),
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "steps_per_round": args.steps_per_round,
        "rows": [],
    }
    for sizes in SIZES:
        row = measure(sizes, args.rounds, args.steps_per_round, args.batch_size)
        print(json.dumps({k: row[k] for k in ("sizes", "steps_per_second", "ratio")}))
        results["rows"].append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "step_speed.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "step_speed.md").write_text(markdown(results))
    print(markdown(results))
    return results


if __name__ == "__main__":
    main()
