"""Train a shipped model again (:func:`retrain`) and check its record (:func:`check`)."""

from __future__ import annotations

import datetime
import io
import json
import os
import platform
import shlex
import tempfile
import time
from pathlib import Path

import torch

from . import ENTRIES, FORMAT, _check_name, _from_bytes, _records, _sha256, entry_options, record

__all__ = ["retrain", "check", "command_line", "MARGINS", "EXAMPLE_SOURCE"]

# the source every record decodes with its shipped weights (a test decodes it again)
EXAMPLE_SOURCE = "Wednesday, May 9, 2018"
# how far a retrained model's scores may fall from the record's (another CPU, another torch):
# exact match in [0, 1], BLEU and chrF in [0, 100]
MARGINS = {"exact_match": 0.03, "bleu": 3.0, "chrf": 2.0}


def _package_folder() -> Path:
    return Path(__file__).resolve().parent


def command_line(options: dict, separator: str = ",") -> str:
    """The ``python -m attnbook train`` command of ``options`` (named as
    :data:`~attnbook.runs.TRAIN_DEFAULTS`; a pair such as ``betas`` joined by ``separator``)."""
    from ..cli import build_parser

    known = {s for a in _train_parser(build_parser())._actions for s in a.option_strings}
    flags = {"noam_d_model": "--noam-d-model"}
    words = ["python", "-m", "attnbook", "train"]
    for key, value in options.items():
        flag = flags.get(key, "--" + key.replace("_", "-"))
        if isinstance(value, bool):
            off = "--no-" + flag[2:]
            if value or off in known:  # a flag without a --no- form is off when left out
                words.append(flag if value else off)
        elif isinstance(value, (list, tuple)):
            words += [flag, separator.join(map(str, value))]
        else:
            words += [flag, str(value)]
    return shlex.join(words)


def _train_parser(parser):
    """The ``train`` subcommand's parser of the command line's ``parser``."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices["train"]
    raise LookupError("the command line has no train command")


def _scores(model, task) -> dict:
    from ..evaluate import translation_scores

    tgt = str(task.options.get("tgt", ""))
    scores = translation_scores(
        model,
        task.test,
        task.src_vocab,
        task.tgt_vocab,
        tokenize="zh" if tgt.startswith(("zh", "ja")) else "13a",
    )
    return {
        "exact_match": scores["exact_match"],
        "bleu": round(scores["bleu"], 3),
        "chrf": round(scores["chrf"], 3),
        "test_examples": scores["examples"],
    }


def _train(name: str, threads: int, quiet: bool):
    from ..runs import train_run

    options = dict(ENTRIES[name]["options"])
    task = options.pop("task")
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    start = time.process_time()
    with tempfile.TemporaryDirectory(prefix="attnbook-pretrained-") as out:
        run = train_run(out, task=task, threads=threads, quiet=quiet, **options)
    return run, load, time.process_time() - start


def retrain(name: str, *, write: bool = True, threads: int = 2, quiet: bool = True) -> dict:
    """Train the shipped model ``name`` again with the options of its entry (the command line's
    ``train``, in a temporary folder), score the float16 weights it ships on the held-out
    split, and return its new record. With ``write`` (the default), write the weights into
    the package (``weights/NAME.pt``) and the record into ``records.json``: this is what
    ``python -m attnbook.pretrained retrain NAME`` does. ``threads``: torch's CPU threads."""
    from .._checks import check_positive_int

    _check_name(name)
    check_positive_int("threads", threads)
    run, load, cpu = _train(name, threads, quiet)
    model = run.model.cpu().eval()
    options = entry_options(name)
    saved = {
        "format": FORMAT,
        "name": name,
        "model": options["model"],
        "model_kwargs": run.trainer.meta["model_kwargs"],
        "task": options["task"],
        "task_kwargs": run.trainer.meta["task_kwargs"],
        "vocab": {"src": run.task.src_vocab.to_dict(), "tgt": run.task.tgt_vocab.to_dict()},
        "state_dict": {k: v.detach().half() for k, v in model.state_dict().items()},
    }
    buffer = io.BytesIO()
    torch.save(saved, buffer)
    data = buffer.getvalue()
    shipped, _ = _from_bytes(data, torch.device("cpu"))  # score what ships: float16 weights
    from . import translate

    rec = {
        "name": name,
        "about": ENTRIES[name]["about"],
        "command": command_line(ENTRIES[name]["options"]),
        "command_in_full": command_line(
            {k: v for k, v in options.items() if v is not None}, separator=","
        ),
        "retrain": f"python -m attnbook.pretrained retrain {name}",
        "options": options,
        "seed": options["seed"],
        "metrics": _scores(shipped, run.task),
        "training": {
            "steps": run.trainer.step,
            "seconds": round(run.trainer.elapsed, 1),
            # CPU time of the whole command (data, training, test scoring, figures): on a
            # loaded machine, closer than the wall time to what a quiet one takes
            "cpu_seconds": round(cpu, 1),
            "threads": threads,
            "cpu_count": os.cpu_count(),
            "load_before": load,
            "validation_exact_match": run.metrics.get("exact_match"),
        },
        "example": {
            "source": EXAMPLE_SOURCE,
            "output": translate(shipped, run.task, EXAMPLE_SOURCE),
        },
        "parameters": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "file": f"{name}.pt",
        "bytes": len(data),
        "sha256": _sha256(data),
    }
    if write:
        folder = _package_folder()
        (folder / "weights").mkdir(exist_ok=True)
        (folder / "weights" / rec["file"]).write_bytes(data)
        records = {**_records(), name: rec}
        records = {n: records[n] for n in ENTRIES if n in records}
        text = json.dumps(records, indent=1, ensure_ascii=False) + "\n"
        (folder / "records.json").write_text(text, encoding="utf-8")
        _records.cache_clear()
    return rec


def check(name: str, *, threads: int = 2, quiet: bool = True) -> list[str]:
    """Retrain ``name`` (nothing written) and compare with its record: the options it trains
    with today (a default changed?) and its scores, each within :data:`MARGINS` below the
    record's. Returns the problems found, one sentence each; empty when the record holds."""
    recorded = record(name)
    problems = [
        f"{name}: --{key.replace('_', '-')} is {today!r} today, {was!r} in the record "
        f"(retrain: python -m attnbook.pretrained retrain {name})"
        for key, was, today in _stale(name)
    ]
    fresh = retrain(name, write=False, threads=threads, quiet=quiet)
    for key, margin in MARGINS.items():
        was, now = recorded["metrics"][key], fresh["metrics"][key]
        if now < was - margin:
            problems.append(
                f"{name}: {key} {now:.4g} retrained, {was:.4g} recorded (allowed {margin} below it)"
            )
    return problems


def _stale(name):
    from . import stale

    return stale(name)
