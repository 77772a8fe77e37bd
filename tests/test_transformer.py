"""attnbook.transformer: shapes, equivalence with torch.nn.Transformer, invariants, parameters."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnbook.positional import PositionalEncoding, sinusoidal_encoding
from attnbook.transformer import (
    Decoder,
    Encoder,
    FeedForward,
    SublayerConnection,
    Transformer,
    count_parameters,
    parameter_breakdown,
    to_torch_transformer,
)

FAST = settings(max_examples=12, deadline=None)
PAD = 0


def tiny(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(d_model=16, n_heads=4, n_layers=2, d_ff=32, dropout=0.1, max_len=20)
    cfg.update(kw)
    return Transformer(11, 13, **cfg).eval()


def batch(seed=0, b=3, s=7, t=5):
    """Random source/target ids with some right padding (never in the first position)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, 11, (b, s), generator=g)
    tgt = torch.randint(1, 13, (b, t), generator=g)
    src[1, s - 3 :] = PAD
    tgt[-1, t - 2 :] = PAD
    return src, tgt


# ------------------------------------------------------------------------------ building blocks


def test_feed_forward_is_two_linear_maps_with_relu_between():
    torch.manual_seed(0)
    ffn = FeedForward(6, 10, dropout=0.0)
    x = torch.randn(2, 3, 6)
    expected = (
        torch.relu(x @ ffn.linear1.weight.T + ffn.linear1.bias) @ ffn.linear2.weight.T
        + ffn.linear2.bias
    )
    torch.testing.assert_close(ffn(x), expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_sublayer_connection_post_and_pre_ln(norm_first):
    torch.manual_seed(0)
    res = SublayerConnection(6, dropout=0.0, norm_first=norm_first)
    with torch.no_grad():
        res.norm.weight.uniform_(0.5, 1.5)
        res.norm.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 3, 6)
    double = lambda h: 2 * h  # noqa: E731
    ln = nn.functional.layer_norm(x, (6,), res.norm.weight, res.norm.bias)
    expected = (
        x + 2 * ln
        if norm_first
        else nn.functional.layer_norm(x + 2 * x, (6,), res.norm.weight, res.norm.bias)
    )
    torch.testing.assert_close(res(x, double), expected)
    out, extra = res(x, lambda h: (double(h), "weights"))  # (output, extra) passes through
    torch.testing.assert_close(out, expected)
    assert extra == "weights"


@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_have_a_final_norm_only_pre_ln(norm_first):
    enc, dec = (
        Encoder(8, 2, 3, 16, norm_first=norm_first),
        Decoder(8, 2, 3, 16, norm_first=norm_first),
    )
    assert len(enc.layers) == len(dec.layers) == 3
    assert (enc.norm is not None) == norm_first and (dec.norm is not None) == norm_first
    x, mem = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
    out, w = enc.eval()(x)
    assert out.shape == (2, 4, 8) and w is None
    out, self_w, cross_w = dec.eval()(x, mem, need_weights=True)
    assert out.shape == (2, 4, 8)
    assert [tuple(w.shape) for w in self_w] == [(2, 2, 4, 4)] * 3
    assert [tuple(w.shape) for w in cross_w] == [(2, 2, 4, 5)] * 3


# ------------------------------------------------------------------------------ the model


def test_forward_shapes_and_attention_of_every_layer():
    model = tiny()
    src, tgt = batch()
    logits, att = model(src, tgt, return_attention=True)
    assert logits.shape == (3, 5, 13)
    assert set(att) == {"encoder_self", "decoder_self", "cross"}
    assert [tuple(w.shape) for w in att["encoder_self"]] == [(3, 4, 7, 7)] * 2
    assert [tuple(w.shape) for w in att["decoder_self"]] == [(3, 4, 5, 5)] * 2
    assert [tuple(w.shape) for w in att["cross"]] == [(3, 4, 5, 7)] * 2
    # the fused path (no weights kept) gives the same logits
    torch.testing.assert_close(model(src, tgt), logits, atol=1e-5, rtol=1e-5)
    # masks were built from pad_id: no weight on source padding, none on the future
    for w in att["encoder_self"] + att["cross"]:
        assert (w[1, ..., -3:] == 0).all()
    for w in att["decoder_self"]:
        assert (w.triu(diagonal=1) == 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 5))


def test_embeddings_are_scaled_by_sqrt_d_model_and_positions_added():
    model = tiny(dropout=0.0)
    src, _ = batch()
    seen = {}
    model.encoder.layers[0].register_forward_pre_hook(lambda m, args: seen.update(x=args[0]))
    model.encode(src)
    expected = model.src_embed.weight[src] * math.sqrt(16) + sinusoidal_encoding(7, 16)
    torch.testing.assert_close(seen["x"], expected)


def test_encode_decode_equal_forward_and_decode_step_is_the_last_position():
    model = tiny()
    src, tgt = batch()
    memory = model.encode(src)
    logits = model.decode(tgt, memory, memory_mask=model.src_mask(src))
    torch.testing.assert_close(logits, model(src, tgt))
    state = model.init_decoder(src)
    step_logits, state2, att = model.decode_step(tgt, state)
    torch.testing.assert_close(step_logits, logits[:, -1])
    assert state2 is state
    assert att["cross"].shape == (3, 2, 4, 7) and att["decoder_self"].shape == (3, 2, 4, 5)
    _, full = model(src, tgt, return_attention=True)
    torch.testing.assert_close(att["cross"][:, 1], full["cross"][1][:, :, -1])
    index = torch.tensor([2, 2, 0])
    reordered = model.reorder_state(state, index)
    torch.testing.assert_close(reordered["memory"], state["memory"][index])
    torch.testing.assert_close(reordered["memory_mask"], state["memory_mask"][index])


def test_dropout_acts_in_training_only_and_models_are_deterministic_from_the_seed():
    a, b = tiny(seed=3), tiny(seed=3)
    for pa, pb in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)
    src, tgt = batch()
    torch.testing.assert_close(a(src, tgt), a(src, tgt))
    a.train()
    torch.manual_seed(0)
    first = a(src, tgt)
    torch.manual_seed(0)
    torch.testing.assert_close(a(src, tgt), first)  # same seed, same masks
    assert not torch.allclose(first, a(src, tgt))  # new dropout masks


def test_learned_positions_and_no_positions():
    learned = tiny(positional="learned")
    assert isinstance(learned.src_pos, PositionalEncoding) and learned.src_pos.kind == "learned"
    src, tgt = batch()
    assert learned(src, tgt).shape == (3, 5, 13)
    base = count_parameters(tiny())
    assert count_parameters(learned) == base + 2 * 20 * 16  # two (max_len, d) tables
    assert count_parameters(tiny(positional=None)) == base


def test_share_embeddings_and_tie_output():
    torch.manual_seed(0)
    m = Transformer(
        10, 10, d_model=8, n_heads=2, n_layers=1, d_ff=16, share_embeddings=True, tie_output=True
    )
    assert m.src_embed.weight is m.tgt_embed.weight is m.output.weight
    untied = Transformer(10, 10, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    assert count_parameters(untied) - count_parameters(m) == 2 * 10 * 8
    parts, parts_untied = parameter_breakdown(m), parameter_breakdown(untied)
    assert parts["output"] == 0 and parts_untied["output"] == 10 * 8
    assert parts["embeddings"] == 10 * 8 and parts_untied["embeddings"] == 2 * 10 * 8
    # a gradient step moves the one shared matrix for both uses
    src = torch.randint(1, 10, (2, 4))
    m(src, src).sum().backward()
    assert m.output.weight.grad is m.src_embed.weight.grad


def test_initialisation_xavier_uniform_matrices_zero_biases_scaled_embeddings():
    torch.manual_seed(0)
    m = Transformer(1000, 1000, d_model=64, n_heads=4, n_layers=2, d_ff=256)
    for name, module in m.named_modules():
        if isinstance(module, nn.Linear):
            fan_out, fan_in = module.weight.shape
            bound = math.sqrt(6 / (fan_in + fan_out))
            w = module.weight
            assert w.abs().max() <= bound, name
            assert abs(w.std().item() - bound / math.sqrt(3)) < 0.1 * bound / math.sqrt(3), name
            assert module.bias is None or (module.bias == 0).all(), name
    for emb in (m.src_embed, m.tgt_embed):
        assert abs(emb.weight.std().item() - 64**-0.5) < 0.01


def _paper_count(d, d_ff, n_layers, vocab):
    """The parameter count written out from the paper's dimensions (biases and LayerNorms in)."""
    attention = 4 * (d * d + d)
    ffn = d * d_ff + d_ff + d_ff * d + d
    norm = 2 * d
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    return vocab * d + n_layers * (encoder_layer + decoder_layer)  # one shared, tied table


def test_base_and_big_models_have_the_papers_parameter_counts():
    with torch.device("meta"):  # shapes only, no memory
        base = Transformer(37000, 37000, share_embeddings=True, tie_output=True)
        big = Transformer(
            37000,
            37000,
            d_model=1024,
            n_heads=16,
            d_ff=4096,
            dropout=0.3,
            share_embeddings=True,
            tie_output=True,
        )
    n_base, n_big = count_parameters(base), count_parameters(big)
    assert n_base == _paper_count(512, 2048, 6, 37000) == 63_082_496
    assert n_big == _paper_count(1024, 4096, 6, 37000)
    # Vaswani et al. (2017), Table 3: base 65M, big 213M. The base count from the paper's own
    # dimensions is 63.1M (65M would need a ~41k vocabulary); the big one rounds to 214M.
    assert abs(n_base - 65e6) / 65e6 < 0.04
    assert abs(n_big - 213e6) / 213e6 < 0.01
    parts = parameter_breakdown(base)
    assert sum(parts.values()) == n_base
    assert parts == {
        "embeddings": 37000 * 512,
        "attention": 18 * (4 * 512 * 512 + 4 * 512),
        "feed_forward": 12 * (2 * 512 * 2048 + 2048 + 512),
        "norms": 30 * 2 * 512,
        "output": 0,
        "other": 0,
    }


# ------------------------------------------------------------------------------ torch equivalence


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_equals_torch_nn_transformer(norm_first):
    torch.manual_seed(0)
    m = Transformer(
        11, 13, d_model=16, n_heads=4, n_layers=2, d_ff=32, dropout=0.1, norm_first=norm_first
    ).eval()
    with torch.no_grad():  # make the LayerNorms non-trivial before copying
        for module in m.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
    ref = to_torch_transformer(m)
    src, tgt = batch(b=4, s=9, t=6)

    def embed(table, ids):  # the paper's input: sqrt(d) * embedding + sinusoid
        return table.weight[ids] * math.sqrt(16) + sinusoidal_encoding(ids.shape[1], 16)

    with torch.no_grad():
        out = ref(
            embed(m.src_embed, src),
            embed(m.tgt_embed, tgt),
            tgt_mask=torch.ones(6, 6, dtype=torch.bool).triu(1),  # True = blocked
            src_key_padding_mask=src == PAD,
            tgt_key_padding_mask=tgt == PAD,
            memory_key_padding_mask=src == PAD,
        )
        expected = out @ m.output.weight.T
        got = m(src, tgt)
        got_with_weights, _ = m(src, tgt, return_attention=True)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_with_weights, expected, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------ properties

CAUSAL_MODEL = tiny(seed=1)
NO_POS_MODEL = tiny(seed=2, positional=None)


@FAST
@given(seed=st.integers(0, 10_000), t=st.integers(2, 8), data=st.data())
def test_decoder_output_at_i_ignores_target_tokens_after_i(seed, t, data):
    i = data.draw(st.integers(0, t - 2))
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, 11, (2, 6), generator=g)
    tgt = torch.randint(1, 13, (2, t), generator=g)
    changed = tgt.clone()
    changed[:, i + 1 :] = torch.randint(0, 13, (2, t - i - 1), generator=g)  # pads allowed
    for return_attention in (False, True):
        a = CAUSAL_MODEL(src, tgt, return_attention=return_attention)
        b = CAUSAL_MODEL(src, changed, return_attention=return_attention)
        a, b = (a[0], b[0]) if return_attention else (a, b)
        torch.testing.assert_close(a[:, : i + 1], b[:, : i + 1], atol=1e-5, rtol=1e-5)


@FAST
@given(seed=st.integers(0, 10_000), s=st.integers(1, 6), n_pad=st.integers(1, 5))
def test_source_padding_changes_nothing_for_real_tokens(seed, s, n_pad):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, 11, (2, s), generator=g)
    tgt = torch.randint(1, 13, (2, 4), generator=g)
    padded = torch.cat([src, torch.full((2, n_pad), PAD)], dim=1)
    torch.testing.assert_close(
        CAUSAL_MODEL.encode(padded)[:, :s], CAUSAL_MODEL.encode(src), atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        CAUSAL_MODEL(padded, tgt), CAUSAL_MODEL(src, tgt), atol=1e-5, rtol=1e-5
    )


@FAST
@given(seed=st.integers(0, 10_000), s=st.integers(2, 8))
def test_encoder_without_positions_is_permutation_equivariant(seed, s):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, 11, (2, s), generator=g)
    perm = torch.randperm(s, generator=g)
    torch.testing.assert_close(
        NO_POS_MODEL.encode(src[:, perm]), NO_POS_MODEL.encode(src)[:, perm], atol=1e-5, rtol=1e-5
    )


def test_encoder_with_positions_is_not_permutation_equivariant():
    model = tiny(seed=2)  # same weights as NO_POS_MODEL, plus the sinusoid
    model.load_state_dict(NO_POS_MODEL.state_dict())
    src = torch.tensor([[3, 5, 7, 9, 4]])
    perm = torch.tensor([4, 3, 2, 1, 0])
    diff = (model.encode(src[:, perm]) - model.encode(src)[:, perm]).abs().max()
    assert diff > 0.1


# ------------------------------------------------------------------------------ bad input

M = tiny()
SRC, TGT = batch()


@pytest.mark.parametrize(
    "bad, err, match",
    [
        (
            lambda: M(SRC.float(), TGT),
            TypeError,
            r"src must be an integer tensor .* got dtype torch.float32",
        ),
        (lambda: M(SRC, TGT.to(torch.bool)), TypeError, "tgt must be an integer tensor"),
        (
            lambda: M(SRC[0], TGT),
            ValueError,
            r"src must have 2 dimensions \(B, L\) of token ids, got shape \(7,\)",
        ),
        (
            lambda: M(SRC.masked_fill(SRC == SRC[0, 0], 11), TGT),
            ValueError,
            r"src holds token id 11, outside the vocabulary: ids must be in \[0, 10\] \(src_vocab_size=11\)",
        ),
        (lambda: M(SRC, TGT - 1), ValueError, r"tgt holds token id -1.*tgt_vocab_size=13"),
        (
            lambda: M(SRC, TGT[:2]),
            ValueError,
            "src and tgt must have the same batch size, got 3 and 2",
        ),
        (
            lambda: M(torch.ones(1, 21, dtype=torch.long), TGT[:1]),
            ValueError,
            r"src has length 21 \(shape \(1, 21\)\) but the model was built with max_len=20",
        ),
        (lambda: M(SRC, torch.ones(3, 0, dtype=torch.long)), ValueError, "at least one token"),
        (
            lambda: M.decode(TGT, torch.randn(2, 7, 16)),
            ValueError,
            "tgt and memory must have the same batch size, got 3 and 2",
        ),
        (
            lambda: M.decode(TGT, torch.randn(3, 7, 8)),
            ValueError,
            "memory must have last dimension d_model=16",
        ),
        (
            lambda: M(SRC, TGT, tgt_mask=torch.ones(5, 4, dtype=torch.bool)),
            ValueError,
            r"tgt_mask must be broadcastable to \(B, L_q, L_k\) = \(3, 5, 5\), got shape \(5, 4\)",
        ),
        (
            lambda: M(SRC, TGT, src_mask=torch.ones(3, 1, 7)),
            TypeError,
            "src_mask must be a boolean",
        ),
        (
            lambda: Transformer(10, 10, d_model=30, n_heads=4),
            ValueError,
            r"d_model must be divisible by n_heads, got d_model=30 and n_heads=4",
        ),
        (
            lambda: Transformer(10, 12, share_embeddings=True),
            ValueError,
            "share_embeddings=True needs one vocabulary.*src_vocab_size=10 and tgt_vocab_size=12",
        ),
        (
            lambda: Transformer(10, 10, d_model=14, n_heads=2, n_layers=1, d_ff=8, pad_id=10),
            ValueError,
            r"pad_id must be a token id in both vocabularies, 0 <= pad_id < 10, got 10",
        ),
        (lambda: Transformer(10, 10, d_model=15, n_heads=3), ValueError, "d_model must be even"),
        (lambda: Transformer(10, 10, positional="rotary"), ValueError, "positional must be one of"),
        (lambda: Transformer(10, 10, n_layers=0), ValueError, "n_layers must be >= 1, got 0"),
        (lambda: Transformer(10, 10, dropout=1.5), ValueError, r"dropout must be in \[0, 1\)"),
        (lambda: Transformer(10.0, 10), TypeError, "src_vocab_size must be an int"),
        (lambda: count_parameters("model"), TypeError, "model must be a torch.nn.Module"),
    ],
)
def test_bad_input_gets_a_clear_error(bad, err, match):
    with pytest.raises(err, match=match):
        bad()


def test_odd_d_model_works_with_learned_positions():
    torch.manual_seed(0)
    m = Transformer(10, 10, d_model=15, n_heads=3, n_layers=1, d_ff=8, positional="learned")
    assert m(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 4, dtype=torch.long)).shape == (
        2,
        4,
        10,
    )


def test_to_torch_transformer_rejects_other_models():
    with pytest.raises(TypeError, match="attnbook Transformer"):
        to_torch_transformer(nn.Linear(2, 2))


# ------------------------------------------------------------------------------ key/value cache


def step_by_step(model, src, tokens, use_cache):
    """decode_step on every prefix of ``tokens``, the state passed on: logits and attention."""
    state = model.init_decoder(src, use_cache=use_cache)
    out = []
    for t in range(1, tokens.shape[1] + 1):
        logits, state, att = model.decode_step(tokens[:, :t], state)
        out.append((logits, att))
    return out, state


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("positional", ["sinusoidal", "learned", None])
def test_cached_decode_step_equals_the_full_prefix_at_every_step(norm_first, positional):
    model = tiny(norm_first=norm_first, positional=positional)
    src, tgt = batch(b=4, t=9)
    tgt[1, 4] = PAD  # a padding token inside a prefix: masked as a key either way
    full, same_state = step_by_step(model, src, tgt, use_cache=False)
    cached, state = step_by_step(model, src, tgt, use_cache=True)
    for (logits_f, att_f), (logits_c, att_c) in zip(full, cached, strict=True):
        torch.testing.assert_close(logits_c, logits_f, rtol=1e-5, atol=1e-5)
        assert att_c.keys() == att_f.keys() == {"decoder_self", "cross"}
        for name in att_f:
            assert att_c[name].shape == att_f[name].shape
            torch.testing.assert_close(att_c[name], att_f[name], rtol=1e-5, atol=1e-6)
    assert set(same_state) == {"memory", "memory_mask"}  # no cache without use_cache
    assert state["self_mask"].shape == (4, 9)  # 9 positions cached
    assert state["self_mask"].tolist() == (tgt != PAD).tolist()
    assert len(state["self_k"]) == len(state["cross_v"]) == 2  # per layer
    assert state["self_k"][0].shape[:2] == (4, 4) and state["self_k"][0].shape[2] >= 9
    assert state["self_k"][0].shape[3] == 4  # d_k = 16 / 4
    assert state["cross_k"][1].shape == (4, 4, 7, 4)  # (B, H, S, d_k)


def test_cached_state_feeds_several_new_tokens_at_once_and_holds_the_full_path_keys():
    model = tiny()
    src, tgt = batch(t=6)
    state = model.init_decoder(src, use_cache=True)
    logits, state, att = model.decode_step(tgt[:, :4], state)  # four positions at once
    logits, state, att = model.decode_step(tgt, state)  # then the last two
    torch.testing.assert_close(logits, model(src, tgt)[:, -1], rtol=1e-5, atol=1e-5)
    # the cache holds what the full pass computes: layer 0's keys of the embedded target
    x = model.tgt_pos(model.tgt_embed(tgt) * math.sqrt(model.d_model))
    layer = model.decoder.layers[0]
    h = layer.residual_self.norm(x) if layer.residual_self.norm_first else x
    keys = layer.self_attn.w_k(h).view(3, 6, 4, 4).transpose(1, 2)  # (B, H, T, d_k)
    torch.testing.assert_close(state["self_k"][0][:, :, :6], keys)


def test_reorder_state_moves_and_copies_the_cache():
    model = tiny()
    src, tgt = batch(b=3, t=5)
    state = model.init_decoder(src, use_cache=True)
    _, state, _ = model.decode_step(tgt[:, :3], state)
    index = torch.tensor([2, 2, 0, 1])
    moved = model.reorder_state(state, index)
    for name in ("self_k", "self_v", "cross_k", "cross_v"):
        for mine, theirs in zip(moved[name], state[name], strict=True):
            assert torch.equal(mine, theirs[index])
    assert torch.equal(moved["self_mask"], state["self_mask"][index])
    assert torch.equal(moved["memory"], state["memory"][index])
    # the moved cache decodes the moved rows as a fresh full pass would
    logits, _, _ = model.decode_step(tgt[index, :4], moved)
    expected = model(src[index], tgt[index, :4])[:, -1]
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    before = [k.clone() for k in state["self_k"]]
    moved["self_k"][0].zero_()  # a copy: the original cache is untouched
    assert all(torch.equal(k, b) for k, b in zip(state["self_k"], before, strict=True))


def test_cache_errors_name_the_argument():
    model = tiny(max_len=6)
    src, tgt = batch(s=6, t=7)
    with pytest.raises(TypeError, match=r"use_cache must be a bool .*got int 1"):
        model.init_decoder(src, use_cache=1)
    state = model.init_decoder(src, use_cache=True)
    with pytest.raises(
        ValueError,
        match=r"tokens has length 7, but the model was built with "
        r"max_len=6: the positional encoding and the key/value cache hold at most",
    ):
        model.decode_step(tgt, state)
    _, state, _ = model.decode_step(tgt[:, :3], state)
    with pytest.raises(
        ValueError,
        match=r"tokens must be \(B=3, t > 3\): the state caches 3 "
        r"positions.*got shape \(3, 3\)",
    ):
        model.decode_step(tgt[:, :3], state)  # nothing new
    with pytest.raises(ValueError, match=r"tokens must be \(B=3, t > 3\).*got shape \(2, 5\)"):
        model.decode_step(tgt[:2, :5], state)
    with pytest.raises(ValueError, match=r"tokens holds token id 13, outside the vocabulary"):
        model.decode_step(torch.cat([tgt[:, :3], torch.full((3, 1), 13)], dim=1), state)
    with pytest.raises(TypeError, match="tokens must be an integer tensor"):
        model.decode_step(tgt[:, :4].float(), state)


def test_a_sublayer_that_returns_another_shape_is_named_not_broadcast():
    """x + Dropout(sublayer(x)) would broadcast a (B, 1, d) output silently: refused at the edge,
    while the layers' own calls (checks off inside them) run the sublayer unwrapped."""
    from attnbook import SublayerConnection
    from attnbook.utils import show_source

    block, x = SublayerConnection(8, dropout=0.0), torch.randn(2, 3, 8)
    for bad in (lambda t: t[:, :1], lambda t: t[..., :4], lambda t: 3.0, lambda t: (t[:1], 0)):
        with pytest.raises(ValueError, match=r"sublayer must return a tensor of x's shape"):
            block(x, bad)
    assert torch.equal(block(x, lambda t: 2 * t), block.norm(3 * x))
    assert block(x, lambda t: (t, "weights"))[1] == "weights"
    assert "_returns_shape_of" not in show_source(SublayerConnection.forward).code
