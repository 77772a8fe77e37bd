"""The command line: ``python -m attnbook train | evaluate | translate | export``.

``train`` builds a task's data and a model, trains it with :class:`attnbook.train.Trainer`
and writes, into ``--out``: ``checkpoint.pt``, ``metrics.json``, ``history.csv``,
``loss.png`` and ``attention.png``. ``evaluate`` measures exact match by input length (and,
for ``--task tsv``, BLEU, chrF and perplexity: :mod:`attnbook.evaluate`); ``translate`` runs
a trained model on your own input; ``export`` writes a Transformer run as ONNX with its
attention (:mod:`attnbook.export`). ``--help`` on each says more.

A run is never destroyed by mistake: ``train`` refuses an ``--out`` that already holds a run
(``--overwrite`` replaces it, ``--resume`` continues it), checks ``--out``, ``--data`` and the
model's length limit before the first step, writes every file atomically, saves a checkpoint
only from a healthy model, and saves one on Ctrl-C or SIGTERM. The exit statuses are
:data:`EXIT_CODES_HELP`.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path, PureWindowsPath

import torch

from . import __version__
from ._options import (
    add_dataclass_arguments,
    cli_default,
    cli_dest,
    option,
    values_from_options,
)
from ._options import fraction as _fraction
from ._options import natural_int as _natural_int
from ._options import positive_int as _positive_int
from .data import (
    EOS,
    TASKS,
    Vocab,
    file_sha256,
    length_controlled,
    load_tsv,
    make_task,
    normalise_text,
)
from .evaluate import exact_match_by_length, generate, translation_scores
from .languages import LOCALES, make_dates_between
from .seq2seq import attention_map
from .train import (
    DEFAULT_STEPS,
    HISTORY_KEYS,
    CheckpointError,
    NonFiniteLossError,
    TrainConfig,
    Trainer,
    atomic_write,
    init_distributed,
    load_checkpoint,
    remove_stale_temp_files,
    scheduled_lr,
)
from .utils import DEVICES, get_device, seed_everything

__all__ = [
    "main",
    "build_parser",
    "program_name",
    "build_model",
    "MODELS",
    "TRAIN_DEFAULTS",
    "TrainCommandOptions",
    "TASK_NAMES",
    "SEQUENCE_TASKS",
    "APPLIES_TO",
    "FIXED_ON_RESUME",
    "PER_INVOCATION",
    "RUN_FILES",
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_DIVERGED",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_CODES_HELP",
    "TRAIN_EXAMPLES",
    "EVALUATE_EXAMPLES",
    "TRANSLATE_EXAMPLES",
    "EXPORT_EXAMPLES",
    "cmd_train",
    "cmd_evaluate",
    "cmd_translate",
    "cmd_export",
]

MODELS = ("rnn", "rnn-attention", "transformer")
TASK_NAMES = (*TASKS, "tsv")


@dataclasses.dataclass
class TrainCommandOptions:
    """The options of ``train`` that :class:`attnbook.train.TrainConfig` does not hold: the
    task and its data, the model, and the run. Declared like TrainConfig's fields (one
    source for each option's default, type and help); the parser is made from both."""

    _data = "task and data"
    task: str | None = option(
        None,
        "copy, reverse, sort (letter sequences), dates (human dates -> ISO) or tsv (your own "
        "source<TAB>target file, --data); required unless --resume",
        choices=TASK_NAMES,
        group=_data,
    )
    data: str | None = option(
        None,
        "the .tsv file for --task tsv; on --resume, the run's file if it moved (or, "
        "knowingly, a changed one)",
        metavar="FILE",
        group=_data,
    )
    encoding: str = option(
        "utf-8",
        "tsv: the file's text encoding, e.g. latin-1 or cp1252",
        metavar="NAME",
        group=_data,
    )
    src_lang: str | None = option(
        None,
        "dates: translate dates between two languages as CLDR writes them, from this locale "
        "(with --tgt-lang; e.g. en_US, zh_CN, de_DE, ru_RU) instead of human English -> ISO",
        choices=LOCALES,
        metavar="LOCALE",
        group=_data,
    )
    tgt_lang: str | None = option(
        None,
        "dates: the locale to translate into (with --src-lang)",
        choices=LOCALES,
        metavar="LOCALE",
        group=_data,
    )
    n_train: int = option(
        20000,
        "training pairs of a synthetic task",
        type=_positive_int,
        metavar="N",
        group=_data,
    )
    n_val: int = option(
        500,
        "validation pairs (evaluated during training)",
        type=_natural_int,
        metavar="N",
        group=_data,
    )
    n_test: int = option(
        1000,
        "held-out test pairs (scored at the end)",
        type=_natural_int,
        metavar="N",
        group=_data,
    )
    min_len: int | None = option(
        None,
        "copy/reverse/sort: shortest input (default 3)",
        type=_positive_int,
        metavar="N",
        group=_data,
    )
    max_len: int | None = option(
        None,
        "copy/reverse/sort: longest input (default 10); tsv: longest sentence in tokens "
        "(default 50)",
        type=_positive_int,
        metavar="N",
        group=_data,
    )
    n_symbols: int | None = option(
        None,
        "copy/reverse/sort: alphabet size, at most 26 (default 10)",
        type=_positive_int,
        metavar="N",
        group=_data,
    )
    level: str = option(
        "word",
        "tsv: word- or character-level vocabulary",
        choices=("word", "char"),
        group=_data,
    )
    lower: bool = option(False, "tsv: lower-case the text", group=_data, show_default=False)
    max_pairs: int | None = option(
        None,
        "tsv: read at most N pairs of the file",
        type=_positive_int,
        metavar="N",
        group=_data,
    )
    model: str = option(
        "transformer",
        "rnn (fixed context vector), rnn-attention (RNN with attention) or transformer",
        choices=MODELS,
        group="model",
    )
    d_model: int = option(
        64, "transformer: model width", type=_positive_int, metavar="N", group="model"
    )
    heads: int = option(
        4, "transformer: attention heads", type=_positive_int, metavar="N", group="model"
    )
    layers: int = option(
        1,
        "transformer: encoder layers = decoder layers",
        type=_positive_int,
        metavar="N",
        group="model",
    )
    d_ff: int = option(
        256, "transformer: feed-forward width", type=_positive_int, metavar="N", group="model"
    )
    norm_first: bool = option(
        True,
        "transformer: pre-LN (trains faster at these sizes); --no-norm-first is the paper's "
        "post-LN",
        group="model",
    )
    emb: int = option(64, "rnn: embedding size", type=_positive_int, metavar="N", group="model")
    hidden: int = option(
        128, "rnn: hidden state size", type=_positive_int, metavar="N", group="model"
    )
    cell: str = option("gru", "rnn: cell", choices=("gru", "lstm", "rnn"), group="model")
    score: str = option(
        "additive",
        "rnn-attention: alignment score",
        choices=("additive", "dot", "general", "scaled_dot"),
        group="model",
    )
    bidirectional: bool = option(
        False, "rnn: bidirectional encoder", group="model", show_default=False
    )
    dropout: float = option(0.0, "dropout", type=_fraction, metavar="P", group="model")
    threads: int | None = option(
        None,
        "torch CPU threads (default: torch's choice)",
        type=_positive_int,
        metavar="N",
        group="run",
    )
    overwrite: bool = option(
        False,
        "replace the run that --out already holds (refused without it)",
        group="run",
        show_default=False,
    )


# Defaults of `train`: those of TrainCommandOptions (the model and data options, chosen to
# train fast on a 2-core CPU: benchmarks/train_speed.py) and of TrainConfig (the training
# options). The parser's own defaults are None, so that on --resume only the options given
# again override the checkpoint's.
TRAIN_DEFAULTS = {
    cli_dest(f): cli_default(f)
    for cls in (TrainCommandOptions, TrainConfig)
    for f in dataclasses.fields(cls)
    if f.name not in ("task", "data")
}

# options a resumed run must keep (they decide the model, the data or the batch order)
# (--data is checked by its content instead: see _find_data)
FIXED_ON_RESUME = (
    "task",
    "model",
    "d_model",
    "heads",
    "layers",
    "d_ff",
    "norm_first",
    "emb",
    "hidden",
    "cell",
    "score",
    "bidirectional",
    "src_lang",
    "tgt_lang",
    "n_train",
    "n_val",
    "n_test",
    "min_len",
    "max_len",
    "n_symbols",
    "level",
    "lower",
    "max_pairs",
    "encoding",
    "seed",
    "batch_size",
)
# options of this invocation only: a resumed run does not take them from the checkpoint
PER_INVOCATION = ("device", "threads", "compile", "out", "quiet", "overwrite")
SEQUENCE_TASKS = ("copy", "reverse", "sort")
# options that mean something only for some models, tasks or schedules: refused elsewhere
# rather than silently ignored. option -> (the option that decides, the values it applies to)
APPLIES_TO = {
    **dict.fromkeys(
        ("d_model", "heads", "layers", "d_ff", "norm_first"), ("model", ("transformer",))
    ),
    **dict.fromkeys(
        ("emb", "hidden", "cell", "bidirectional"), ("model", ("rnn", "rnn-attention"))
    ),
    "score": ("model", ("rnn-attention",)),
    **dict.fromkeys(("n_train", "n_val", "n_test"), ("task", (*TASKS,))),
    **dict.fromkeys(("src_lang", "tgt_lang"), ("task", ("dates",))),
    **dict.fromkeys(("min_len", "n_symbols"), ("task", SEQUENCE_TASKS)),
    "max_len": ("task", (*SEQUENCE_TASKS, "tsv")),
    **dict.fromkeys(("data", "level", "lower", "max_pairs", "encoding"), ("task", ("tsv",))),
    "lr": ("schedule", ("constant", "cosine")),
    **dict.fromkeys(("lr_scale", "noam_d_model"), ("schedule", ("noam",))),
    "min_lr_ratio": ("schedule", ("cosine",)),
}
# the files a run writes into --out (and evaluate beside the checkpoint)
RUN_FILES = (
    "checkpoint.pt",
    "metrics.json",
    "history.csv",
    "loss.png",
    "attention.png",
    "evaluation.json",
)
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DIVERGED = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143  # 128 + SIGINT, 128 + SIGTERM
EXIT_CODES_HELP = """\
exit status:
  0    done
  1    an error, said in one line on stderr (ATTNBOOK_DEBUG=1 shows the traceback); every
       check runs before the first step, and no saved file is changed by a failed command
  2    bad arguments
  3    training diverged (a NaN or infinite loss or weights): it stopped, and the last good
       checkpoint is kept as it was
  130  interrupted by Ctrl-C (SIGINT); in training, after saving a checkpoint that --resume
       continues from
  143  stopped by SIGTERM; likewise
"""


# --------------------------------------------------------------------------------------------
# argument parsing
# --------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """An argument error is one line (not the whole usage) and exit status 2."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _lengths(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated positive integers such as 5,10,20, got {text!r}"
        ) from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(
            f"must be comma-separated positive integers such as 5,10,20, got {text!r}"
        )
    return sorted(set(values))


TRAIN_EXAMPLES = (
    """\
examples:
  %(prog)s --task dates --model transformer --max-seconds 60 --out runs/dates
  %(prog)s --task reverse --model rnn-attention --steps 3000 --hidden 256
  %(prog)s --task tsv --data fra.tsv --model transformer --epochs 10 \\
      --d-model 256 --layers 3 --device cuda
  %(prog)s --resume runs/dates/checkpoint.pt --steps 4000
  torchrun --nproc_per_node=2 -m attnbook train --task dates --batch-size 256

--steps is the total number of updates, those before a --resume included. On --resume the
model, data, seed and length of the run (--steps/--epochs, the schedule's end) come from the
checkpoint; options given again override it, and each change is printed. --device,
--threads, --compile and --quiet are not carried over. An --out that holds a run is refused
unless --overwrite. Ctrl-C or SIGTERM saves a checkpoint and exits; --resume continues
exactly from it.

"""
    + EXIT_CODES_HELP
)

EVALUATE_EXAMPLES = (
    """\
examples:
  %(prog)s --checkpoint runs/reverse/checkpoint.pt --lengths 5,10,20,40
  %(prog)s --checkpoint runs/dates/checkpoint.pt --beam 4

copy/reverse/sort: --n-per-length fresh inputs of exactly each length (none seen in training;
lengths beyond the training range show how the model extrapolates). dates/tsv: the test split,
grouped by source length: the column "L" holds sources longer than the previous bound and at
most L tokens long. tsv runs also get corpus BLEU and chrF (sacrebleu: pip install
sacrebleu) and the perplexity of the test split. The results are also written to
evaluation.json beside the checkpoint.

"""
    + EXIT_CODES_HELP
)

TRANSLATE_EXAMPLES = (
    """\
examples:
  %(prog)s --checkpoint runs/dates/checkpoint.pt "Wednesday 9 May 2018"
  %(prog)s --checkpoint runs/dates/checkpoint.pt "9.5.2018" \\
      --attention-png attention.png --beam 4

"""
    + EXIT_CODES_HELP
)


EXPORT_EXAMPLES = (
    """\
examples:
  %(prog)s --checkpoint runs/dates/checkpoint.pt --out site/dates.onnx

"""
    + EXIT_CODES_HELP
)


def program_name(argv0: str | None = None) -> str:
    """The name the command line was run by, for its usage, help and messages: ``attnbook``
    when ``argv0`` (default ``sys.argv[0]``) is the console script that installing the package
    makes (``attnbook``, ``attnbook.exe``), else ``python -m attnbook``."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    stem = PureWindowsPath(argv0).stem  # splits at "/" and at "\\"
    return "attnbook" if stem == "attnbook" else "python -m attnbook"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``python -m attnbook``: subcommands train, evaluate, translate, export, and
    ``--version``. ``prog``: the program name it shows (default :func:`program_name`)."""
    prog = program_name() if prog is None else prog
    parser = _Parser(
        prog=prog,
        description="Train, evaluate and run the seq2seq models of the book "
        "'Attention, from the ground up'.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"run '{prog} COMMAND --help' for a command's options "
        "and examples\n\n" + EXIT_CODES_HELP,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"attnbook {__version__}",
        help="print the package's version and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    fmt = argparse.RawDescriptionHelpFormatter

    # ---------------------------------------------------------------- train
    t = sub.add_parser(
        "train",
        help="train a model on a task",
        formatter_class=fmt,
        description="Train an RNN or Transformer seq2seq model on a synthetic "
        "task or your own tab-separated sentence pairs.",
        epilog=TRAIN_EXAMPLES,
    )
    groups = {name: t.add_argument_group(name) for name in ("task and data", "model")}
    groups["optimisation"] = t.add_argument_group("optimisation")
    groups["run"] = g = t.add_argument_group("run")
    # the fields of both, with their defaults and help (see attnbook._options)
    add_dataclass_arguments(t, TrainCommandOptions, groups)
    add_dataclass_arguments(t, TrainConfig, groups)
    g.add_argument(
        "--resume",
        metavar="CHECKPOINT",
        help="continue a run from its checkpoint.pt, exactly where it stopped",
    )
    t.set_defaults(func=cmd_train)

    # ---------------------------------------------------------------- evaluate
    e = sub.add_parser(
        "evaluate",
        help="exact-match accuracy by input length (tsv: also BLEU, chrF, perplexity)",
        formatter_class=fmt,
        epilog=EVALUATE_EXAMPLES,
        description="Greedy-decode (or beam-search) held-out inputs and print "
        "exact-match accuracy by input length; for --task tsv runs also corpus BLEU, chrF "
        "and perplexity.",
    )
    e.add_argument(
        "--checkpoint", required=True, metavar="FILE", help="a checkpoint.pt written by 'train'"
    )
    e.add_argument(
        "--lengths",
        type=_lengths,
        default=[5, 10, 20, 40],
        metavar="L1,L2,...",
        help="input lengths (default: 5,10,20,40)",
    )
    e.add_argument(
        "--n-per-length",
        type=_positive_int,
        default=100,
        metavar="N",
        help="copy/reverse/sort: fresh inputs per length (default: 100)",
    )
    e.add_argument(
        "--beam",
        type=_positive_int,
        default=1,
        metavar="K",
        help="beam size; 1 = greedy decoding (default: 1)",
    )
    e.add_argument(
        "--batch-size",
        type=_positive_int,
        default=256,
        metavar="N",
        help="inputs decoded together (default: 256)",
    )
    e.add_argument(
        "--data",
        metavar="FILE",
        help="tsv runs: the run's data file, if it is no longer where it was",
    )
    e.add_argument("--device", choices=DEVICES, default="auto", help="(default: auto)")
    e.set_defaults(func=cmd_evaluate)

    # ---------------------------------------------------------------- translate
    r = sub.add_parser(
        "translate",
        help="run a trained model on your input",
        formatter_class=fmt,
        epilog=TRANSLATE_EXAMPLES,
        description="Decode each TEXT with a trained model and print the output, one line each.",
    )
    r.add_argument("text", nargs="+", metavar="TEXT", help="the input(s), quoted")
    r.add_argument(
        "--checkpoint", required=True, metavar="FILE", help="a checkpoint.pt written by 'train'"
    )
    r.add_argument(
        "--beam",
        type=_positive_int,
        default=1,
        metavar="K",
        help="beam size; 1 = greedy decoding (default: 1)",
    )
    r.add_argument(
        "--max-len",
        type=_positive_int,
        default=None,
        metavar="N",
        help="longest output in tokens (default: twice the input, plus 10)",
    )
    r.add_argument(
        "--attention-png",
        metavar="FILE",
        help="save the cross-attention heatmap (the last layer, averaged over heads "
        "for the transformer); with several inputs FILE gets _1, _2, ...",
    )
    r.add_argument("--device", choices=DEVICES, default="auto", help="(default: auto)")
    r.set_defaults(func=cmd_translate)

    # ---------------------------------------------------------------- export
    x = sub.add_parser(
        "export",
        help="write a trained Transformer as ONNX, its attention included (for a web page)",
        formatter_class=fmt,
        epilog=EXPORT_EXAMPLES,
        description="Export a --model transformer run to ONNX: token ids in, the logits and "
        "the attention weights of every layer and head out (encoder self, decoder self, "
        "cross), any source and target length; a JSON sidecar beside it holds the "
        "vocabularies and special ids (attnbook.export). Needs pip install 'attnbook[export]'.",
    )
    x.add_argument(
        "--checkpoint", required=True, metavar="FILE", help="a checkpoint.pt written by 'train'"
    )
    x.add_argument(
        "--out",
        required=True,
        metavar="FILE.onnx",
        help="the ONNX file to write; the sidecar FILE.json is written beside it",
    )
    x.add_argument(
        "--overwrite", action="store_true", help="replace FILE.onnx and FILE.json if they exist"
    )
    x.set_defaults(func=cmd_export)
    return parser


# --------------------------------------------------------------------------------------------
# models and data from options
# --------------------------------------------------------------------------------------------


def _model_kwargs(o: dict) -> dict:
    if o["model"] == "transformer":
        return {
            "d_model": o["d_model"],
            "n_heads": o["heads"],
            "n_layers": o["layers"],
            "d_ff": o["d_ff"],
            "dropout": o["dropout"],
            "norm_first": o["norm_first"],
            "max_len": 512,
        }
    return {
        "emb_dim": o["emb"],
        "hidden_dim": o["hidden"],
        "cell": o["cell"],
        "bidirectional": o["bidirectional"],
        "dropout": o["dropout"],
        "attention": o["score"] if o["model"] == "rnn-attention" else None,
    }


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


def _build_task(name: str, kwargs: dict):
    if name == "tsv":
        kw = dict(kwargs)
        path = Path(kw.pop("path"))
        if not path.is_file():
            raise FileNotFoundError(f"the data file {path} does not exist")
        try:
            return load_tsv(path, **kw)
        except OSError as err:  # unreadable: permissions, a device error
            raise ValueError(f"--data {path}: cannot read it ({err.strerror or err})") from err
    kw = dict(kwargs)
    sizes = kw.pop("n_train"), kw.pop("n_val"), kw.pop("n_test")
    if "src" in kw:  # dates between two languages (attnbook.languages)
        return make_dates_between(kw.pop("src"), kw.pop("tgt"), *sizes, **kw)
    return make_task(name, *sizes, **kw)


def _model_from_checkpoint(ckpt: dict, path, device: torch.device):
    meta = ckpt.get("meta") or {}
    if "model" not in meta or "model_kwargs" not in meta:
        raise CheckpointError(
            f"{path} was not written by 'python -m attnbook train' (it does "
            "not say which model it holds)"
        )
    src_vocab = Vocab.from_dict(ckpt["vocab"]["src"])
    tgt_vocab = Vocab.from_dict(ckpt["vocab"]["tgt"])
    model = build_model(meta["model"], len(src_vocab), len(tgt_vocab), meta["model_kwargs"])
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as err:
        raise CheckpointError(
            f"{path}: its weights do not fit a {meta['model']} with {meta['model_kwargs']}"
        ) from err
    return model.to(device).eval(), src_vocab, tgt_vocab, meta


def _normalise_input(text: str, vocab: Vocab, meta: dict) -> str:
    """Treat a typed input as the training data were treated (tsv: tokenised, lower-cased)."""
    if meta.get("task") != "tsv":
        return text
    return normalise_text(text, vocab.level, meta["task_kwargs"].get("lower", False))


# --------------------------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------------------------


def _resolve_train_options(args: argparse.Namespace) -> tuple[dict, dict | None, list]:
    """The run's options: defaults <- the checkpoint's (on --resume) <- the command line.

    Returns the options, the checkpoint (None unless --resume) and, on --resume, the settings
    the command line changes as ``(option, before, now)``."""
    given = {k: v for k, v in vars(args).items() if k in TRAIN_DEFAULTS or k in ("task", "data")}
    given = {k: v for k, v in given.items() if v is not None}
    ckpt, changes = None, []
    options = {**TRAIN_DEFAULTS, "task": None, "data": None}
    if args.resume:
        ckpt = load_checkpoint(args.resume)
        before = (ckpt.get("meta") or {}).get("options")
        if before is None:
            raise CheckpointError(
                f"{args.resume} was not written by 'python -m attnbook "
                "train', so it cannot be resumed from the command line"
            )
        for key in FIXED_ON_RESUME:
            if key in given and given[key] != before.get(key):
                flag = "--" + key.replace("_", "-")
                raise CheckpointError(
                    f"{args.resume} was trained with {flag} "
                    f"{before.get(key)}, not {given[key]}; a resumed run "
                    "keeps the model, the data and the seed"
                )
        options.update({k: v for k, v in before.items() if k not in PER_INVOCATION})
        if "steps" in given or "epochs" in given:  # a new length replaces the old one
            options.update(steps=None, epochs=None)
        if "out" not in given:
            options["out"] = str(Path(args.resume).parent)
        changes = [
            (k, before.get(k), v)
            for k, v in given.items()
            if k not in PER_INVOCATION and k != "data" and before.get(k) != v
        ]
    options.update(given)
    if options["task"] is None:
        raise ValueError("--task is required (or --resume CHECKPOINT)")
    _refuse_what_does_not_apply(given, options)
    if options["steps"] is None and options["epochs"] is None:
        options["steps"] = DEFAULT_STEPS  # --max-seconds is a budget on top of it
    try:
        codecs.lookup(options["encoding"])
    except LookupError:
        raise ValueError(
            f"--encoding {options['encoding']}: not a text encoding Python "
            "knows (utf-8, latin-1, cp1252, utf-16, ...)"
        ) from None
    if options["task"] == "tsv":
        if ckpt is not None:
            options["data"] = str(_find_data(ckpt, args.resume, given.get("data")))
        if not options["data"]:
            raise ValueError("--task tsv needs --data FILE (one source<TAB>target pair a line)")
        _check_data_file(Path(options["data"]))
        options["data"] = str(Path(options["data"]).resolve())
    if options["out"] is None:
        options["out"] = str(Path("runs") / f"{options['task']}-{options['model']}")
    return options, ckpt, changes


def _refuse_what_does_not_apply(given: dict, options: dict) -> None:
    """An option given for another model, task or schedule is an error, not ignored."""
    for key in given:
        if key not in APPLIES_TO:
            continue
        decider, values = APPLIES_TO[key]
        if options[decider] not in values:
            raise ValueError(
                f"--{key.replace('_', '-')} applies to --{decider} "
                f"{'/'.join(values)}, not to --{decider} {options[decider]}"
            )


def _check_data_file(path: Path) -> None:
    if path.is_dir():
        raise ValueError(f"--data {path}: is a folder; it wants a file of source<TAB>target lines")
    if not path.is_file():
        raise FileNotFoundError(f"--data {path}: no such file")
    if not os.access(path, os.R_OK):
        raise ValueError(f"--data {path}: cannot read it (permission denied)")


def _find_data(ckpt: dict, ckpt_path, given: str | None) -> Path:
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
        _check_data_file(path)
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


def _data_identity(path: str, out: Path) -> dict:
    """What a checkpoint stores of a tsv file: where it was, where relative to the run's
    folder, and its content's hash."""
    path = Path(path).resolve()
    identity = {"path": str(path), "sha256": file_sha256(path)}
    with contextlib.suppress(ValueError):  # another drive (Windows)
        identity["relative"] = os.path.relpath(path, out.resolve())
    return identity


def _position_limit(model) -> int | None:
    """How many positions the model can read or write (its positional table); None: any."""
    return model.max_len


def _check_lengths_fit(task, model, options: dict) -> None:
    """Every source, and every target with its BOS, must fit the model's positional table."""
    limit = _position_limit(model)
    if limit is None:
        return
    split = [p for part in (task.train, task.val, task.test) for p in part]
    src = max(len(task.src_vocab.tokenize(s)) for s, _ in split)
    tgt = max(len(task.tgt_vocab.tokenize(t)) for _, t in split) + 1
    if max(src, tgt) > limit:
        side = "source" if src >= tgt else "target (+1 for <bos>)"
        raise ValueError(
            f"--max-len {options['max_len']}: the data hold a {side} of "
            f"{max(src, tgt)} tokens, but a {options['model']} reads at most "
            f"{limit} positions; use --max-len {limit - 1} or less"
        )


def _check_out(out: Path, overwrite: bool, resume: str | None) -> list[str]:
    """Refuse an --out that cannot hold the run, or that holds another run (unless
    --overwrite). Nothing is written. Returns the run files --overwrite will replace."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file; it wants a folder (new or holding a run)")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"--out {out}: cannot create it, because {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: {existing} is not writable (permission denied)")
    held = [name for name in RUN_FILES if (out / name).exists()]
    same = resume is not None and out.resolve() == Path(resume).resolve().parent
    if same and overwrite:
        raise ValueError(
            f"--overwrite would delete the checkpoint that --resume {resume} "
            "continues; leave --overwrite out, or give another --out"
        )
    if held and not same and not overwrite:
        hint = (
            f", or --resume {out / 'checkpoint.pt'} to continue it"
            if "checkpoint.pt" in held
            else ""
        )
        raise ValueError(
            f"--out {out} already holds a run ({', '.join(held)}); pass "
            f"--overwrite to replace it{hint}"
        )
    return held if overwrite else []


def _prepare_out(out: Path, replace: list[str]) -> list[Path]:
    """Create --out, prove it writable, remove temporary files a killed run left, and the
    files of the run that --overwrite replaces. Returns the stale files removed."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".attnbook-probe-"):
            pass
    except OSError as err:
        raise ValueError(f"--out {out}: cannot write into it ({err.strerror or err})") from err
    for name in replace:
        (out / name).unlink(missing_ok=True)
    return remove_stale_temp_files(out)


def _lr_changes(trainer: Trainer, ckpt: dict) -> list[tuple]:
    """The step budget and learning rate of the next update, before and after a resume's
    options (a longer run restarts the tail of a cosine schedule, say)."""
    old = TrainConfig.from_dict(ckpt["config"], device=trainer.config.device)
    old_total = (
        old.steps
        if old.steps is not None
        else old.epochs * len(trainer.order)
        if old.epochs is not None
        else None
        if old.max_seconds is not None
        else 1000
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


def _train_config(o: dict, device: str) -> TrainConfig:
    """The TrainConfig of the resolved options ``o`` (an option left at None: its default)."""
    return values_from_options(TrainConfig, o, device=device)


def cmd_train(args: argparse.Namespace) -> int:
    options, ckpt, changes = _resolve_train_options(args)
    out = Path(options["out"])
    replace = _check_out(out, bool(options["overwrite"]), args.resume)
    rank, world_size = init_distributed()
    if options["threads"]:
        torch.set_num_threads(options["threads"])
    say = print if rank == 0 and not options["quiet"] else (lambda *a, **k: None)
    seed_everything(options["seed"])
    task = _build_task(options["task"], _task_kwargs(options))
    if not task.val:
        raise ValueError(
            "the task has no validation pairs (--n-val 0 or a tiny file): "
            "training needs some to evaluate on"
        )
    kind, model_kwargs = options["model"], _model_kwargs(options)
    model = build_model(kind, len(task.src_vocab), len(task.tgt_vocab), model_kwargs)
    _check_lengths_fit(task, model, options)
    config = _train_config(options, options["device"])
    meta = {
        "model": kind,
        "model_kwargs": model_kwargs,
        "task": options["task"],
        "task_kwargs": _task_kwargs(options),
        "options": options,
    }
    if options["task"] == "tsv":
        meta["data"] = _data_identity(options["data"], out)
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
                f"{args.resume} is at step {trainer.step}, the end of its run of "
                f"{trainer.total_steps} steps; give --steps (or --epochs) beyond "
                f"step {trainer.step} to train further"
            )
        changes += _lr_changes(trainer, ckpt)
        if rank == 0:  # said even with --quiet: it changes the result
            shown = "; ".join(
                f"{'--' + k.replace('_', '-') if k in TRAIN_DEFAULTS else k} {a} -> {b}"
                for k, a, b in changes
            )
            print(
                f"resuming {args.resume} at step {trainer.step}"
                + (f"; changed: {shown}" if shown else "; no setting changed"),
                file=sys.stderr,
            )
    if rank == 0:
        for stale in _prepare_out(out, replace):
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
    if rank == 0:
        test = None
        if task.test and not trainer.interrupted:
            test = trainer.evaluate(task.test, max_examples=None)
        metrics = _metrics(trainer, task, kind, n_params, test)
        _write_outputs(out, trainer, model, task, metrics)
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
    if trainer.interrupted == "SIGTERM":
        return EXIT_TERMINATED
    return EXIT_INTERRUPTED if trainer.interrupted else EXIT_OK


def _metrics(trainer: Trainer, task, kind: str, n_params: int, test: dict | None) -> dict:
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


def _write_text(path: Path, text: str) -> None:
    """A text file, written atomically (a reader never sees half of it)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def _write_outputs(out: Path, trainer: Trainer, model, task, metrics: dict) -> None:
    _write_text(out / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=HISTORY_KEYS)
    writer.writeheader()
    writer.writerows(
        {k: ("" if row.get(k) is None else row[k]) for k in HISTORY_KEYS} for row in trainer.history
    )
    _write_text(out / "history.csv", table.getvalue())
    _loss_figure(trainer.history, out / "loss.png", f"{metrics['model']} on {metrics['task']}")
    pairs = task.test or task.val
    if pairs:  # drawn when the model has cross-attention
        source = pairs[0][0]
        _attention_figure(
            model,
            source,
            trainer.src_vocab,
            trainer.tgt_vocab,
            1,
            2 * len(trainer.src_vocab.tokenize(source)) + 10,
            out / "attention.png",
        )


# --------------------------------------------------------------------------------------------
# pictures
# --------------------------------------------------------------------------------------------


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save_figure(fig, path: Path) -> None:
    """``fig`` to ``path`` (its format from the suffix, png by default), atomically."""
    plt = _pyplot()
    kind = Path(path).suffix.lstrip(".").lower() or "png"
    try:
        atomic_write(path, lambda f: fig.savefig(f, format=kind, dpi=100))
    finally:
        plt.close(fig)


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
    _save_figure(fig, path)


def _attention_figure(
    model, source: str, src_vocab: Vocab, tgt_vocab: Vocab, beam: int, max_len: int, path: Path
) -> str | None:
    """Decode ``source``, draw its cross-attention to ``path``; return the output text (None,
    and no picture, for a model without cross-attention)."""
    plt = _pyplot()
    from .viz import heatmap

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
    fig, ax = plt.subplots(
        figsize=(max(4.0, 0.32 * len(x_labels) + 2), max(3.0, 0.32 * len(y_labels) + 1.5))
    )
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
    _save_figure(fig, path)
    return tgt_vocab.decode(out_ids)


# --------------------------------------------------------------------------------------------
# evaluate and translate
# --------------------------------------------------------------------------------------------


def cmd_evaluate(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.checkpoint)
    device = get_device(args.device)
    model, src_vocab, tgt_vocab, meta = _model_from_checkpoint(ckpt, args.checkpoint, device)
    task_kwargs = dict(meta["task_kwargs"])
    if meta["task"] == "tsv":
        task_kwargs["path"] = str(_find_data(ckpt, args.checkpoint, args.data))
    elif args.data is not None:
        raise ValueError(
            f"--data applies to runs of --task tsv, not to this --task {meta['task']} run"
        )
    limit = _position_limit(model)
    if meta["task"] in SEQUENCE_TASKS and limit is not None and max(args.lengths) >= limit:
        raise ValueError(
            f"--lengths: {max(args.lengths)} is too long for this model, which "
            f"reads and writes at most {limit} positions (so inputs of at most "
            f"{limit - 1} symbols, one position being its <eos>)"
        )
    task = _build_task(meta["task"], task_kwargs)
    if meta["task"] in SEQUENCE_TASKS:
        seen = {s for split in (task.train, task.val, task.test) for s, _ in split}
        n_symbols = task.options["n_symbols"]
        groups = {}
        for length in args.lengths:  # as many fresh inputs as there are, up to N
            left = n_symbols**length - sum(len(s) == length for s in seen)
            n = min(args.n_per_length, left)
            groups[length] = (
                []
                if n < 1
                else length_controlled(task, [length], n, seed=meta["task_kwargs"]["seed"] + 1)[
                    length
                ]
            )
        how = f"up to {args.n_per_length} inputs of each length, none seen in training"
    else:
        groups = {n: [] for n in args.lengths}
        for pair in task.test:
            n = len(src_vocab.tokenize(pair[0]))
            bound = next((b for b in args.lengths if n <= b), None)
            if bound is not None:
                groups[bound].append(pair)
        how = "the test split by source length (longer than the previous bound, <= L)"
    counts = {str(length): len(pairs) for length, pairs in groups.items()}
    by_length = exact_match_by_length(
        model,
        {str(length): pairs for length, pairs in groups.items()},
        src_vocab,
        tgt_vocab,
        beam=args.beam,
        batch_size=args.batch_size,
    )
    corpus = None
    if meta["task"] == "tsv":
        if not task.test:
            raise ValueError("this run's test split is empty: nothing to score")
        corpus = translation_scores(
            model, task.test, src_vocab, tgt_vocab, beam=args.beam, batch_size=args.batch_size
        )
        del corpus["hypotheses"]
    print(
        f"exact match, {'greedy' if args.beam == 1 else f'beam {args.beam}'} decoding, "
        f"{meta['model']} on {meta['task']} ({how}):"
    )
    print(f"{'length':>8} {'examples':>9} {'exact match':>12}")
    for key, value in by_length.items():
        shown = "-" if value is None else f"{100 * value:.1f}%"
        print(f"{key:>8} {counts[key]:>9} {shown:>12}")
    if corpus is not None:
        print(
            f"test split, {corpus['examples']} pairs: BLEU {corpus['bleu']:.2f}, "
            f"chrF {corpus['chrf']:.2f}, perplexity {corpus['perplexity']:.3f}, "
            f"exact match {100 * corpus['exact_match']:.1f}%"
        )
    result = {
        "by_length": by_length,
        **({} if corpus is None else {"test": corpus}),
        "examples": counts,
        "beam": args.beam,
        "checkpoint": str(args.checkpoint),
        "step": ckpt["step"],
        "task": meta["task"],
        "model": meta["model"],
    }
    path = Path(args.checkpoint).parent / "evaluation.json"
    _write_text(path, json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.checkpoint)
    device = get_device(args.device)
    model, src_vocab, tgt_vocab, meta = _model_from_checkpoint(ckpt, args.checkpoint, device)
    limit = _position_limit(model)
    if args.max_len is not None and limit is not None and args.max_len > limit:
        raise ValueError(
            f"--max-len {args.max_len}: this model writes at most {limit} tokens "
            "(its positional table)"
        )
    texts = []
    for i, raw in enumerate(args.text, start=1):  # every input checked before any work
        text = _normalise_input(raw, src_vocab, meta)
        n = len(src_vocab.tokenize(text))
        if not n:
            raise ValueError(f"input {i} is empty")
        if limit is not None and n > limit:
            raise ValueError(
                f"input {i} has {n} tokens, but this model reads at most {limit} "
                "(its positional table): shorten it or split it"
            )
        src_vocab.encode(text)  # an unknown symbol fails here
        texts.append((i, text, n))
    for i, text, n in texts:
        max_len = args.max_len or (2 * n + 10 if limit is None else min(2 * n + 10, limit))
        if args.attention_png:
            png = Path(args.attention_png)
            if len(args.text) > 1:
                png = png.with_name(f"{png.stem}_{i}{png.suffix or '.png'}")
            output = _attention_figure(model, text, src_vocab, tgt_vocab, args.beam, max_len, png)
            if output is None:
                raise ValueError(
                    "this model has no attention to draw (--model rnn uses the fixed context "
                    "vector only)"
                )
            print(output)
        else:
            src = torch.tensor([src_vocab.encode(text)], dtype=torch.long, device=device)
            print(tgt_vocab.decode(generate(model, src, max_len=max_len, beam=args.beam)[0]))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import export_onnx, missing_packages

    out = Path(args.out)
    if out.suffix != ".onnx":
        raise ValueError(f"--out must name an .onnx file (such as dates.onnx), got {args.out!r}")
    sidecar = out.with_suffix(".json")
    if out.is_dir():
        raise ValueError(f"--out {args.out} is a folder; give the .onnx file to write")
    existing = [str(p) for p in (out, sidecar) if p.exists()]
    if existing and not args.overwrite:
        raise ValueError(f"--out: {' and '.join(existing)} already exist; pass --overwrite")
    ckpt = load_checkpoint(args.checkpoint)
    model, src_vocab, tgt_vocab, meta = _model_from_checkpoint(
        ckpt, args.checkpoint, torch.device("cpu")
    )
    if meta["model"] != "transformer":
        raise ValueError(
            f"--checkpoint {args.checkpoint} holds a --model {meta['model']} run; export "
            "writes the Transformer's attention, so it takes --model transformer runs only"
        )
    missing = missing_packages()
    if missing:  # after every argument is checked
        raise ImportError(f"export needs {' and '.join(missing)}: pip install 'attnbook[export]'")
    info = {
        "checkpoint": Path(args.checkpoint).name,
        "step": ckpt.get("step"),
        "task": meta.get("task"),
        "task_kwargs": {k: v for k, v in (meta.get("task_kwargs") or {}).items() if k != "path"},
        "model_kwargs": meta.get("model_kwargs"),
    }
    written = export_onnx(model, out, src_vocab, tgt_vocab, info=info)
    print(f"wrote {out} ({written['bytes'] / 1024:.0f} KiB) and {sidecar}")
    return 0


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------


class _Terminated(BaseException):
    """SIGTERM outside the training loop (which saves a checkpoint and returns itself)."""


def _raise_terminated(signum, frame):
    raise _Terminated


@contextlib.contextmanager
def _sigterm_raises():
    """While a command runs, SIGTERM unwinds it like Ctrl-C (temporary files are removed, a
    one-line message, status 143) instead of killing the process mid-write."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Run the command line; returns the exit status (:data:`EXIT_CODES_HELP`). ``argv``:
    the arguments (default ``sys.argv[1:]``); ``prog``: the program name of the usage and
    messages (default :func:`program_name`)."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    name = f"{parser.prog} {args.command}"
    try:
        with _sigterm_raises():
            return args.func(args)
    except (
        ValueError,
        TypeError,
        OSError,
        ArithmeticError,
        RuntimeError,
        LookupError,
        ImportError,  # an optional package (sacrebleu) missing: the message says what to install
    ) as err:
        if os.environ.get("ATTNBOOK_DEBUG"):
            raise
        message = " ".join(str(err).split()) or type(err).__name__
        if isinstance(err, NonFiniteLossError):
            print(f"{name}: training diverged: {message}", file=sys.stderr)
            return EXIT_DIVERGED
        print(f"{name}: error: {message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:  # outside training (which saves and returns itself)
        print(f"{name}: interrupted (SIGINT)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _Terminated:
        print(f"{name}: stopped (SIGTERM)", file=sys.stderr)
        return EXIT_TERMINATED


if __name__ == "__main__":
    sys.exit(main())
