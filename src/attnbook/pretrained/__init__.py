"""Small trained models that ship inside the package, each with the command that trains it.

A chapter whose point needs a model that takes too long to train on a reader's CPU loads it
from here instead (issue 30's rule): the page says so and shows the command, the weights are
small (float16, a few hundred kilobytes each), and ``make pretrained-check`` retrains every
entry and checks its recorded scores within a margin. ::

    from attnbook import pretrained

    pretrained.names()                      # ('dates-transformer', 'en-zh-transformer', ...)
    model, task, record = pretrained.load("en-zh-transformer")
    record["command"]                       # python -m attnbook train --task dates ...
    record["metrics"]["exact_match"]        # of the shipped weights, on task.test

Each entry is a ``python -m attnbook train`` run (:func:`attnbook.runs.train_run`) with the
options of :data:`ENTRIES`; its record (``records.json``) holds every option the run resolved
(defaults included, so that a later change of a default shows: :func:`stale`), the seed, the
command line, the held-out scores of the shipped weights, the training time and machine, the
torch version, and the weights file's size and sha256. ``python -m attnbook.pretrained retrain
NAME`` trains an entry again and writes its files (:func:`retrain`); ``python -m
attnbook.pretrained check`` retrains into a temporary folder and compares (:func:`check`).
"""

from __future__ import annotations

import hashlib
import io
import json
from functools import cache
from importlib import resources

import torch

from ..data import Vocab
from ..runs.models import build_model
from ..runs.tasks import build_task

__all__ = [
    "ENTRIES",
    "FORMAT",
    "PretrainedError",
    "names",
    "record",
    "load",
    "entry_options",
    "stale",
    "retrain",
    "check",
    "translate",
]

FORMAT = "attnbook-pretrained-1"

# name -> the options of its `python -m attnbook train` run (beyond them: the defaults, which
# the record writes out) and what it is. The seed is given, and so is the device: the CPU.
# The models of the chapter on real languages (book/16_real_languages): each trained for what
# fits in 45 s of one CPU core, evaluated once, at the end. The Transformer takes more, cheaper
# steps than the RNNs (an RNN's decoder runs one character after another); the two RNNs get
# the same steps, so that the fixed context vector is compared at equal cost. Every setting the
# recipe depends on is written here, so that a change of the command line's defaults does not
# change these models (the RNNs' lr 3e-3 was the default when they were made, and so was the
# cosine schedule's floor of a tenth of the peak, min_lr_ratio 0.1).
_PAIR_RUNS = {
    "transformer": {"steps": 1000, "lr": 5e-3, "min_lr_ratio": 0.1, "eval_every": 1000},
    "rnn-attention": {"steps": 300, "lr": 3e-3, "min_lr_ratio": 0.1, "eval_every": 300},
    "rnn": {"steps": 300, "lr": 3e-3, "min_lr_ratio": 0.1, "eval_every": 300},
}
ENTRIES: dict[str, dict] = {
    "dates-transformer": {
        "about": "human English dates -> ISO, the Transformer with the command line's defaults",
        "options": {"task": "dates", "model": "transformer", "seed": 0, "device": "cpu"},
    },
    **{
        f"en-{lang}-{model}": {
            "about": f"dates from English into {language} as CLDR writes them, {what}",
            "options": {
                "task": "dates",
                "src_lang": "en_US",
                "tgt_lang": locale,
                "model": model,
                **_PAIR_RUNS[model],
                "n_test": 500,
                "seed": 0,
                "device": "cpu",
            },
        }
        for lang, locale, language in (
            ("zh", "zh_CN", "Chinese"),
            ("de", "de_DE", "German"),
            ("ru", "ru_RU", "Russian"),
        )
        for model, what in (
            ("transformer", "the Transformer"),
            ("rnn-attention", "the RNN with additive attention"),
            ("rnn", "the RNN with a fixed context vector"),
        )
    },
}
"""Every shipped model: its name -> ``{"about": ..., "options": ...}``, the options of the
``python -m attnbook train`` run that trains it (those not given take the defaults)."""


class PretrainedError(ValueError):
    """A shipped model that is missing, or whose file does not match its record."""


def _check_name(name) -> str:
    if not isinstance(name, str) or name not in ENTRIES:
        raise ValueError(f"name must be one of {names()}, got {name!r}")
    return name


def names() -> tuple[str, ...]:
    """The names of the shipped models, in :data:`ENTRIES`'s order."""
    return tuple(ENTRIES)


def _folder():
    return resources.files(__name__)


@cache
def _records() -> dict:
    path = _folder().joinpath("records.json")
    if not path.is_file():
        return {}
    return json.loads(path.read_text("utf-8"))


def record(name: str) -> dict:
    """The record of the shipped model ``name``: ``command``, ``options`` (every option of
    the run, defaults included), ``seed``, ``metrics`` (held-out ``exact_match``, ``bleu``,
    ``chrf`` of the shipped weights, ``test_examples``), ``training`` (steps, seconds, threads,
    the machine's load), ``example`` (a source and the greedy output of the shipped weights),
    ``torch``, ``file``, ``bytes``, ``sha256`` and ``parameters``."""
    _check_name(name)
    rec = _records().get(name)
    if rec is None:
        raise PretrainedError(
            f"{name!r} has no shipped weights yet: train them with "
            f"python -m attnbook.pretrained retrain {name}"
        )
    return rec


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(name: str) -> tuple[bytes, dict]:
    rec = record(name)
    path = _folder().joinpath("weights", rec["file"])
    if not path.is_file():
        raise PretrainedError(f"the weights of {name!r} ({rec['file']}) are not in the package")
    data = path.read_bytes()
    if _sha256(data) != rec["sha256"]:
        raise PretrainedError(
            f"the weights file of {name!r} does not match its record (sha256 "
            f"{_sha256(data)[:12]}, recorded {rec['sha256'][:12]}): retrain it with "
            f"python -m attnbook.pretrained retrain {name}"
        )
    return data, rec


def _from_bytes(data: bytes, device) -> tuple[torch.nn.Module, dict]:
    saved = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    if saved.get("format") != FORMAT:
        raise PretrainedError(f"not a {FORMAT} file (format {saved.get('format')!r})")
    src_vocab = Vocab.from_dict(saved["vocab"]["src"])
    tgt_vocab = Vocab.from_dict(saved["vocab"]["tgt"])
    model = build_model(saved["model"], len(src_vocab), len(tgt_vocab), saved["model_kwargs"])
    model.load_state_dict({k: v.float() for k, v in saved["state_dict"].items()})
    return model.to(device).eval(), saved


@cache
def _task(name: str, kwargs: str):
    # the models of one pair share their task: made once (a second each)
    return build_task(name, json.loads(kwargs))


def load(name: str, device: str | torch.device = "cpu"):
    """The shipped model ``name`` (one of :func:`names`), in eval mode on ``device``, with its
    task and record: ``(model, task, record)``.

    ``task`` is the run's data made again (deterministic: the same splits and vocabularies as
    in training; ``task.test`` is what ``record["metrics"]`` scores), made once and shared by
    the models trained on the same data (do not change it in place). The weights are checked
    against the record's sha256, and the vocabularies against the task's."""
    _check_name(name)
    data, rec = _read(name)
    model, saved = _from_bytes(data, torch.device(device))
    task = _task(saved["task"], json.dumps(saved["task_kwargs"], sort_keys=True))
    for side in ("src", "tgt"):
        if getattr(task, f"{side}_vocab").to_dict() != saved["vocab"][side]:
            raise PretrainedError(
                f"the {side} vocabulary of {name!r} differs from its task's as made today "
                f"(the task's data changed): retrain it with "
                f"python -m attnbook.pretrained retrain {name}"
            )
    return model, task, rec


def translate(model, task, text: str, *, max_len: int | None = None) -> str:
    """Greedy-decode one source ``text`` with ``model`` and ``task``'s vocabularies."""
    from ..evaluate import generate

    if not isinstance(text, str) or not text:
        raise ValueError(f"text must be a non-empty str, got {text!r}")
    ids = task.src_vocab.encode(text, unknown="error")
    src = torch.tensor([ids], dtype=torch.long, device=next(model.parameters()).device)
    n = max_len or 2 * len(ids) + 10
    if model.max_len is not None:
        n = min(n, model.max_len)
    return task.tgt_vocab.decode(generate(model, src, max_len=n)[0])


def entry_options(name: str) -> dict:
    """Every option of the run that trains ``name`` as the command line resolves it today:
    the entry's options over today's defaults, less those that do not apply to its model,
    task or schedule, and ``out``, ``threads``, ``quiet`` and ``overwrite`` (they do not
    change the weights)."""
    from ..runs.options import APPLIES_TO, PER_INVOCATION, resolve_options

    given = dict(ENTRIES[_check_name(name)]["options"])
    options, _, _ = resolve_options({**given, "out": "unused"})
    kept = {
        k: v
        for k, v in sorted(options.items(), key=lambda kv: kv[0] != "task")
        if (k not in PER_INVOCATION or k == "device")
        and (k not in APPLIES_TO or options[APPLIES_TO[k][0]] in APPLIES_TO[k][1])
    }
    return json.loads(json.dumps(kept))  # as the record holds them (a tuple is a list)


def stale(name: str) -> list[tuple[str, object, object]]:
    """The options whose value today differs from the record's, as ``(option, recorded,
    today)`` (a default changed since the weights were trained); empty when none."""
    recorded = record(name)["options"]
    today = entry_options(name)
    return [
        (k, recorded.get(k), today.get(k))
        for k in sorted(set(recorded) | set(today))
        if recorded.get(k) != today.get(k)
    ]


from ._retrain import check, retrain  # noqa: E402  (they use the names above)
