"""Bad input, everywhere (issue 26): every public name of ``attnbook`` refuses what a caller
can get wrong with a ``ValueError`` or ``TypeError`` that names the argument.

Each :class:`Spec` is one public function or method with a call that works (``good``) and, per
argument, a hypothesis strategy of ways to break that argument alone: its type, its shape, its
element type (floating activations against the module's dtype, token ids of a kind an
embedding cannot read), its device (``meta`` stands for "another device" on a CPU-only
machine), its values (ids outside the vocabulary, sizes below 1, probabilities outside
[0, 1)) and empty dimensions. A test lists ``attnbook.__all__`` and fails when a public name
has neither a spec nor a reason in ``EXEMPT``. The last part checks that loading a checkpoint
is safe: a pickle that would run code does not run it.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnbook as A
from attnbook.cli import main
from attnbook.train import CHECKPOINT_FORMAT, CheckpointError, load_checkpoint

SETTINGS = settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# --------------------------------------------------------------------------------------------
# ways to break one argument: (label, value or function of the good value)
# --------------------------------------------------------------------------------------------


def const(*values):
    return [(repr(v)[:30], v) for v in values]


NOT_TENSOR = [("None", None), ("a list", lambda t: t.tolist()), ("a str", "x"), ("an int", 3)]
META = [("on another device", lambda t: t.to("meta"))]
EMPTY = [("empty batch", lambda t: t[:0]), ("empty length", lambda t: t[:, :0])]
RANK = [("one dimension less", lambda t: t[0]), ("one dimension more", lambda t: t[None])]
FLOAT_KIND = [
    ("int64", lambda t: t.long()),
    ("bool", lambda t: t.bool()),
    ("float64 (the module is float32)", lambda t: t.double()),
]
#: a floating activation of a module, (B, L, d)
ACTIVATION = NOT_TENSOR + FLOAT_KIND + EMPTY + RANK + META
#: a floating operand of a function, (..., L, d), against other float32 operands
OPERAND = (
    NOT_TENSOR
    + FLOAT_KIND
    + [
        ("empty positions", lambda t: t[..., :0, :]),
        ("empty features", lambda t: t[..., :0]),
        ("one dimension", lambda t: t.flatten()),
    ]
    + META
)
#: token ids (B, L), vocabularies of 10 (source) and 11 (target) below
IDS = (
    NOT_TENSOR
    + EMPTY
    + RANK
    + [
        ("float", lambda t: t.float()),
        ("bool", lambda t: t.bool()),
        ("uint8", lambda t: t.to(torch.uint8)),
        ("int16", lambda t: t.to(torch.int16)),
        ("an id above the vocabulary", lambda t: t + 1000),
        ("a negative id", lambda t: t - 1000),
    ]
)
IDS_HERE = IDS + META  # where the ids must be on the model's device (no move)
MASK = [
    ("int64", lambda m: m.long()),
    ("float", lambda m: m.float()),
    ("a list", lambda m: m.tolist()),
    ("a shape that does not broadcast", lambda m: torch.ones(7, 6, 5, dtype=torch.bool)),
    ("on another device", lambda m: m.to("meta")),
]
SIZE = const(0, -3, 2.0, "4", True, None)
SIZE_OR_NONE = const(0, -3, 2.0, "4", True)
PROB = const(1.0, 1.5, -0.1, math.nan, math.inf, "0.1", True, None)
FLAG = const("yes", 1, 0, None, 1.0)


def breaks(*groups) -> st.SearchStrategy:
    return st.sampled_from([b for group in groups for b in group])


# --------------------------------------------------------------------------------------------
# the objects the calls use (small, built once)
# --------------------------------------------------------------------------------------------

torch.manual_seed(0)
V_SRC, V_TGT, D = 10, 11, 8
SRC = torch.randint(1, V_SRC, (2, 5))
TGT = torch.randint(1, V_TGT, (2, 4))
X = torch.randn(2, 3, D)
MEMORY = torch.randn(2, 5, D)
Q, K, V = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
MASK_QK = torch.ones(2, 3, 5, dtype=torch.bool)
MHA = A.MultiHeadAttention(D, 2)
FFN = A.FeedForward(D, 16, 0.0)
SUB = A.SublayerConnection(D, 0.0)
ENC_LAYER, DEC_LAYER = A.EncoderLayer(D, 2, 16, 0.0), A.DecoderLayer(D, 2, 16, 0.0)
ENCODER, DECODER = A.Encoder(D, 2, 1, 16, 0.0), A.Decoder(D, 2, 1, 16, 0.0)
PE = A.PositionalEncoding(D, 10, 0.0)
TRANSFORMER = A.Transformer(V_SRC, V_TGT, D, 2, 1, 16, 0.0, max_len=20).eval()
SEQ2SEQ = A.Seq2Seq(V_SRC, V_TGT, 8, 8, attention="additive").eval()
RNN_ENC = A.RNNEncoder(V_SRC, 8, 8)
CTX_DEC, ATT_DEC = A.ContextDecoder(V_TGT, 8, 8), A.AttentionDecoder(V_TGT, 8, 8, 8)
SCORED = {
    "AdditiveAttention": A.AdditiveAttention(4, 4, 5),
    "GeneralAttention": A.GeneralAttention(4, 4),
    "DotAttention": A.DotAttention(),
}
TASK = A.make_task("copy", 24, 6, 6)


@pytest.fixture(scope="module")
def tsv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tsv") / "pairs.tsv"
    path.write_text("".join(f"a b {i}\tc d {i}\n" for i in range(20)), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# the specs: one public call that works, and the ways to break each of its arguments
# --------------------------------------------------------------------------------------------


@dataclass
class Spec:
    name: str  # the public name ("Transformer") or "Name.method"
    call: object  # call(**kwargs)
    good: dict
    bad: dict = field(default_factory=dict)  # argument -> list of (label, breaker)
    runs_good: bool = True

    def __str__(self):
        return self.name

    __repr__ = __str__


def module_call(module, method="__call__"):
    return lambda **kw: getattr(module, method)(**kw)


def fresh_trainer_model():
    return A.Seq2Seq(len(TASK.src_vocab), len(TASK.tgt_vocab), 8, 8)


SPECS = [
    # ---------------------------------------------------------------- attention functions
    Spec(
        "scaled_dot_product_attention",
        A.scaled_dot_product_attention,
        {"q": Q, "k": K, "v": V, "mask": MASK_QK, "dropout_p": 0.0},
        {"q": OPERAND, "k": OPERAND, "v": OPERAND, "mask": MASK, "dropout_p": PROB},
    ),
    Spec(
        "masked_softmax",
        A.masked_softmax,
        {"scores": torch.randn(2, 3, 5), "mask": MASK_QK},
        {
            "scores": NOT_TENSOR
            + FLOAT_KIND[:2]
            + [("no keys", lambda t: t[..., :0]), ("no queries", lambda t: t[:, :0])]
            + [("one dimension", lambda t: t[0, 0, :1].reshape(()))],
            "mask": MASK,
        },
    ),
    Spec("dot_score", A.dot_score, {"query": Q, "keys": K}, {"query": OPERAND, "keys": OPERAND}),
    Spec(
        "scaled_dot_score",
        A.scaled_dot_score,
        {"query": Q, "keys": K},
        {"query": OPERAND, "keys": OPERAND},
    ),
    Spec(
        "general_score",
        A.general_score,
        {"query": Q, "keys": K, "weight": torch.randn(4, 4)},
        {
            "query": OPERAND,
            "keys": OPERAND,
            "weight": NOT_TENSOR + FLOAT_KIND + [("wrong shape", lambda w: w[:3])] + META,
        },
    ),
    Spec(
        "additive_score",
        A.additive_score,
        {"query": Q, "keys": K, "w_a": torch.randn(7, 8), "v_a": torch.randn(7)},
        {
            "query": OPERAND,
            "keys": OPERAND,
            "w_a": NOT_TENSOR + FLOAT_KIND + [("no rows", lambda w: w[:0])] + META,
            "v_a": NOT_TENSOR + FLOAT_KIND + [("wrong size", lambda v: v[:3])] + META,
        },
    ),
    Spec(
        "padding_mask",
        A.padding_mask,
        {"lengths_or_tokens": TGT, "pad_id": 0},
        {
            "lengths_or_tokens": NOT_TENSOR + EMPTY + [("float", lambda t: t.float())],
            "pad_id": const("0", 0.5, True),
        },
    ),
    Spec(
        "padding_mask(lengths)",
        A.padding_mask,
        {"lengths_or_tokens": torch.tensor([3, 1]), "max_len": 4},
        {
            "lengths_or_tokens": [("negative", lambda t: -t), ("empty", lambda t: t[:0])],
            "max_len": const(0, 2, 2.0, "4"),
        },
    ),
    Spec(
        "causal_mask",
        A.causal_mask,
        {"n": 3, "device": "cpu"},
        {"n": SIZE, "device": const("gpu7", 3, "", ["cpu"])},
    ),
    Spec(
        "make_attention",
        A.make_attention,
        {"score": "additive", "query_dim": 4, "key_dim": 4, "hidden_dim": 5},
        {
            "score": const("cosine", 3, None),
            "query_dim": SIZE,
            "key_dim": SIZE,
            "hidden_dim": SIZE_OR_NONE,
        },
    ),
    # ---------------------------------------------------------------- attention modules
    Spec(
        "MultiHeadAttention",
        A.MultiHeadAttention,
        {"d_model": 8, "n_heads": 2, "dropout": 0.1, "bias": True},
        {
            "d_model": SIZE + const(7),
            "n_heads": SIZE + const(3),
            "dropout": PROB,
            "bias": FLAG,
        },
    ),
    Spec(
        "MultiHeadAttention.forward",
        module_call(MHA),
        {"query": X, "key": MEMORY, "value": MEMORY, "mask": MASK_QK, "need_weights": True},
        {
            "query": ACTIVATION,
            "key": ACTIVATION,
            "value": ACTIVATION,
            "mask": MASK,
            "need_weights": FLAG,
        },
    ),
    *(
        Spec(
            f"{name}.forward",
            module_call(module),
            {"query": torch.randn(2, 4), "keys": K, "values": V, "mask": MASK_QK[:, 0]},
            {
                "query": NOT_TENSOR
                + FLOAT_KIND[:2]
                + [("no batch", lambda t: t[:0]), ("no features", lambda t: t[:, :0])]
                + [("one dimension", lambda t: t[0])]
                + META,
                "keys": ACTIVATION[:6] + EMPTY + RANK + META,
                "values": ACTIVATION[1:6] + EMPTY + RANK + META,  # None: the keys
                "mask": MASK,
            },
        )
        for name, module in SCORED.items()
    ),
    Spec(
        "AdditiveAttention",
        A.AdditiveAttention,
        {"query_dim": 4, "key_dim": 4, "hidden_dim": 5},
        {"query_dim": SIZE, "key_dim": SIZE, "hidden_dim": SIZE},
    ),
    Spec(
        "GeneralAttention",
        A.GeneralAttention,
        {"query_dim": 4, "key_dim": 4},
        {"query_dim": SIZE, "key_dim": SIZE},
    ),
    Spec("DotAttention", A.DotAttention, {"scaled": True}, {"scaled": FLAG}),
    # ---------------------------------------------------------------- positions
    Spec(
        "sinusoidal_encoding",
        A.sinusoidal_encoding,
        {"n_positions": 5, "d_model": 8, "base": 10000.0},
        {
            "n_positions": SIZE,
            "d_model": SIZE + const(3),
            "base": const(0.0, -5.0, 1.0, math.nan, math.inf, "1e4", None),
        },
    ),
    Spec(
        "PositionalEncoding",
        A.PositionalEncoding,
        {"d_model": 8, "max_len": 10, "dropout": 0.1, "kind": "sinusoidal"},
        {"d_model": SIZE, "max_len": SIZE, "dropout": PROB, "kind": const("rope", None, 1)},
    ),
    Spec(
        "PositionalEncoding.forward",
        module_call(PE),
        {"x": X, "offset": 0},
        {
            "x": ACTIVATION + [("longer than max_len", lambda t: torch.randn(2, 11, D))],
            "offset": const(-1, 1.5, "0", 8),
        },
    ),
    # ---------------------------------------------------------------- Transformer parts
    Spec(
        "FeedForward",
        A.FeedForward,
        {"d_model": 8, "d_ff": 16, "dropout": 0.1},
        {"d_model": SIZE, "d_ff": SIZE, "dropout": PROB},
    ),
    Spec(
        "FeedForward.forward",
        module_call(FFN),
        {"x": X},
        {"x": NOT_TENSOR + FLOAT_KIND + EMPTY + META + [("wrong d_model", lambda t: t[..., :5])]},
    ),
    Spec(
        "SublayerConnection",
        A.SublayerConnection,
        {"d_model": 8, "dropout": 0.1, "norm_first": False},
        {"d_model": SIZE, "dropout": PROB, "norm_first": FLAG},
    ),
    Spec(
        "SublayerConnection.forward",
        module_call(SUB),
        {"x": X, "sublayer": FFN},
        {
            "x": NOT_TENSOR + FLOAT_KIND + EMPTY + META + [("wrong d", lambda t: t[..., :5])],
            "sublayer": const(None, 3, "ffn"),
        },
    ),
    *(
        Spec(
            name,
            cls,
            {"d_model": 8, "n_heads": 2, "d_ff": 16, "dropout": 0.1, "norm_first": True},
            {
                "d_model": SIZE + const(7),
                "n_heads": SIZE + const(3),
                "d_ff": SIZE,
                "dropout": PROB,
                "norm_first": FLAG,
            },
        )
        for name, cls in (("EncoderLayer", A.EncoderLayer), ("DecoderLayer", A.DecoderLayer))
    ),
    *(
        Spec(
            name,
            cls,
            {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "norm_first": False},
            {"n_layers": SIZE, "d_model": SIZE, "n_heads": SIZE, "norm_first": FLAG},
        )
        for name, cls in (("Encoder", A.Encoder), ("Decoder", A.Decoder))
    ),
    *(
        Spec(
            f"{name}.forward",
            module_call(module),
            {"x": X, "mask": MASK_QK[:, :, :3], "need_weights": True},
            {"x": ACTIVATION, "mask": MASK, "need_weights": FLAG},
        )
        for name, module in (("EncoderLayer", ENC_LAYER), ("Encoder", ENCODER))
    ),
    *(
        Spec(
            f"{name}.forward",
            module_call(module),
            {
                "x": X,
                "memory": MEMORY,
                "tgt_mask": torch.ones(3, 3, dtype=torch.bool).tril(),
                "memory_mask": MASK_QK,
                "need_weights": True,
            },
            {
                "x": ACTIVATION,
                "memory": ACTIVATION,
                "tgt_mask": MASK,
                "memory_mask": MASK,
                "need_weights": FLAG,
            },
        )
        for name, module in (("DecoderLayer", DEC_LAYER), ("Decoder", DECODER))
    ),
    # ---------------------------------------------------------------- the Transformer
    Spec(
        "Transformer",
        A.Transformer,
        {
            "src_vocab_size": 10,
            "tgt_vocab_size": 10,
            "d_model": 8,
            "n_heads": 2,
            "n_layers": 1,
            "d_ff": 16,
            "dropout": 0.1,
            "max_len": 20,
            "norm_first": False,
            "share_embeddings": True,
            "tie_output": False,
            "pad_id": 0,
            "positional": "sinusoidal",
        },
        {
            "src_vocab_size": SIZE + const(5),  # 5: share_embeddings needs equal sizes
            "tgt_vocab_size": SIZE,
            "d_model": SIZE + const(7),
            "n_heads": SIZE + const(3),
            "n_layers": SIZE,
            "d_ff": SIZE,
            "dropout": PROB,
            "max_len": SIZE,
            "norm_first": FLAG,
            "share_embeddings": FLAG,
            "tie_output": FLAG,
            "pad_id": const(-1, 10, "0", 0.0, True),
            "positional": const("rotary", 1),
        },
    ),
    Spec(
        "Transformer.forward",
        module_call(TRANSFORMER),
        {"src": SRC, "tgt": TGT, "return_attention": True},
        {
            "src": IDS_HERE + [("longer than max_len", lambda t: t.repeat(1, 5))],
            "tgt": IDS_HERE + [("another batch size", lambda t: t[:1])],
            "return_attention": FLAG,
        },
    ),
    Spec(
        "Transformer.encode",
        module_call(TRANSFORMER, "encode"),
        {"src": SRC, "src_mask": MASK_QK[:, :1], "return_attention": False},
        {"src": IDS_HERE, "src_mask": MASK, "return_attention": FLAG},
    ),
    Spec(
        "Transformer.decode",
        module_call(TRANSFORMER, "decode"),
        {"tgt": TGT, "memory": MEMORY, "memory_mask": MASK_QK[:, :1]},
        {"tgt": IDS_HERE, "memory": ACTIVATION, "memory_mask": MASK},
    ),
    Spec(
        "Transformer.init_decoder",
        module_call(TRANSFORMER, "init_decoder"),
        {"src": SRC, "use_cache": True},
        {"src": IDS_HERE, "use_cache": FLAG},
    ),
    *(
        Spec(
            f"Transformer.decode_step(use_cache={cache})",
            module_call(TRANSFORMER, "decode_step"),
            {"tokens": TGT[:, :1], "state": TRANSFORMER.init_decoder(SRC, use_cache=cache)},
            {
                "tokens": IDS_HERE[:4]
                + [(label, b) for label, b in IDS_HERE[6:] if label != "an id above the vocabulary"]
                + [("an id above the vocabulary", lambda t: t + V_TGT)],
                "state": const(None, [1], {}, {"memory": 1}),
            },
        )
        for cache in (False, True)
    ),
    Spec(
        "count_parameters",
        A.count_parameters,
        {"model": MHA, "trainable_only": True},
        {"model": const(None, "m", 3), "trainable_only": FLAG},
    ),
    Spec("parameter_breakdown", A.parameter_breakdown, {"model": MHA}, {"model": const(None, 3)}),
    Spec(
        "to_torch_transformer",
        A.to_torch_transformer,
        {"model": TRANSFORMER},
        {"model": const(None, "t") + [("another module", MHA)]},
    ),
    # ---------------------------------------------------------------- RNN models
    Spec(
        "RNNEncoder",
        A.RNNEncoder,
        {"vocab_size": 10, "emb_dim": 8, "hidden_dim": 8, "cell": "gru", "bidirectional": True},
        {
            "vocab_size": SIZE,
            "emb_dim": SIZE,
            "hidden_dim": SIZE,
            "cell": const("rnn3", None),
            "bidirectional": FLAG,
            "dropout": PROB,
            "pad_id": const(-1, 10, "0", True),
        },
    ),
    Spec("RNNEncoder.forward", module_call(RNN_ENC), {"src": SRC}, {"src": IDS_HERE}),
    Spec(
        "ContextDecoder",
        A.ContextDecoder,
        {"vocab_size": 11, "emb_dim": 8, "hidden_dim": 8},
        {"vocab_size": SIZE, "emb_dim": SIZE, "hidden_dim": SIZE, "cell": const("x", 3)},
    ),
    Spec(
        "ContextDecoder.forward",
        module_call(CTX_DEC),
        {"tgt_in": TGT, "context": torch.randn(2, 8)},
        {
            "tgt_in": IDS_HERE,
            # the decoder's argument is its initial state: the messages call it state
            "context": NOT_TENSOR[:1]
            + FLOAT_KIND
            + [("wrong size", lambda t: t[:, :5]), ("one dimension more", lambda t: t[None])]
            + META,
        },
    ),
    Spec(
        "AttentionDecoder",
        A.AttentionDecoder,
        {"vocab_size": 11, "emb_dim": 8, "hidden_dim": 8, "memory_dim": 8},
        {
            "vocab_size": SIZE,
            "memory_dim": SIZE,
            "score": const("cosine", None),
            "attn_dim": SIZE_OR_NONE,
        },
    ),
    Spec(
        "AttentionDecoder.forward",
        module_call(ATT_DEC),
        {
            "tgt_in": TGT,
            "state": torch.randn(2, 8),
            "memory": MEMORY,
            "src_mask": torch.ones(2, 5, dtype=torch.bool),
        },
        {
            "tgt_in": IDS_HERE,
            "state": NOT_TENSOR[:1] + FLOAT_KIND + [("wrong size", lambda t: t[:, :5])] + META,
            "memory": ACTIVATION + [("wrong size", lambda t: t[..., :5])],
            "src_mask": MASK[:4],
        },
    ),
    Spec(
        "Seq2Seq",
        A.Seq2Seq,
        {"src_vocab_size": 10, "tgt_vocab_size": 11, "attention": "additive", "attn_dim": 4},
        {
            "src_vocab_size": SIZE,
            "tgt_vocab_size": SIZE,
            "emb_dim": SIZE,
            "hidden_dim": SIZE,
            "cell": const("rnn3", None),
            "bidirectional": FLAG,
            "attention": const("cosine", 1),
            "pad_id": const(-1, 10, "0"),
            "dropout": PROB,
            "attn_dim": SIZE_OR_NONE,
        },
    ),
    Spec(
        "Seq2Seq.forward",
        module_call(SEQ2SEQ),
        {"src": SRC, "tgt_in": TGT, "return_attention": True},
        {
            "src": IDS_HERE,
            "tgt_in": IDS_HERE + [("another batch size", lambda t: t[:1])],
            "return_attention": FLAG,
        },
    ),
    Spec(
        "Seq2Seq.decode_step",
        module_call(SEQ2SEQ, "decode_step"),
        {"tokens": TGT[:, :1], "state": SEQ2SEQ.init_decoder(SRC)},
        {"tokens": IDS_HERE, "state": const(None, [1], {})},
    ),
    # ---------------------------------------------------------------- decoding
    *(
        Spec(
            f"{fn.__name__}({type(model).__name__})",
            fn,
            {"model": model, "src": SRC, "bos_id": 1, "eos_id": 2, "max_len": 4},
            {
                "model": const(None, "model") + [("a module that is not seq2seq", MHA)],
                "src": IDS,  # moved to the model's device, so any device
                "bos_id": const(-1, 11, 99, "1", 1.0, None),
                "eos_id": const(-1, 11, 99, "2", 2.0, None),
                "max_len": SIZE,
                "use_cache": FLAG,
                "return_attention": FLAG,
                **(
                    {"beam_size": SIZE, "length_penalty": PROB[2:]} if "beam" in fn.__name__ else {}
                ),
            },
        )
        for fn in (A.greedy_decode, A.beam_search)
        for model in (TRANSFORMER, SEQ2SEQ)
    ),
    Spec(
        "sequence_log_prob",
        A.sequence_log_prob,
        {"model": TRANSFORMER, "src": SRC, "ids": TGT, "bos_id": 1},
        {
            "model": const(None, "model"),
            "src": IDS,
            "ids": IDS + [("another batch size", lambda t: t[:1])],
            "bos_id": const(-1, 11, "1", None),
        },
    ),
    # ---------------------------------------------------------------- training
    Spec(
        "label_smoothed_loss",
        A.label_smoothed_loss,
        {"logits": torch.randn(2, 4, V_TGT), "targets": TGT, "pad_id": 0, "smoothing": 0.1},
        {
            "logits": NOT_TENSOR + [("int64", lambda t: t.long())] + EMPTY + RANK,
            "targets": IDS[:4]
            + [("float", lambda t: t.float()), ("a class above V", lambda t: t + V_TGT)]
            + [("a negative class", lambda t: -t), ("only padding", lambda t: t * 0)]
            + [
                ("another length", lambda t: t[:, :3]),
                ("on another device", lambda t: t.to("meta")),
            ],
            "pad_id": const(-1, V_TGT, "0", None),
            "smoothing": PROB,
            "reduction": const("avg", None),
        },
    ),
    Spec(
        "noam_lr",
        A.noam_lr,
        {"step": 1, "d_model": 8, "warmup": 10, "scale": 1.0},
        {
            "step": const(-1, 1.5, "1", None),
            "d_model": SIZE,
            "warmup": SIZE,
            "scale": const(0.0, -1.0, math.nan, math.inf, "1"),
        },
    ),
    Spec(
        "TrainConfig",
        A.TrainConfig,
        {"steps": 5, "batch_size": 4},
        {
            "steps": const(0, -1, 2.5, "5"),
            "batch_size": SIZE,
            "lr": const(0.0, -1.0, math.nan, math.inf, "0.1"),
            "label_smoothing": PROB,
            "device": const("tpu", 3),
            "optimizer": const("lion", None),
            "schedule": const("zigzag", None),
            "weight_decay": const(-1.0, math.nan, "0"),
            "grad_clip": const(0.0, -1.0, math.nan),
            "amp": FLAG[:2],
            "bucket": FLAG,
            "compile": FLAG,
            "progress": FLAG,
        },
    ),
    Spec(
        "Trainer",
        A.Trainer,
        {"model": fresh_trainer_model(), "train_data": TASK},
        {
            "model": const(None, "m")
            + [("not a seq2seq module", MHA)]
            + [("a vocabulary too small", A.Seq2Seq(3, 3, 8, 8))]
            + [("another pad_id", A.Seq2Seq(20, 20, 8, 8, pad_id=5))],
            "train_data": const(None, 5, "pairs", []),
            "config": const({"steps": 3}, 3),
            "meta": const([1], "m"),
        },
    ),
    Spec(
        "train_model",
        A.train_model,
        {"model": fresh_trainer_model(), "task": TASK, "steps": 1, "batch_size": 4},
        {
            "model": const(None) + [("a vocabulary too small", A.Seq2Seq(3, 3, 8, 8))],
            "task": const(None, [("a", "b")]),
            "steps": const(0, -1, 2.5),
            "batch_size": SIZE,
        },
        runs_good=False,  # a real (short) training run: test_train covers it
    ),
    # ---------------------------------------------------------------- data
    Spec(
        "make_task",
        A.make_task,
        {"name": "copy", "n_train": 10, "n_val": 2, "n_test": 2, "seed": 0},
        {
            "name": const("poetry", 3, None),
            "n_train": SIZE,
            "n_val": const(-1, 2.0, "2", None),
            "n_test": const(-1, 2.0, "2", None),
            "seed": const(-1, "0", 0.5),
        },
    ),
    Spec(
        "length_controlled",
        A.length_controlled,
        {"task": "copy", "lengths": [3, 4], "n_per_length": 2},
        {
            "task": const("poetry", 3, None),
            "lengths": const([], [0], [2.5], "3", None, [-1]),
            "n_per_length": SIZE,
        },
    ),
    Spec(
        "Vocab",
        A.Vocab,
        {"symbols": ["a", "b"], "level": "char", "unknown": "error"},
        {
            "symbols": const(None, 3, ["a", "a"], [1, 2], [""], ["ab"]),
            "level": const("byte", 3, None),
            "unknown": const("skip", None),
        },
    ),
    Spec(
        "make_loader",
        A.make_loader,
        {"data": TASK.train, "src_vocab": TASK.src_vocab, "tgt_vocab": TASK.tgt_vocab},
        {
            "data": const(None, 5, "pairs", []),
            "src_vocab": const(None, "v", {"a": 1}),
            "tgt_vocab": const(None, "v"),
            "batch_size": SIZE,
            "shuffle": FLAG,
            "bucket": FLAG,
            "drop_last": FLAG,
            "seed": const(-1, "0", None),
            "num_workers": const(-1, 1.5, "2"),
        },
    ),
    Spec(
        "load_tsv",
        A.load_tsv,
        {"path": "TSV"},
        {
            "path": const(None, 3),
            "level": const("byte", None),
            "min_len": const(0, 1.5, 99),
            "max_len": SIZE,
            "val_fraction": PROB,
            "test_fraction": PROB,
            "min_freq": SIZE,
            "max_pairs": const(0, -1, 2.5),
            "seed": const(-1, "0"),
        },
    ),
    # ---------------------------------------------------------------- notebook helpers
    Spec(
        "seed_everything",
        A.seed_everything,
        {"seed": 0},
        {"seed": const(-1, 2**40, "0", 0.5, True)},
    ),
    Spec("get_device", A.get_device, {"preference": "cpu"}, {"preference": const("tpu", 3, None)}),
    Spec(
        "setup_notebook",
        A.setup_notebook,
        {"seed": 0, "device": "cpu", "threads": None},
        {"seed": const(-1, "0"), "device": const("tpu", 3), "threads": const(0, -2, 1.5, "2")},
    ),
    Spec(
        "best_time",
        A.best_time,
        {"fn": lambda: None, "repeats": 2, "number": 1},
        {"fn": const(None, 3), "repeats": SIZE, "number": SIZE},
    ),
    Spec(
        "glue",
        A.glue,
        {"name": "x", "value": 1.0, "display": False, "digits": 3},
        {"name": const(3, "", "a b", None), "display": FLAG, "digits": const(0, 18, 2.5, "3")},
    ),
    Spec(
        "show_source", A.show_source, {"obj": A.masked_softmax}, {"obj": const(3, None, "x", math)}
    ),
    Spec(
        "check",
        A.check,
        {"got": 1.0, "want": 1.0, "name": "x", "atol": 1e-5, "rtol": 1e-4},
        {
            "name": const(3, None),
            "atol": const(-1.0, math.nan, "1"),
            "rtol": const(-1.0, math.nan, "1"),
        },
    ),
]

#: public names that take no argument a caller could get wrong
EXEMPT = {
    "TASKS": "a constant: the task names and what each task asks (a dict, nothing to call)",
    "CheckpointError": "an exception type the package raises (its message is the package's)",
    "NonFiniteLossError": "an exception type the trainer raises with its own numbers",
    "Seq2SeqModel": "a typing.Protocol, never instantiated (checked by isinstance only)",
}

CASES = [(spec, arg) for spec in SPECS for arg in spec.bad]


def resolve(value, tsv_path):
    return tsv_path if isinstance(value, str) and value == "TSV" else value


def good_kwargs(spec: Spec, tsv_path) -> dict:
    return {k: resolve(v, tsv_path) for k, v in spec.good.items()}


# --------------------------------------------------------------------------------------------
# the tests
# --------------------------------------------------------------------------------------------


def test_every_public_name_is_covered():
    covered = {spec.name.split(".")[0].split("(")[0] for spec in SPECS}
    missing = set(A.__all__) - covered - set(EXEMPT)
    assert not missing, f"public names with no bad-input spec and no reason in EXEMPT: {missing}"
    assert not set(EXEMPT) & covered, "a name is both exempt and covered"
    assert set(EXEMPT) <= set(A.__all__), "EXEMPT names what attnbook does not export"
    assert all(spec.bad for spec in SPECS), "a spec breaks no argument"


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_the_good_call_works(spec, tsv):
    if not spec.runs_good:
        pytest.skip("covered by its own module's tests")
    spec.call(**good_kwargs(spec, tsv))


@pytest.mark.parametrize("spec, arg", CASES, ids=[f"{s.name}-{a}" for s, a in CASES])
@SETTINGS
@given(data=st.data())
def test_a_bad_argument_is_named(spec, arg, tsv, data):
    label, breaker = data.draw(st.sampled_from(spec.bad[arg]), label=f"{arg} broken as")
    kwargs = good_kwargs(spec, tsv)
    good = kwargs.get(arg)
    kwargs[arg] = breaker(good) if callable(breaker) and not _is_value(breaker) else breaker
    with pytest.raises((ValueError, TypeError)) as info:
        spec.call(**kwargs)
    message = str(info.value)
    wanted = arg
    if spec.name == "ContextDecoder.forward" and arg == "context" and "state" in message:
        wanted = "state"  # the decoder's state, s_0: its shape errors call it so
    if spec.name == "get_device":
        wanted = "device"  # preference names the device
    if spec.name == "Trainer" and arg == "model" and "vocabular" in label:
        wanted = "vocab_size"
    if spec.name == "Trainer" and arg == "model" and "pad_id" in label:
        wanted = "pad_id"
    if spec.name == "train_model" and arg == "model" and "vocabular" in label:
        wanted = "vocab_size"
    if spec.name == "Trainer" and arg == "train_data" and label == "[]":
        wanted = "pairs"
    if spec.name == "Vocab" and arg == "symbols" and label in ("['ab']",):
        wanted = "symbol"
    assert wanted in message or wanted.replace("_", " ") in message, (
        f"{spec.name}: {arg} broken as {label} gave {type(info.value).__name__}: {message}"
    )
    assert "Traceback" not in message and "\n" not in message.strip()


def _is_value(x) -> bool:
    """A breaker that is itself the bad value (a module, a function to pass as fn)."""
    return isinstance(x, (torch.nn.Module, type)) or x is math


# --------------------------------------------------------------------------------------------
# the checks step aside where they must: under tracing, inside the training step
# --------------------------------------------------------------------------------------------


def test_checks_step_aside_inside_a_checked_call_and_under_tracing(monkeypatch):
    from attnbook._checks import checked, unchecked

    calls = []
    spied = checked(lambda self, x: calls.append(1))(A.FeedForward.forward.__wrapped__)
    monkeypatch.setattr(A.FeedForward, "forward", spied)
    layer = A.EncoderLayer(D, 2, 16, 0.0)
    layer.feed_forward(X)  # called at the edge: checked once
    assert calls == [1]
    layer(X)  # inside the layer's checked forward: the layer checked its input already
    with unchecked():  # the trainer's steps after the first
        layer.feed_forward(X)
    torch.jit.trace(layer.feed_forward, (X,), check_trace=False)
    assert calls == [1], "a check ran inside a checked call, under unchecked or while tracing"


# --------------------------------------------------------------------------------------------
# the command line: each command names the option it refuses, in one line
# --------------------------------------------------------------------------------------------


@SETTINGS
@given(
    option=st.sampled_from(["--steps", "--batch-size", "--d-model", "--n-train"]),
    value=st.one_of(st.integers(max_value=0), st.sampled_from(["x", "1.5", ""])),
)
def test_cli_train_names_a_bad_option(option, value, capsys):
    try:
        code = main(["train", "--task", "copy", option, str(value)])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code in (1, 2), err
    assert option in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("command", ["evaluate", "translate"])
def test_cli_refuses_a_file_that_is_not_a_checkpoint(command, tmp_path, capsys):
    path = tmp_path / "notes.pt"
    path.write_text("not a checkpoint\n")
    argv = [command, "--checkpoint", str(path)] + (["hello"] if command == "translate" else [])
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "corrupt or not a checkpoint" in err and len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------------------------
# loading is safe
# --------------------------------------------------------------------------------------------


class _Payload:
    """Unpickled by a plain pickle, this would create ``target`` (a harmless side effect)."""

    def __init__(self, target: Path):
        self.target = target

    def __reduce__(self):
        return (Path.touch, (self.target,))


def _checkpoint(**changes) -> dict:
    ckpt = {"format": CHECKPOINT_FORMAT, "step": 0, "model": {"w": torch.zeros(2)}}
    ckpt.update(changes)
    return ckpt


def test_a_pickle_that_would_run_code_does_not_run(tmp_path):
    target = tmp_path / "created_by_the_payload"
    for i, write in enumerate(
        (
            lambda f: torch.save(_checkpoint(extra=_Payload(target)), f),  # zip format
            lambda f: pickle.dump(_checkpoint(extra=_Payload(target)), f),  # a bare pickle
        )
    ):
        path = tmp_path / f"evil{i}.pt"
        with open(path, "wb") as f:
            write(f)
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path)
        assert not target.exists(), "loading the checkpoint ran code from the file"
        assert "\n" not in str(info.value) and "not a checkpoint" in str(info.value)
    with open(tmp_path / "evil0.pt", "rb") as f:  # the payload is real: pickle runs it
        try:
            torch.load(f, weights_only=False)
        except Exception:  # noqa: BLE001 (what it returns does not matter)
            pass
    assert target.exists()


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda p: p.write_bytes(b"\x00\x01garbage" * 50), "corrupt or not a checkpoint"),
        (lambda p: p.write_text("step,loss\n1,2.0\n"), "corrupt or not a checkpoint"),
        (lambda p: torch.save({"weights": torch.zeros(3)}, p), "not an attnbook training"),
        (lambda p: torch.save([1, 2, 3], p), "not an attnbook training"),
        (
            lambda p: torch.save(_checkpoint(format="attnbook-checkpoint-0"), p),
            "another version of attnbook",
        ),
        (
            lambda p: torch.save(_checkpoint(format="attnbook-checkpoint-2"), p),
            "another version of attnbook",
        ),
        (lambda p: None, "does not exist"),
    ],
)
def test_a_bad_checkpoint_file_gets_one_clear_line(make, words, tmp_path):
    path = tmp_path / "checkpoint.pt"
    make(path)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_a_truncated_checkpoint_gets_one_clear_line(tmp_path):
    path = tmp_path / "checkpoint.pt"
    torch.save(_checkpoint(model={"w": torch.randn(1000)}), path)
    load_checkpoint(path)  # whole, it loads
    data = path.read_bytes()
    for keep in (len(data) // 2, 100, 10):
        path.write_bytes(data[:keep])
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(path)
        assert "corrupt or not a checkpoint" in str(info.value)
        assert "\n" not in str(info.value)


def test_a_checkpoint_of_another_model_kind_is_refused():
    trainer = A.Trainer(fresh_trainer_model(), TASK, config=A.TrainConfig(steps=1, progress=False))
    ckpt = trainer.state_dict()
    ckpt["model_class"] = "Transformer"
    with pytest.raises(CheckpointError, match="holds a Transformer, not a Seq2Seq"):
        trainer.load_checkpoint(ckpt)
