"""The options of a training run: what each one is, its default, and how a run resolves them.

A run's options are the fields of :class:`TrainCommandOptions` (the task and its data, the
model, the run) and of :class:`attnbook.train.TrainConfig` (the training), named as the
command line's flags are (``d_model`` is ``--d-model``); :data:`TRAIN_DEFAULTS` holds their
defaults. :func:`resolve_options` makes a run's options: the defaults, then on resume the
checkpoint's, then the options given. A resumed run keeps :data:`FIXED_ON_RESUME`; an option
for another model, task or schedule (:data:`APPLIES_TO`) is refused, not ignored; sizes this
machine cannot hold are refused before any work (:func:`check_sizes`).
"""

from __future__ import annotations

import argparse
import codecs
import dataclasses
from pathlib import Path

from .._limits import check_parts, check_threads, history_bytes, pair_bytes
from .._options import cli_default, cli_dest, option, values_from_options
from .._options import fraction as _fraction
from .._options import natural_int as _natural_int
from .._options import positive_int as _positive_int
from ..data import TASKS
from ..data.dates import _date_charset
from ..data.tasks import _SEQUENCE_OPTIONS
from ..languages import LOCALES
from ..train import DEFAULT_STEPS, CheckpointError, TrainConfig, load_checkpoint
from .models import MODELS, POSITIONS, training_device, training_parts
from .tasks import check_checkpoint_file, check_data_file, find_data

__all__ = [
    "TASK_NAMES",
    "SEQUENCE_TASKS",
    "TrainCommandOptions",
    "TRAIN_DEFAULTS",
    "FIXED_ON_RESUME",
    "PER_INVOCATION",
    "APPLIES_TO",
    "check_values",
    "check_sizes",
    "resolve_options",
    "refuse_what_does_not_apply",
    "train_config",
]

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
        "torch CPU threads, at most 4 per CPU (default: torch's choice)",
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
# (--data is checked by its content instead: see find_data)
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
SEQUENCE_TASKS = ("copy", "reverse", "sort")
# options of this invocation only: a resumed run does not take them from the checkpoint
PER_INVOCATION = ("device", "threads", "compile", "out", "quiet", "overwrite")
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


def check_values(given: dict) -> None:
    """Check options given from Python as the command line's parser checks its flags: each
    of :class:`TrainCommandOptions` against its choices and type (TrainConfig checks its own)."""
    fields = {cli_dest(f): f for f in dataclasses.fields(TrainCommandOptions)}
    for key, value in given.items():
        if value is None or key not in fields:
            continue
        meta, default = fields[key].metadata, fields[key].default
        if isinstance(default, bool) and not isinstance(value, bool):
            raise TypeError(f"{key} must be True or False, got {value!r}")
        if meta["choices"] is not None and value not in meta["choices"]:
            raise ValueError(f"{key} must be one of {tuple(meta['choices'])}, got {value!r}")
        if meta["type"] is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{key} must be a number, got {value!r}")
            try:
                meta["type"](str(value))
            except argparse.ArgumentTypeError as err:
                raise ValueError(f"{key} {err}") from None


def resolve_options(given: dict, resume: str | None = None) -> tuple[dict, dict | None, list]:
    """The run's options: defaults <- the checkpoint's (on ``resume``, a checkpoint's path) <-
    ``given`` (options named as :data:`TRAIN_DEFAULTS`, with ``task`` and ``data``; a None is
    not given).

    Returns the options, the checkpoint (None unless resuming) and, on resume, the settings
    ``given`` changes as ``(option, before, now)``."""
    given = {k: v for k, v in given.items() if v is not None}
    ckpt, changes = None, []
    options = {**TRAIN_DEFAULTS, "task": None, "data": None}
    if resume:
        check_checkpoint_file("--resume", resume)
        ckpt = load_checkpoint(resume)
        before = (ckpt.get("meta") or {}).get("options")
        if before is None:
            raise CheckpointError(
                f"{resume} was not written by 'python -m attnbook "
                "train', so it cannot be resumed from the command line"
            )
        for key in FIXED_ON_RESUME:
            if key in given and given[key] != before.get(key):
                flag = "--" + key.replace("_", "-")
                raise CheckpointError(
                    f"{resume} was trained with {flag} "
                    f"{before.get(key)}, not {given[key]}; a resumed run "
                    "keeps the model, the data and the seed"
                )
        options.update({k: v for k, v in before.items() if k not in PER_INVOCATION})
        if "steps" in given or "epochs" in given:  # a new length replaces the old one
            options.update(steps=None, epochs=None)
        if "out" not in given:
            options["out"] = str(Path(resume).parent)
        changes = [
            (k, before.get(k), v)
            for k, v in given.items()
            if k not in PER_INVOCATION and k != "data" and before.get(k) != v
        ]
    options.update(given)
    if options["task"] is None:
        raise ValueError("--task is required (or --resume CHECKPOINT)")
    refuse_what_does_not_apply(given, options)
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
            options["data"] = str(find_data(ckpt, resume, given.get("data")))
        if not options["data"]:
            raise ValueError("--task tsv needs --data FILE (one source<TAB>target pair a line)")
        check_data_file(Path(options["data"]))
        options["data"] = str(Path(options["data"]).resolve())
    if options["out"] is None:
        options["out"] = str(Path("runs") / f"{options['task']}-{options['model']}")
    check_sizes(options)
    return options, ckpt, changes


def refuse_what_does_not_apply(given: dict, options: dict) -> None:
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


def train_config(o: dict, device: str) -> TrainConfig:
    """The TrainConfig of the resolved options ``o`` (an option left at None: its default)."""
    return values_from_options(TrainConfig, o, device=device)


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def check_sizes(o: dict) -> None:
    """Refuse, before any work, the sizes of the resolved options ``o`` that this machine cannot
    hold or do (:mod:`attnbook._limits`): more than 4 threads per CPU; a sequence longer than a
    Transformer's positions; training (weights, gradients, Adam, a batch's activations) beyond
    the training device's memory; the data and the history of the steps beyond the RAM. The
    vocabularies and lengths are those the task makes (a tsv file's are known once it is read:
    :func:`~attnbook.runs.models.check_lengths_fit` checks again with them)."""
    if o.get("threads"):
        check_threads("--threads", o["threads"])
    task = o["task"]
    data_sizes = {_flag(k): o[k] for k in ("n_train", "n_val", "n_test")}
    n_pairs = o["n_train"] + o["n_val"] + o["n_test"]
    if task in SEQUENCE_TASKS:
        max_len = o["max_len"] or _SEQUENCE_OPTIONS["max_len"]
        if o["model"] == "transformer" and max_len + 1 > POSITIONS:
            raise ValueError(
                f"--max-len {max_len}: a transformer reads and writes at most {POSITIONS} "
                f"positions (a target with its <bos> takes max_len + 1); use --max-len "
                f"{POSITIONS - 1} or less, or --model rnn"
            )
        vocab = (o["n_symbols"] or _SEQUENCE_OPTIONS["n_symbols"]) + 4
        src_vocab = tgt_vocab = vocab
        src_len, tgt_len = max_len, max_len + 1
        data_sizes["--max-len"] = max_len
    elif task == "dates":  # the longest spelling: about 40 characters (other languages: 60)
        src_len, tgt_len = (60, 60) if o.get("src_lang") else (40, 11)
        src_vocab, tgt_vocab = (200, 200) if o.get("src_lang") else (len(_date_charset()) + 4, 15)
    else:  # tsv: not read yet; a lower bound
        src_len = tgt_len = min(o["max_len"] or 50, 50)
        src_vocab = tgt_vocab = 4
        n_pairs = 0
    batch = o["batch_size"] if task == "tsv" else min(o["batch_size"], o["n_train"])
    if task == "tsv":
        batch = min(batch, o["max_pairs"] or batch)
    parts = training_parts(o, src_vocab, tgt_vocab, batch, src_len, tgt_len)
    if task in SEQUENCE_TASKS:
        parts[1][1]["--max-len"] = src_len
    data = n_pairs * pair_bytes(src_len, tgt_len)
    ram = [("the task's pairs of text and token ids", data_sizes, data)]
    steps = o["steps"]
    if steps is None and o["epochs"] is not None and task != "tsv":
        steps = o["epochs"] * -(-o["n_train"] // o["batch_size"])
    if steps is not None and o["max_seconds"] is None:
        length = {"--steps": o["steps"]} if o["steps"] is not None else {"--epochs": o["epochs"]}
        ram.append(
            (
                "the training history (a row every --log-every steps and at every evaluation)",
                {**length, "--log-every": o["log_every"]},
                history_bytes(steps, o["log_every"], o["eval_every"]),
            )
        )
    device = training_device(o["device"])
    if device is None or device.type != "cuda":
        check_parts("", parts + ram)
    else:
        check_parts("", parts, device=device)
        check_parts("", ram)
