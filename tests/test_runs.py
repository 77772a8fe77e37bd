"""A notebook user gets the command line's run folder from Python (issue 27):
:func:`attnbook.runs.train_run` refuses a folder that holds a run unless ``overwrite=True``,
continues a run exactly with ``resume``, and writes every file atomically."""

import errno
import hashlib
import io
import json
import re
from pathlib import Path

import pytest
import torch

import attnbook.train as train_module
from attnbook.runs import RUN_FILES, Run, train_run
from attnbook.train import load_checkpoint

# a tiny transformer on a tiny task: a run of a few tenths of a second
TINY = dict(
    task="reverse",
    model="transformer",
    n_train=200,
    n_val=20,
    n_test=20,
    min_len=2,
    max_len=5,
    n_symbols=5,
    d_model=16,
    heads=2,
    d_ff=32,
    batch_size=16,
    eval_every=10,
    log_every=5,
    device="cpu",
    quiet=True,
)


def hashes(folder: Path) -> dict:
    """Every file of a folder (temporary ones included) -> its SHA-256."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(folder).iterdir())
        if p.is_file()
    }


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "first"
    run = train_run(out, steps=10, **TINY)
    assert isinstance(run, Run) and run.out == out and run.interrupted is None
    assert sorted(p.name for p in out.iterdir()) == sorted(set(RUN_FILES) - {"evaluation.json"})
    return out


def test_a_folder_that_holds_a_run_is_refused_without_overwrite(first, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name in RUN_FILES[:5]:
        (out / name).write_bytes((first / name).read_bytes())
    before = hashes(out)
    with pytest.raises(ValueError, match="already holds a run .*pass --overwrite to replace it"):
        train_run(out, steps=10, **TINY)
    assert hashes(out) == before  # refused before anything was written
    run = train_run(out, steps=10, overwrite=True, **TINY)
    assert run.metrics["steps"] == 10
    assert json.loads((out / "metrics.json").read_text())["val_loss"] == run.metrics["val_loss"]


def test_an_unknown_option_is_refused_by_name(tmp_path):
    with pytest.raises(TypeError, match="d_modle"):
        train_run(tmp_path / "run", d_modle=16, **TINY)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("option", "value", "error", "words"),
    [
        ("n_train", 0, ValueError, "n_train must be a positive integer, got 0"),
        ("n_train", 2.5, ValueError, "n_train must be a positive integer, got '2.5'"),
        ("d_model", "64", TypeError, "d_model must be a number, got '64'"),
        ("model", "lstm", ValueError, "model must be one of ('rnn', 'rnn-attention',"),
        ("lower", "yes", TypeError, "lower must be True or False, got 'yes'"),
    ],
)
def test_a_bad_value_is_refused_as_the_command_line_refuses_it(
    option, value, error, words, tmp_path
):
    with pytest.raises(error, match=re.escape(words)):
        train_run(tmp_path / "run", **{**TINY, option: value})
    assert not (tmp_path / "run").exists()


def test_resume_continues_exactly(first, tmp_path):
    straight = train_run(tmp_path / "straight", steps=20, **TINY)
    resumed_out = tmp_path / "resumed"
    resumed_out.mkdir()
    for name in RUN_FILES[:5]:
        (resumed_out / name).write_bytes((first / name).read_bytes())
    resumed = train_run(resume=resumed_out / "checkpoint.pt", steps=20, quiet=True)
    assert resumed.out == resumed_out and resumed.options["task"] == "reverse"
    assert resumed.trainer.step == straight.trainer.step == 20
    for name, weights in straight.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[name], weights, rtol=0, atol=0)

    def logged(run):  # every logged number but the wall-clock time
        return [{k: v for k, v in row.items() if k != "seconds"} for row in run.trainer.history]

    assert logged(resumed) == logged(straight)
    assert load_checkpoint(resumed_out / "checkpoint.pt")["step"] == 20


def test_resume_refuses_a_change_of_model(first, tmp_path):
    with pytest.raises(train_module.CheckpointError, match="--d-model 16, not 32"):
        train_run(resume=first / "checkpoint.pt", steps=20, d_model=32)


def test_outputs_are_written_atomically(first, tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    for name in RUN_FILES[:5]:
        (out / name).write_bytes((first / name).read_bytes())
    before = hashes(out)
    real_open = open

    def half_then_fail(path, mode="r", *args, **kwargs):
        """metrics.json's temporary file takes half of what is written, then the disk fails."""
        f = real_open(path, mode, *args, **kwargs)
        if not Path(path).name.startswith(".metrics.json.tmp-"):
            return f

        class Half(io.RawIOBase):
            def writable(self):
                return True

            def write(self, b):
                f.write(bytes(b)[: len(b) // 2])
                f.flush()
                raise OSError(errno.EIO, "Input/output error")

            def close(self):
                f.close()
                super().close()

            def fileno(self):
                return f.fileno()

        return Half()

    monkeypatch.setattr(train_module.checkpoint, "open", half_then_fail, raising=False)
    with pytest.raises(OSError, match=f"could not write {out / 'metrics.json'}: Input/output"):
        train_run(resume=out / "checkpoint.pt", steps=20, quiet=True)
    after = hashes(out)
    assert sorted(after) == sorted(before)  # no temporary file left behind
    assert after["metrics.json"] == before["metrics.json"]  # the old one, whole
    assert json.loads((out / "metrics.json").read_text())["steps"] == 10
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 20  # saved before, whole


def test_a_run_leaves_the_callers_matplotlib_alone(tmp_path, monkeypatch):
    # a notebook that trains a run keeps its backend (inline figures) and its open figures
    import matplotlib
    import matplotlib.pyplot as plt

    def use(*args, **kwargs):
        pytest.fail(f"a run called matplotlib.use{args}")

    monkeypatch.setattr(matplotlib, "use", use)
    open_figure = plt.figure()
    try:
        before = plt.get_fignums()
        train_run(tmp_path / "run", steps=10, **TINY)
        assert plt.get_fignums() == before
    finally:
        plt.close(open_figure)
    for picture in ("loss.png", "attention.png"):
        assert (tmp_path / "run" / picture).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
