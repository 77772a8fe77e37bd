"""No run is ever lost (issue 17): the command line and the trainer under a user's mistakes,
faults and bad data. Each case checks the exit status, that the message names the problem,
and that nothing already saved changed (the files' hashes before and after)."""

import errno
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import attnbook.train as train_module
from attnbook.cli import RUN_FILES, TRAIN_DEFAULTS, main
from attnbook.data import load_tsv, make_task
from attnbook.train import (
    NonFiniteLossError,
    TrainConfig,
    Trainer,
    atomic_write,
    load_checkpoint,
    remove_stale_temp_files,
)
from attnbook.transformer import Transformer

DATA = [
    "--n-train",
    "200",
    "--n-val",
    "20",
    "--n-test",
    "20",
    "--min-len",
    "2",
    "--max-len",
    "5",
    "--n-symbols",
    "5",
]
RUN = ["--batch-size", "16", "--eval-every", "10", "--log-every", "5", "--quiet"]
TRANSFORMER = ["--d-model", "16", "--heads", "2", "--d-ff", "32"]
PAIRS = [
    f"the {a} {b}\tle {b} {a}"
    for a in ("red", "green", "blue", "cat", "dog", "big")
    for b in ("red", "green", "blue", "cat", "dog", "big")
]


def cli(argv, capsys):
    """main(argv) in this process -> (exit status, stdout, stderr)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, *words: str) -> None:
    """One line of error, besides a resume's notice of what it changes."""
    lines = [line for line in err.strip().splitlines() if not line.startswith("resuming ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)


def hashes(folder: Path) -> dict:
    """Every file of a folder (temporary ones included) -> its SHA-256."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(folder).iterdir())
        if p.is_file()
    }


def temp_files(folder: Path) -> list:
    return [p.name for p in Path(folder).glob(".*.tmp-*")]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A finished 20-step run of a tiny transformer on the copy task (never modified)."""
    out = tmp_path_factory.mktemp("safety") / "copy"
    assert (
        main(
            [
                "train",
                "--task",
                "copy",
                "--steps",
                "20",
                "--out",
                str(out),
                *DATA,
                *RUN,
                *TRANSFORMER,
            ]
        )
        == 0
    )
    return out


@pytest.fixture
def run_copy(base, tmp_path):
    """A copy of the base run that a test may change."""
    return Path(shutil.copytree(base, tmp_path / "copy"))


@pytest.fixture
def tsv_copy(tmp_path):
    """A finished run on a tsv file of its own: a folder holding data.tsv and run/."""
    root = tmp_path / "tsv"
    root.mkdir()
    (root / "data.tsv").write_text("\n".join(PAIRS) + "\n")
    assert (
        main(
            [
                "train",
                "--task",
                "tsv",
                "--data",
                str(root / "data.tsv"),
                "--steps",
                "10",
                "--out",
                str(root / "run"),
                *RUN,
                *TRANSFORMER,
            ]
        )
        == 0
    )
    return root


def train_argv(out, *extra, steps=20):
    return [
        "train",
        "--task",
        "copy",
        "--steps",
        str(steps),
        "--out",
        out,
        *DATA,
        *RUN,
        *TRANSFORMER,
        *extra,
    ]


# --------------------------------------------------------------------------------------------
# 1. an existing run is never replaced by mistake
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["explicit --out", "default --out"])
def test_an_existing_run_is_refused(how, base, tmp_path, monkeypatch, capsys):
    if how == "default --out":
        monkeypatch.chdir(tmp_path)
        run = Path(shutil.copytree(base, tmp_path / "runs" / "copy-transformer"))
        argv = ["train", "--task", "copy", "--steps", "20", *DATA, *RUN, *TRANSFORMER]
    else:
        run = Path(shutil.copytree(base, tmp_path / "copy"))
        argv = train_argv(run)
    before = hashes(run)
    code, _, err = cli(argv, capsys)
    assert code == 1
    one_line_error(err, "already holds a run", "checkpoint.pt", "--overwrite", "--resume")
    assert hashes(run) == before


def test_overwrite_replaces_the_run_and_removes_its_old_files(run_copy, capsys):
    (run_copy / "evaluation.json").write_text("{}")
    before = hashes(run_copy)
    code, _, err = cli(train_argv(run_copy, "--overwrite", "--seed", "1"), capsys)
    assert code == 0, err
    after = hashes(run_copy)
    assert "evaluation.json" not in after  # the old run's file is gone
    assert after["checkpoint.pt"] != before["checkpoint.pt"]
    assert load_checkpoint(run_copy / "checkpoint.pt")["meta"]["options"]["seed"] == 1


def test_an_empty_existing_folder_is_accepted(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = cli(train_argv(tmp_path / "empty", steps=10), capsys)
    assert code == 0, err
    assert sorted(hashes(tmp_path / "empty")) == [
        "attention.png",
        "checkpoint.pt",
        "history.csv",
        "loss.png",
        "metrics.json",
    ]


def test_overwrite_with_resume_of_the_same_run_is_refused(run_copy, capsys):
    before = hashes(run_copy)
    code, _, err = cli(
        ["train", "--resume", run_copy / "checkpoint.pt", "--steps", "30", "--overwrite"], capsys
    )
    assert code == 1
    one_line_error(err, "--overwrite would delete the checkpoint")
    assert hashes(run_copy) == before


def test_resume_into_another_run_is_refused(run_copy, base, capsys):
    before = hashes(base)
    code, _, err = cli(
        ["train", "--resume", run_copy / "checkpoint.pt", "--steps", "30", "--out", base], capsys
    )
    assert code == 1
    one_line_error(err, f"--out {base} already holds a run")
    assert hashes(base) == before


# --------------------------------------------------------------------------------------------
# 2. --out is checked before the first step
# --------------------------------------------------------------------------------------------


def _file(tmp_path):
    (tmp_path / "some-file").write_text("not a folder")
    return tmp_path / "some-file"


@pytest.mark.parametrize(
    "case, words",
    [
        ("a file", "is a file; it wants a folder"),
        ("under a file", "cannot create it, because"),
        ("not writable", "is not writable"),
        ("cannot write", "cannot write into it"),
    ],
)
def test_a_bad_out_fails_before_any_training(case, words, tmp_path, monkeypatch, capsys):
    out = {"a file": _file(tmp_path), "under a file": _file(tmp_path) / "run"}.get(
        case, tmp_path / "run"
    )
    if case == "not writable":  # (as root, chmod would not stop a write)
        monkeypatch.setattr(os, "access", lambda *a, **k: False)
    if case == "cannot write":

        def refuse(*a, **k):
            raise OSError(errno.EROFS, "Read-only file system")

        monkeypatch.setattr("tempfile.NamedTemporaryFile", refuse)
    started = []
    monkeypatch.setattr(Trainer, "fit", lambda self: started.append(1))
    code, _, err = cli(train_argv(out, steps=100000), capsys)
    assert code == 1 and not started
    one_line_error(err, "--out", words)


# --------------------------------------------------------------------------------------------
# 8. an option that does not apply is refused, not ignored
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, words",
    [
        (
            ["--model", "rnn", "--heads", "2"],
            "--heads applies to --model transformer, not to --model rnn",
        ),
        (["--model", "rnn", "--d-model", "16"], "--d-model applies to --model transformer"),
        (["--model", "rnn-attention", "--layers", "2"], "--layers applies to --model transformer"),
        (["--model", "rnn", "--d-ff", "32"], "--d-ff applies to --model transformer"),
        (["--model", "rnn", "--no-norm-first"], "--norm-first applies to --model transformer"),
        (["--emb", "8"], "--emb applies to --model rnn/rnn-attention, not to --model transformer"),
        (["--hidden", "16"], "--hidden applies to --model rnn/rnn-attention"),
        (["--cell", "lstm"], "--cell applies to --model rnn/rnn-attention"),
        (["--bidirectional"], "--bidirectional applies to --model rnn/rnn-attention"),
        (
            ["--model", "rnn", "--score", "dot"],
            "--score applies to --model rnn-attention, not to --model rnn",
        ),
        (["--score", "dot"], "--score applies to --model rnn-attention"),
        (
            ["--task", "dates", "--n-symbols", "5"],
            "--n-symbols applies to --task copy/reverse/sort",
        ),
        (["--task", "dates", "--min-len", "2"], "--min-len applies to --task copy/reverse/sort"),
        (
            ["--task", "dates", "--max-len", "9"],
            "--max-len applies to --task copy/reverse/sort/tsv",
        ),
        (["--level", "char"], "--level applies to --task tsv, not to --task copy"),
        (["--lower"], "--lower applies to --task tsv"),
        (["--max-pairs", "5"], "--max-pairs applies to --task tsv"),
        (["--encoding", "latin-1"], "--encoding applies to --task tsv"),
        (["--data", "pairs.tsv"], "--data applies to --task tsv"),
        (
            ["--task", "tsv", "--data", "pairs.tsv", "--n-train", "100"],
            "--n-train applies to --task copy/reverse/sort/dates, not to --task tsv",
        ),
        (["--schedule", "noam", "--lr", "0.01"], "--lr applies to --schedule constant/cosine"),
        (["--lr-scale", "2"], "--lr-scale applies to --schedule noam, not to --schedule cosine"),
    ],
)
def test_an_option_that_does_not_apply_is_refused(argv, words, tmp_path, capsys):
    if "--task" not in argv:
        argv = ["--task", "copy", *argv]
    code, _, err = cli(["train", *argv, "--out", tmp_path / "run", "--quiet"], capsys)
    assert code == 1
    one_line_error(err, words)
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------------------------
# 6. data: decoding, encodings, identity (a hash and the paths) on resume and evaluate
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lines_before", [2, 5000])
def test_a_decoding_error_names_the_file_line_and_column(lines_before, tmp_path):
    path = tmp_path / "latin.tsv"
    path.write_bytes(("a b\tc d\n" * lines_before + "un caf\u00e9\tcoffee\n").encode("latin-1"))
    with pytest.raises(
        ValueError,
        match=rf"latin.tsv, line {lines_before + 1}, column 7: not "
        r"valid utf-8 \(bytes b'\\xe9'\)",
    ):
        load_tsv(path)
    pairs = load_tsv(path, encoding="latin-1", val_fraction=0.0, test_fraction=0.0).train
    assert ("un café", "coffee") in pairs


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_word(tmp_path):
    path = tmp_path / "bom.tsv"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(PAIRS).encode())
    task = load_tsv(path, val_fraction=0.0, test_fraction=0.0)
    assert "\ufeff" not in task.src_vocab.itos and ("the red red", "le red red") in task.train


def test_the_command_line_names_the_bad_byte_and_takes_encoding(tmp_path, capsys):
    data = tmp_path / "pairs.tsv"
    data.write_bytes(("\n".join(PAIRS) + "\nun caf\u00e9\tcoffee\n").encode("cp1252"))
    argv = [
        "train",
        "--task",
        "tsv",
        "--data",
        data,
        "--steps",
        "5",
        "--out",
        tmp_path / "run",
        *RUN,
        *TRANSFORMER,
    ]
    code, _, err = cli(argv, capsys)
    assert code == 1
    one_line_error(err, f"{data}, line {len(PAIRS) + 1}, column 7", "--encoding")
    assert not (tmp_path / "run" / "checkpoint.pt").exists()
    code, _, err = cli([*argv, "--encoding", "cp1252"], capsys)
    assert code == 0, err
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert ckpt["meta"]["task_kwargs"]["encoding"] == "cp1252"
    assert "café" in ckpt["vocab"]["src"]["symbols"]


@pytest.mark.parametrize(
    "case, words",
    [
        ("unknown encoding", "--encoding klingon: not a text encoding"),
        ("a folder", "is a folder"),
        ("one field", "line 2: expected at least 2 tab-separated fields"),
        ("binary", "not valid utf-8"),
    ],
)
def test_bad_data_is_one_line_before_any_training(case, words, tmp_path, capsys):
    data = tmp_path / "pairs.tsv"
    extra = []
    if case == "unknown encoding":
        data.write_text("\n".join(PAIRS))
        extra = ["--encoding", "klingon"]
    elif case == "a folder":
        data.mkdir()
    elif case == "one field":
        data.write_text("a\tb\nno tab here\n")
    else:
        data.write_bytes(bytes(range(256)) * 4)
    code, _, err = cli(
        ["train", "--task", "tsv", "--data", data, "--out", tmp_path / "run", *extra, *RUN], capsys
    )
    assert code == 1
    one_line_error(err, words)
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_relative_data_resumes_and_evaluates_from_another_folder(tmp_path, monkeypatch, capsys):
    (tmp_path / "data.tsv").write_text("\n".join(PAIRS) + "\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(
        [
            "train",
            "--task",
            "tsv",
            "--data",
            "data.tsv",
            "--steps",
            "10",
            "--out",
            "run",
            *RUN,
            *TRANSFORMER,
        ],
        capsys,
    )
    assert code == 0, err
    identity = load_checkpoint(tmp_path / "run" / "checkpoint.pt")["meta"]["data"]
    assert identity["path"] == str(tmp_path / "data.tsv")
    assert identity["relative"] == os.path.join("..", "data.tsv")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, _, err = cli(
        ["train", "--resume", "../run/checkpoint.pt", "--steps", "20", "--quiet"], capsys
    )
    assert code == 0, err
    assert load_checkpoint(tmp_path / "run" / "checkpoint.pt")["step"] == 20
    code, _, err = cli(["evaluate", "--checkpoint", "../run/checkpoint.pt"], capsys)
    assert code == 0, err


def test_a_run_moved_with_its_data_still_evaluates(tsv_copy, tmp_path, capsys):
    moved = tmp_path / "moved"
    shutil.move(tsv_copy, moved)  # data.tsv and run/ move together
    code, out, err = cli(["evaluate", "--checkpoint", moved / "run" / "checkpoint.pt"], capsys)
    assert code == 0, err
    assert "exact match" in out


@pytest.mark.parametrize("command", ["resume", "evaluate"])
def test_a_changed_data_file_is_refused_unless_given_again(command, tsv_copy, capsys):
    ckpt = tsv_copy / "run" / "checkpoint.pt"
    with open(tsv_copy / "data.tsv", "a") as f:
        f.write("the new cat\tle nouveau chat\n")
    before = hashes(tsv_copy / "run")
    argv = (
        ["train", "--resume", ckpt, "--steps", "20"]
        if command == "resume"
        else ["evaluate", "--checkpoint", ckpt]
    )
    code, _, err = cli(argv, capsys)
    assert code == 1
    one_line_error(
        err, "data.tsv has changed since it was trained", "test pairs could leak", "--data"
    )
    assert hashes(tsv_copy / "run") == before
    if command == "evaluate":  # knowingly: it runs, with a warning
        code, out, err = cli([*argv, "--data", tsv_copy / "data.tsv"], capsys)
        assert code == 0 and "is not the file this run was trained on" in err


def test_a_missing_data_file_says_where_it_looked(tsv_copy, capsys):
    (tsv_copy / "data.tsv").rename(tsv_copy / "renamed.tsv")
    ckpt = tsv_copy / "run" / "checkpoint.pt"
    code, _, err = cli(["evaluate", "--checkpoint", ckpt], capsys)
    assert code == 1
    one_line_error(err, "the run's data file is not at", str(tsv_copy / "data.tsv"), "--data")
    code, _, err = cli(
        ["evaluate", "--checkpoint", ckpt, "--data", tsv_copy / "renamed.tsv"], capsys
    )
    assert code == 0, err
    assert "warning" not in err  # the same content: no warning


# --------------------------------------------------------------------------------------------
# 7. lengths: the model must fit the data; translate and evaluate say the model's limit
# --------------------------------------------------------------------------------------------


def test_data_longer_than_the_positional_table_is_refused_before_training(tmp_path, capsys):
    code, _, err = cli(
        [
            "train",
            "--task",
            "copy",
            "--max-len",
            "600",
            "--min-len",
            "590",
            "--n-train",
            "20",
            "--n-val",
            "5",
            "--n-test",
            "5",
            "--out",
            tmp_path / "run",
            *RUN,
            *TRANSFORMER,
        ],
        capsys,
    )
    assert code == 1
    one_line_error(err, "--max-len 600", "at most 512 positions", "--max-len 511")
    assert not (tmp_path / "run").exists()


def test_a_char_level_file_with_long_lines_is_refused(tmp_path, capsys):
    data = tmp_path / "long.tsv"
    data.write_text("\n".join(PAIRS + ["x" * 600 + "\ty"] * 3) + "\n")
    code, _, err = cli(
        [
            "train",
            "--task",
            "tsv",
            "--data",
            data,
            "--level",
            "char",
            "--max-len",
            "700",
            "--out",
            tmp_path / "run",
            *RUN,
            *TRANSFORMER,
        ],
        capsys,
    )
    assert code == 1
    one_line_error(err, "a source of 600 tokens", "at most 512 positions")


def test_the_trainer_refuses_data_its_model_cannot_read():
    task = make_task("copy", 50, 10, 10, seed=0, min_len=5, max_len=9, n_symbols=5)
    model = Transformer(
        len(task.src_vocab),
        len(task.tgt_vocab),
        d_model=16,
        n_heads=2,
        n_layers=1,
        d_ff=32,
        max_len=8,
    )
    with pytest.raises(
        ValueError,
        match="train_data holds a source of 9 tokens, but the model reads at most max_len=8",
    ):
        Trainer(model, task, config=TrainConfig(steps=2, progress=False))


@pytest.mark.parametrize(
    "argv, words",
    [
        (["translate", "a" * 600], "input 1 has 600 tokens, but this model reads at most 512"),
        (["translate", "abc", "a" * 513], "input 2 has 513 tokens"),
        (
            ["translate", "abc", "--max-len", "1000"],
            "--max-len 1000: this model writes at most 512",
        ),
        (["evaluate", "--lengths", "5,600"], "--lengths: 600 is too long for this model"),
    ],
)
def test_over_long_inputs_are_one_line_naming_the_limit(argv, words, base, capsys):
    code, out, err = cli([*argv, "--checkpoint", base / "checkpoint.pt"], capsys)
    assert code == 1 and out == ""  # nothing printed for the first input
    one_line_error(err, words)


def test_a_long_input_decodes_within_the_table(base, capsys):
    code, out, err = cli(
        ["translate", "--checkpoint", base / "checkpoint.pt", "abcde" * 60], capsys
    )  # 300 symbols: 2 * 300 + 10 > 512
    assert code == 0, err
    assert 0 < len(out.strip()) <= 512


# --------------------------------------------------------------------------------------------
# 3. health before saving: a diverged model never replaces the last good checkpoint
# --------------------------------------------------------------------------------------------


def _nan_validation_after(monkeypatch, good_calls: int):
    original, calls = Trainer.evaluate, []

    def evaluate(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        calls.append(1)
        return result if len(calls) <= good_calls else {**result, "val_loss": float("nan")}

    monkeypatch.setattr(Trainer, "evaluate", evaluate)


def test_a_diverged_resume_keeps_the_checkpoint_and_says_so(run_copy, monkeypatch, capsys):
    before = hashes(run_copy)
    _nan_validation_after(monkeypatch, 0)
    code, _, err = cli(
        ["train", "--resume", run_copy / "checkpoint.pt", "--steps", "30", "--quiet"], capsys
    )
    assert code == 3
    one_line_error(
        err,
        "training diverged",
        "validation loss became nan at step 30",
        f"{run_copy / 'checkpoint.pt'} (step 20), is kept untouched",
    )
    assert hashes(run_copy) == before


def test_a_diverged_new_run_keeps_its_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    _nan_validation_after(monkeypatch, 1)
    code, _, err = cli(train_argv(tmp_path / "run"), capsys)
    assert code == 3
    one_line_error(err, "at step 20", "(step 10), is kept untouched")
    assert load_checkpoint(tmp_path / "run" / "checkpoint.pt")["step"] == 10


def test_the_trainer_does_not_save_non_finite_weights(tmp_path):
    task = make_task("copy", 100, 10, 10, seed=0, min_len=2, max_len=5, n_symbols=5)
    model = Transformer(
        len(task.src_vocab), len(task.tgt_vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32
    )
    config = TrainConfig(
        steps=6, batch_size=16, eval_every=3, progress=False, out_dir=str(tmp_path)
    )
    trainer = Trainer(
        model, task.train, None, config, src_vocab=task.src_vocab, tgt_vocab=task.tgt_vocab
    )  # no validation: weights alone

    def poison(optimizer, args, kwargs):
        if trainer.step == 5:  # the last update blows a weight up
            with torch.no_grad():
                next(model.parameters()).view(-1)[0] = float("inf")

    trainer.optimizer.register_step_post_hook(poison)
    saved = tmp_path / "checkpoint.pt"
    with pytest.raises(
        NonFiniteLossError,
        match=r"weights became non-finite .* at step 6; "
        r".*\(step 3\), is kept untouched",
    ) as info:
        trainer.fit()
    assert info.value.saved_step == 3 and load_checkpoint(saved)["step"] == 3


# --------------------------------------------------------------------------------------------
# 4. resume: the run's length and schedule unless changed, every change said
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("steps", [None, "10", "20"])
def test_resuming_a_finished_run_without_a_longer_one_is_refused(steps, run_copy, capsys):
    before = hashes(run_copy)
    extra = ["--steps", steps] if steps else []
    code, _, err = cli(["train", "--resume", run_copy / "checkpoint.pt", *extra], capsys)
    assert code == 1
    one_line_error(err, "is at step 20, the end of its run of", "--steps")
    assert hashes(run_copy) == before


def test_a_run_stopped_by_max_seconds_continues_to_its_steps(tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = cli(train_argv(out, "--max-seconds", "0.02", steps=40), capsys)
    assert code == 0, err
    stopped = load_checkpoint(out / "checkpoint.pt")["step"]
    assert stopped < 40
    code, _, err = cli(
        ["train", "--resume", out / "checkpoint.pt", "--max-seconds", "600", "--quiet"], capsys
    )
    assert code == 0, err
    assert "--max-seconds 0.02 -> 600.0" in err and "total steps" not in err
    assert json.loads((out / "metrics.json").read_text())["steps"] == 40


def test_extending_a_run_says_how_the_schedule_changes(run_copy, capsys):
    code, out, err = cli(
        ["train", "--resume", run_copy / "checkpoint.pt", "--steps", "30", "--lr", "0.001"], capsys
    )
    assert code == 0, err
    assert "resuming" in err and "at step 20" in err
    for change in (
        "--steps 20 -> 30",
        f"--lr {TRAIN_DEFAULTS['lr']} -> 0.001",  # the run was made with the default
        "total steps 20 -> 30",
        "learning rate of step 21",
    ):
        assert change in err, (change, err)
    assert "done: 30 steps" in out  # --quiet was not carried over


def test_a_stale_temporary_file_is_removed_by_the_next_run(run_copy, capsys):
    stale = run_copy / ".checkpoint.pt.tmp-999999999"
    stale.write_bytes(b"half a checkpoint")
    live = run_copy / f".metrics.json.tmp-{os.getppid()}"  # a live process's: kept
    live.write_bytes(b"{")
    code, out, err = cli(["train", "--resume", run_copy / "checkpoint.pt", "--steps", "30"], capsys)
    assert code == 0, err
    assert not stale.exists() and live.exists() and f"removed {stale}" in out


# --------------------------------------------------------------------------------------------
# 5. atomic writes and a full disk
# --------------------------------------------------------------------------------------------


def _disk_full_for(monkeypatch, name: str):
    """Every write into a temporary file for ``name`` fails as on a full disk."""
    real_open = open

    class Full(io.RawIOBase):
        def __init__(self, f):
            self.f = f

        def writable(self):
            return True

        def write(self, b):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            self.f.close()
            super().close()

        def fileno(self):
            return self.f.fileno()

    def fake_open(path, mode="r", *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        return Full(f) if Path(path).name.startswith(f".{name}.tmp-") else f

    monkeypatch.setattr(train_module.checkpoint, "open", fake_open, raising=False)


@pytest.mark.parametrize("name", ["checkpoint.pt", "metrics.json", "history.csv", "loss.png"])
def test_a_full_disk_names_the_file_and_keeps_the_old_one(name, run_copy, monkeypatch, capsys):
    before = hashes(run_copy)
    _disk_full_for(monkeypatch, name)
    code, _, err = cli(
        ["train", "--resume", run_copy / "checkpoint.pt", "--steps", "30", "--quiet"], capsys
    )
    assert code == 1
    one_line_error(err, f"could not write {run_copy / name}: no space left on device")
    assert hashes(run_copy)[name] == before[name] and temp_files(run_copy) == []


@pytest.mark.parametrize("failure", [OSError(errno.EIO, "Input/output error"), KeyboardInterrupt()])
def test_atomic_write_keeps_the_old_file_on_any_failure(failure, tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text("old")

    def write(f):
        f.write(b"half")
        raise failure

    with pytest.raises(type(failure)) as info:
        atomic_write(path, write)
    assert path.read_text() == "old" and temp_files(tmp_path) == []
    if isinstance(failure, OSError):
        assert str(info.value).startswith(f"could not write {path}: Input/output error")


def test_remove_stale_temp_files_only_removes_dead_processes_files(tmp_path):
    dead = tmp_path / ".checkpoint.pt.tmp-999999999"
    alive = tmp_path / f".loss.png.tmp-{os.getppid()}"
    other = tmp_path / "notes.tmp-1"
    for p in (dead, alive, other):
        p.write_text("x")
    assert remove_stale_temp_files(tmp_path) == [dead]
    assert alive.exists() and other.exists()


# --------------------------------------------------------------------------------------------
# 9. signals and exit statuses
# --------------------------------------------------------------------------------------------


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    return env


def _start_training(out: Path) -> subprocess.Popen:
    argv = [
        sys.executable,
        "-m",
        "attnbook",
        *train_argv(str(out), "--threads", "1", steps=1000000),
    ]
    proc = subprocess.Popen(
        argv, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 60
    while not (out / "checkpoint.pt").exists() and time.time() < deadline:
        time.sleep(0.05)  # the first evaluation saves one
    return proc


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_a_real_signal_leaves_a_checkpoint_that_resumes(sig, status, tmp_path, capsys):
    out = tmp_path / "run"
    proc = _start_training(out)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == status, stderr
    step = load_checkpoint(out / "checkpoint.pt")["step"]
    assert 10 <= step < 1000000
    if sig == signal.SIGTERM:
        assert "interrupted (SIGTERM)" in stderr and "Traceback" not in stderr
        assert json.loads((out / "metrics.json").read_text())["interrupted"] == "SIGTERM"
        assert temp_files(out) == []
    code, _, err = cli(
        ["train", "--resume", out / "checkpoint.pt", "--steps", step + 5, "--quiet"], capsys
    )
    assert code == 0, err
    assert load_checkpoint(out / "checkpoint.pt")["step"] == step + 5 and temp_files(out) == []


@pytest.mark.parametrize(
    "signum, status, words",
    [
        (signal.SIGTERM, 143, "stopped (SIGTERM)"),
        (signal.SIGINT, 130, "interrupted (SIGINT)"),
    ],
)
def test_a_signal_before_training_exits_cleanly(
    signum, status, words, tmp_path, monkeypatch, capsys
):
    import attnbook.runs.training as training_module

    def build_task(*args, **kwargs):
        os.kill(os.getpid(), signum)
        time.sleep(1)
        raise AssertionError("the signal did not stop the command")

    monkeypatch.setattr(training_module, "build_task", build_task)
    # A shell that starts pytest in the background (as CI may) leaves SIGINT ignored; Ctrl-C
    # at a terminal reaches Python's default handler, which this test is about.
    saved_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    handler = signal.getsignal(signal.SIGTERM)
    try:
        code, _, err = cli(train_argv(tmp_path / "run"), capsys)
    finally:
        signal.signal(signal.SIGINT, saved_sigint)
    assert code == status
    one_line_error(err, words)
    assert signal.getsignal(signal.SIGTERM) is handler  # restored afterwards


@pytest.mark.parametrize("command", [[], ["train"], ["evaluate"], ["translate"]])
def test_help_lists_the_exit_statuses(command, capsys):
    code, out, _ = cli([*command, "--help"], capsys)
    assert code == 0
    assert "exit status:" in out
    for status in ("  0 ", "  1 ", "  2 ", "  3 ", "  130 ", "  143 "):
        assert status in out, status


def test_the_readme_documents_the_exit_statuses_and_overwrite():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    cli_section = readme[readme.index("The command line trains") :]
    for words in ("--overwrite", "130", "143", "diverged"):
        assert words in cli_section, words
    assert set(RUN_FILES) >= {"checkpoint.pt", "metrics.json", "history.csv", "loss.png"}


@pytest.mark.parametrize("recorded", [True, False])
def test_a_run_of_the_default_length_reports_its_own_length_on_resume(run_copy, capsys, recorded):
    """A run given no --steps lasted DEFAULT_STEPS: its checkpoint records that total (a later
    default may differ); an older checkpoint without it is read with today's default."""
    from attnbook.train import DEFAULT_STEPS
    from attnbook.train.checkpoint import checkpoint_digest

    path = run_copy / "checkpoint.pt"
    ckpt = torch.load(path, weights_only=False)
    assert ckpt["total_steps"] == 20  # what this run's Trainer had
    ckpt["config"]["steps"] = None  # as if it had been given no length ...
    if recorded:
        ckpt["total_steps"] = 25  # ... by a default of 25 steps at the time
    else:
        del ckpt["total_steps"]  # ... in a checkpoint from before the total was recorded
    ckpt["digest"] = checkpoint_digest(ckpt)  # an edited file that is whole (issue 40)
    torch.save(ckpt, path)
    code, _, err = cli(["train", "--resume", path, "--steps", "30", "--quiet"], capsys)
    assert code == 0, err
    assert f"total steps {25 if recorded else DEFAULT_STEPS} -> 30" in err, err
