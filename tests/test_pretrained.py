"""attnbook.pretrained: the shipped weights load, match their records, and decode as recorded.

Retraining them (slow) is ``make pretrained-check``, not part of these tests."""

import hashlib
import io
import shlex
from importlib import resources

import pytest
import torch

from attnbook import Seq2Seq, Transformer, pretrained
from attnbook.cli import build_parser
from attnbook.pretrained import _retrain
from attnbook.runs.options import TRAIN_DEFAULTS, resolve_options
from attnbook.train import DEFAULT_STEPS

NAMES = pretrained.names()


def test_every_entry_ships_weights_and_a_record():
    assert "dates-transformer" in NAMES
    for name in NAMES:
        rec = pretrained.record(name)
        assert rec["name"] == name and rec["file"] == f"{name}.pt"
        data = resources.files("attnbook.pretrained").joinpath("weights", rec["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == rec["sha256"]
        assert len(data) == rec["bytes"] < 1_000_000  # small: float16, under a megabyte each


@pytest.mark.parametrize("name", NAMES)
def test_a_shipped_model_loads_with_its_task_and_decodes_as_recorded(name):
    model, task, rec = pretrained.load(name)
    options = rec["options"]
    assert not model.training
    assert sum(p.numel() for p in model.parameters()) == rec["parameters"]
    if options["model"] == "transformer":
        assert isinstance(model, Transformer) and model.d_model == options["d_model"]
    else:
        assert isinstance(model, Seq2Seq)
    src = task.src_vocab.encode_batch([s for s, _ in task.test[:3]])
    tgt_in = task.tgt_vocab.encode_batch([t for _, t in task.test[:3]], add_bos=True)
    logits = model(src, tgt_in)
    assert logits.shape == (3, tgt_in.shape[1], len(task.tgt_vocab))
    assert len(task.test) == rec["metrics"]["test_examples"] == options["n_test"]
    example = rec["example"]
    assert pretrained.translate(model, task, example["source"]) == example["output"]


def test_the_recorded_command_trains_with_the_recorded_options():
    """The command line of each record, parsed by the CLI's own parser and resolved, gives
    every option the record lists (so the page's command is the one that made the weights)."""
    for name in NAMES:
        rec = pretrained.record(name)
        words = shlex.split(rec["command"])
        assert words[:4] == ["python", "-m", "attnbook", "train"]
        args = vars(build_parser().parse_args(words[3:]))
        given = {k: v for k, v in args.items() if k in TRAIN_DEFAULTS or k == "task"}
        assert {k: v for k, v in given.items() if v is not None} == {
            k: v for k, v in pretrained.ENTRIES[name]["options"].items()
        }
        full = vars(build_parser().parse_args(shlex.split(rec["command_in_full"])[3:]))
        full = {k: v for k, v in full.items() if k in TRAIN_DEFAULTS or k == "task"}
        resolved, _, _ = resolve_options({**full, "out": "unused"})
        assert {k: resolved[k] for k in rec["options"]} == {
            k: tuple(v) if isinstance(v, list) else v for k, v in rec["options"].items()
        }
        assert rec["seed"] == rec["options"]["seed"] == pretrained.ENTRIES[name]["options"]["seed"]
        assert rec["torch"] and rec["training"]["steps"] == rec["options"]["steps"]


def test_bad_names_are_refused_naming_the_argument():
    for call in (pretrained.load, pretrained.record, pretrained.retrain, pretrained.stale):
        with pytest.raises(ValueError, match=r"name must be one of \('dates-transformer'"):
            call("dates-transformr")
    with pytest.raises(ValueError, match="name must be one of"):
        pretrained.load(None)
    with pytest.raises(ValueError, match="text must be a non-empty str"):
        model, task, _ = pretrained.load("dates-transformer")
        pretrained.translate(model, task, "")


def test_a_file_that_does_not_match_its_record_is_refused(monkeypatch):
    rec = dict(pretrained.record("dates-transformer"), sha256="0" * 64)
    monkeypatch.setattr(pretrained, "record", lambda name: rec)
    with pytest.raises(pretrained.PretrainedError, match="does not match its record"):
        pretrained.load("dates-transformer")
    buffer = io.BytesIO()
    torch.save({"format": "something else"}, buffer)
    with pytest.raises(pretrained.PretrainedError, match="not a attnbook-pretrained-1 file"):
        pretrained._from_bytes(buffer.getvalue(), "cpu")


def test_a_changed_default_shows_as_stale(monkeypatch):
    name = "dates-transformer"
    assert pretrained.stale(name) == [] or all(len(c) == 3 for c in pretrained.stale(name))
    changed = dict(pretrained.record(name))
    changed["options"] = {**changed["options"], "lr": 123.0}
    monkeypatch.setattr(pretrained, "record", lambda n: changed)
    assert ("lr", 123.0, pretrained.entry_options(name)["lr"]) in pretrained.stale(name)


def test_the_command_line_of_options():
    line = _retrain.command_line({"task": "dates", "norm_first": False, "src_lang": "en_US"})
    assert line == "python -m attnbook train --task dates --no-norm-first --src-lang en_US"


def test_a_retrain_that_stopped_early_writes_nothing(monkeypatch):
    # a run interrupted by a signal saves its checkpoint and returns: its weights must not ship
    class Stopped:
        class trainer:  # noqa: N801 - stands in for the run's trainer
            step = 352

    written = []
    monkeypatch.setattr(_retrain, "_train", lambda name, threads, quiet: (Stopped, None, 0.0))
    monkeypatch.setattr(_retrain, "_package_folder", lambda: written.append(1))
    with pytest.raises(pretrained.PretrainedError, match=f"stopped at step 352 of {DEFAULT_STEPS}"):
        _retrain.retrain("dates-transformer")
    assert written == []


def test_the_retrain_command_stops_at_a_run_that_stopped_early(monkeypatch, capsys):
    # a SIGTERM ends the current run with a checkpoint; the command must not go on to the next
    from attnbook.pretrained import __main__ as command

    calls = []

    def stopped(name, threads):
        calls.append(name)
        raise pretrained.PretrainedError(f"retraining {name!r} stopped at step 3 of 1500")

    monkeypatch.setattr(command, "retrain", stopped)
    assert command.main(["retrain", "--all"]) == 1
    assert calls == [NAMES[0]] and "stopped at step 3" in capsys.readouterr().err
