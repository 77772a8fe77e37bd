"""Issue 40: special files and paths, and arguments of the wrong kind, everywhere.

1. Every reader of a user's file (``load_tsv``, ``file_sha256``, ``load_checkpoint``, the
   command line's ``--data``, ``--checkpoint``, ``--resume``) answers a FIFO, a device
   (``/dev/zero``, ``/dev/null``, ``/dev/urandom``), a folder, a dangling link, a link loop, a
   NUL byte in the path or the content, an empty, unreadable or huge file and a path of the
   wrong type with ONE line naming the argument and the path, and returns within seconds:
   each call runs in a thread that the test waits on for a bounded time, so a regression that
   blocks (a FIFO's open) fails instead of hanging the suite.
2. Every writer (``--attention-png``, ``export --out``, ``export_onnx``) refuses a folder, a
   FIFO, ``/dev/full``, ``/dev/null``, a path under a file, and ``--attention-png`` a format
   matplotlib cannot write, before any decoding work.
3. A hypothesis sweep of the public functions and constructors that take config-like
   arguments: wrong types and values raise only ``TypeError``/``ValueError`` naming the
   argument (never ``KeyError``, ``AttributeError``, ``IndexError``, ``RuntimeError``,
   ``ZeroDivisionError``, a hang or a NaN).
"""

from __future__ import annotations

import math
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnbook.data.corpus as corpus
from attnbook._files import check_input_file, check_output_file, check_path, open_input_file
from attnbook.cli import main
from attnbook.data import (
    BucketBatchSampler,
    Vocab,
    file_sha256,
    length_controlled,
    load_tsv,
    make_task,
    normalise_text,
    tokenize_words,
)
from attnbook.languages import make_dates_between
from attnbook.live import check_text
from attnbook.runs.evaluation import evaluate_run, export_run, translate_run
from attnbook.runs.tasks import check_data_file, data_identity
from attnbook.train import CheckpointError, TrainConfig, cosine_lr, load_checkpoint

WAIT = 15  # seconds a call may take before it counts as a hang

PAIRS = "".join(f"the {a} {b}\tle {b} {a}\n" for a in ("red", "cat", "dog") for b in ("big", "old"))
TRAIN = ["--n-train", "60", "--n-val", "8", "--n-test", "8", "--min-len", "2", "--max-len", "4"]
TINY = ["--d-model", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--quiet"]


def returns_within(fn, seconds: float = WAIT):
    """Run ``fn()`` in a thread; its exception (or None). Fails the test if it is still running
    after ``seconds``: a hang is a failure, not a stuck suite."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the test
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the call did not return within {seconds} s (a FIFO or a device read?)")
    return box.get("error")


def one_line(err: BaseException) -> str:
    message = str(err)
    assert message and "\n" not in message.strip(), repr(message)
    return message


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


# --------------------------------------------------------------------------------------------
# the special paths
# --------------------------------------------------------------------------------------------

KINDS = [
    "fifo",
    "folder",
    "dangling link",
    "link loop",
    "empty",
    "nul in path",
    "under a file",
    "missing",
    "unreadable",
    "/dev/zero",
    "/dev/null",
    "/dev/urandom",
    "an int",
    "bytes",
]

#: what the message says of each kind (besides the argument's name)
SAYS = {
    "fifo": "named pipe (FIFO)",
    "folder": "is a folder",
    "dangling link": "symbolic link to",
    "link loop": "symbolic link loop",
    "empty": "is empty",
    "nul in path": "NUL byte",
    "under a file": "is a file, not a folder",
    "missing": "does not exist",
    "unreadable": "permission denied",
    "/dev/zero": "character device",
    "/dev/null": "character device",
    "/dev/urandom": "character device",
    "an int": "got int",
    "bytes": "got bytes",
}


@pytest.fixture
def special(tmp_path):
    """``special(kind)`` -> a path (or a value) of that kind; FIFOs are unblocked at the end
    (a reader stuck in open() gets a writer and returns)."""
    fifos = []

    def make(kind: str):
        p = tmp_path / kind.replace("/", "_").replace(" ", "_")
        if kind == "fifo":
            if not hasattr(os, "mkfifo"):
                pytest.skip("no FIFOs on this system")
            os.mkfifo(p)
            fifos.append(p)
        elif kind == "folder":
            p.mkdir()
        elif kind == "dangling link":
            p.symlink_to(tmp_path / "nowhere")
        elif kind == "link loop":
            p.symlink_to(p)
        elif kind == "empty":
            p.write_bytes(b"")
        elif kind == "nul in path":
            return str(tmp_path / "a\0b.tsv")
        elif kind == "under a file":
            p.write_text(PAIRS)
            return p / "inside.tsv"
        elif kind == "unreadable":
            p.write_text(PAIRS)
            p.chmod(0)
            if os.access(p, os.R_OK):
                pytest.skip("running as root (or with CAP_DAC_OVERRIDE): chmod 000 denies nothing")
        elif kind.startswith("/dev/"):
            if not os.path.exists(kind):
                pytest.skip(f"no {kind} here")
            return kind
        elif kind == "an int":
            return 3
        elif kind == "bytes":
            return os.fsencode(tmp_path / "pairs.tsv")
        return p

    yield make
    for fifo in fifos:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue  # no reader waits: nothing to unblock
        os.close(fd)


def _shown(path) -> str:
    return str(path) if isinstance(path, (str, os.PathLike)) and "\0" not in str(path) else ""


READERS = {
    "load_tsv": (lambda p: load_tsv(p), "path"),
    "file_sha256": (lambda p: file_sha256(p), "path"),
    "load_checkpoint": (lambda p: load_checkpoint(p), "checkpoint"),
    "check_data_file (--data)": (lambda p: check_data_file(p), "--data"),
}


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("kind", KINDS)
def test_a_reader_gets_one_line_for_a_special_path(reader, kind, special):
    if reader == "file_sha256" and kind == "empty":
        assert file_sha256(special(kind)).startswith("e3b0c442")  # an empty file has a digest
        return
    path = special(kind)
    call, name = READERS[reader]
    err = returns_within(lambda: call(path))
    assert err is not None, f"{reader} accepted {kind}"
    allowed = (TypeError,) if kind in ("an int", "bytes") else (ValueError, FileNotFoundError)
    assert isinstance(err, allowed), f"{reader} on {kind}: {type(err).__name__}: {err}"
    message = one_line(err)
    assert name in message and SAYS[kind] in message, message
    assert _shown(path) in message


def test_load_tsv_refuses_a_nul_character_in_the_content(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_bytes(PAIRS.encode() + b"a\x00b\tc\n")
    with pytest.raises(ValueError) as info:
        load_tsv(path)
    assert "line 7: holds a NUL character" in one_line(info.value)
    path.write_bytes(b"\x00" * 300_000)  # /dev/zero's bytes in a regular file: no line break
    err = returns_within(lambda: load_tsv(path))
    assert isinstance(err, ValueError) and "line 1: holds a NUL" in one_line(err)


def test_load_tsv_refuses_a_line_longer_than_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "MAX_LINE_CHARS", 40)
    path = tmp_path / "pairs.tsv"
    path.write_text(PAIRS + "x" * 39 + "\ty\n")  # 41 characters: one too many
    with pytest.raises(ValueError) as info:
        load_tsv(path)
    assert "line 7: longer than 40 characters" in one_line(info.value)
    path.write_text(PAIRS + "x" * 38 + "\ty\r\n")  # 40 and its line break: read
    assert len(load_tsv(path, val_fraction=0.0, test_fraction=0.0).train) == 7


def test_a_huge_tsv_is_refused_unless_max_pairs_says_to_read_a_part(tmp_path, monkeypatch):
    path = tmp_path / "pairs.tsv"
    path.write_text(PAIRS * 10)
    monkeypatch.setattr(corpus, "MAX_TSV_BYTES", 100)
    with pytest.raises(ValueError) as info:
        load_tsv(path)
    message = one_line(info.value)
    assert str(path) in message and "max_pairs" in message and "100 bytes" in message
    assert len(load_tsv(path, max_pairs=3, val_fraction=0.0, test_fraction=0.0).train) == 3


def test_a_file_swapped_for_a_fifo_after_the_check_is_refused_not_waited_on(tmp_path, monkeypatch):
    """The open itself never blocks: the type is read again from the open descriptor."""
    import attnbook._files as files

    path = tmp_path / "pairs.tsv"
    path.write_text(PAIRS)
    real_check = files.check_input_file

    def check_then_swap(*args, **kwargs):
        checked = real_check(*args, **kwargs)
        path.unlink()
        os.mkfifo(path)
        return checked

    monkeypatch.setattr(files, "check_input_file", check_then_swap)
    err = returns_within(lambda: open_input_file("path", path, "a file"))
    assert isinstance(err, ValueError) and "named pipe (FIFO)" in one_line(err)


def test_the_helpers_accept_what_they_should(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(PAIRS)
    assert check_input_file("path", str(path), "a file") == path
    with open_input_file("path", path, "a file") as f:
        assert f.read() == PAIRS.encode()
    link = tmp_path / "link.tsv"
    link.symlink_to(path)  # a link to a regular file is that file
    assert len(load_tsv(link, val_fraction=0.0, test_fraction=0.0).train) == 6
    assert check_output_file("out", tmp_path / "new" / "deeper" / "x.png", "a png") is not None
    assert check_output_file("out", path, "a file") == path  # an existing file: replaced
    assert check_path("p", Path("x")) == Path("x")


# --------------------------------------------------------------------------------------------
# output paths
# --------------------------------------------------------------------------------------------

OUT_KINDS = {
    "folder": "is a folder",
    "fifo": "named pipe (FIFO)",
    "/dev/full": "character device",
    "/dev/null": "character device",
    "under a file": "not a folder",
    "dangling link": "symbolic link to",
    "link loop": "symbolic link loop",
    "nul in path": "NUL byte",
    "an int": "got int",
}


@pytest.mark.parametrize("kind", list(OUT_KINDS))
def test_an_output_path_of_the_wrong_kind_gets_one_line(kind, special):
    path = special(kind) if kind != "under a file" else special(kind).with_suffix(".png")
    err = returns_within(lambda: check_output_file("--out", path, "a picture file"))
    assert isinstance(err, (ValueError, TypeError)), f"{kind}: {err!r}"
    message = one_line(err)
    assert "--out" in message and OUT_KINDS[kind] in message, message


def test_an_output_folder_that_cannot_be_written_is_named(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as root: chmod denies nothing")
        with pytest.raises(ValueError, match="cannot write in the folder .*locked"):
            check_output_file("--out", folder / "x.png", "a picture file")
    finally:
        folder.chmod(stat.S_IRWXU)


# --------------------------------------------------------------------------------------------
# the command line: one line, exit 1 or 2, the option named
# --------------------------------------------------------------------------------------------


def cli(argv, capsys):
    try:
        code = main([str(a) for a in argv], prog="attnbook")
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def cli_within(argv, capsys):
    box = {}
    err = returns_within(lambda: box.setdefault("result", cli(argv, capsys)))
    if err is not None:
        raise err
    return box["result"]


def assert_one_line(code, err, *words):
    assert code in (1, 2), (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, (word, err)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A tiny trained Transformer run (a few steps of copy): its checkpoint."""
    out = tmp_path_factory.mktemp("issue40") / "run"
    code = main(
        ["train", "--task", "copy", "--model", "transformer", "--steps", "3", "--out", str(out)]
        + ["--batch-size", "8", "--eval-every", "3", "--log-every", "3", "--n-symbols", "5"]
        + TRAIN
        + TINY
    )
    assert code == 0
    return out / "checkpoint.pt"


@pytest.mark.parametrize(
    "kind", ["fifo", "/dev/zero", "/dev/null", "folder", "dangling link", "empty", "nul in path"]
)
@pytest.mark.parametrize(
    "command",
    [
        ["train", "--task", "tsv", "--data", "{p}", "--out", "{d}/run", "--steps", "2"],
        ["train", "--resume", "{p}"],
        ["evaluate", "--checkpoint", "{p}"],
        ["translate", "--checkpoint", "{p}", "hello"],
        ["export", "--checkpoint", "{p}", "--out", "{d}/x.onnx"],
    ],
    ids=["--data", "--resume", "evaluate --checkpoint", "translate --checkpoint", "export"],
)
def test_the_command_line_names_the_option_of_a_special_input(
    command, kind, special, tmp_path, capsys
):
    path = special(kind)
    argv = [a.replace("{p}", str(path)).replace("{d}", str(tmp_path)) for a in command]
    option = next(a for a in command if a in ("--data", "--resume", "--checkpoint"))
    code, _, err = cli_within(argv, capsys)
    assert_one_line(code, err, option, SAYS[kind])
    assert not (tmp_path / "run").exists() and not (tmp_path / "x.onnx").exists()


@pytest.mark.parametrize(
    "png, words",
    [
        ("x.txt", ["--attention-png", "cannot write .txt", ".png", ".svg"]),
        ("{folder}", ["--attention-png", "is a folder"]),
        ("{fifo}", ["--attention-png", "named pipe"]),
        ("/dev/full", ["--attention-png", "character device"]),
        ("{file}/a.png", ["--attention-png", "not a folder"]),
    ],
)
def test_attention_png_is_checked_before_any_decoding(
    png, words, run, tmp_path, monkeypatch, capsys
):
    if png == "/dev/full" and not os.path.exists(png):
        pytest.skip("no /dev/full here")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "file").write_text("x")
    png = png.format(folder=tmp_path / "folder", fifo=tmp_path / "fifo", file=tmp_path / "file")
    import attnbook.runs.evaluation as evaluation

    def no_work(*args, **kwargs):
        raise AssertionError("decoding ran before --attention-png was checked")

    monkeypatch.setattr(evaluation, "attention_figure", no_work)
    monkeypatch.setattr(evaluation, "load_checkpoint", no_work)
    code, out, err = cli_within(
        ["translate", "--checkpoint", run, "abc", "--attention-png", png], capsys
    )
    assert_one_line(code, err, *words)
    assert out == ""


def test_attention_png_in_a_format_matplotlib_writes_works(run, tmp_path, capsys):
    code, out, err = cli(
        ["translate", "--checkpoint", run, "abc", "--attention-png", tmp_path / "a.svg"], capsys
    )
    assert code == 0, err
    assert (tmp_path / "a.svg").read_text().lstrip().startswith("<?xml")
    with pytest.raises(ValueError, match="--attention-png .*cannot write .bmp"):
        next(translate_run(run, ["abc"], attention_png=tmp_path / "a.bmp"))


@pytest.mark.parametrize(
    "kind", ["folder", "fifo", "link to /dev/full", "under a file", "sidecar a folder", "an int"]
)
def test_export_out_of_the_wrong_kind_is_refused_before_loading(kind, run, tmp_path, capsys):
    out = tmp_path / "x.onnx"
    if kind == "folder":
        out.mkdir()
    elif kind == "fifo":
        os.mkfifo(out)
    elif kind == "link to /dev/full":
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full here")
        out.symlink_to("/dev/full")
    elif kind == "under a file":
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "x.onnx"
    elif kind == "sidecar a folder":
        out.with_suffix(".json").mkdir()
    else:
        out = 3
    err = returns_within(lambda: export_run(run, out))
    assert isinstance(err, (ValueError, TypeError)), repr(err)
    assert "--out" in one_line(err)
    if kind != "an int":
        code, _, stderr = cli_within(["export", "--checkpoint", run, "--out", out], capsys)
        assert_one_line(code, stderr, "--out")


# --------------------------------------------------------------------------------------------
# arguments of the wrong kind: a hypothesis sweep
# --------------------------------------------------------------------------------------------

SWEEP = settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

#: values that are wrong for every argument they are given to below
NOT_POSITIVE_INT = [-1, 0, 2.5, True, "5", None, math.nan, [3]]
NOT_NATURAL_INT = [-1, 2.5, True, "5", None, math.inf, [3]]
NOT_POSITIVE_FLOAT = [0.0, -1.0, math.nan, math.inf, "0.1", True, None, [0.1]]
NOT_PROBABILITY = [1.0, 1.5, -0.1, math.nan, math.inf, "0.1", True, None]
NOT_FLAG = ["yes", 1, 0, None, 1.0]
NOT_PATH = [3, 2.5, True, b"x.tsv", ["x"], "", "a\0b"]

VOCAB = Vocab("abc")
WORDS = Vocab(["the", "cat"], level="word")


def _tsv(tmp: Path) -> Path:
    path = tmp / "pairs.tsv"
    if not path.exists():
        path.write_text(PAIRS)
    return path


def _good(value, tmp: Path, run: Path):
    """A good argument: "TSV" a corpus, "RUN" the trained run's checkpoint, "OUT" a new .onnx
    file's path; anything else as it is."""
    if isinstance(value, str) and value == "TSV":
        return _tsv(tmp)
    if isinstance(value, str) and value == "RUN":
        return run
    if isinstance(value, str) and value == "OUT":
        return tmp / "sweep" / "x.onnx"
    return value


#: (name, call(**kwargs), good kwargs, {argument: bad values}); "TSV" is the corpus's path
CASES = [
    (
        "TrainConfig",
        TrainConfig,
        {"steps": 5},
        {
            "steps": NOT_POSITIVE_INT[:5],
            "epochs": NOT_POSITIVE_INT[:5],
            "max_seconds": [v for v in NOT_POSITIVE_FLOAT if v is not None],
            "batch_size": NOT_POSITIVE_INT,
            "optimizer": ["lion", None, 3, ["adamw"]],
            "lr": NOT_POSITIVE_FLOAT,
            "schedule": ["zigzag", None, 3],
            "warmup": NOT_NATURAL_INT,
            "lr_scale": NOT_POSITIVE_FLOAT,
            "d_model": NOT_POSITIVE_INT[:5],
            "min_lr_ratio": [-0.1, 1.5, math.nan, "0.1", True, None],
            "betas": [0.9, (0.9,), (0.9, 1.0), ("a", "b"), "ab", None, (0.9, math.nan)],
            "adam_eps": NOT_POSITIVE_FLOAT,
            "weight_decay": [-1.0, math.nan, math.inf, "0", True, None],
            "grad_clip": [0.0, -1.0, math.nan, math.inf, "1", True],
            "label_smoothing": NOT_PROBABILITY,
            "eval_every": NOT_POSITIVE_INT,
            "eval_examples": NOT_POSITIVE_INT[:5],
            "log_every": NOT_POSITIVE_INT,
            "bucket": NOT_FLAG,
            "device": ["tpu", 3, None, "cuda:x", ["cpu"]],
            "amp": ["yes", 1, 0.0],
            "compile": NOT_FLAG,
            "seed": NOT_NATURAL_INT,
            "progress": NOT_FLAG,
            "out_dir": NOT_PATH,
        },
    ),
    (
        "TrainConfig.from_dict",
        lambda d: TrainConfig.from_dict(d),
        {"d": {"steps": 5}},
        {"d": [None, [("steps", 5)], "steps", 3]},
    ),
    (
        "Vocab.from_dict",
        lambda d: Vocab.from_dict(d),
        {"d": VOCAB.to_dict()},
        {
            "d": [None, [1], "abc", 3],
        },
    ),
    (
        "check_text",
        check_text,
        {"text": "abc", "src_vocab": VOCAB, "max_len": 10},
        {"max_len": NOT_POSITIVE_INT, "src_vocab": [None, "abc", WORDS, 3]},
    ),
    (
        "load_tsv",
        load_tsv,
        {"path": "TSV"},
        {
            "path": NOT_PATH,
            "level": ["byte", None, 3],
            "lower": ["yes", None, 1],
            "min_len": NOT_POSITIVE_INT[:5],
            "max_len": NOT_POSITIVE_INT[:5],
            "val_fraction": [1.0, -0.1, math.nan, "0.1", True, None],
            "test_fraction": [1.0, -0.1, math.nan, "0.1", True, None],
            "seed": NOT_NATURAL_INT,
            "min_freq": NOT_POSITIVE_INT,
            "max_pairs": NOT_POSITIVE_INT[:5],
            "encoding": ["klingon", 3, None, ""],
        },
    ),
    (
        "Vocab",
        Vocab,
        {"symbols": "abc"},
        {"symbols": [3, None, b"abc", ["a", 3]], "level": ["byte", 3], "unknown": ["skip", 3]},
    ),
    (
        "Vocab.build",
        Vocab.build,
        {"texts": ["abc"]},
        {
            "texts": [3, None, "abc", [3]],
            "min_freq": NOT_POSITIVE_INT,
            "max_size": NOT_POSITIVE_INT[:5],
            "level": ["byte", None],
        },
    ),
    (
        "Vocab.encode",
        lambda **kw: VOCAB.encode(**kw),
        {"text": "abc"},
        {"add_bos": NOT_FLAG, "add_eos": NOT_FLAG, "unknown": ["skip", 3], "text": [3, None]},
    ),
    (
        "Vocab.decode",
        lambda **kw: VOCAB.decode(**kw),
        {"ids": [4, 5]},
        {"strip_special": NOT_FLAG, "ids": [[4, "5"], [99], [-1], 3.5]},
    ),
    (
        "make_task",
        make_task,
        {"name": "copy", "n_train": 10, "n_val": 2, "n_test": 2},
        {
            "name": ["poetry", None, 3],
            "n_train": NOT_POSITIVE_INT,
            "seed": NOT_NATURAL_INT,
        },
    ),
    (
        "normalise_text",
        normalise_text,
        {"text": "a b"},
        {"text": [3, None, b"ab"], "level": ["byte", None, 3], "lower": NOT_FLAG},
    ),
    (
        "tokenize_words",
        tokenize_words,
        {"text": "a b"},
        {"text": [3, None], "lower": NOT_FLAG},
    ),
    (
        "BucketBatchSampler",
        BucketBatchSampler,
        {"lengths": [1, 2, 3], "batch_size": 2},
        {
            "batch_size": NOT_POSITIVE_INT,
            "shuffle": NOT_FLAG,
            "drop_last": NOT_FLAG,
            "seed": NOT_NATURAL_INT,
            "pool_batches": NOT_POSITIVE_INT,
        },
    ),
    (
        "cosine_lr",
        cosine_lr,
        {"step": 5, "lr": 0.1, "warmup": 2, "total_steps": 10},
        {
            "step": NOT_POSITIVE_INT,
            "lr": NOT_POSITIVE_FLOAT,
            "warmup": NOT_NATURAL_INT,
            "total_steps": NOT_POSITIVE_INT,
            "min_ratio": [-0.1, 1.5, math.nan, "0.1", True, None],
        },
    ),
    (
        "make_dates_between",
        make_dates_between,
        {"src": "en_US", "tgt": "de_DE", "n_train": 5, "n_val": 2, "n_test": 2},
        {
            "src": ["xx_XX", None, 3],
            "n_train": NOT_POSITIVE_INT,
            "seed": NOT_NATURAL_INT,
            "weekday_share": [-0.1, 1.5, math.nan, "0.5", True, None],
        },
    ),
    (
        "length_controlled",
        length_controlled,
        {"task": "copy", "lengths": [3], "n_per_length": 2},
        {"lengths": [3, None, [0], ["3"]], "n_per_length": NOT_POSITIVE_INT},
    ),
    (
        "check_output_file",
        lambda path: check_output_file("path", path, "a file"),
        {"path": "TSV"},
        {"path": NOT_PATH + ["/dev/full", "/"]},
    ),
    (
        "data_identity",
        lambda path: data_identity(path, Path(".")),
        {"path": "TSV"},
        {"path": NOT_PATH + ["/dev/zero"]},
    ),
    (
        "evaluate_run",
        evaluate_run,
        {"checkpoint": "RUN", "lengths": (3,), "n_per_length": 2},
        {
            "checkpoint": NOT_PATH + ["/dev/zero"],
            "lengths": [3, None, (), (0,), ("3",), (2.5,)],
            # None is allowed here: up to DEFAULT_N_PER_LENGTH, as many as the task has
            "n_per_length": [v for v in NOT_POSITIVE_INT if v is not None],
            "beam": NOT_POSITIVE_INT,
            "batch_size": NOT_POSITIVE_INT,
            "device": ["tpu", 3, "cuda:x"],
            "data": ["/dev/zero", 3],
        },
    ),
    (
        "translate_run",
        lambda **kw: list(translate_run(**kw)),
        {"checkpoint": "RUN", "texts": ["abc"]},
        {
            "checkpoint": NOT_PATH + ["/dev/zero"],
            "texts": [3, None, [3], []],
            "beam": NOT_POSITIVE_INT,
            "max_len": NOT_POSITIVE_INT[:5],
            "attention_png": [3, "x.txt", "/dev/full", "/", "a\0b.png"],
            "device": ["tpu", 3],
        },
    ),
    (
        "export_run",
        export_run,
        {"checkpoint": "RUN", "out": "OUT"},
        {
            "checkpoint": NOT_PATH + ["/dev/zero"],
            "out": NOT_PATH + ["/dev/full", "x.txt", "/"],
            "overwrite": NOT_FLAG,
        },
    ),
    (
        "file_sha256",
        file_sha256,
        {"path": "TSV"},
        {"path": NOT_PATH},
    ),
    (
        "load_checkpoint",
        load_checkpoint,
        {"path": "TSV"},
        {"path": NOT_PATH},
    ),
]

SWEEP_CASES = [(name, arg) for name, _, _, bad in CASES for arg in bad]
_BY_NAME = {name: (call, good, bad) for name, call, good, bad in CASES}
#: where the message names the argument by another word
ALIASES = {
    ("TrainConfig.from_dict", "d"): "dict",
    ("load_checkpoint", "path"): "checkpoint",
    ("evaluate_run", "checkpoint"): "--checkpoint",
    ("evaluate_run", "data"): "--data",
    ("evaluate_run", "lengths"): "length",
    ("translate_run", "attention_png"): "--attention-png",
    ("export_run", "out"): "--out",
}


@pytest.mark.parametrize("name, arg", SWEEP_CASES, ids=[f"{n}-{a}" for n, a in SWEEP_CASES])
@SWEEP
@given(data=st.data())
def test_a_wrong_argument_is_a_type_or_value_error_naming_it(name, arg, data, tmp_path, run):
    call, good, bad = _BY_NAME[name]
    value = data.draw(st.sampled_from(bad[arg]), label=f"{arg}")
    kwargs = {k: _good(v, tmp_path, run) for k, v in good.items()}
    kwargs[arg] = value
    err = returns_within(lambda: call(**kwargs))
    assert err is not None, f"{name} accepted {arg}={value!r}"
    assert type(err) in (TypeError, ValueError, FileNotFoundError, CheckpointError), (
        f"{name}: {arg}={value!r} gave {type(err).__name__}: {err}"
    )
    message = one_line(err)
    wanted = ALIASES.get((name, arg), arg)
    assert wanted in message or wanted.replace("_", " ") in message, (
        f"{name}: {arg}={value!r} gave {message!r}, which does not name {wanted}"
    )
    assert "nan" not in message.lower() or value is math.nan or "nan" in repr(value).lower()


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_the_good_calls_of_the_sweep_work(name, tmp_path, run):
    if name == "load_checkpoint":
        pytest.skip("a TSV is not a checkpoint: its good call is the trained run's, below")
    call, good, _ = _BY_NAME[name]
    call(**{k: _good(v, tmp_path, run) for k, v in good.items()})


def test_vocab_from_dict_names_the_key(tmp_path):
    cases = [
        ({}, ValueError, "'symbols'"),
        ({"symbols": ["a"]}, ValueError, "'level'"),
        ({"symbols": "abc", "level": "char"}, TypeError, "d['symbols']"),
        ({"symbols": ["a", "a"], "level": "char"}, ValueError, "duplicate"),
        ({"symbols": [*Vocab("").itos, "a"], "level": "char"}, ValueError, "special symbols"),
        ({"symbols": ["<eos>"], "level": "word"}, ValueError, "special symbol"),
        ({"symbols": ["a"], "level": 3}, ValueError, "d['level']"),
        ({"symbols": ["a"], "level": "char", "unknown": "x"}, ValueError, "d['unknown']"),
        ({"symbols": [1], "level": "char"}, TypeError, "d['symbols']"),
        ({"symbols": ["a"], "level": "char", "symbol": []}, ValueError, "'symbol'"),
    ]
    for d, kind, words in cases:
        with pytest.raises(kind) as info:
            Vocab.from_dict(d)
        assert words in one_line(info.value), (d, str(info.value))
    assert Vocab.from_dict(VOCAB.to_dict()) == VOCAB


def test_a_checkpoint_read_through_the_check_loads_as_before(run):
    ckpt = load_checkpoint(run)
    assert ckpt["format"].startswith("attnbook-checkpoint-")
    copied = run.parent / "copy.pt"
    shutil.copy(run, copied)
    assert load_checkpoint(copied)["step"] == ckpt["step"]
    assert torch.equal(
        next(iter(load_checkpoint(copied)["model"].values())),
        next(iter(ckpt["model"].values())),
    )


def test_an_unreadable_file_is_named_even_where_root_reads_everything(tmp_path, monkeypatch):
    """chmod 000 denies nothing to root: the two places that see a denial are made to see it
    (the access check, and the open itself where the check was wrong)."""
    import attnbook._files as files

    path = tmp_path / "pairs.tsv"
    path.write_text(PAIRS)
    with monkeypatch.context() as m:
        m.setattr(files.os, "access", lambda *args, **kwargs: False)
        for call in (lambda: load_tsv(path), lambda: check_data_file(path)):
            with pytest.raises(ValueError, match="cannot be read \\(permission denied\\)"):
                call()
        with pytest.raises(ValueError, match="--out .*cannot be written \\(permission denied\\)"):
            check_output_file("--out", path, "a file")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(files.os, "open", denied)
    with pytest.raises(
        CheckpointError, match="checkpoint .* cannot be read \\(permission denied\\)"
    ):
        load_checkpoint(path)
