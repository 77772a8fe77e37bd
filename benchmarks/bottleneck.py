"""The fixed-context bottleneck, measured: exact-match accuracy against input length.

Bahdanau et al. (2014), Figure 2: the BLEU score of the plain encoder-decoder (RNNenc) falls
as sentences get longer, while the attention model (RNNsearch) holds up. This script
reproduces that shape on a synthetic task. Two :class:`attnbook.rnn.Seq2Seq` models, the same
in everything but the decoder's link to the source (the fixed context vector ``C = h_S``
alone, or additive attention over ``h_1..h_S`` as well), are trained with the same budget
(same data, same batches in the same order, same steps, same optimiser) on inputs of mixed
lengths; then each is greedy-decoded on fresh inputs of every length, including lengths
longer than any seen in training, and scored by exact match and by per-token accuracy.

Run from the repository root (a few minutes on a 2-core CPU)::

    .venv/bin/python benchmarks/bottleneck.py

It writes ``benchmarks/results/bottleneck.{md,json,png}``. ``--help`` lists the knobs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import attnbook
from attnbook.data import BOS, EOS, PAD, length_controlled, make_loader, make_task
from attnbook.decode import greedy_decode
from attnbook.rnn import Seq2Seq

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_name() -> str:
    """The CPU's model name where the OS tells it (Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--task", default="copy", choices=["copy", "reverse", "sort"])
    p.add_argument("--n-symbols", type=int, default=10, help="alphabet size")
    p.add_argument("--train-min", type=int, default=5, help="shortest training input")
    p.add_argument("--train-max", type=int, default=40, help="longest training input")
    p.add_argument("--n-train", type=int, default=50_000, help="distinct training pairs")
    p.add_argument(
        "--eval-lengths",
        default="5,10,15,20,25,30,35,40,45,50",
        help="comma-separated input lengths to evaluate",
    )
    p.add_argument("--n-eval", type=int, default=100, help="test inputs per length")
    p.add_argument("--emb", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--attn-dim", type=int, default=64, help="hidden size of the additive score")
    p.add_argument("--cell", default="gru", choices=["gru", "lstm", "rnn"])
    p.add_argument("--bidirectional", action="store_true", help="bidirectional encoder (both)")
    p.add_argument("--steps", type=int, default=1500, help="optimiser steps for each model")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1 is fastest for these small matrices)",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="folder for the results")
    p.add_argument("--name", default="bottleneck", help="file name stem of the results")
    return p.parse_args(argv)


def train(model: Seq2Seq, loader, steps: int, lr: float, log_every: int = 250) -> list[float]:
    """Teacher-forced cross-entropy with Adam and gradient clipping; returns the loss curve."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses, step = [], 0
    while step < steps:
        for batch in loader:
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
            step += 1
            if step % log_every == 0:
                recent = sum(losses[-log_every:]) / log_every
                print(f"    step {step:5d}  loss {recent:.4f}", flush=True)
            if step == steps:
                break
    return losses


def evaluate(model: Seq2Seq, pairs, src_vocab, tgt_vocab, batch_size: int = 100):
    """Greedy-decode the sources; return (exact-match accuracy, per-token accuracy).

    Per-token accuracy compares position by position up to the target's length (a missing
    or extra token counts as wrong at that position).
    """
    exact = tokens_right = tokens_total = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        src = src_vocab.encode_batch([s for s, _ in chunk])  # (B, S)
        max_len = max(len(t) for _, t in chunk) + 5
        ids = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=max_len)
        for row, (_, target) in zip(ids, chunk, strict=True):
            prediction = tgt_vocab.decode(row)
            exact += prediction == target
            tokens_right += sum(p == t for p, t in zip(prediction, target, strict=False))
            tokens_total += len(target)
    return exact / len(pairs), tokens_right / tokens_total


def _shown_path(path: Path) -> str:
    """A path as the results show it: relative to the repository when inside it (no machine
    paths in recorded results)."""
    try:
        return str(path.resolve().relative_to(RESULTS.parents[1]))
    except ValueError:
        return str(path)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = results["config"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), gridspec_kw={"width_ratios": [1, 1, 1.1]})
    for key, label, style in (
        ("context", "fixed context C = h_S (RNNenc)", "o--"),
        ("attention", "additive attention (RNNsearch)", "s-"),
    ):
        lengths = [r["length"] for r in results["by_length"]]
        axes[0].plot(
            lengths, [100 * r[key]["exact"] for r in results["by_length"]], style, label=label
        )
        axes[1].plot(
            lengths, [100 * r[key]["token"] for r in results["by_length"]], style, label=label
        )
    for ax, title in zip(axes[:2], ("exact match (%)", "per-token accuracy (%)"), strict=True):
        ax.axvspan(
            cfg["train_max"] + 0.5,
            max(cfg["eval_lengths"]) + 2,
            color="0.9",
            label="longer than any training input",
        )
        ax.set_xlabel("input length (symbols)")
        ax.set_title(title)
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
    axes[1].legend(loc="center right", fontsize=8)
    example = results["example"]
    weights = example["weights"]  # (output steps, source)
    axes[2].imshow(weights, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    axes[2].set_xticks(range(len(example["source"])), list(example["source"]), fontsize=6)
    shown = list(example["prediction"]) + ["<eos>"]
    axes[2].set_yticks(range(len(weights)), shown[: len(weights)], fontsize=6)
    axes[2].set_xlabel("source symbol")
    axes[2].set_ylabel("generated symbol")
    axes[2].set_title(f"attention weights, one input of length {len(example['source'])}")
    fig.suptitle(
        f"'{cfg['task']}' task, {cfg['cell'].upper()} hidden {cfg['hidden']}, "
        f"trained {cfg['steps']} steps on lengths {cfg['train_min']}-{cfg['train_max']} "
        "(same budget for both models)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(results: dict) -> str:
    cfg, machine = results["config"], results["machine"]
    lines = [
        "# The fixed-context bottleneck: accuracy against input length",
        "",
        "The shape of Figure 2 of Bahdanau et al. (2014) on a synthetic task: the encoder-decoder "
        "whose only link to the source is the fixed context vector C = h_S degrades as the "
        "input grows; the same model with additive attention does not.",
        "",
        f"Task `{cfg['task']}` over {cfg['n_symbols']} symbols; {cfg['n_train']} distinct "
        f"training inputs of lengths {cfg['train_min']}-{cfg['train_max']}; each test length "
        f"has {cfg['n_eval']} fresh inputs (none seen in training). Both models: "
        f"`Seq2Seq(emb_dim={cfg['emb']}, hidden_dim={cfg['hidden']}, cell={cfg['cell']!r})`, "
        f"{'bidirectional' if cfg['bidirectional'] else 'unidirectional'} encoder; trained with the same budget: {cfg['steps']} Adam steps "
        f"(lr {cfg['lr']}, gradient norm clipped to 1) on the same batches of "
        f"{cfg['batch_size']}, seed {cfg['seed']}. Greedy decoding.",
        "",
        "| input length | fixed context: exact | attention: exact | fixed context: per token "
        "| attention: per token |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in results["by_length"]:
        mark = " *" if r["length"] > cfg["train_max"] else ""
        lines.append(
            f"| {r['length']}{mark} | {100 * r['context']['exact']:.0f}% | "
            f"{100 * r['attention']['exact']:.0f}% | {100 * r['context']['token']:.1f}% | "
            f"{100 * r['attention']['token']:.1f}% |"
        )
    m = results["models"]
    seen = [r for r in results["by_length"] if r["length"] <= cfg["train_max"]]
    below = [r["length"] for r in seen if r["context"]["exact"] < 0.5]
    example = results["example"]
    verdict = (
        "right"
        if example["prediction"] == example["target"]
        else f"wrong; the target is `{example['target']}`"
    )
    lines += [
        "",
        f"\\* longer than any training input (training lengths {cfg['train_min']}-"
        f"{cfg['train_max']}).",
        "",
        f"Within the training lengths, the fixed-context model's exact match goes from "
        f"{100 * seen[0]['context']['exact']:.0f}% at length {seen[0]['length']} to "
        f"{100 * seen[-1]['context']['exact']:.0f}% at length {seen[-1]['length']}"
        + (f" (below 50% from length {below[0]} on)" if below else "")
        + f", and its per-token accuracy to {100 * seen[-1]['context']['token']:.0f}% "
        f"(guessing gives {100 / cfg['n_symbols']:.0f}%); the attention model's exact match "
        f"stays between {100 * min(r['attention']['exact'] for r in seen):.0f}% and "
        f"{100 * max(r['attention']['exact'] for r in seen):.0f}%. Same budget means the same "
        "steps on the same batches; the attention model's steps cost more time (the table "
        "below).",
        "",
        "| model | parameters | training time | final training loss |",
        "|---|---:|---:|---:|",
    ]
    for key, label in (
        ("context", "fixed context (attention=None)"),
        ("attention", "attention='additive'"),
    ):
        lines.append(
            f"| {label} | {m[key]['parameters']:,} | {m[key]['train_seconds']:.0f} s | "
            f"{m[key]['final_loss']:.4f} |"
        )
    lines += [
        "",
        f"The figure's right panel is the attention model's alignment for one test input of "
        f"length {len(example['source'])}: `{example['source']}` -> `{example['prediction']}` "
        f"({verdict}).",
        "",
        f"![accuracy against input length]({cfg['name']}.png)",
        "",
        "## Machine and command",
        "",
        f"Ran on {machine['cpu_count']} CPU cores ({machine['processor'] or machine['machine']}), "
        f"{machine['threads']} torch thread(s), Python {machine['python']}, torch "
        f"{machine['torch']}, {machine['platform']}; {results['total_seconds']:.0f} s in all. "
        "Re-run from the repository root with",
        "",
        "```",
        f"{results['command']}",
        "```",
        "",
        "Everything is seeded, so a re-run on the same machine and software gives the same "
        "numbers; another CPU or torch version may change the last digits of the losses and "
        "a few decoded sequences, not the shape.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    eval_lengths = [int(x) for x in args.eval_lengths.split(",")]
    t_start = time.time()

    data = make_task(
        args.task,
        n_train=args.n_train,
        n_val=0,
        n_test=0,
        seed=args.seed,
        min_len=args.train_min,
        max_len=args.train_max,
        n_symbols=args.n_symbols,
    )
    tests = length_controlled(data, eval_lengths, args.n_eval, seed=args.seed + 1)
    print(data, flush=True)

    results = {
        "config": {
            **{k: (_shown_path(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "eval_lengths": eval_lengths,
        },
        "models": {},
        "by_length": [{"length": n} for n in eval_lengths],
    }
    for key, attention in (("context", None), ("attention", "additive")):
        torch.manual_seed(args.seed)
        model = Seq2Seq(
            len(data.src_vocab),
            len(data.tgt_vocab),
            args.emb,
            args.hidden,
            cell=args.cell,
            bidirectional=args.bidirectional,
            attention=attention,
            pad_id=PAD,
            attn_dim=args.attn_dim if attention else None,
        )
        loader = make_loader(
            data.train, data.src_vocab, data.tgt_vocab, args.batch_size, seed=args.seed
        )  # same batches
        print(
            f"training {key} model ({sum(p.numel() for p in model.parameters()):,} parameters)",
            flush=True,
        )
        t0 = time.time()
        losses = train(model, loader, args.steps, args.lr)
        seconds = time.time() - t0
        results["models"][key] = {
            "attention": attention,
            "parameters": sum(p.numel() for p in model.parameters()),
            "train_seconds": round(seconds, 1),
            "final_loss": sum(losses[-50:]) / len(losses[-50:]),
            "loss_every_50": [
                round(sum(losses[i : i + 50]) / len(losses[i : i + 50]), 4)
                for i in range(0, len(losses), 50)
            ],
        }
        for row in results["by_length"]:
            exact, token = evaluate(model, tests[row["length"]], data.src_vocab, data.tgt_vocab)
            row[key] = {"exact": exact, "token": token}
            print(
                f"    length {row['length']:3d}: exact {100 * exact:5.1f}%  "
                f"per token {100 * token:5.1f}%",
                flush=True,
            )
        if attention is not None:  # one alignment, for the figure
            length = max(n for n in eval_lengths if n <= min(args.train_max, 30))
            source, target = tests[length][0]
            src = data.src_vocab.encode_batch([source])
            ids, att = greedy_decode(
                model, src, bos_id=BOS, eos_id=EOS, max_len=length + 5, return_attention=True
            )
            results["example"] = {
                "source": source,
                "target": target,
                "prediction": data.tgt_vocab.decode(ids[0]),
                # (L, S): the RNN's attention is one layer with one head
                "weights": att["cross"][0, :, 0, 0].round(decimals=4).tolist(),
            }

    results["total_seconds"] = round(time.time() - t_start, 1)
    results["machine"] = {
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "processor": cpu_name(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    shown = [a for a in (argv if argv is not None else sys.argv[1:])]
    results["command"] = " ".join([".venv/bin/python benchmarks/bottleneck.py", *shown])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / f"{args.name}.md").write_text(markdown(results))
    plot(results, args.out / f"{args.name}.png")
    if args.out.resolve() == RESULTS and args.name == "bottleneck":  # the chapters' copy
        recorded = Path(attnbook.__file__).resolve().parent / "recorded" / "bottleneck.json"
        recorded.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out / args.name}.{{json,md,png}} in {results['total_seconds']:.0f} s")
    return results


if __name__ == "__main__":
    main()
