"""The command line: ``python -m attnbook train | evaluate | translate | export``.

``train`` builds a task's data and a model, trains it with :class:`attnbook.train.Trainer`
and writes, into ``--out``: ``checkpoint.pt``, ``metrics.json``, ``history.csv``,
``loss.png`` and ``attention.png``. ``evaluate`` measures exact match by input length (and,
for ``--task tsv``, BLEU, chrF and perplexity: :mod:`attnbook.evaluate`); ``translate`` runs
a trained model on your own input; ``export`` writes a Transformer run as ONNX with its
attention (:mod:`attnbook.export`). ``--help`` on each says more.

A run is never destroyed by mistake: ``train`` refuses an ``--out`` that already holds a run
(``--overwrite`` replaces it, ``--resume`` continues it) or anything that is not of a run,
checks ``--out``, ``--data`` and the model's length limit before the first step, locks the
run folder while it writes it (one command at a time: :class:`attnbook.runs.folder.RunLock`),
writes every file atomically, saves a checkpoint only from a healthy model, and saves one on
Ctrl-C or SIGTERM. No command writes over a file it reads (links resolved) or over a file
it did not make. Ctrl-C and SIGTERM at any moment, from the first import to the last write,
end a command with status 130 or 143 and one line (:mod:`attnbook._signals`). The exit
statuses are :data:`EXIT_CODES_HELP`.

This module parses the arguments and says what happened; the work is the library's
(:mod:`attnbook.runs`: :func:`attnbook.runs.train_run` gives Python the same run folder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path, PureWindowsPath

from . import __version__, _signals
from ._cli_help import (
    EVALUATE_EXAMPLES,
    EXIT_CODES_HELP,
    EXIT_DIVERGED,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXPORT_EXAMPLES,
    TRAIN_EXAMPLES,
    TRANSLATE_EXAMPLES,
)
from ._options import add_dataclass_arguments
from ._options import positive_int as _positive_int
from .runs.evaluation import DEFAULT_N_PER_LENGTH, evaluate_run, export_run, translate_run
from .runs.folder import RUN_FILES, RunLock, check_outputs, write_text
from .runs.models import MODELS, build_model
from .runs.options import (
    APPLIES_TO,
    FIXED_ON_RESUME,
    PER_INVOCATION,
    SEQUENCE_TASKS,
    TASK_NAMES,
    TRAIN_DEFAULTS,
    TrainCommandOptions,
    resolve_options,
)
from .runs.training import file_identity, train_resolved
from .train import NonFiniteLossError, TrainConfig
from .utils import DEVICES

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
        default=None,
        metavar="N",
        help="copy/reverse/sort: fresh inputs per length; more than the task has of a length "
        "is refused (default: up to 100, as many as there are)",
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
    r.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the --attention-png file(s) if they exist (refused without it; never "
        "the checkpoint)",
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
        "--overwrite",
        action="store_true",
        help="replace FILE.onnx and FILE.json if they exist (never the checkpoint)",
    )
    x.set_defaults(func=cmd_export)
    return parser


# --------------------------------------------------------------------------------------------
# train (the run itself: attnbook.runs)
# --------------------------------------------------------------------------------------------


def _given(args: argparse.Namespace) -> dict:
    """The options of ``train`` in ``args`` (None: not given)."""
    return {k: v for k, v in vars(args).items() if k in TRAIN_DEFAULTS or k in ("task", "data")}


def _resolve_train_options(args: argparse.Namespace) -> tuple[dict, dict | None, list]:
    """The run's options: defaults <- the checkpoint's (on --resume) <- the command line
    (:func:`attnbook.runs.options.resolve_options`)."""
    return resolve_options(_given(args), args.resume)


def cmd_train(args: argparse.Namespace) -> int:
    seen = file_identity(args.resume)  # before it is read: a resume writes over no other one
    run = train_resolved(
        *_resolve_train_options(args),
        args.resume,
        command=getattr(args, "command_line", None),
        resume_seen=seen,
    )
    if run.interrupted == "SIGTERM":
        return EXIT_TERMINATED
    return EXIT_INTERRUPTED if run.interrupted else EXIT_OK


# --------------------------------------------------------------------------------------------
# evaluate and translate
# --------------------------------------------------------------------------------------------


def _check_evaluation_json(path: Path, inputs: dict) -> None:
    """evaluation.json is written over no input (links resolved) and over no file that
    evaluate did not write (a JSON object with its keys)."""
    check_outputs({"evaluation.json": path}, inputs)
    if not os.path.lexists(path):
        return
    try:
        old = json.loads(path.read_text("utf-8"))
        ours = isinstance(old, dict) and {"by_length", "checkpoint", "step"} <= set(old)
    except (OSError, ValueError):
        ours = False
    if not ours or not path.is_file() or path.is_symlink():
        raise ValueError(
            f"{path} exists and is not an evaluation that evaluate wrote: it is not written "
            "over; move it away (evaluate writes its results there)"
        )


def cmd_evaluate(args: argparse.Namespace) -> int:
    path = Path(args.checkpoint).parent / "evaluation.json"
    _check_evaluation_json(path, {"--checkpoint": args.checkpoint, "--data": args.data})
    lock = RunLock(path.parent, getattr(args, "command_line", None))
    if Path(args.checkpoint).is_file():  # (a missing one: evaluate_run says so)
        notice = lock.acquire()
        if notice:
            print(notice, file=sys.stderr)
    try:
        return _evaluate(args, path)
    finally:
        lock.release()


def _evaluate(args: argparse.Namespace, path: Path) -> int:
    result = evaluate_run(
        args.checkpoint,
        lengths=args.lengths,
        n_per_length=args.n_per_length,
        beam=args.beam,
        batch_size=args.batch_size,
        data=args.data,
        device=args.device,
    )
    if result["task"] in SEQUENCE_TASKS:
        n = args.n_per_length or DEFAULT_N_PER_LENGTH
        how = f"up to {n} inputs of each length, none seen in training"
    else:
        how = "the test split by source length (longer than the previous bound, <= L)"
    by_length, counts, corpus = result["by_length"], result["examples"], result.get("test")
    print(
        f"exact match, {'greedy' if args.beam == 1 else f'beam {args.beam}'} decoding, "
        f"{result['model']} on {result['task']} ({how}):"
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
    _check_evaluation_json(path, {"--checkpoint": args.checkpoint, "--data": args.data})
    write_text(path, json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    for output in translate_run(
        args.checkpoint,
        args.text,
        beam=args.beam,
        max_len=args.max_len,
        attention_png=args.attention_png,
        overwrite=args.overwrite,
        device=args.device,
    ):
        print(output)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    written = export_run(args.checkpoint, out, overwrite=args.overwrite)
    print(f"wrote {out} ({written['bytes'] / 1024:.0f} KiB) and {out.with_suffix('.json')}")
    return 0


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------


_Terminated = _signals.Terminated  # (the name it had here)


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Run the command line; returns the exit status (:data:`EXIT_CODES_HELP`). ``argv``:
    the arguments (default ``sys.argv[1:]``); ``prog``: the program name of the usage and
    messages (default :func:`program_name`).

    Ctrl-C and SIGTERM: recorded (not acted on) while the process imports and parses, then
    acted on at once (:mod:`attnbook._signals`); either way one line on stderr and status 130
    or 143. Called from Python, it puts back the caller's signal handlers on return."""
    saved = _signals.guard()
    try:
        parser = build_parser(prog)
        args = parser.parse_args(argv)
        name = f"{parser.prog} {args.command}"
        shown = sys.argv[1:] if argv is None else [str(a) for a in argv]
        args.command_line = " ".join([parser.prog, *shown])[:300]
        return _run(args, name)
    finally:
        _signals.settle(saved)


def _run(args: argparse.Namespace, name: str) -> int:
    try:
        try:
            _signals.arm()  # a signal that came during the imports stops the command here
            _signals.phase("command")
        except BaseException as stop:
            stop.attnbook_detail = " before the command started: nothing was written"
            raise
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
    except KeyboardInterrupt as stop:  # outside training (which saves and returns itself)
        print(f"{name}: interrupted (SIGINT){_detail(stop)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _signals.Terminated as stop:
        print(f"{name}: stopped (SIGTERM){_detail(stop)}", file=sys.stderr)
        return EXIT_TERMINATED


def _detail(stop: BaseException) -> str:
    """What the command kept, as ``train`` says it (``attnbook_detail``: see
    :func:`attnbook.runs.training.train_resolved`)."""
    return str(getattr(stop, "attnbook_detail", "")).replace("\n", " ")


if __name__ == "__main__":
    sys.exit(main())
