"""Dates between real languages: exact match, BLEU, chrF and alignment accuracy per model.

Three models, the same in data, steps and batches, learn to translate a date written in
English (CLDR's four styles and the English dates task's own spellings) into Chinese, German
and Russian as CLDR writes them (:mod:`attnbook.languages`): the RNN with a fixed context
vector, the RNN with additive attention (Bahdanau et al. 2014) and a small Transformer. Each is
greedy-decoded on held-out dates (no test date is seen in training in any spelling) and scored
by exact match, corpus BLEU (sacrebleu; its ``zh`` tokenizer for Chinese) and chrF, and, for
the attention models, by **alignment accuracy**: the share of the attention of each target
character that falls on the source field (weekday, day, month, year) that wrote it, which the
generator knows (:func:`attnbook.languages.alignment_accuracy`). The Transformer's is given
for its heads averaged and for its best head.

Run from the repository root (about 15 minutes on a 2-core CPU)::

    .venv/bin/python benchmarks/languages.py

It writes ``benchmarks/results/languages.{md,json}``. ``--help`` lists the knobs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_info, measured_on, run_command  # noqa: E402

from attnbook import Seq2Seq, Transformer, train_model  # noqa: E402
from attnbook.data import Seq2SeqDataset, collate  # noqa: E402
from attnbook.evaluate import translation_scores  # noqa: E402
from attnbook.languages import alignment_accuracy, make_dates_between  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
PAIRS = (("en_US", "zh_CN"), ("en_US", "de_DE"), ("en_US", "ru_RU"))
MODELS = ("rnn", "rnn-attention", "transformer")


def build(kind: str, task):
    src, tgt = len(task.src_vocab), len(task.tgt_vocab)
    if kind == "transformer":
        return Transformer(src, tgt, d_model=64, n_heads=4, n_layers=1, d_ff=256, dropout=0.0,
                           norm_first=True)  # fmt: skip
    attention = "additive" if kind == "rnn-attention" else None
    return Seq2Seq(src, tgt, emb_dim=64, hidden_dim=128, attention=attention)


def train_options(kind: str, steps: int) -> dict:
    common = {"schedule": "cosine", "warmup": 100, "eval_every": steps, "device": "cpu"}
    if kind == "transformer":
        return {**common, "lr": 8e-3, "label_smoothing": 0.1}
    return {**common, "lr": 3e-3}


@torch.no_grad()
def alignment(model, task) -> dict | None:
    """Mean alignment accuracy over the test pairs: heads averaged, and the best head."""
    if getattr(model, "attention", "none") is None:
        return None  # the fixed context vector: no weights to measure
    batch = collate(list(Seq2SeqDataset(task.test, task.src_vocab, task.tgt_vocab)))
    model.eval()
    _, attention = model(batch.src, batch.tgt_in, return_attention=True)
    cross = attention["cross"][-1]  # (B, H, T, S), the last layer
    per_head = [
        [
            alignment_accuracy(cross[i, h], task.fields[s], task.fields[t])
            for i, (s, t) in enumerate(task.test)
        ]
        for h in range(cross.shape[1])
    ]
    mean = [
        alignment_accuracy(cross[i].mean(0), task.fields[s], task.fields[t])
        for i, (s, t) in enumerate(task.test)
    ]
    heads = [sum(a) / len(a) for a in per_head]
    return {"heads_averaged": sum(mean) / len(mean), "best_head": max(heads), "per_head": heads}


def run(args) -> dict:
    torch.set_num_threads(args.threads)
    rows = []
    for src, tgt in PAIRS:
        task = make_dates_between(src, tgt, args.n_train, 300, args.n_test, seed=0)
        for kind in MODELS:
            torch.manual_seed(0)
            model = build(kind, task)
            start = time.perf_counter()
            train_model(model, task, args.steps, **train_options(kind, args.steps))
            seconds = time.perf_counter() - start
            scores = translation_scores(
                model, task.test, task.src_vocab, task.tgt_vocab,
                tokenize="zh" if tgt.startswith("zh") else "13a",
            )  # fmt: skip
            row = {
                "pair": f"{src} -> {tgt}",
                "model": kind,
                "seconds": round(seconds, 1),
                "exact_match": scores["exact_match"],
                "bleu": scores["bleu"],
                "chrf": scores["chrf"],
                "alignment": alignment(model, task),
                "examples": [
                    (s, t, h)
                    for (s, t), h in zip(task.test[:3], scores["hypotheses"][:3], strict=True)
                ],
            }
            rows.append(row)
            print(row["pair"], kind, f"{seconds:.0f} s", f"exact {row['exact_match']:.3f}",
                  f"BLEU {row['bleu']:.1f}", f"chrF {row['chrf']:.1f}", row["alignment"] and
                  f"align {row['alignment']['heads_averaged']:.3f}", flush=True)  # fmt: skip
    return {
        "machine": machine_info(),
        "command": run_command("languages.py"),
        "settings": vars(args),
        "rows": rows,
    }


def markdown(results: dict) -> str:
    lines = [
        "# Dates between real languages",
        "",
        measured_on(results),
        "",
        f"Every model: {results['settings']['steps']} steps of batch 64 on "
        f"{results['settings']['n_train']} training pairs, then greedy decoding of "
        f"{results['settings']['n_test']} held-out dates. Alignment: the mean share of each "
        "target character's attention on the source field that wrote it (last layer; the "
        "Transformer's heads averaged, and its best head). The fixed-context RNN has no "
        "attention to measure.",
        "",
        "| pair | model | exact match | BLEU | chrF | alignment | best head | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        a = r["alignment"]
        lines.append(
            f"| {r['pair']} | {r['model']} | {r['exact_match']:.1%} | {r['bleu']:.1f} | "
            f"{r['chrf']:.1f} | {a['heads_averaged']:.1%} | {a['best_head']:.1%} | "
            f"{r['seconds']:.0f} |"
            if a
            else f"| {r['pair']} | {r['model']} | {r['exact_match']:.1%} | {r['bleu']:.1f} | "
            f"{r['chrf']:.1f} | - | - | {r['seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=600, help="training steps of every model")
    p.add_argument("--n-train", type=int, default=20000, help="training pairs")
    p.add_argument("--n-test", type=int, default=500, help="held-out test pairs")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    args = p.parse_args(argv)
    results = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "languages.json").write_text(
        json.dumps(results, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
    )
    (args.out / "languages.md").write_text(markdown(results), encoding="utf-8")
    print(f"wrote {args.out / 'languages.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
