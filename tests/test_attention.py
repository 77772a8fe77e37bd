"""Unit, property and equivalence tests of attnbook.attention."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook.attention import (
    SCORE_FUNCTIONS,
    AdditiveAttention,
    DotAttention,
    GeneralAttention,
    MultiHeadAttention,
    SelfAttentionHead,
    additive_score,
    causal_mask,
    dot_score,
    general_score,
    make_attention,
    masked_softmax,
    padding_mask,
    scaled_dot_product_attention,
    scaled_dot_score,
    to_torch_multihead,
)

FAST = settings(max_examples=40, deadline=None)


def naive_attention(q, k, v, mask=None):
    """softmax(QK^T / sqrt(d)) V, written independently of the package (float64 reference)."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, -1)
    return w @ v, w


# ------------------------------------------------------------------------------ score functions


def test_dot_and_scaled_dot_scores_by_hand():
    q = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    k = torch.tensor([[1.0, 0.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    assert dot_score(q, k).tolist() == [[5.0, 20.0]]
    assert scaled_dot_score(q, k).tolist() == [[2.5, 10.0]]  # divided by sqrt(4) = 2


def test_general_score_is_dot_score_with_identity():
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 5), torch.randn(2, 4, 5)
    torch.testing.assert_close(general_score(q, k, torch.eye(5)), dot_score(q, k))


def test_general_score_allows_different_sizes():
    torch.manual_seed(0)
    q, k, w = torch.randn(3, 5), torch.randn(4, 7), torch.randn(5, 7)
    expected = torch.stack([torch.stack([q[i] @ w @ k[j] for j in range(4)]) for i in range(3)])
    torch.testing.assert_close(general_score(q, k, w), expected)


def test_additive_score_equals_the_literal_concatenation_formula():
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 5), torch.randn(2, 4, 6)
    w_a, v_a = torch.randn(7, 11), torch.randn(7)
    got = additive_score(q, k, w_a, v_a)
    expected = torch.empty(2, 3, 4)
    for b in range(2):
        for i in range(3):
            for j in range(4):
                expected[b, i, j] = v_a @ torch.tanh(w_a @ torch.cat([q[b, i], k[b, j]]))
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: dot_score(torch.randn(2, 3), torch.randn(2, 4)), "last dimension"),
        (lambda: dot_score([[1.0]], torch.randn(1, 1)), "must be a torch.Tensor"),
        (
            lambda: dot_score(
                torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long)
            ),
            "floating-point",
        ),
        (
            lambda: general_score(torch.randn(2, 3), torch.randn(2, 4), torch.randn(4, 3)),
            r"\(d_q, d_k\) = \(3, 4\)",
        ),
        (
            lambda: additive_score(
                torch.randn(2, 3), torch.randn(2, 4), torch.randn(5, 6), torch.randn(5)
            ),
            r"d_q \+ d_k",
        ),
        (
            lambda: additive_score(
                torch.randn(2, 3), torch.randn(2, 4), torch.randn(5, 7), torch.randn(4)
            ),
            "attention size",
        ),
    ],
)
def test_score_functions_reject_bad_input(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bad()


# ------------------------------------------------------------------------------ masks


def test_padding_mask_from_lengths_and_tokens_agree():
    from_lengths = padding_mask(torch.tensor([3, 1]), max_len=4)
    tokens = torch.tensor([[5, 6, 7, 0], [9, 0, 0, 0]])
    from_tokens = padding_mask(tokens, pad_id=0)
    assert from_lengths.shape == (2, 1, 4)
    assert torch.equal(from_lengths, from_tokens)
    assert from_lengths[:, 0].tolist() == [[True, True, True, False], [True, False, False, False]]


def test_causal_mask_is_lower_triangular():
    m = causal_mask(4)
    assert m.dtype == torch.bool
    assert m.tolist() == [[i >= j for j in range(4)] for i in range(4)]


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: padding_mask(torch.tensor([[1, 2]])), "pad_id is required"),
        (lambda: padding_mask(torch.tensor([1.0, 2.0])), "integer"),
        (lambda: padding_mask(torch.tensor([3, -1])), ">= 0"),
        (lambda: padding_mask(torch.tensor([5]), max_len=3), "shorter than the longest"),
        (lambda: padding_mask(torch.tensor([2]), pad_id=0), "only used with token ids"),
        (lambda: causal_mask(0), "n must be >= 1"),
        (lambda: causal_mask(2.5), "n must be an int"),
    ],
)
def test_masks_reject_bad_input(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bad()


# ------------------------------------------------------------------------------ masked softmax


def test_masked_softmax_zero_on_masked_and_fully_masked_rows():
    scores = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    w = masked_softmax(scores, mask)
    assert w[0, 1] == 0 and torch.isclose(w[0].sum(), torch.tensor(1.0))
    assert torch.equal(w[1], torch.zeros(3))
    (w * torch.arange(3.0)).sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_masked_softmax_rejects_unbroadcastable_and_non_bool_masks():
    with pytest.raises(ValueError, match=r"broadcastable to the scores' shape \(2, 3\)"):
        masked_softmax(torch.zeros(2, 3), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="boolean"):
        masked_softmax(torch.zeros(2, 3), torch.ones(2, 3))


# ------------------------------------------------------------------------------ SDPA, properties

shapes = st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 6), st.integers(1, 4))


@FAST
@given(shape=shapes, seed=st.integers(0, 2**16), p_mask=st.floats(0.0, 1.0))
def test_weights_are_a_distribution_over_allowed_keys(shape, seed, p_mask):
    b, l_q, l_k, d = shape
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, n, d, generator=g) for n in (l_q, l_k, l_k))
    mask = torch.rand(b, l_q, l_k, generator=g) >= p_mask
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert (w[~mask] == 0).all()  # masked keys: exactly zero
    has_key = mask.any(-1)
    torch.testing.assert_close(w.sum(-1)[has_key], torch.ones(int(has_key.sum())))
    assert (w.sum(-1)[~has_key] == 0).all()  # no key at all: zero row
    assert (out[~has_key] == 0).all()  # ... and zero output
    ref_out, ref_w = naive_attention(q, k, v, mask)
    torch.testing.assert_close(out[has_key].double(), ref_out[has_key], atol=1e-5, rtol=1e-5)


@FAST
@given(n=st.integers(2, 6), d=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_self_attention_without_positions_is_permutation_equivariant(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    mha = MultiHeadAttention(d_model=4, n_heads=2)
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    x = torch.randn(1, n, 4, generator=g)
    perm = torch.randperm(n, generator=g)
    out, _ = mha(x, x, x)
    out_perm, _ = mha(x[:, perm], x[:, perm], x[:, perm])
    torch.testing.assert_close(out_perm, out[:, perm], atol=1e-5, rtol=1e-5)


@FAST
@given(n=st.integers(2, 7), i=st.integers(0, 5), seed=st.integers(0, 2**16))
def test_causal_mask_output_at_i_ignores_later_positions(n, i, seed):
    i = i % (n - 1)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, n, 3, generator=g)
    y = x.clone()
    y[:, i + 1 :] = torch.randn(1, n - i - 1, 3, generator=g)  # change the future only
    m = causal_mask(n)
    out_x, _ = scaled_dot_product_attention(x, x, x, m)
    out_y, _ = scaled_dot_product_attention(y, y, y, m)
    torch.testing.assert_close(out_x[:, : i + 1], out_y[:, : i + 1])


def test_sdpa_matches_torch_and_dropout_changes_only_mixing():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    out, w = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v))
    torch.manual_seed(1)
    out_drop, w_drop = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.testing.assert_close(w_drop, w)  # weights reported before dropout
    assert not torch.allclose(out_drop, out)


@pytest.mark.parametrize(
    "bad, match",
    [
        (
            lambda: scaled_dot_product_attention(
                torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4)
            ),
            "last dimension",
        ),
        (
            lambda: scaled_dot_product_attention(
                torch.randn(3, 4), torch.randn(5, 4), torch.randn(6, 4)
            ),
            "number of positions",
        ),
        (
            lambda: scaled_dot_product_attention(
                torch.randn(3, 4), torch.randn(5, 4), torch.randn(5, 4), dropout_p=1.5
            ),
            r"dropout_p must be in \[0, 1\)",
        ),
        (
            lambda: scaled_dot_product_attention(torch.randn(4), torch.randn(4), torch.randn(4)),
            "at least 2 dimensions",
        ),
    ],
)
def test_sdpa_rejects_bad_input(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bad()


# ------------------------------------------------------------------------------ RNN-era modules


@pytest.mark.parametrize("score", SCORE_FUNCTIONS)
def test_rnn_attention_modules_one_query_per_step(score):
    torch.manual_seed(0)
    att = make_attention(score, query_dim=6, key_dim=6, hidden_dim=5)
    s, h = torch.randn(2, 6), torch.randn(2, 4, 6)
    lengths_mask = padding_mask(torch.tensor([4, 2]))[:, 0]  # (B, L_k)
    context, w = att(s, h, mask=lengths_mask)
    assert context.shape == (2, 6) and w.shape == (2, 4)
    assert (w[1, 2:] == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2))
    torch.testing.assert_close(context, torch.einsum("bl,bld->bd", w, h))


def test_make_attention_types_and_errors():
    assert isinstance(make_attention("additive", 3, 4, 5), AdditiveAttention)
    assert isinstance(make_attention("general", 3, 4), GeneralAttention)
    assert isinstance(make_attention("dot", 4, 4), DotAttention)
    with pytest.raises(ValueError, match="score must be one of"):
        make_attention("cosine", 4, 4)
    with pytest.raises(ValueError, match="needs query_dim == key_dim"):
        make_attention("dot", 3, 4)


def test_additive_attention_uses_its_two_layers():
    att = AdditiveAttention(3, 4, 5)
    assert att.w_a.weight.shape == (5, 7) and att.v_a.weight.shape == (1, 5)
    s, h = torch.randn(2, 3), torch.randn(2, 6, 4)
    _, w = att(s, h)
    expected = torch.softmax(additive_score(s[:, None], h, att.w_a.weight, att.v_a.weight[0]), -1)
    torch.testing.assert_close(w, expected[:, 0])


def test_rnn_attention_rejects_mismatched_batches():
    att = DotAttention()
    with pytest.raises(ValueError, match="batch size"):
        att(torch.randn(2, 4), torch.randn(3, 5, 4))
    with pytest.raises(ValueError, match=r"3 dimensions \(B, L_k, d_k\)"):
        att(torch.randn(2, 4), torch.randn(5, 4))


# ------------------------------------------------------------------------------ multi-head


@pytest.mark.parametrize("masking", ["none", "padding", "causal", "both"])
def test_multi_head_attention_equals_torch(masking):
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, n_heads=4).eval()
    ref = to_torch_multihead(mha)
    x = torch.randn(3, 6, 16)
    pad = padding_mask(torch.tensor([6, 4, 1]))  # (B, 1, L)
    mask, key_padding, attn_mask = None, None, None
    if masking in ("padding", "both"):
        mask, key_padding = pad, ~pad[:, 0]
    if masking in ("causal", "both"):
        attn_mask = ~causal_mask(6)  # torch: True = blocked
        mask = causal_mask(6) if mask is None else mask & causal_mask(6)
    out, w = mha(x, x, x, mask)
    ref_out, ref_w = ref(x, x, x, key_padding_mask=key_padding, attn_mask=attn_mask)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w.mean(1), ref_w, atol=1e-5, rtol=1e-5)  # torch averages heads
    fused, none = mha(x, x, x, mask, need_weights=False)
    assert none is None
    torch.testing.assert_close(fused, out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
def test_multi_head_packed_projections_equal_separate_ones(bias):
    """Self-attention (one input) and cross-attention (key is value) stack the projections
    into one matrix product; the result must equal three separate products on copies."""
    torch.manual_seed(1)
    mha = MultiHeadAttention(12, 3, bias=bias).eval()
    x, mem = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
    for q, kv in ((x, x), (x, mem)):
        packed, w_packed = mha(q, kv, kv)
        separate, w_separate = mha(q.clone(), kv.clone(), kv.clone())
        torch.testing.assert_close(packed, separate, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(w_packed, w_separate, atol=1e-6, rtol=1e-6)
    x.requires_grad_(True)
    mha(x, x, x)[0].sum().backward()
    assert all(p.grad is not None for p in mha.parameters())


def test_multi_head_cross_attention_shapes_and_fully_masked_rows():
    mha = MultiHeadAttention(8, 2)
    q, kv = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[0, 1] = False
    for need in (True, False):
        out, w = mha(q, kv, kv, mask, need_weights=need)
        assert out.shape == (2, 3, 8) and torch.isfinite(out).all()
        if need:
            assert w.shape == (2, 2, 3, 5) and (w[0, :, 1] == 0).all()


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: MultiHeadAttention(10, 3), r"divisible by n_heads, got d_model=10 and n_heads=3"),
        (lambda: MultiHeadAttention(8, 0), "n_heads must be >= 1"),
        (lambda: MultiHeadAttention(8, 2, dropout=-0.1), "dropout"),
        (
            lambda: MultiHeadAttention(8, 2)(
                torch.randn(2, 3, 6), torch.randn(2, 3, 6), torch.randn(2, 3, 6)
            ),
            "d_model=8",
        ),
        (
            lambda: MultiHeadAttention(8, 2)(
                torch.randn(2, 3, 8), torch.randn(1, 3, 8), torch.randn(1, 3, 8)
            ),
            "batch size",
        ),
        (
            lambda: MultiHeadAttention(8, 2)(
                torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 5, 8)
            ),
            "length",
        ),
        (
            lambda: MultiHeadAttention(8, 2)(
                torch.randn(3, 8), torch.randn(3, 8), torch.randn(3, 8)
            ),
            r"3 dimensions \(B, L, d_model\)",
        ),
        (
            lambda: MultiHeadAttention(8, 2)(
                torch.randn(2, 3, 8),
                torch.randn(2, 3, 8),
                torch.randn(2, 3, 8),
                torch.ones(3, 4, dtype=torch.bool),
            ),
            "broadcastable",
        ),
    ],
)
def test_multi_head_rejects_bad_input(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bad()


# ------------------------------------------------------------------------------ one head


def test_self_attention_head_parameter_counts_and_limits():
    shared = SelfAttentionHead(d_model=4, d_k=3)
    per_position = SelfAttentionHead(d_model=4, d_k=3, n_positions=5)
    assert sum(p.numel() for p in shared.parameters()) == 3 * 4 * 3
    assert sum(p.numel() for p in per_position.parameters()) == 5 * 3 * 4 * 3
    out, w = per_position(torch.randn(2, 5, 4))
    assert out.shape == (2, 5, 3) and w.shape == (2, 5, 5)
    assert shared(torch.randn(2, 50, 4))[0].shape == (2, 50, 3)  # shared: any length
    with pytest.raises(ValueError, match="n_positions=5"):
        per_position(torch.randn(2, 6, 4))


def test_per_position_head_with_equal_weights_is_the_shared_head():
    shared = SelfAttentionHead(d_model=4, d_k=4)
    per_position = SelfAttentionHead(d_model=4, d_k=4, n_positions=6)
    with torch.no_grad():
        for name in ("w_q", "w_k", "w_v"):
            getattr(per_position, name).copy_(getattr(shared, name).expand(6, 4, 4))
    x = torch.randn(2, 6, 4)
    torch.testing.assert_close(per_position(x)[0], shared(x)[0])
    expected, _ = scaled_dot_product_attention(x @ shared.w_q, x @ shared.w_k, x @ shared.w_v)
    torch.testing.assert_close(shared(x)[0], expected)


def test_to_torch_multihead_rejects_other_modules():
    with pytest.raises(TypeError, match="mha must be a MultiHeadAttention"):
        to_torch_multihead(torch.nn.Linear(2, 2))
