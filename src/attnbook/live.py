"""The live block: a trained seq2seq Transformer that runs in the reader's browser.

Chapter 13 shows the shipped dates Transformer (``attnbook.pretrained``'s ``dates-transformer``,
trained by ``python -m attnbook train --task dates --model transformer``) as a block on the
page: an input box, a button, the translation, the attention as a heatmap with the real
characters on both axes (every layer and head of the cross-attention and of both stacks'
self-attention), and the decoder stepping through its output. The block is an HTML output with
its own script (``assets/live.js``):

- :func:`live_block` returns the display object. It holds one example translated in advance by
  PyTorch, which the page shows at once, with no runtime loaded.
- When the reader asks for another translation, the script loads onnxruntime-web (served by
  the built book from ``vendor/``, :data:`RUNTIME`) and the model file that
  :func:`write_model` wrote (``live/NAME.onnx``, :data:`MODEL_DIR`), and decodes greedily in
  the browser, as :func:`attnbook.decode.greedy_decode` does.
- In a running notebook (JupyterLab, Colab) there is no built book to serve those files: the
  block shows its example and, when asked, says so and points to
  :meth:`LiveBlock.translate`, which computes the same view in Python.

Input the model cannot read gets a message, on the page as from :func:`check_text`: empty
input, a character outside the source vocabulary (named), more characters than the model's
positional table holds.

The book's model file: ``make live-model`` (``python -m attnbook.live --pretrained NAME --out
DIR``, or ``--checkpoint FILE`` for a run of ``python -m attnbook train``) writes it with
:func:`write_model`.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import itertools
import json
import sys
from importlib import resources
from pathlib import Path

import torch

from ._checks import check_positive_int
from ._files import check_path
from .data import BOS, EOS, SPECIALS, Vocab
from .decode import greedy_decode

__all__ = [
    "LiveBlock",
    "live_block",
    "from_checkpoint",
    "live_example",
    "check_text",
    "write_model",
    "weights_digest",
    "RUNTIME",
    "MODEL_DIR",
    "MODEL_NAME",
    "MAX_OUTPUT",
    "KINDS",
    "main",
]

RUNTIME = "vendor/onnxruntime-web@1.30.0/"  # tests/book_js.py puts it in the built book
MODEL_DIR = "live/"  # the model files' folder in the built book
MODEL_NAME = "dates-transformer"
MAX_OUTPUT = 16  # decoding steps at most (a date in ISO form is ten characters and <eos>)
KINDS = ("cross", "encoder_self", "decoder_self")  # the ONNX outputs' names without _attention

_ids = itertools.count(1)


def weights_digest(model: torch.nn.Module) -> str:
    """A short sha256 of ``model``'s weights (names, shapes and float32 values): the page
    compares the model file's with its example's, so that the two come from one model."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().to("cpu", torch.float32).contiguous()
        h.update(f"{name}{tuple(t.shape)}".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


def _show(c: str) -> str:
    return json.dumps(c, ensure_ascii=False) + f" (U+{ord(c):04X})"


def check_text(text, src_vocab: Vocab, max_len: int) -> None:
    """Raise ``ValueError`` with the page's message when ``text`` cannot be translated: empty
    (or only spaces), longer than ``max_len`` characters, or holding characters that
    ``src_vocab`` (character-level) does not know, each one named. A ``max_len`` that is not
    an int of at least 1, or a ``src_vocab`` that is not a character-level :class:`Vocab`, is
    the caller's mistake: a ``TypeError`` or ``ValueError`` naming it."""
    check_positive_int("max_len", max_len)
    if not isinstance(src_vocab, Vocab) or src_vocab.level != "char":
        raise TypeError(
            f"src_vocab must be a character-level attnbook Vocab, got {src_vocab!r:.80}"
        )
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("The input is empty: type a date to translate.")
    n = len(text)
    if n > max_len:
        raise ValueError(
            f"The input has {n} characters; the model reads at most {max_len} "
            "(the length of its positional table)."
        )
    known = set(src_vocab.itos[len(SPECIALS) :])
    unknown = list(dict.fromkeys(c for c in text if c not in known))
    if unknown:
        rest = "".join(sorted(known - {" "}))
        raise ValueError(
            f"The model does not know {', '.join(_show(c) for c in unknown)}: it reads only "
            f"the characters of its training data: {'the space and ' * (' ' in known)}{rest}"
        )


def _check_model(model, src_vocab, tgt_vocab) -> None:
    from .transformer import Transformer

    if not isinstance(model, Transformer):
        raise TypeError(f"model must be an attnbook Transformer, got {type(model).__name__}")
    for name, vocab, size in (
        ("src_vocab", src_vocab, model.src_vocab_size),
        ("tgt_vocab", tgt_vocab, model.tgt_vocab_size),
    ):
        if not isinstance(vocab, Vocab) or vocab.level != "char":
            raise TypeError(f"{name} must be a character-level attnbook Vocab, got {vocab!r}")
        if len(vocab) != size:
            raise ValueError(f"{name} has {len(vocab)} symbols but the model has {size}")


def _round(x: torch.Tensor, digits: int = 5):
    return torch.round(x.float(), decimals=digits).tolist()


def live_example(
    model, src_vocab: Vocab, tgt_vocab: Vocab, text: str, *, max_output: int = MAX_OUTPUT
) -> dict:
    """What the block shows for ``text``, computed by PyTorch: the translation by
    :func:`~attnbook.decode.greedy_decode` (at most ``max_output`` steps), and the decoder run
    once more on ``<bos>`` followed by its own output less the last token (what each step read)
    with every attention weight returned, as the page's runtime computes them. JSON-friendly:
    ``source``, ``reads`` (decoder inputs) and
    ``writes`` (outputs) are token labels; ``attention[kind]`` is ``[layer][head][query][key]``
    for ``kind`` in cross, encoder_self, decoder_self; ``top[step]`` the three likeliest
    tokens with their probabilities; ``finished``: whether ``<eos>`` came."""
    _check_model(model, src_vocab, tgt_vocab)
    check_text(text, src_vocab, model.max_len)
    src = torch.tensor([src_vocab.encode(text)])  # (1, S)
    out = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=max_output)[0]  # (T,)
    dec_in = torch.cat([torch.tensor([BOS]), out[:-1]])[None]  # (1, T): <bos> + its output
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits, att = model(src, dec_in, return_attention=True)
    model.train(was_training)
    probs = logits[0].softmax(-1)  # (T, V)
    best = probs.topk(3, dim=-1)
    itos = tgt_vocab.itos
    return {
        "text": text,
        "source": list(text),
        "reads": [itos[i] for i in dec_in[0].tolist()],
        "writes": [itos[i] for i in out.tolist()],
        "translation": tgt_vocab.decode(out),
        "finished": bool(out[-1] == EOS),
        "attention": {k: _round(torch.stack(att[k])[:, 0]) for k in KINDS},
        "top": [
            [[itos[i], round(p, 4)] for i, p in zip(ids, ps, strict=True)]
            for ids, ps in zip(best.indices.tolist(), best.values.tolist(), strict=True)
        ],
    }


def _asset(name: str) -> str:
    return resources.files("attnbook").joinpath("assets", name).read_text(encoding="utf-8")


def _messages() -> dict[str, dict[str, str]]:
    """The block's words in the languages besides English: language -> {English message:
    translation}, from ``assets/locale/<language>.json`` (tests/live_catalog.py compiles them
    from the book's ``locale/<language>/LC_MESSAGES/live.po``). The block shows the ones of its
    page's language (``<html lang>``), English elsewhere."""
    folder = resources.files("attnbook").joinpath("assets", "locale")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".json")), key=lambda f: f.name)
    return {f.name[: -len(".json")]: json.loads(f.read_text(encoding="utf-8")) for f in files}


class LiveBlock:
    """The live block as a display object (``_repr_html_``): shown in a notebook or on the
    built page. :meth:`translate` gives the same block for another input, computed by PyTorch
    (what a running notebook uses instead of the browser's runtime)."""

    def __init__(self, model, src_vocab: Vocab, tgt_vocab: Vocab, example: dict, config: dict):
        self.model, self.src_vocab, self.tgt_vocab = model, src_vocab, tgt_vocab
        self.example, self.config = example, config
        self.id = f"attnbook-live-{next(_ids)}"

    def translate(self, text: str) -> LiveBlock:
        """The block for ``text``, translated by PyTorch (raises the page's message as a
        ``ValueError`` for input the model cannot read)."""
        example = live_example(
            self.model,
            self.src_vocab,
            self.tgt_vocab,
            text,
            max_output=self.config["max_output"],
        )
        return LiveBlock(self.model, self.src_vocab, self.tgt_vocab, example, self.config)

    def __repr__(self) -> str:
        return (
            f"LiveBlock({self.example['text']!r} -> {self.example['translation']!r}; "
            "interactive in a browser)"
        )

    def _repr_html_(self) -> str:
        data = {**self.config, "example": self.example, "messages": _messages()}
        # JSON inside <script>: "</" would end the element, so it is written "<\/"
        payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
        plain = html.escape(f"{self.example['text']} → {self.example['translation']}")
        return (
            f'<div class="attnbook-live" id="{self.id}">'
            f"<style>{_asset('live.css')}</style>"
            f'<p class="attnbook-live-static">{plain}<br><em>The interactive block needs '
            "JavaScript (the built book, JupyterLab or Colab, with the notebook trusted).</em></p>"
            "</div>\n"
            f'<script type="application/json" id="{self.id}-config">{payload}</script>\n'
            f'<script type="module">\n{_asset("live.js")}\nmount("{self.id}");\n</script>'
        )


def live_block(
    model,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    sample: str = "Wednesday 9 May 2018",
    max_output: int = MAX_OUTPUT,
    name: str = MODEL_NAME,
    title: str = "The dates Transformer, running in your browser",
) -> LiveBlock:
    """The live block for ``model`` (an attnbook Transformer with character-level
    vocabularies), showing ``sample`` translated in advance. On the built book the page runs
    ``live/NAME.onnx``, which :func:`write_model` must have written from the same weights (the
    page checks :func:`weights_digest`); decoding stops after ``max_output`` steps; ``title``
    heads the block."""
    if not isinstance(max_output, int) or isinstance(max_output, bool) or max_output < 1:
        raise ValueError(f"max_output must be a positive int, got {max_output!r}")
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"name must be a file name without a folder, got {name!r}")
    example = live_example(model, src_vocab, tgt_vocab, sample, max_output=max_output)
    config = {
        "title": title,
        "model": f"{MODEL_DIR}{name}.onnx",
        "sidecar": f"{MODEL_DIR}{name}.json",
        "runtime": RUNTIME,
        "weights": weights_digest(model),
        "parameters": sum(p.numel() for p in model.parameters()),
        "d_model": model.d_model,
        "layers": model.n_layers,
        "heads": model.n_heads,
        "max_len": model.max_len,
        "max_output": max_output,
        "specials": {"bos": BOS, "eos": EOS},
        "src_itos": list(src_vocab.itos),
        "tgt_itos": list(tgt_vocab.itos),
    }
    return LiveBlock(model, src_vocab, tgt_vocab, example, config)


def _load(checkpoint):
    from .runs.models import model_from_checkpoint
    from .train import load_checkpoint

    ckpt = load_checkpoint(checkpoint)
    model, src_vocab, tgt_vocab, meta = model_from_checkpoint(ckpt, checkpoint, torch.device("cpu"))
    if meta["model"] != "transformer":
        raise ValueError(f"checkpoint {checkpoint} holds a {meta['model']} run, not a transformer")
    return ckpt, model, src_vocab, tgt_vocab, meta


def from_checkpoint(checkpoint, **kwargs) -> LiveBlock:
    """:func:`live_block` for the Transformer of a run of ``python -m attnbook train`` (its
    ``checkpoint.pt``); ``kwargs`` go to :func:`live_block`."""
    _, model, src_vocab, tgt_vocab, _ = _load(checkpoint)
    return live_block(model, src_vocab, tgt_vocab, **kwargs)


def write_model(
    model, src_vocab: Vocab, tgt_vocab: Vocab, folder, *, name: str = MODEL_NAME, info=None
) -> dict:
    """Export ``model`` to ``folder/live/NAME.onnx`` with its sidecar
    (:func:`attnbook.export.export_onnx`), recording ``info`` (where the model came from) and
    its :func:`weights_digest`, which the page compares with its example's; returns the
    sidecar. ``folder`` is what the built book serves at its root (``make live-model`` passes
    ``.cache/live/site``, which ``_config.yml`` copies into the book)."""
    from .export import export_onnx

    _check_model(model, src_vocab, tgt_vocab)
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"name must be a file name without a folder, got {name!r}")
    if info is not None and not isinstance(info, dict):
        raise TypeError(f"info must be a dict or None, got {type(info).__name__}")
    info = {**(info or {}), "weights": weights_digest(model)}
    out = check_path("folder", folder) / MODEL_DIR / f"{name}.onnx"
    return export_onnx(model, out, src_vocab, tgt_vocab, info=info)


def _from_pretrained(name: str):
    from . import pretrained

    model, task, record = pretrained.load(name)
    info = {"pretrained": name, "command": record["command"], "sha256": record["sha256"]}
    return model, task.src_vocab, task.tgt_vocab, info


def _from_checkpoint(checkpoint):
    ckpt, model, src_vocab, tgt_vocab, meta = _load(checkpoint)
    info = {
        "checkpoint": Path(checkpoint).name,
        "step": ckpt.get("step"),
        "task": meta.get("task"),
        "task_kwargs": {k: v for k, v in (meta.get("task_kwargs") or {}).items() if k != "path"},
        "model_kwargs": meta.get("model_kwargs"),
    }
    return model, src_vocab, tgt_vocab, info


def main(argv=None) -> int:
    """``python -m attnbook.live (--pretrained NAME | --checkpoint FILE) --out DIR``: writes
    the model file with :func:`write_model`."""
    parser = argparse.ArgumentParser(
        prog="python -m attnbook.live",
        description="Write the live block's model file (DIR/live/NAME.onnx and its sidecar).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--pretrained", metavar="NAME", help="a model of attnbook.pretrained")
    source.add_argument("--checkpoint", metavar="FILE", help="a transformer run's checkpoint.pt")
    parser.add_argument("--out", required=True, help="the folder the built book serves")
    parser.add_argument("--name", default=MODEL_NAME, help=f"default: {MODEL_NAME}")
    args = parser.parse_args(argv)
    try:
        if args.pretrained is not None:
            model, src_vocab, tgt_vocab, info = _from_pretrained(args.pretrained)
        else:
            model, src_vocab, tgt_vocab, info = _from_checkpoint(args.checkpoint)
        sidecar = write_model(model, src_vocab, tgt_vocab, args.out, name=args.name, info=info)
    except (ValueError, TypeError, OSError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(
        f"wrote {Path(args.out) / MODEL_DIR / sidecar['onnx']} ({sidecar['bytes']:,} bytes, "
        f"weights {sidecar['info']['weights']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
