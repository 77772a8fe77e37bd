"""attnbook.export and `python -m attnbook export`: the ONNX file against PyTorch.

A small Transformer trained by the command line is exported once; onnxruntime then runs the
file at source and target lengths other than those of the export's example (9 and 6), with a
batch that holds padding, and every output (the logits and every layer's encoder self-,
decoder self- and cross-attention) must equal PyTorch's within 1e-5; greedy decoding with the
file gives `greedy_decode`'s output. Skipped, saying why, without onnx/onnxscript (the export)
or onnxruntime (running it): pip install 'attnbook[export]'. The argument checks run always.
"""

import hashlib
import importlib.util
import json

import numpy as np
import pytest
import torch

from attnbook import export as export_module
from attnbook.cli import main
from attnbook.data import BOS, EOS, PAD, Vocab
from attnbook.decode import greedy_decode
from attnbook.export import OUTPUT_NAMES, AttentionOutputs, export_onnx
from attnbook.runs.models import model_from_checkpoint as _model_from_checkpoint
from attnbook.train import load_checkpoint
from attnbook.transformer import Transformer

TINY_DATA = [
    *("--n-train", "300", "--n-val", "30", "--n-test", "30"),
    *("--min-len", "2", "--max-len", "6", "--n-symbols", "6"),
    *("--batch-size", "16", "--eval-every", "20", "--log-every", "20", "--quiet"),
]
TINY = [*TINY_DATA, *("--d-model", "16", "--heads", "2", "--layers", "2", "--d-ff", "32")]
TINY += ["--lr", "0.01"]


def needs(*packages):
    missing = [p for p in packages if importlib.util.find_spec(p) is None]
    return pytest.mark.skipif(
        bool(missing),
        reason=f"{', '.join(missing)} not installed (pip install 'attnbook[export]')",
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "copy"
    assert main(["train", "--task", "copy", "--steps", "80", "--out", str(out), *TINY]) == 0
    return out


@pytest.fixture(scope="module")
def exported(run):
    if export_module.missing_packages():
        pytest.skip(
            f"{export_module.missing_packages()} not installed: pip install 'attnbook[export]'"
        )
    onnx_path = run / "web" / "copy.onnx"
    assert (
        main(["export", "--checkpoint", str(run / "checkpoint.pt"), "--out", str(onnx_path)]) == 0
    )
    ckpt = load_checkpoint(run / "checkpoint.pt")
    model, src_vocab, tgt_vocab, _ = _model_from_checkpoint(ckpt, "ckpt", torch.device("cpu"))
    return onnx_path, model, src_vocab, tgt_vocab


@pytest.fixture(scope="module")
def session(exported):
    ort = pytest.importorskip(
        "onnxruntime", reason="onnxruntime is not installed (pip install 'attnbook[export]')"
    )
    return ort.InferenceSession(str(exported[0]), providers=["CPUExecutionProvider"])


def batch(rows, vocab_size, seed):
    """Token ids ``(B, max length)``: random real symbols, each row padded after its length."""
    g = torch.Generator().manual_seed(seed)
    longest = max(rows)
    ids = torch.randint(4, vocab_size, (len(rows), longest), generator=g)
    for i, n in enumerate(rows):
        ids[i, n:] = PAD
    return ids


@needs("onnxruntime")
@pytest.mark.parametrize(
    "src_rows, tgt_rows",
    [
        ([1], [1]),  # the shortest
        ([3], [12]),  # a target longer than the source
        ([17, 5], [4, 4]),  # a padded source
        ([40, 23, 31], [2, 19, 7]),  # far beyond the training lengths, padding in both
    ],
)
def test_every_output_matches_pytorch_at_new_lengths(exported, session, src_rows, tgt_rows):
    _, model, src_vocab, tgt_vocab = exported
    src = batch(src_rows, len(src_vocab), seed=sum(src_rows))
    tgt = batch(tgt_rows, len(tgt_vocab), seed=sum(tgt_rows) + 1)
    tgt[:, 0] = BOS
    with torch.no_grad():
        expected = AttentionOutputs(model.eval())(src, tgt)
    got = session.run(list(OUTPUT_NAMES), {"src": src.numpy(), "tgt": tgt.numpy()})
    layers, heads = model.n_layers, model.n_heads
    b, s, t = len(src_rows), max(src_rows), max(tgt_rows)
    shapes = {
        "logits": (b, t, len(tgt_vocab)),
        "encoder_self_attention": (layers, b, heads, s, s),
        "decoder_self_attention": (layers, b, heads, t, t),
        "cross_attention": (layers, b, heads, t, s),
    }
    for name, mine, theirs in zip(OUTPUT_NAMES, got, expected, strict=True):
        assert mine.shape == shapes[name], name
        assert np.isfinite(mine).all(), name
        diff = np.abs(mine - theirs.numpy()).max()
        assert diff < 1e-5, f"{name}: ONNX differs from PyTorch by {diff:.2e}"
    # attention weights are weights: each row sums to 1 (a check that the outputs are not
    # pre-softmax scores)
    for name in OUTPUT_NAMES[1:]:
        w = got[OUTPUT_NAMES.index(name)]
        assert np.allclose(w.sum(-1), 1, atol=1e-5), name


@needs("onnxruntime")
def test_greedy_decoding_with_the_file_gives_greedy_decode(exported, session, run):
    _, model, src_vocab, tgt_vocab = exported
    texts = ["abcab", "fedcbafedc", "a", "ccccccccccccccccccccccc"]  # lengths 1 to 23
    assert set("".join(texts)) <= set(src_vocab.itos)
    outputs = []
    for text in texts:
        src = torch.tensor([src_vocab.encode(text)])
        expected = tgt_vocab.decode(
            greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=40)[0]
        )
        tokens = [BOS]
        for _ in range(40):
            logits = session.run(["logits"], {"src": src.numpy(), "tgt": np.array([tokens])})[0]
            tokens.append(int(logits[0, -1].argmax()))
            if tokens[-1] == EOS:
                break
        assert tgt_vocab.decode(tokens) == expected, text
        outputs.append(expected)
    assert len(set(outputs)) > 1, f"every input decodes to the same output: {outputs}"


@needs("onnxruntime")
def test_the_sidecar_says_what_a_page_needs(exported, session):
    onnx_path, model, src_vocab, tgt_vocab = exported
    sidecar = json.loads(onnx_path.with_suffix(".json").read_text(encoding="utf-8"))
    data = onnx_path.read_bytes()
    assert sidecar["onnx"] == onnx_path.name and sidecar["bytes"] == len(data)
    assert sidecar["sha256"] == hashlib.sha256(data).hexdigest()
    # the file holds the model, not this machine's paths (the exporter's stack traces)
    assert b"attnbook/" not in data and str(onnx_path.parent).encode() not in data
    assert sidecar["src_vocab"]["itos"] == src_vocab.itos
    assert sidecar["tgt_vocab"]["itos"] == tgt_vocab.itos
    assert sidecar["src_vocab"]["level"] == "char"
    assert sidecar["special_ids"] == {"pad": PAD, "bos": BOS, "eos": EOS, "unk": 3}
    assert sidecar["max_len"] == model.max_len
    assert sidecar["model"]["n_layers"] == model.n_layers == 2
    assert sidecar["info"]["task"] == "copy" and sidecar["info"]["step"] == 80
    assert [o.name for o in session.get_outputs()] == list(OUTPUT_NAMES) == list(sidecar["outputs"])
    assert [i.name for i in session.get_inputs()] == list(sidecar["inputs"])
    # every axis the sidecar calls a length or the batch is dynamic in the file
    for o in session.get_outputs():
        for axis, dim in zip(sidecar["outputs"][o.name], o.shape, strict=True):
            assert isinstance(dim, str) == (axis in ("batch", "src_len", "tgt_len")), (
                o.name,
                o.shape,
            )


# --------------------------------------------------------------------------------------------
# errors (no ONNX package needed)
# --------------------------------------------------------------------------------------------


def cli(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr().err


def test_out_must_name_an_onnx_file(run, tmp_path, capsys):
    code, err = cli(
        ["export", "--checkpoint", str(run / "checkpoint.pt"), "--out", str(tmp_path / "m.pt")],
        capsys,
    )
    assert code == 1 and "--out must name an .onnx file" in err
    code, err = cli(
        ["export", "--checkpoint", str(run / "checkpoint.pt"), "--out", str(tmp_path)], capsys
    )
    assert code == 1 and "--out must name an .onnx file" in err


def test_existing_files_are_kept_without_overwrite(run, tmp_path, capsys):
    (tmp_path / "m.json").write_text("{}")
    code, err = cli(
        ["export", "--checkpoint", str(run / "checkpoint.pt"), "--out", str(tmp_path / "m.onnx")],
        capsys,
    )
    assert code == 1 and "m.json already exist" in err and "--overwrite" in err
    assert (tmp_path / "m.json").read_text() == "{}"


def test_a_missing_checkpoint_and_an_rnn_run_are_refused(tmp_path, capsys):
    code, err = cli(
        ["export", "--checkpoint", str(tmp_path / "none.pt"), "--out", str(tmp_path / "m.onnx")],
        capsys,
    )
    assert code == 1 and "none.pt does not exist" in err
    rnn = tmp_path / "rnn"
    assert (
        main(
            [
                "train",
                "--task",
                "copy",
                "--model",
                "rnn-attention",
                "--steps",
                "2",
                "--out",
                str(rnn),
                *TINY_DATA,
                "--emb",
                "8",
                "--hidden",
                "8",
            ]
        )
        == 0
    )
    code, err = cli(
        ["export", "--checkpoint", str(rnn / "checkpoint.pt"), "--out", str(tmp_path / "m.onnx")],
        capsys,
    )
    assert (
        code == 1 and "holds a --model rnn-attention run" in err and "transformer runs only" in err
    )
    assert not (tmp_path / "m.onnx").exists()


def test_without_the_onnx_packages_the_error_says_what_to_install(
    run, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(export_module, "missing_packages", lambda: ["onnxscript"])
    code, err = cli(
        ["export", "--checkpoint", str(run / "checkpoint.pt"), "--out", str(tmp_path / "m.onnx")],
        capsys,
    )
    assert code == 1 and "needs onnxscript" in err and "pip install 'attnbook[export]'" in err
    with pytest.raises(ImportError, match="attnbook\\[export\\]"):
        export_onnx(
            Transformer(8, 8, d_model=8, n_heads=2, n_layers=1, d_ff=8),
            tmp_path / "m.onnx",
            Vocab("abcd"),
            Vocab("abcd"),
        )


def test_export_onnx_checks_its_arguments(tmp_path):
    model = Transformer(8, 9, d_model=8, n_heads=2, n_layers=1, d_ff=8)
    src, tgt = Vocab("abcd"), Vocab("abcde")
    with pytest.raises(TypeError, match="model must be an attnbook Transformer .*got Linear"):
        export_onnx(torch.nn.Linear(2, 2), tmp_path / "m.onnx", src, tgt)
    with pytest.raises(ValueError, match="tgt_vocab has 8 symbols but the model was built for 9"):
        export_onnx(model, tmp_path / "m.onnx", src, src)
    with pytest.raises(TypeError, match="src_vocab must be an attnbook Vocab, got list"):
        export_onnx(model, tmp_path / "m.onnx", list("abcd"), tgt)
    with pytest.raises(ValueError, match="path must name an .onnx file"):
        export_onnx(model, tmp_path / "m.pt", src, tgt)
    with pytest.raises(TypeError, match="info must hold JSON values only"):
        export_onnx(model, tmp_path / "m.onnx", src, tgt, info={"x": object()})
    assert not list(tmp_path.iterdir())
