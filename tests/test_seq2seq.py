"""attnbook.seq2seq: one contract for every seq2seq model, the RNN and the Transformer alike.

The same tests run on each model kind: the shapes of every method's outputs, the padding mask
honoured, the attention layout, teacher forcing equal to step-by-step decoding. A last test
reads the source of the modules that take a model and checks that none of them asks which
kind it holds.
"""

import ast
from pathlib import Path

import pytest
import torch
from torch import nn

import attnbook
from attnbook.attention import padding_mask
from attnbook.decode import beam_search, greedy_decode, sequence_log_prob
from attnbook.rnn import Seq2Seq
from attnbook.seq2seq import Seq2SeqModel, attention_map, check_seq2seq
from attnbook.transformer import Transformer

PAD, BOS, EOS = 0, 1, 2
V_SRC, V_TGT = 11, 9

KINDS = {
    "rnn-additive": lambda: Seq2Seq(V_SRC, V_TGT, emb_dim=8, hidden_dim=16, attention="additive"),
    "rnn-general-lstm-bidirectional": lambda: Seq2Seq(
        V_SRC, V_TGT, emb_dim=8, hidden_dim=16, cell="lstm", bidirectional=True, attention="general"
    ),
    "rnn-fixed-context": lambda: Seq2Seq(V_SRC, V_TGT, emb_dim=8, hidden_dim=16, attention=None),
    "transformer": lambda: Transformer(
        V_SRC, V_TGT, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=32
    ),
}
# (layers, heads) of each kind's attention; None: the model has no attention
LAYOUT = {
    "rnn-additive": (1, 1),
    "rnn-general-lstm-bidirectional": (1, 1),
    "rnn-fixed-context": None,
    "transformer": (2, 2),
}


def build(kind):
    torch.manual_seed(0)
    return KINDS[kind]().eval()


def batch():
    """Two right-padded sources (5 and 3 real tokens) and teacher-forced targets (BOS first)."""
    src = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 10, PAD, PAD]])
    tgt = torch.tensor([[BOS, 3, 4, 5], [BOS, 6, 7, 8]])
    return src, tgt


@pytest.mark.parametrize("kind", KINDS)
def test_every_model_is_a_seq2seq_model(kind):
    model = build(kind)
    assert isinstance(model, Seq2SeqModel)
    check_seq2seq(model)  # no error
    assert model.pad_id == PAD
    assert model.max_len == (32 if kind == "transformer" else None)


def test_other_objects_are_not_and_get_a_clear_error():
    assert not isinstance(nn.Linear(2, 2), Seq2SeqModel)
    with pytest.raises(TypeError, match=r"model must be a seq2seq model .* Linear lacks"):
        check_seq2seq(nn.Linear(2, 2))


@pytest.mark.parametrize("kind", KINDS)
def test_the_shapes_of_every_method(kind):
    model, (src, tgt) = build(kind), batch()
    b, s, t = src.shape[0], src.shape[1], tgt.shape[1]
    with torch.no_grad():
        mask = model.src_mask(src)
        assert mask.dtype == torch.bool and torch.equal(mask, padding_mask(src, PAD))
        assert mask.shape == (b, 1, s)
        memory = model.encode(src)
        assert memory.shape[:2] == (b, s) and memory.is_floating_point()
        logits = model(src, tgt)
        assert logits.shape == (b, t, V_TGT)
        for use_cache in (False, True):
            state = model.init_decoder(src, use_cache=use_cache)
            assert isinstance(state, dict)
            step_logits, state, attention = model.decode_step(tgt[:, :1], state)
            assert step_logits.shape == (b, V_TGT) and isinstance(attention, dict)
            moved = model.reorder_state(state, torch.tensor([1, 1, 0]))
            step2, _, _ = model.decode_step(
                tgt[[1, 1, 0], :2], model.reorder_state(moved, torch.arange(3))
            )
            assert step2.shape == (3, V_TGT)


@pytest.mark.parametrize("kind", KINDS)
def test_the_attention_layout_is_the_same_for_every_model(kind):
    model, (src, tgt) = build(kind), batch()
    layout = LAYOUT[kind]
    if layout is None:  # the fixed context vector: no weights anywhere
        with pytest.raises(ValueError, match="needs an attention model"):
            model(src, tgt, return_attention=True)
        _, _, attention = model.decode_step(tgt[:, :1], model.init_decoder(src))
        assert attention == {}
        return
    n_layers, n_heads = layout
    b, s, t = src.shape[0], src.shape[1], tgt.shape[1]
    with torch.no_grad():
        logits, attention = model(src, tgt, return_attention=True)
        cross = attention["cross"]  # per layer (B, H, T, S)
        assert isinstance(cross, list) and len(cross) == n_layers
        assert all(w.shape == (b, n_heads, t, s) for w in cross)
        stacked = torch.stack(cross, dim=1)  # (B, layers, H, T, S)
        for use_cache in (False, True):
            state = model.init_decoder(src, use_cache=use_cache)
            for i in range(t):
                step, state, att = model.decode_step(tgt[:, : i + 1], state)
                assert att["cross"].shape == (b, n_layers, n_heads, s)
                torch.testing.assert_close(step, logits[:, i], atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(att["cross"], stacked[:, :, :, i], atol=1e-5, rtol=0)
        ids, decoded = greedy_decode(
            model, src, bos_id=BOS, eos_id=EOS, max_len=4, return_attention=True
        )
        assert decoded["cross"].shape == (b, ids.shape[1], n_layers, n_heads, s)
        assert attention_map(decoded["cross"]).shape == (b, ids.shape[1], s)


@pytest.mark.parametrize("kind", [k for k, layout in LAYOUT.items() if layout])
def test_the_padding_mask_is_honoured(kind):
    model, (src, tgt) = build(kind), batch()
    real = src != PAD  # (B, S)
    with torch.no_grad():
        logits, attention = model(src, tgt, return_attention=True)
        for w in attention["cross"]:  # (B, H, T, S)
            assert (w.masked_select(~real[:, None, None, :]) == 0).all()
            torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:3]))
        # the padded row decodes as if it stood alone, without its padding
        alone = model(src[1:, :3], tgt[1:])
        torch.testing.assert_close(logits[1:], alone, atol=1e-5, rtol=1e-5)
        _, _, att = model.decode_step(tgt[:, :1], model.init_decoder(src))
        assert (att["cross"].masked_select(~real[:, None, None, :]) == 0).all()


def test_attention_map_picks_a_layer_and_averages_the_heads():
    w = torch.arange(2 * 3 * 2 * 4, dtype=torch.float).view(2, 3, 2, 4)  # (B, layers, H, K)
    torch.testing.assert_close(attention_map(w), w[:, -1].mean(1))
    torch.testing.assert_close(attention_map(w, layer=0), w[:, 0].mean(1))
    one = torch.rand(5, 1, 1, 7)  # an RNN: one layer, one head
    assert torch.equal(attention_map(one), one[:, 0, 0])
    with pytest.raises(ValueError, match="n_layers, H, K"):
        attention_map(torch.rand(3, 4))


# ------------------------------------------------------------------------------ a third model


class Uniform(nn.Module):
    """The smallest model of the protocol: every next token equally likely (it always picks
    the lowest id, here EOS after the pad and BOS ids are ruled out)."""

    max_len = None

    def __init__(self, vocab=6, pad_id=PAD):
        super().__init__()
        self.vocab, self.pad_id = vocab, pad_id
        self.bias = nn.Parameter(torch.zeros(vocab))

    def src_mask(self, src):
        return padding_mask(src, self.pad_id)

    def encode(self, src):
        return torch.zeros(*src.shape, 1)

    def forward(self, src, tgt, *, return_attention=False):
        logits = self.bias.expand(*tgt.shape, self.vocab)
        return (logits, {}) if return_attention else logits

    def init_decoder(self, src, use_cache=False):
        return {"n": torch.zeros(src.shape[0])}

    def decode_step(self, tokens, state):
        logits = self.bias.expand(tokens.shape[0], self.vocab).clone()
        logits[:, [PAD, BOS]] = -1e9
        return logits, state, {}

    def reorder_state(self, state, index):
        return {k: v.index_select(0, index) for k, v in state.items()}


def test_the_decoders_accept_any_model_of_the_protocol():
    model, src = Uniform(), torch.tensor([[3, 4], [5, PAD]])
    assert isinstance(model, Seq2SeqModel)
    assert greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=5).tolist() == [[2], [2]]
    assert beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=5).tolist() == [[2], [2]]
    log_p = sequence_log_prob(model, src, torch.tensor([[3, EOS], [EOS, PAD]]), bos_id=BOS)
    torch.testing.assert_close(log_p, torch.tensor([-2, -1]) * torch.log(torch.tensor(6.0)))


# ------------------------------------------------------------------------------ no special cases

SRC = Path(attnbook.__file__).parent
# the modules that take a model: they must treat every model of the protocol alike
USERS = (
    ["decode.py", "evaluate.py", "cli.py", "seq2seq.py"]
    + [p.relative_to(SRC).as_posix() for p in sorted((SRC / "widgets").glob("*.py"))]
    + [p.relative_to(SRC).as_posix() for p in sorted((SRC / "viz").glob("*.py"))]
    + [f"train/{name}" for name in ("batches.py", "checkpoint.py", "losses.py", "runtime.py")]
    + [
        f"runs/{name}"
        for name in ("folder.py", "models.py", "report.py", "tasks.py", "training.py")
    ]
)
MODEL_CLASSES = {"Transformer", "Seq2Seq", "AttentionDecoder", "ContextDecoder", "RNNEncoder"}
KIND_ATTRIBUTES = {"has_attention", "attention", "hidden_dim", "d_model", "cell", "n_heads"}
# what a module may ask a model for by name: the protocol, and nn.Module's own training mode
ALLOWED = {"pad_id", "max_len", "src_mask", "encode", "forward", "init_decoder", "decode_step"}
ALLOWED |= {"reorder_state", "training", "train", "eval"}
ALLOWED |= {"src_vocab_size", "tgt_vocab_size"}  # the protocol's optional members


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _is_model(node) -> bool:
    return (isinstance(node, ast.Name) and node.id == "model") or (
        isinstance(node, ast.Attribute) and node.attr == "model"
    )


@pytest.mark.parametrize("name", USERS)
def test_no_module_that_takes_a_model_asks_which_kind_it_is(name):
    tree = ast.parse((SRC / name).read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if node.func.id in ("isinstance", "issubclass") and len(args) == 2:
                if _names(args[1]) & MODEL_CLASSES:
                    found.append(f"line {node.lineno}: {ast.unparse(node)}")
            if node.func.id in ("hasattr", "getattr") and len(args) > 1 and _is_model(args[0]):
                asked = args[1].value if isinstance(args[1], ast.Constant) else None
                if asked is not None and asked not in ALLOWED:
                    found.append(f"line {node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Attribute) and node.attr in KIND_ATTRIBUTES:
            if _is_model(node.value):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    assert not found, f"{name} special-cases a model kind: {found}"
