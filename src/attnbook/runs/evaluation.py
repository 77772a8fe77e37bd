"""Using a run: exact match by input length (a TSV run: BLEU, chrF, perplexity), and decoding.

:func:`evaluate_run` is ``python -m attnbook evaluate`` without its printing: it rebuilds a
run's model and task from its checkpoint and scores fresh inputs of each length (copy,
reverse, sort: none seen in training) or the test split grouped by source length (dates,
tsv), and returns what the command writes to ``evaluation.json``. :func:`translate_run` is
``python -m attnbook translate``: a run's model on your own inputs; :func:`export_run` is
``python -m attnbook export``: a Transformer run as ONNX, its attention included.

None of them returns from a model whose numbers are not numbers (issue 40): the checkpoint is
verified and its weights checked finite as it loads (:func:`attnbook.train.load_checkpoint`),
and every logits tensor the model computes while evaluating or translating (or, before an
export, on one example) is checked finite on the device; a NaN or an infinity raises
``FloatingPointError`` (the command exits 1) instead of scores or outputs.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ..data import BOS, SPECIALS, length_controlled
from ..evaluate import exact_match_by_length, generate, translation_scores
from ..train import load_checkpoint
from ..utils import get_device
from .models import model_from_checkpoint, position_limit
from .options import SEQUENCE_TASKS
from .report import attention_figure
from .tasks import build_task, find_data, normalise_input

__all__ = ["evaluate_run", "translate_run", "export_run"]


class _FiniteOutputs:
    """``watch = _FiniteOutputs(model, checkpoint)``: from then on every logits tensor the
    model (this run's own copy) returns (``forward``, ``decode_step``) is checked finite on
    its device, without a host read; ``watch.check(what)`` reads the verdict once and raises
    ``FloatingPointError`` if one was not."""

    def __init__(self, model, checkpoint):
        self.model, self.checkpoint = model, checkpoint
        self.bad = torch.zeros((), dtype=torch.bool, device=next(model.parameters()).device)
        step = model.decode_step

        def decode_step(*args, **kwargs):
            out = step(*args, **kwargs)
            self._see(out)
            return out

        model.decode_step = decode_step  # on the instance: the model is the run's own
        self.hook = model.register_forward_hook(lambda module, args, out: self._see(out))

    def close(self) -> None:
        """Stop watching (before the model is traced for export)."""
        self.hook.remove()
        del self.model.decode_step

    def _see(self, out):
        logits = out[0] if isinstance(out, tuple) else out
        if isinstance(logits, torch.Tensor) and logits.is_floating_point():
            self.bad |= ~torch.isfinite(logits).all()

    def check(self, what: str) -> None:
        if bool(self.bad):
            raise FloatingPointError(
                f"the model of {self.checkpoint} computed NaN or infinite scores on {what}: its "
                "weights are finite but too large for its arithmetic (a diverged or damaged "
                "run), so there is nothing to report; use an earlier checkpoint, or retrain"
            )


def _check_finite_numbers(result: dict, checkpoint) -> dict:
    """Every float of ``result`` (BLEU, chrF, perplexity, fractions) is finite."""
    stack = [("", result)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{path}/{k}", v) for k, v in value.items())
        elif isinstance(value, float) and not math.isfinite(value):
            raise FloatingPointError(
                f"the evaluation of {checkpoint} gave {value} for {path.lstrip('/')}: the "
                "model's numbers are not finite, so there is nothing to report"
            )
    return result


def evaluate_run(
    checkpoint: str | Path,
    *,
    lengths=(5, 10, 20, 40),
    n_per_length: int = 100,
    beam: int = 1,
    batch_size: int = 256,
    data: str | Path | None = None,
    device: str = "auto",
) -> dict:
    """Exact match by input length of the run whose ``checkpoint.pt`` is ``checkpoint``.

    copy/reverse/sort: up to ``n_per_length`` fresh inputs of exactly each of ``lengths`` (none
    seen in training); dates/tsv: the test split, grouped by source length (longer than the
    previous bound, at most the length). A tsv run also gets corpus BLEU, chrF and the
    perplexity of its test split (``"test"``); ``data``: its file, if it moved. ``beam``: 1 for
    greedy decoding. Returns ``{"by_length", "examples", "beam", "checkpoint", "step", "task",
    "model"}`` (and ``"test"``), what ``evaluation.json`` holds; writes nothing.
    """
    lengths = sorted(set(lengths))
    if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths):
        raise ValueError(f"lengths must be positive integers such as (5, 10, 20), got {lengths}")
    ckpt = load_checkpoint(checkpoint)
    device = get_device(device)
    model, src_vocab, tgt_vocab, meta = model_from_checkpoint(ckpt, checkpoint, device)
    watch = _FiniteOutputs(model, checkpoint)
    task_kwargs = dict(meta["task_kwargs"])
    if meta["task"] == "tsv":
        task_kwargs["path"] = str(find_data(ckpt, checkpoint, data))
    elif data is not None:
        raise ValueError(
            f"--data applies to runs of --task tsv, not to this --task {meta['task']} run"
        )
    limit = position_limit(model)
    if meta["task"] in SEQUENCE_TASKS and limit is not None and max(lengths) >= limit:
        raise ValueError(
            f"--lengths: {max(lengths)} is too long for this model, which "
            f"reads and writes at most {limit} positions (so inputs of at most "
            f"{limit - 1} symbols, one position being its <eos>)"
        )
    task = build_task(meta["task"], task_kwargs)
    if meta["task"] in SEQUENCE_TASKS:
        seen = {s for split in (task.train, task.val, task.test) for s, _ in split}
        n_symbols = task.options["n_symbols"]
        groups = {}
        for length in lengths:  # as many fresh inputs as there are, up to N
            left = n_symbols**length - sum(len(s) == length for s in seen)
            n = min(n_per_length, left)
            groups[length] = (
                []
                if n < 1
                else length_controlled(task, [length], n, seed=meta["task_kwargs"]["seed"] + 1)[
                    length
                ]
            )
    else:
        groups = {n: [] for n in lengths}
        for pair in task.test:
            n = len(src_vocab.tokenize(pair[0]))
            bound = next((b for b in lengths if n <= b), None)
            if bound is not None:
                groups[bound].append(pair)
    counts = {str(length): len(pairs) for length, pairs in groups.items()}
    by_length = exact_match_by_length(
        model,
        {str(length): pairs for length, pairs in groups.items()},
        src_vocab,
        tgt_vocab,
        beam=beam,
        batch_size=batch_size,
    )
    corpus = None
    if meta["task"] == "tsv":
        if not task.test:
            raise ValueError("this run's test split is empty: nothing to score")
        corpus = translation_scores(
            model, task.test, src_vocab, tgt_vocab, beam=beam, batch_size=batch_size
        )
        del corpus["hypotheses"]
    watch.check("the evaluation's inputs")
    _check_finite_numbers({"by_length": by_length, "test": corpus or {}}, checkpoint)
    return {
        "by_length": by_length,
        **({} if corpus is None else {"test": corpus}),
        "examples": counts,
        "beam": beam,
        "checkpoint": str(checkpoint),
        "step": ckpt["step"],
        "task": meta["task"],
        "model": meta["model"],
    }


def translate_run(
    checkpoint: str | Path,
    texts: list[str],
    *,
    beam: int = 1,
    max_len: int | None = None,
    attention_png: str | Path | None = None,
    device: str = "auto",
):
    """Decode each of ``texts`` with the model of the run whose ``checkpoint.pt`` is
    ``checkpoint``; yields the outputs in order, every input checked before the first.

    A tsv run's input is tokenised and lower-cased as its data were. ``max_len``: the longest
    output (default twice the input, plus 10); ``beam``: 1 for greedy decoding;
    ``attention_png``: also draw each output's cross-attention there (with several inputs
    the file names get ``_1``, ``_2``, ...)."""
    ckpt = load_checkpoint(checkpoint)
    device = get_device(device)
    model, src_vocab, tgt_vocab, meta = model_from_checkpoint(ckpt, checkpoint, device)
    watch = _FiniteOutputs(model, checkpoint)
    limit = position_limit(model)
    if max_len is not None and limit is not None and max_len > limit:
        raise ValueError(
            f"--max-len {max_len}: this model writes at most {limit} tokens (its positional table)"
        )
    if isinstance(texts, str):
        texts = [texts]
    checked = []
    for i, raw in enumerate(texts, start=1):  # every input checked before any work
        text = normalise_input(raw, src_vocab, meta)
        n = len(src_vocab.tokenize(text))
        if not n:
            raise ValueError(f"input {i} is empty")
        if limit is not None and n > limit:
            raise ValueError(
                f"input {i} has {n} tokens, but this model reads at most {limit} "
                "(its positional table): shorten it or split it"
            )
        src_vocab.encode(text)  # an unknown symbol fails here
        checked.append((i, text, n))
    for i, text, n in checked:
        length = max_len or (2 * n + 10 if limit is None else min(2 * n + 10, limit))
        if attention_png:
            png = Path(attention_png)
            if len(texts) > 1:
                png = png.with_name(f"{png.stem}_{i}{png.suffix or '.png'}")
            output = attention_figure(model, text, src_vocab, tgt_vocab, beam, length, png)
            if output is None:
                raise ValueError(
                    "this model has no attention to draw (--model rnn uses the fixed context "
                    "vector only)"
                )
            watch.check(f"input {i}")
            yield output
        else:
            src = torch.tensor([src_vocab.encode(text)], dtype=torch.long, device=device)
            ids = generate(model, src, max_len=length, beam=beam)
            watch.check(f"input {i}")
            yield tgt_vocab.decode(ids[0])


def export_run(checkpoint: str | Path, out: str | Path, *, overwrite: bool = False) -> dict:
    """Write the Transformer of the run whose ``checkpoint.pt`` is ``checkpoint`` as ONNX to
    ``out`` (an ``.onnx`` file; its JSON sidecar beside it), as ``python -m attnbook export``
    does (:func:`attnbook.export.export_onnx`, which says what it returns). Existing files are
    refused unless ``overwrite``; every argument is checked before anything is written."""
    from ..export import export_onnx, missing_packages

    shown, out = str(out), Path(out)
    if out.suffix != ".onnx":
        raise ValueError(f"--out must name an .onnx file (such as dates.onnx), got {shown!r}")
    sidecar = out.with_suffix(".json")
    if out.is_dir():
        raise ValueError(f"--out {shown} is a folder; give the .onnx file to write")
    existing = [str(p) for p in (out, sidecar) if p.exists()]
    if existing and not overwrite:
        raise ValueError(f"--out: {' and '.join(existing)} already exist; pass --overwrite")
    ckpt = load_checkpoint(checkpoint)
    model, src_vocab, tgt_vocab, meta = model_from_checkpoint(ckpt, checkpoint, torch.device("cpu"))
    watch = _FiniteOutputs(model, checkpoint)
    if meta["model"] != "transformer":
        raise ValueError(
            f"--checkpoint {checkpoint} holds a --model {meta['model']} run; export "
            "writes the Transformer's attention, so it takes --model transformer runs only"
        )
    missing = missing_packages()
    if missing:  # after every argument is checked
        raise ImportError(f"export needs {' and '.join(missing)}: pip install 'attnbook[export]'")
    n = min(model.max_len, 9)  # one example, as export_onnx traces: finite logits first
    src = torch.full((1, n), min(len(SPECIALS), len(src_vocab) - 1), dtype=torch.long)
    with torch.no_grad():
        model(src, torch.full((1, 1), BOS, dtype=torch.long))
    watch.check("an example input, before exporting")
    watch.close()
    info = {
        "checkpoint": Path(checkpoint).name,
        "step": ckpt.get("step"),
        "task": meta.get("task"),
        "task_kwargs": {k: v for k, v in (meta.get("task_kwargs") or {}).items() if k != "path"},
        "model_kwargs": meta.get("model_kwargs"),
    }
    return export_onnx(model, out, src_vocab, tgt_vocab, info=info)
