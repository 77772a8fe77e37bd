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
from collections.abc import Iterable
from pathlib import Path

import torch

from .._checks import check_bool, check_positive_int
from .._files import check_output_file, check_path
from .._limits import check_decoding_memory as _check_decoding_memory
from .._limits import check_memory, is_size, pair_bytes
from ..data import BOS, SPECIALS, length_controlled
from ..evaluate import exact_match_by_length, generate, translation_scores
from ..train import load_checkpoint
from ..utils import get_device
from .folder import check_new_files, check_outputs
from .models import model_from_checkpoint, position_limit
from .options import SEQUENCE_TASKS
from .report import attention_figure
from .tasks import build_task, check_checkpoint_file, find_data, normalise_input

__all__ = ["DEFAULT_N_PER_LENGTH", "evaluate_run", "translate_run", "export_run"]

# copy/reverse/sort: the fresh inputs of each length that evaluate_run decodes when not told
# (fewer where the task has fewer)
DEFAULT_N_PER_LENGTH = 100


def _fresh_inputs(n_symbols: int, length: int, seen: int) -> float:
    """How many sources of ``length`` symbols over ``n_symbols`` are not among the ``seen`` ones
    (math.inf where the count is beyond any number of examples anyone asks for)."""
    if length * math.log2(max(n_symbols, 2)) > 256:
        return math.inf
    return n_symbols**length - seen


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
    n_per_length: int | None = None,
    beam: int = 1,
    batch_size: int = 256,
    data: str | Path | None = None,
    device: str = "auto",
) -> dict:
    """Exact match by input length of the run whose ``checkpoint.pt`` is ``checkpoint``.

    copy/reverse/sort: ``n_per_length`` fresh inputs of exactly each of ``lengths`` (none seen
    in training; more than the task has of a length is refused, with how many it has); None:
    up to :data:`DEFAULT_N_PER_LENGTH` of each, as many as there are. dates/tsv: the test
    split, grouped by source length (longer than the previous bound, at most the length).
    Sizes this machine cannot hold (the inputs, a decoding of ``batch_size`` x ``beam``
    hypotheses) are refused before any is made (:mod:`attnbook._limits`). A tsv run also gets
    corpus BLEU, chrF and the perplexity of its test split (``"test"``); ``data``: its file, if
    it moved. ``beam``: 1 for greedy decoding. Returns ``{"by_length", "examples", "beam",
    "checkpoint", "step", "task", "model"}`` (and ``"test"``), what ``evaluation.json`` holds;
    writes nothing.
    """
    for name, value in (("beam", beam), ("batch_size", batch_size)):
        check_positive_int(name, value)
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Iterable):
        raise TypeError(
            f"lengths must be positive integers such as (5, 10, 20), got {type(lengths).__name__}"
        )
    lengths = sorted(set(lengths))
    if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths):
        raise ValueError(f"lengths must be positive integers such as (5, 10, 20), got {lengths}")
    if n_per_length is not None:
        check_positive_int("n_per_length", n_per_length)
    check_checkpoint_file("--checkpoint", checkpoint)
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
        wanted = {}
        for length in lengths:  # n_per_length given: that many or an error; else up to 100
            left = _fresh_inputs(n_symbols, length, sum(len(s) == length for s in seen))
            if n_per_length is not None and n_per_length > left:
                total = n_symbols**length
                fix = (
                    f"use --n-per-length {left} or less"
                    if left >= 1
                    else f"drop {length} from --lengths"
                )
                raise ValueError(
                    f"--n-per-length {n_per_length}: the {meta['task']} task of this run has "
                    f"only {left} fresh input{'s' if left != 1 else ''} of length {length} "
                    f"({total} sources of {length} symbols over {n_symbols}, {total - left} of "
                    f"them in the run's data); {fix}, or leave --n-per-length out for up to "
                    f"{DEFAULT_N_PER_LENGTH} of each length, as many as there are"
                )
            wanted[length] = int(min(n_per_length or DEFAULT_N_PER_LENGTH, left))
        _check_evaluation_memory(model, wanted, n_per_length, beam, batch_size)
        groups = {
            length: []
            if n < 1
            else length_controlled(task, [length], n, seed=meta["task_kwargs"]["seed"] + 1)[length]
            for length, n in wanted.items()
        }
    else:
        groups = {n: [] for n in lengths}
        for pair in task.test:
            n = len(src_vocab.tokenize(pair[0]))
            bound = next((b for b in lengths if n <= b), None)
            if bound is not None:
                groups[bound].append(pair)
        pairs = [p for group in groups.values() for p in group] + (
            task.test if meta["task"] == "tsv" else []
        )
        if pairs and is_size(beam) and is_size(batch_size):
            src = max(len(src_vocab.tokenize(s)) for s, _ in pairs)
            tgt = max(len(tgt_vocab.tokenize(t)) for _, t in pairs) + 1
            _check_decoding_memory(
                "",
                {"--beam": beam, "--batch-size": batch_size},
                model,
                min(batch_size, len(pairs)),
                src,
                max(tgt, 2 * src + 10) if meta["task"] == "tsv" else tgt,
                beam,
            )
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


def _check_evaluation_memory(model, wanted: dict, n_per_length, beam, batch_size) -> None:
    """Refuse fresh inputs, or a decoding of them, that this machine cannot hold."""
    sizes = {"--n-per-length": n_per_length or DEFAULT_N_PER_LENGTH}
    check_memory(
        "",
        sizes,
        f"{sum(wanted.values())} pairs of text and token ids",
        sum(n * pair_bytes(length, length) for length, n in wanted.items()),
    )
    most = max(wanted.values())
    if most >= 1 and is_size(beam) and is_size(batch_size):
        longest = max(length for length, n in wanted.items() if n >= 1)
        _check_decoding_memory(
            "",
            {"--beam": beam, "--batch-size": batch_size, **sizes},
            model,
            min(batch_size, most),
            longest,
            longest + 1,
            beam,
        )


def translate_run(
    checkpoint: str | Path,
    texts: list[str],
    *,
    beam: int = 1,
    max_len: int | None = None,
    attention_png: str | Path | None = None,
    overwrite: bool = False,
    device: str = "auto",
):
    """Decode each of ``texts`` with the model of the run whose ``checkpoint.pt`` is
    ``checkpoint``; yields the outputs in order, every input checked before the first.

    A tsv run's input is tokenised and lower-cased as its data were. ``max_len``: the longest
    output (default twice the input, plus 10); ``beam``: 1 for greedy decoding;
    ``attention_png``: also draw each output's cross-attention there (with several inputs
    the file names get ``_1``, ``_2``, ...; checked, as every file, before any decoding); an
    existing file is refused unless ``overwrite``, and the checkpoint always (links resolved)."""
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, (list, tuple)) or not texts:
        raise (ValueError if isinstance(texts, (list, tuple)) else TypeError)(
            f"texts must be a non-empty list of str, got {texts!r:.60}"
        )
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] must be a str, got {type(text).__name__} {text!r:.40}")
    check_positive_int("beam", beam)
    if max_len is not None:
        check_positive_int("max_len", max_len)
    pngs = _attention_pngs(attention_png, len(texts)) if attention_png is not None else None
    if pngs:
        check_new_files("--attention-png", pngs, checkpoint, overwrite)
    check_checkpoint_file("--checkpoint", checkpoint)
    ckpt = load_checkpoint(checkpoint)
    device = get_device(device)
    model, src_vocab, tgt_vocab, meta = model_from_checkpoint(ckpt, checkpoint, device)
    watch = _FiniteOutputs(model, checkpoint)
    limit = position_limit(model)
    if max_len is not None and limit is not None and max_len > limit:
        raise ValueError(
            f"--max-len {max_len}: this model writes at most {limit} tokens (its positional table)"
        )
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
        length = max_len or (2 * n + 10 if limit is None else min(2 * n + 10, limit))
        _check_decoding_memory(
            "",
            {"--max-len": length, "--beam": beam},
            model,
            1,
            n,
            length,
            beam,
            return_attention=bool(attention_png),
        )
        checked.append((i, text, n))
    for i, text, n in checked:
        length = max_len or (2 * n + 10 if limit is None else min(2 * n + 10, limit))
        if pngs:
            output = attention_figure(model, text, src_vocab, tgt_vocab, beam, length, pngs[i - 1])
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


def _attention_pngs(attention_png, n: int) -> list[Path]:
    """The picture files of ``--attention-png`` for ``n`` inputs (``_1``, ``_2``, ... when
    several), each checked: a path (not a folder, a FIFO, a device, under a file) in a format
    matplotlib writes, named by its suffix (none: png)."""
    from matplotlib.backend_bases import FigureCanvasBase

    png = check_path("--attention-png", attention_png)
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    kind = png.suffix.lstrip(".").lower()
    if kind and kind not in formats:
        raise ValueError(
            f"--attention-png {png}: matplotlib cannot write .{kind} files; it wants a "
            f"picture file ending in {', '.join('.' + f for f in formats)} (none: .png)"
        )
    if n > 1:
        pngs = [png.with_name(f"{png.stem}_{i}{png.suffix or '.png'}") for i in range(1, n + 1)]
    else:
        pngs = [png]
    wants = "a picture file to write (such as attention.png)"
    return [check_output_file("--attention-png", p, wants) for p in pngs]


def export_run(checkpoint: str | Path, out: str | Path, *, overwrite: bool = False) -> dict:
    """Write the Transformer of the run whose ``checkpoint.pt`` is ``checkpoint`` as ONNX to
    ``out`` (an ``.onnx`` file; its JSON sidecar beside it), as ``python -m attnbook export``
    does (:func:`attnbook.export.export_onnx`, which says what it returns). Existing files are
    refused unless ``overwrite``; every argument is checked before anything is written."""
    from ..export import export_onnx, missing_packages

    check_path("--out", out)
    check_bool("overwrite", overwrite)
    shown, out = str(out), Path(out)
    if out.suffix != ".onnx":
        raise ValueError(f"--out must name an .onnx file (such as dates.onnx), got {shown!r}")
    sidecar = out.with_suffix(".json")
    for path in (out, sidecar):  # a folder, a FIFO, a device, a file for a folder: refused
        check_output_file("--out", path, "an .onnx file to write (its .json sidecar beside it)")
    check_outputs({"--out": out, "--out's sidecar": sidecar}, {"--checkpoint": checkpoint})
    existing = [str(p) for p in (out, sidecar) if p.exists()]
    if existing and not overwrite:
        raise ValueError(f"--out: {' and '.join(existing)} already exist; pass --overwrite")
    check_checkpoint_file("--checkpoint", checkpoint)
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
