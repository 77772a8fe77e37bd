"""Export a trained seq2seq Transformer to ONNX, attention included, for a page to run it.

:func:`export_onnx` writes ``NAME.onnx`` and a JSON sidecar ``NAME.json``. The ONNX graph
takes token ids and returns the next-token logits and every attention weight the model
computes, as named outputs:

- inputs ``src`` ``(batch, src_len)`` and ``tgt`` ``(batch, tgt_len)``, int64 token ids:
  the source as :meth:`attnbook.data.vocab.Vocab.encode` gives it, and the target so far, starting
  with ``<bos>`` (the decoder input). Source and target lengths (and the batch) are dynamic,
  from 1 to the model's ``max_len``; ``<pad>`` ids are masked as in PyTorch.
- outputs ``logits`` ``(batch, tgt_len, tgt_vocab)``; ``encoder_self_attention``
  ``(layers, batch, heads, src_len, src_len)``; ``decoder_self_attention``
  ``(layers, batch, heads, tgt_len, tgt_len)``; ``cross_attention``
  ``(layers, batch, heads, tgt_len, src_len)``: the softmax weights of every layer and head.

Greedy decoding runs the graph once per output token with the tokens so far as ``tgt`` and
takes the argmax of the last position's logits (no cache: the book's models are small).

The sidecar holds what a page needs to turn text into ids and back: both vocabularies
(``itos``, id order, and their ``level``), the special ids, ``max_len``, the input and output
names with their axes, the model's sizes and where it came from, and the ONNX file's size
and sha256.

The export needs the optional packages ``onnx`` and ``onnxscript`` (``pip install
"attnbook[export]"``, which also brings ``onnxruntime`` to run the file). From the command
line: ``python -m attnbook export --checkpoint runs/dates/checkpoint.pt --out dates.onnx``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import torch
from torch import nn

from . import __version__
from ._files import check_output_file, check_path
from .data import BOS, EOS, PAD, SPECIALS, UNK, Vocab

__all__ = [
    "export_onnx",
    "AttentionOutputs",
    "missing_packages",
    "INPUT_NAMES",
    "OUTPUT_NAMES",
    "OUTPUT_AXES",
    "SIDECAR_FORMAT",
    "OPSET",
    "EXPORT_PACKAGES",
]

INPUT_NAMES = ("src", "tgt")
OUTPUT_NAMES = ("logits", "encoder_self_attention", "decoder_self_attention", "cross_attention")
OUTPUT_AXES = {
    "logits": ["batch", "tgt_len", "tgt_vocab"],
    "encoder_self_attention": ["layer", "batch", "head", "src_len", "src_len"],
    "decoder_self_attention": ["layer", "batch", "head", "tgt_len", "tgt_len"],
    "cross_attention": ["layer", "batch", "head", "tgt_len", "src_len"],
}
SIDECAR_FORMAT = "attnbook-onnx-1"
OPSET = 18
EXPORT_PACKAGES = ("onnx", "onnxscript")


class AttentionOutputs(nn.Module):
    """``model`` with its attention as outputs: ``(src, tgt) -> (logits, encoder_self,
    decoder_self, cross)``, each attention stacked over layers ``(layers, B, H, L_q, L_k)``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor, tgt: torch.Tensor):
        logits, attention = self.model(src, tgt, return_attention=True)
        return (
            logits,
            torch.stack(attention["encoder_self"]),
            torch.stack(attention["decoder_self"]),
            torch.stack(attention["cross"]),
        )


def missing_packages() -> list[str]:
    """The packages the export needs that are not installed."""
    return [p for p in EXPORT_PACKAGES if importlib.util.find_spec(p) is None]


def _strip_metadata(path: Path) -> None:
    """Drop what the exporter records about this machine's Python source (each node's stack
    trace, with absolute file paths, and its doc string): the file then depends on the model
    alone, and is a quarter smaller."""
    import onnx

    def strip(nodes) -> None:
        for node in nodes:
            del node.metadata_props[:]
            node.doc_string = ""
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    strip(attribute.g.node)
                for graph in attribute.graphs:
                    strip(graph.node)

    proto = onnx.load(str(path))
    strip(proto.graph.node)
    for function in proto.functions:
        strip(function.node)
    del proto.graph.metadata_props[:]
    onnx.save(proto, str(path))


def _check_model(model, src_vocab: Vocab, tgt_vocab: Vocab) -> None:
    from .transformer import Transformer

    if not isinstance(model, Transformer):
        raise TypeError(
            "model must be an attnbook Transformer (the export returns its self- and "
            f"cross-attention), got {type(model).__name__}"
        )
    for name, vocab, size in (
        ("src_vocab", src_vocab, model.src_vocab_size),
        ("tgt_vocab", tgt_vocab, model.tgt_vocab_size),
    ):
        if not isinstance(vocab, Vocab):
            raise TypeError(f"{name} must be an attnbook Vocab, got {type(vocab).__name__}")
        if len(vocab) != size:
            raise ValueError(
                f"{name} has {len(vocab)} symbols but the model was built for {size}: "
                "not the vocabulary it was trained with"
            )
    if model.pad_id != PAD:
        raise ValueError(f"the model's pad_id is {model.pad_id}, but the vocabularies' is {PAD}")


def _check_out(path) -> Path:
    path = check_path("path", path)
    if path.suffix != ".onnx":
        raise ValueError(f"path must name an .onnx file, got {str(path)!r}")
    for file in (path, path.with_suffix(".json")):  # a folder, a FIFO, a device: refused
        check_output_file("path", file, "an .onnx file to write (its .json sidecar beside it)")
    return path


def export_onnx(
    model,
    path,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    info: dict | None = None,
) -> dict:
    """Write ``model`` (a :class:`attnbook.transformer.Transformer`) to ``path`` (``.onnx``)
    with its attention as outputs (module docstring), and the sidecar ``path`` with
    ``.json``; returns the sidecar's content. ``src_vocab``/``tgt_vocab``: the vocabularies the
    model was trained with; ``info``: extra JSON-friendly facts to record (the task, the
    checkpoint, ...). The model is exported in eval mode (no dropout); its mode is restored.
    """
    _check_model(model, src_vocab, tgt_vocab)
    path = _check_out(path)
    if info is not None:
        if not isinstance(info, dict):
            raise TypeError(f"info must be a dict or None, got {type(info).__name__}")
        try:
            json.dumps(info)
        except (TypeError, ValueError) as err:
            raise TypeError(f"info must hold JSON values only: {err}") from None
    missing = missing_packages()
    if missing:
        raise ImportError(
            f"exporting to ONNX needs {' and '.join(missing)}: pip install 'attnbook[export]'"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    was_training = model.training
    device = next(model.parameters()).device
    wrapped = AttentionOutputs(model).eval()
    # example lengths all different and above 1, so that no axis is specialised to a constant
    n = min(model.max_len, 9)
    first = min(len(SPECIALS), model.src_vocab_size - 1)  # the first real symbol
    src = torch.full((2, n), first, dtype=torch.long, device=device)
    tgt = torch.full((2, max(n - 3, 2)), BOS, dtype=torch.long, device=device)
    batch = torch.export.Dim("batch", min=1, max=4096)
    src_len = torch.export.Dim("src_len", min=1, max=model.max_len)
    tgt_len = torch.export.Dim("tgt_len", min=1, max=model.max_len)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with torch.no_grad():
            torch.onnx.export(
                wrapped,
                (src, tgt),
                str(tmp),
                input_names=list(INPUT_NAMES),
                output_names=list(OUTPUT_NAMES),
                dynamic_shapes={"src": {0: batch, 1: src_len}, "tgt": {0: batch, 1: tgt_len}},
                dynamo=True,
                opset_version=OPSET,
                external_data=False,
                verbose=False,
            )
        _strip_metadata(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
        model.train(was_training)
    data = path.read_bytes()
    sidecar = {
        "format": SIDECAR_FORMAT,
        "onnx": path.name,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "inputs": {
            "src": ["batch", "src_len"],
            "tgt": ["batch", "tgt_len"],
        },
        "input_dtype": "int64",
        "outputs": OUTPUT_AXES,
        "max_len": model.max_len,
        "special_ids": {"pad": PAD, "bos": BOS, "eos": EOS, "unk": UNK},
        "src_vocab": {"level": src_vocab.level, "itos": list(src_vocab.itos)},
        "tgt_vocab": {"level": tgt_vocab.level, "itos": list(tgt_vocab.itos)},
        "model": {
            "d_model": model.d_model,
            "n_heads": model.n_heads,
            "n_layers": model.n_layers,
            "parameters": sum(p.numel() for p in model.parameters()),
        },
        "opset": OPSET,
        "attnbook": __version__,
        "torch": torch.__version__,
        **({"info": info} if info else {}),
    }
    path.with_suffix(".json").write_text(
        json.dumps(sidecar, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return sidecar
