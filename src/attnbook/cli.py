"""The command line: ``python -m attnbook train | evaluate | translate``.

``train`` builds a task's data and a model, trains it with :class:`attnbook.train.Trainer`
and writes, into ``--out``: ``checkpoint.pt``, ``metrics.json``, ``history.csv``,
``loss.png`` and ``attention.png``. ``evaluate`` measures exact match by input length;
``translate`` runs a trained model on your own input. ``--help`` on each says more.

Exit status: 0 done; 1 an error (one line on stderr, no traceback; set ``ATTNBOOK_DEBUG=1``
to see the traceback); 2 bad arguments; 130 training interrupted by Ctrl-C (after saving a
checkpoint that ``--resume`` continues from).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from pathlib import Path

import torch

from .data import BOS, EOS, TASKS, Vocab, length_controlled, load_tsv, make_task, normalise_text
from .decode import beam_search, greedy_decode
from .train import (
    HISTORY_KEYS,
    OPTIMIZERS,
    SCHEDULES,
    CheckpointError,
    TrainConfig,
    Trainer,
    exact_match,
    init_distributed,
    load_checkpoint,
)
from .utils import DEVICES, get_device, seed_everything

__all__ = ["main", "build_parser", "build_model", "MODELS", "TRAIN_DEFAULTS"]

MODELS = ("rnn", "rnn-attention", "transformer")
TASK_NAMES = (*TASKS, "tsv")

# Defaults of `train`, chosen to train fast on a 2-core CPU (benchmarks/train_speed.py).
# The parser's own defaults are None, so that on --resume only the options given again
# override the checkpoint's.
TRAIN_DEFAULTS = {
    "model": "transformer", "steps": None, "epochs": None, "max_seconds": None,
    "batch_size": 64, "optimizer": "adamw", "lr": None, "schedule": None, "warmup": None,
    "lr_scale": 0.7, "weight_decay": 0.01, "grad_clip": 1.0, "label_smoothing": 0.1,
    "eval_every": 250, "eval_examples": 500, "log_every": 25,
    # the Transformer
    "d_model": 64, "heads": 4, "layers": 1, "d_ff": 256, "dropout": 0.0, "norm_first": True,
    # the RNNs
    "emb": 64, "hidden": 128, "cell": "gru", "score": "additive", "bidirectional": False,
    # the data
    "n_train": 20000, "n_val": 500, "n_test": 1000, "min_len": None, "max_len": None,
    "n_symbols": None, "level": "word", "lower": False, "max_pairs": None,
    # the run
    "device": "auto", "amp": None, "compile": False, "seed": 0, "threads": None,
    "out": None, "quiet": False,
}
# model-dependent defaults: (schedule, lr, warmup, steps)
MODEL_DEFAULTS = {
    "transformer": {"schedule": "cosine", "lr": 3e-3, "warmup": 100, "steps": 2000},
    "rnn": {"schedule": "cosine", "lr": 3e-3, "warmup": 50, "steps": 2000},
    "rnn-attention": {"schedule": "cosine", "lr": 3e-3, "warmup": 50, "steps": 2000},
}
# options a resumed run must keep (they decide the model, the data or the batch order)
FIXED_ON_RESUME = ("task", "data", "model", "d_model", "heads", "layers", "d_ff", "norm_first",
                   "emb", "hidden", "cell", "score", "bidirectional", "n_train", "n_val",
                   "n_test", "min_len", "max_len", "n_symbols", "level", "lower", "max_pairs",
                   "seed", "batch_size")
LENGTH_OPTIONS = ("steps", "epochs", "max_seconds")
EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130


# --------------------------------------------------------------------------------------------
# argument parsing
# --------------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """An argument error is one line (not the whole usage) and exit status 2."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _natural_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {text}")
    return value


def _lengths(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated positive integers such as 5,10,20, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(
            f"must be comma-separated positive integers such as 5,10,20, got {text!r}")
    return sorted(set(values))


def _default(name: str) -> str:
    value = TRAIN_DEFAULTS[name]
    return f" (default: {value})" if value is not None else ""


TRAIN_EXAMPLES = """\
examples:
  python -m attnbook train --task dates --model transformer --max-seconds 60 --out runs/dates
  python -m attnbook train --task reverse --model rnn-attention --steps 3000 --hidden 256
  python -m attnbook train --task tsv --data fra.tsv --model transformer --epochs 10 \\
      --d-model 256 --layers 3 --device cuda
  python -m attnbook train --resume runs/dates/checkpoint.pt --steps 4000
  torchrun --nproc_per_node=2 -m attnbook train --task dates --batch-size 256

--steps is the total number of updates, those before a --resume included. On --resume the
model, data and seed come from the checkpoint; other options given again override it.
Ctrl-C saves a checkpoint and exits (status 130); --resume continues exactly from it.
"""

EVALUATE_EXAMPLES = """\
examples:
  python -m attnbook evaluate --checkpoint runs/reverse/checkpoint.pt --lengths 5,10,20,40
  python -m attnbook evaluate --checkpoint runs/dates/checkpoint.pt --beam 4

copy/reverse/sort: --n-per-length fresh inputs of exactly each length (none seen in training;
lengths beyond the training range show how the model extrapolates). dates/tsv: the test split,
grouped by source length: the column "L" holds sources longer than the previous bound and at
most L tokens long. The table is also written to evaluation.json beside the checkpoint.
"""

TRANSLATE_EXAMPLES = """\
examples:
  python -m attnbook translate --checkpoint runs/dates/checkpoint.pt "Wednesday 9 May 2018"
  python -m attnbook translate --checkpoint runs/dates/checkpoint.pt "9.5.2018" \\
      --attention-png attention.png --beam 4
"""


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m attnbook``: subcommands train, evaluate, translate."""
    parser = _Parser(prog="python -m attnbook",
                     description="Train, evaluate and run the seq2seq models of the book "
                                 "'Attention, from the ground up'.",
                     epilog="run 'python -m attnbook COMMAND --help' for a command's options "
                            "and examples")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    fmt = argparse.RawDescriptionHelpFormatter

    # ---------------------------------------------------------------- train
    t = sub.add_parser("train", help="train a model on a task", formatter_class=fmt,
                       description="Train an RNN or Transformer seq2seq model on a synthetic "
                                   "task or your own tab-separated sentence pairs.",
                       epilog=TRAIN_EXAMPLES)
    g = t.add_argument_group("task and data")
    g.add_argument("--task", choices=TASK_NAMES,
                   help="copy, reverse, sort (letter sequences), dates (human dates -> ISO) or "
                        "tsv (your own source<TAB>target file, --data); required unless "
                        "--resume")
    g.add_argument("--data", metavar="FILE", help="the .tsv file for --task tsv")
    g.add_argument("--n-train", type=_positive_int, metavar="N",
                   help="training pairs of a synthetic task" + _default("n_train"))
    g.add_argument("--n-val", type=_natural_int, metavar="N",
                   help="validation pairs (evaluated during training)" + _default("n_val"))
    g.add_argument("--n-test", type=_natural_int, metavar="N",
                   help="held-out test pairs (scored at the end)" + _default("n_test"))
    g.add_argument("--min-len", type=_positive_int, metavar="N",
                   help="copy/reverse/sort: shortest input (default 3)")
    g.add_argument("--max-len", type=_positive_int, metavar="N",
                   help="copy/reverse/sort: longest input (default 10); tsv: longest sentence "
                        "in tokens (default 50)")
    g.add_argument("--n-symbols", type=_positive_int, metavar="N",
                   help="copy/reverse/sort: alphabet size, at most 26 (default 10)")
    g.add_argument("--level", choices=("word", "char"),
                   help="tsv: word- or character-level vocabulary" + _default("level"))
    g.add_argument("--lower", action="store_true", default=None,
                   help="tsv: lower-case the text")
    g.add_argument("--max-pairs", type=_positive_int, metavar="N",
                   help="tsv: read at most N pairs of the file")

    g = t.add_argument_group("model")
    g.add_argument("--model", choices=MODELS,
                   help="rnn (fixed context vector), rnn-attention (RNN with attention) or "
                        "transformer" + _default("model"))
    g.add_argument("--d-model", type=_positive_int, metavar="N",
                   help="transformer: model width" + _default("d_model"))
    g.add_argument("--heads", type=_positive_int, metavar="N",
                   help="transformer: attention heads" + _default("heads"))
    g.add_argument("--layers", type=_positive_int, metavar="N",
                   help="transformer: encoder layers = decoder layers" + _default("layers"))
    g.add_argument("--d-ff", type=_positive_int, metavar="N",
                   help="transformer: feed-forward width" + _default("d_ff"))
    g.add_argument("--norm-first", action=argparse.BooleanOptionalAction, default=None,
                   help="transformer: pre-LN (trains faster at these sizes); --no-norm-first "
                        "is the paper's post-LN" + _default("norm_first"))
    g.add_argument("--emb", type=_positive_int, metavar="N",
                   help="rnn: embedding size" + _default("emb"))
    g.add_argument("--hidden", type=_positive_int, metavar="N",
                   help="rnn: hidden state size" + _default("hidden"))
    g.add_argument("--cell", choices=("gru", "lstm", "rnn"), help="rnn: cell" + _default("cell"))
    g.add_argument("--score", choices=("additive", "dot", "general", "scaled_dot"),
                   help="rnn-attention: alignment score" + _default("score"))
    g.add_argument("--bidirectional", action="store_true", default=None,
                   help="rnn: bidirectional encoder")
    g.add_argument("--dropout", type=_fraction, metavar="P", help="dropout" + _default("dropout"))

    g = t.add_argument_group("optimisation")
    length = g.add_mutually_exclusive_group()
    length.add_argument("--steps", type=_positive_int, metavar="N",
                        help="total updates (default 2000 unless --epochs)")
    length.add_argument("--epochs", type=_positive_int, metavar="N",
                        help="passes over the training data, instead of --steps")
    g.add_argument("--max-seconds", type=_positive_float, metavar="S",
                   help="stop after S seconds of training (evaluations included), or when "
                        "--steps/--epochs are done if that comes first")
    g.add_argument("--batch-size", type=_positive_int, metavar="N",
                   help="pairs per update, over all processes" + _default("batch_size"))
    g.add_argument("--optimizer", choices=OPTIMIZERS, help="optimiser" + _default("optimizer"))
    g.add_argument("--schedule", choices=SCHEDULES,
                   help="learning-rate schedule: noam (the paper's warm-up, 1/sqrt(step) "
                        "decay), constant, or cosine (warm-up, then a cosine decay to 0.1 lr "
                        "at the last step) (default: cosine, which ends cleaner on short runs: "
                        "see benchmarks/results/train_speed.md)")
    g.add_argument("--lr", type=_positive_float,
                   help="peak learning rate of constant/cosine (default 3e-3)")
    g.add_argument("--lr-scale", type=_positive_float, metavar="F",
                   help="noam: factor on d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)"
                        + _default("lr_scale"))
    g.add_argument("--warmup", type=_natural_int, metavar="N",
                   help="warm-up steps (default: 100 for the transformer, 50 for the RNNs)")
    g.add_argument("--weight-decay", type=float, metavar="W",
                   help="AdamW weight decay" + _default("weight_decay"))
    g.add_argument("--grad-clip", type=_positive_float, metavar="NORM",
                   help="clip the gradient norm" + _default("grad_clip"))
    g.add_argument("--label-smoothing", type=_fraction, metavar="EPS",
                   help="label smoothing" + _default("label_smoothing"))
    g.add_argument("--eval-every", type=_positive_int, metavar="N",
                   help="evaluate (and save a checkpoint) every N steps" + _default("eval_every"))
    g.add_argument("--eval-examples", type=_positive_int, metavar="N",
                   help="validation pairs decoded at each evaluation" + _default("eval_examples"))
    g.add_argument("--log-every", type=_positive_int, metavar="N",
                   help="a history row every N steps" + _default("log_every"))

    g = t.add_argument_group("run")
    g.add_argument("--device", choices=DEVICES,
                   help="auto = cuda, then mps, then cpu" + _default("device"))
    g.add_argument("--amp", action=argparse.BooleanOptionalAction, default=None,
                   help="mixed precision (default: on for CUDA, off elsewhere; on the CPU it "
                        "autocasts to bfloat16)")
    g.add_argument("--compile", action="store_true", default=None,
                   help="torch.compile the model for training (minutes of compiling on a "
                        "CPU; worth it for long GPU runs)")
    g.add_argument("--seed", type=_natural_int, help="random seed" + _default("seed"))
    g.add_argument("--threads", type=_positive_int, metavar="N",
                   help="torch CPU threads (default: torch's choice)")
    g.add_argument("--out", metavar="DIR",
                   help="output folder (default: runs/TASK-MODEL; on --resume the "
                        "checkpoint's folder)")
    g.add_argument("--resume", metavar="CHECKPOINT",
                   help="continue a run from its checkpoint.pt, exactly where it stopped")
    g.add_argument("--quiet", action="store_true", default=None,
                   help="no progress bar or log lines")
    t.set_defaults(func=cmd_train)

    # ---------------------------------------------------------------- evaluate
    e = sub.add_parser("evaluate", help="exact-match accuracy by input length",
                       formatter_class=fmt, epilog=EVALUATE_EXAMPLES,
                       description="Greedy-decode (or beam-search) held-out inputs and print "
                                   "exact-match accuracy by input length.")
    e.add_argument("--checkpoint", required=True, metavar="FILE",
                   help="a checkpoint.pt written by 'train'")
    e.add_argument("--lengths", type=_lengths, default=[5, 10, 20, 40], metavar="L1,L2,...",
                   help="input lengths (default: 5,10,20,40)")
    e.add_argument("--n-per-length", type=_positive_int, default=100, metavar="N",
                   help="copy/reverse/sort: fresh inputs per length (default: 100)")
    e.add_argument("--beam", type=_positive_int, default=1, metavar="K",
                   help="beam size; 1 = greedy decoding (default: 1)")
    e.add_argument("--batch-size", type=_positive_int, default=256, metavar="N",
                   help="inputs decoded together (default: 256)")
    e.add_argument("--device", choices=DEVICES, default="auto", help="(default: auto)")
    e.set_defaults(func=cmd_evaluate)

    # ---------------------------------------------------------------- translate
    r = sub.add_parser("translate", help="run a trained model on your input",
                       formatter_class=fmt, epilog=TRANSLATE_EXAMPLES,
                       description="Decode each TEXT with a trained model and print the "
                                   "output, one line each.")
    r.add_argument("text", nargs="+", metavar="TEXT", help="the input(s), quoted")
    r.add_argument("--checkpoint", required=True, metavar="FILE",
                   help="a checkpoint.pt written by 'train'")
    r.add_argument("--beam", type=_positive_int, default=1, metavar="K",
                   help="beam size; 1 = greedy decoding (default: 1)")
    r.add_argument("--max-len", type=_positive_int, default=None, metavar="N",
                   help="longest output in tokens (default: twice the input, plus 10)")
    r.add_argument("--attention-png", metavar="FILE",
                   help="save the cross-attention heatmap (the last layer, averaged over heads "
                        "for the transformer); with several inputs FILE gets _1, _2, ...")
    r.add_argument("--device", choices=DEVICES, default="auto", help="(default: auto)")
    r.set_defaults(func=cmd_translate)
    return parser


# --------------------------------------------------------------------------------------------
# models and data from options
# --------------------------------------------------------------------------------------------

def _model_kwargs(o: dict) -> dict:
    if o["model"] == "transformer":
        return {"d_model": o["d_model"], "n_heads": o["heads"], "n_layers": o["layers"],
                "d_ff": o["d_ff"], "dropout": o["dropout"], "norm_first": o["norm_first"],
                "max_len": 512}
    return {"emb_dim": o["emb"], "hidden_dim": o["hidden"], "cell": o["cell"],
            "bidirectional": o["bidirectional"], "dropout": o["dropout"],
            "attention": o["score"] if o["model"] == "rnn-attention" else None}


def build_model(kind: str, src_vocab_size: int, tgt_vocab_size: int, kwargs: dict):
    """The model ``kind`` (one of :data:`MODELS`) with constructor arguments ``kwargs``."""
    if kind not in MODELS:
        raise ValueError(f"kind must be one of {MODELS}, got {kind!r}")
    if kind == "transformer":
        from .transformer import Transformer
        return Transformer(src_vocab_size, tgt_vocab_size, **kwargs)
    from .rnn import Seq2Seq
    return Seq2Seq(src_vocab_size, tgt_vocab_size, **kwargs)


def _task_kwargs(o: dict) -> dict:
    if o["task"] == "tsv":
        kw = {"path": str(Path(o["data"]).resolve()), "level": o["level"], "lower": o["lower"],
              "seed": o["seed"]}
        kw.update({k: o[k] for k in ("max_len", "max_pairs") if o[k] is not None})
        return kw
    kw = {"n_train": o["n_train"], "n_val": o["n_val"], "n_test": o["n_test"], "seed": o["seed"]}
    options = {k: o[k] for k in ("min_len", "max_len", "n_symbols") if o[k] is not None}
    if options and o["task"] == "dates":
        raise ValueError(f"--{next(iter(options)).replace('_', '-')} applies to copy/reverse/"
                         "sort, not to --task dates")
    return {**kw, **options}


def _build_task(name: str, kwargs: dict):
    if name == "tsv":
        kw = dict(kwargs)
        path = Path(kw.pop("path"))
        if not path.is_file():
            raise FileNotFoundError(f"the data file {path} does not exist")
        return load_tsv(path, **kw)
    kw = dict(kwargs)
    return make_task(name, kw.pop("n_train"), kw.pop("n_val"), kw.pop("n_test"), **kw)


def _model_from_checkpoint(ckpt: dict, path, device: torch.device):
    meta = ckpt.get("meta") or {}
    if "model" not in meta or "model_kwargs" not in meta:
        raise CheckpointError(f"{path} was not written by 'python -m attnbook train' (it does "
                              "not say which model it holds)")
    src_vocab = Vocab.from_dict(ckpt["vocab"]["src"])
    tgt_vocab = Vocab.from_dict(ckpt["vocab"]["tgt"])
    model = build_model(meta["model"], len(src_vocab), len(tgt_vocab), meta["model_kwargs"])
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as err:
        raise CheckpointError(f"{path}: its weights do not fit a {meta['model']} with "
                              f"{meta['model_kwargs']}") from err
    return model.to(device).eval(), src_vocab, tgt_vocab, meta


def _normalise_input(text: str, vocab: Vocab, meta: dict) -> str:
    """Treat a typed input as the training data were treated (tsv: tokenised, lower-cased)."""
    if meta.get("task") != "tsv":
        return text
    return normalise_text(text, vocab.level, meta["task_kwargs"].get("lower", False))


def _decode(model, src, beam: int, max_len: int, return_attention: bool = False):
    if beam == 1:
        return greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=max_len,
                             return_attention=return_attention)
    return beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=max_len, beam_size=beam,
                       return_attention=return_attention)


# --------------------------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------------------------

def _resolve_train_options(args: argparse.Namespace) -> tuple[dict, dict | None]:
    """The run's options: defaults <- the checkpoint's (on --resume) <- the command line."""
    given = {k: v for k, v in vars(args).items()
             if k in TRAIN_DEFAULTS or k in ("task", "data")}
    given = {k: v for k, v in given.items() if v is not None}
    ckpt = None
    options = {**TRAIN_DEFAULTS, "task": None, "data": None}
    if args.resume:
        ckpt = load_checkpoint(args.resume)
        before = (ckpt.get("meta") or {}).get("options")
        if before is None:
            raise CheckpointError(f"{args.resume} was not written by 'python -m attnbook "
                                  "train', so it cannot be resumed from the command line")
        for key in FIXED_ON_RESUME:
            if key in given and given[key] != before.get(key):
                flag = "--" + key.replace("_", "-")
                raise CheckpointError(f"{args.resume} was trained with {flag} "
                                      f"{before.get(key)}, not {given[key]}; a resumed run "
                                      "keeps the model, the data and the seed")
        options.update(before)
        if any(k in given for k in LENGTH_OPTIONS):          # a new length replaces the old
            options.update(dict.fromkeys(LENGTH_OPTIONS))
        if "out" not in given:
            options["out"] = str(Path(args.resume).parent)
    options.update(given)
    if options["task"] is None:
        raise ValueError("--task is required (or --resume CHECKPOINT)")
    for key, value in MODEL_DEFAULTS[options["model"]].items():
        if options[key] is None and not (key == "steps" and options["epochs"]):
            options[key] = value
    if options["task"] == "tsv":
        if not options["data"]:
            raise ValueError("--task tsv needs --data FILE (one source<TAB>target pair a line)")
        if not Path(options["data"]).is_file():
            raise FileNotFoundError(f"--data {options['data']}: no such file")
    elif options["data"]:
        raise ValueError(f"--data is for --task tsv, not --task {options['task']}")
    if options["out"] is None:
        options["out"] = str(Path("runs") / f"{options['task']}-{options['model']}")
    return options, ckpt


def _train_config(o: dict, device: str) -> TrainConfig:
    return TrainConfig(
        steps=o["steps"], epochs=o["epochs"], max_seconds=o["max_seconds"],
        batch_size=o["batch_size"], optimizer=o["optimizer"], lr=o["lr"],
        schedule=o["schedule"], warmup=o["warmup"], lr_scale=o["lr_scale"],
        weight_decay=o["weight_decay"], grad_clip=o["grad_clip"],
        label_smoothing=o["label_smoothing"], eval_every=o["eval_every"],
        eval_examples=o["eval_examples"], log_every=o["log_every"], device=device,
        amp=o["amp"], compile=o["compile"], seed=o["seed"], progress=not o["quiet"],
        out_dir=o["out"])


def cmd_train(args: argparse.Namespace) -> int:
    options, ckpt = _resolve_train_options(args)
    rank, world_size = init_distributed()
    if options["threads"]:
        torch.set_num_threads(options["threads"])
    say = print if rank == 0 and not options["quiet"] else (lambda *a, **k: None)
    seed_everything(options["seed"])
    task = _build_task(options["task"], _task_kwargs(options))
    if not task.val:
        raise ValueError("the task has no validation pairs (--n-val 0 or a tiny file): "
                         "training needs some to evaluate on")
    kind, model_kwargs = options["model"], _model_kwargs(options)
    model = build_model(kind, len(task.src_vocab), len(task.tgt_vocab), model_kwargs)
    config = _train_config(options, options["device"])
    meta = {"model": kind, "model_kwargs": model_kwargs, "task": options["task"],
            "task_kwargs": _task_kwargs(options), "options": options}
    trainer = Trainer(model, task.train, task.val, config, src_vocab=task.src_vocab,
                      tgt_vocab=task.tgt_vocab, meta=meta)
    if ckpt is not None:
        trainer.load_checkpoint(ckpt)
        say(f"resuming {args.resume} at step {trainer.step}")
    n_params = sum(p.numel() for p in model.parameters())
    say(f"{kind} ({n_params:,} parameters) on {task.name}: {len(task.train)} training pairs, "
        f"device {trainer.device}" + (f", {world_size} processes" if world_size > 1 else "")
        + (f", amp {trainer.amp_dtype}" if trainer.amp_dtype else ""), flush=True)
    trainer.fit()
    if rank == 0:
        out = Path(options["out"])
        test = None
        if task.test and not trainer.interrupted:
            test = trainer.evaluate(task.test, max_examples=None)
        metrics = _metrics(trainer, task, kind, n_params, test)
        _write_outputs(out, trainer, model, task, metrics)
        if trainer.interrupted:                  # said even with --quiet
            print(f"interrupted ({trainer.interrupted}) at step {trainer.step}; checkpoint saved: "
                f"{out / 'checkpoint.pt'}; continue with --resume {out / 'checkpoint.pt'}",
                file=sys.stderr)
        else:
            shown = {k: metrics[k] for k in ("train_loss", "val_loss", "exact_match",
                                             "test_exact_match") if metrics.get(k) is not None}
            say(f"done: {trainer.step} steps in {trainer.elapsed:.1f} s; "
                + ", ".join(f"{k} {v:.4f}" for k, v in shown.items()) + f"; wrote {out}/")
    if world_size > 1:
        torch.distributed.destroy_process_group()
    return EXIT_INTERRUPTED if trainer.interrupted else 0


def _metrics(trainer: Trainer, task, kind: str, n_params: int, test: dict | None) -> dict:
    history = trainer.history
    last_loss = next((r["train_loss"] for r in reversed(history)
                      if r["train_loss"] is not None), None)
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
        metrics.update(test_loss=test["val_loss"], test_token_accuracy=test["token_accuracy"],
                       test_exact_match=test["exact_match"], test_examples=len(task.test))
    metrics["config"] = trainer.config.to_dict()
    return metrics


def _write_outputs(out: Path, trainer: Trainer, model, task, metrics: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    with open(out / "history.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=HISTORY_KEYS)
        writer.writeheader()
        writer.writerows({k: ("" if row.get(k) is None else row[k]) for k in HISTORY_KEYS}
                         for row in trainer.history)
    _loss_figure(trainer.history, out / "loss.png", f"{metrics['model']} on {metrics['task']}")
    pairs = task.test or task.val
    if getattr(model, "attention", "") is not None and pairs:
        source = pairs[0][0]
        _attention_figure(model, source, trainer.src_vocab, trainer.tgt_vocab, 1,
                          2 * len(trainer.src_vocab.tokenize(source)) + 10, out / "attention.png")


# --------------------------------------------------------------------------------------------
# pictures
# --------------------------------------------------------------------------------------------

def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _loss_figure(history: list[dict], path: Path, title: str) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
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
        handles += ax2.plot(*zip(*em, strict=True), "s--", color="tab:green",
                            label="validation exact match (right axis)")
        ax2.set_ylim(-0.02, 1.02)
        ax2.set_ylabel("exact match")
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3,
              fontsize=8, frameon=False)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _attention_figure(model, source: str, src_vocab: Vocab, tgt_vocab: Vocab, beam: int,
                      max_len: int, path: Path) -> str:
    """Decode ``source``, draw its cross-attention to ``path``; return the output text."""
    plt = _pyplot()
    from .viz import heatmap

    device = next(model.parameters()).device
    src = torch.tensor([src_vocab.encode(source)], dtype=torch.long, device=device)   # (1, S)
    ids, attention = _decode(model, src, beam, max_len, return_attention=True)
    if "cross" not in attention:
        raise ValueError("this model has no attention to draw (--model rnn uses the fixed "
                         "context vector only)")
    weights = attention["cross"][0]                       # (L, S) or (L, n_layers, H, S)
    if weights.dim() == 4:
        weights = weights[:, -1].mean(dim=1)              # last layer, mean over heads: (L, S)
    out_ids = ids[0].tolist()
    n = out_ids.index(EOS) + 1 if EOS in out_ids else len(out_ids)
    y_labels = [tgt_vocab.itos[i] for i in out_ids[:n]]
    x_labels = [src_vocab.itos[i] for i in src[0].tolist()]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.32 * len(x_labels) + 2),
                                    max(3.0, 0.32 * len(y_labels) + 1.5)))
    heatmap(weights[:n].float().cpu(), ["␣" if x == " " else x for x in x_labels],
            y_labels, ax=ax, annotate=False, vmin=0.0, vmax=1.0,
            title="cross-attention" + (" (last layer, mean over heads)"
                                       if attention["cross"].dim() == 5 else ""),
            xlabel="source", ylabel="output")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return tgt_vocab.decode(out_ids)


# --------------------------------------------------------------------------------------------
# evaluate and translate
# --------------------------------------------------------------------------------------------

def cmd_evaluate(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.checkpoint)
    device = get_device(args.device)
    model, src_vocab, tgt_vocab, meta = _model_from_checkpoint(ckpt, args.checkpoint, device)
    task = _build_task(meta["task"], meta["task_kwargs"])
    if meta["task"] in ("copy", "reverse", "sort"):
        seen = {s for split in (task.train, task.val, task.test) for s, _ in split}
        n_symbols = task.options["n_symbols"]
        groups = {}
        for length in args.lengths:           # as many fresh inputs as there are, up to N
            left = n_symbols ** length - sum(len(s) == length for s in seen)
            n = min(args.n_per_length, left)
            groups[length] = [] if n < 1 else length_controlled(
                task, [length], n, seed=meta["task_kwargs"]["seed"] + 1)[length]
        how = f"up to {args.n_per_length} inputs of each length, none seen in training"
    else:
        groups = {n: [] for n in args.lengths}
        for pair in task.test:
            n = len(src_vocab.tokenize(pair[0]))
            bound = next((b for b in args.lengths if n <= b), None)
            if bound is not None:
                groups[bound].append(pair)
        how = "the test split by source length (longer than the previous bound, <= L)"
    by_length, counts = {}, {}
    for length, pairs in groups.items():
        counts[str(length)] = len(pairs)
        by_length[str(length)] = (None if not pairs else
                                  _exact_match(model, pairs, src_vocab, tgt_vocab, args.beam,
                                               args.batch_size, device))
    print(f"exact match, {'greedy' if args.beam == 1 else f'beam {args.beam}'} decoding, "
          f"{meta['model']} on {meta['task']} ({how}):")
    print(f"{'length':>8} {'examples':>9} {'exact match':>12}")
    for key, value in by_length.items():
        shown = "-" if value is None else f"{100 * value:.1f}%"
        print(f"{key:>8} {counts[key]:>9} {shown:>12}")
    result = {"by_length": by_length, "examples": counts, "beam": args.beam,
              "checkpoint": str(args.checkpoint), "step": ckpt["step"], "task": meta["task"],
              "model": meta["model"]}
    path = Path(args.checkpoint).parent / "evaluation.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


@torch.no_grad()
def _exact_match(model, pairs, src_vocab: Vocab, tgt_vocab: Vocab, beam: int, batch_size: int,
                 device) -> float:
    right = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start:start + batch_size]
        src = src_vocab.encode_batch([s for s, _ in chunk]).to(device)               # (B, S)
        tgt = tgt_vocab.encode_batch([t for _, t in chunk], add_eos=True).to(device)  # (B, T)
        ids = _decode(model, src, beam, tgt.shape[1])                                 # (B, <=T)
        right += exact_match(ids, tgt, model.pad_id).sum().item()
    return right / len(pairs)


def cmd_translate(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.checkpoint)
    device = get_device(args.device)
    model, src_vocab, tgt_vocab, meta = _model_from_checkpoint(ckpt, args.checkpoint, device)
    for i, raw in enumerate(args.text, start=1):
        text = _normalise_input(raw, src_vocab, meta)
        if not src_vocab.tokenize(text):
            raise ValueError(f"input {i} is empty")
        n = len(src_vocab.tokenize(text))
        max_len = args.max_len or 2 * n + 10
        if args.attention_png:
            png = Path(args.attention_png)
            if len(args.text) > 1:
                png = png.with_name(f"{png.stem}_{i}{png.suffix or '.png'}")
            print(_attention_figure(model, text, src_vocab, tgt_vocab, args.beam, max_len, png))
        else:
            src = torch.tensor([src_vocab.encode(text)], dtype=torch.long, device=device)
            print(tgt_vocab.decode(_decode(model, src, args.beam, max_len)[0]))
    return 0


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError, ArithmeticError, RuntimeError) as err:
        if os.environ.get("ATTNBOOK_DEBUG"):
            raise
        message = " ".join(str(err).split()) or type(err).__name__
        print(f"python -m attnbook {args.command}: error: {message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:              # outside training (which saves and returns itself)
        print(f"python -m attnbook {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
