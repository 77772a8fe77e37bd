"""attnbook.positional: the sinusoid table, the module, the relative-position rotation."""

import math

import pytest
import torch

from attnbook.attention import MultiHeadAttention
from attnbook.positional import PositionalEncoding, relative_shift_matrix, sinusoidal_encoding


def test_sinusoidal_encoding_matches_the_formula_entry_by_entry():
    pe = sinusoidal_encoding(20, 8)
    for pos in (0, 1, 7, 19):
        for i in range(4):
            angle = pos / 10000 ** (2 * i / 8)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert pe[0, 0::2].abs().max() == 0 and torch.all(pe[0, 1::2] == 1)


def test_every_position_has_a_distinct_encoding_of_constant_norm():
    pe = sinusoidal_encoding(200, 64)
    norms = pe.norm(dim=-1)
    torch.testing.assert_close(norms, torch.full((200,), math.sqrt(32.0)))
    distances = torch.cdist(pe, pe) + torch.eye(200)
    assert distances.min() > 0.1


def test_relative_shift_is_a_linear_map_independent_of_position():
    pe = sinusoidal_encoding(60, 16).double()
    for k in (1, 5, -3):
        m = relative_shift_matrix(k, 16).double()
        lo, hi = max(0, -k), min(60, 60 - k)
        torch.testing.assert_close(pe[lo:hi] @ m, pe[lo + k : hi + k], atol=1e-5, rtol=1e-5)


def test_dot_product_between_positions_depends_only_on_distance():
    pe = sinusoidal_encoding(100, 32).double()
    gram = pe @ pe.T
    for k in (0, 1, 7, 30):
        diagonal = torch.diagonal(gram, offset=k)
        assert diagonal.max() - diagonal.min() < 1e-4  # same for every pos


@pytest.mark.parametrize("kind", PositionalEncoding.KINDS)
def test_positional_encoding_module_adds_and_checks(kind):
    torch.manual_seed(0)
    enc = PositionalEncoding(8, max_len=10, kind=kind).eval()
    x = torch.zeros(2, 6, 8)
    out = enc(x)
    torch.testing.assert_close(out[0], enc.encoding(6))
    torch.testing.assert_close(out[0], out[1])
    if kind == "sinusoidal":
        torch.testing.assert_close(enc.encoding(6), sinusoidal_encoding(6, 8))
        assert not list(enc.parameters())
    else:
        assert sum(p.numel() for p in enc.parameters()) == 10 * 8
    with pytest.raises(ValueError, match="max_len=10"):
        enc(torch.zeros(1, 11, 8))
    with pytest.raises(ValueError, match="d_model=8"):
        enc(torch.zeros(1, 3, 6))


def test_positions_break_permutation_equivariance():
    torch.manual_seed(0)
    mha, enc = MultiHeadAttention(8, 2).eval(), PositionalEncoding(8).eval()
    x = torch.randn(1, 5, 8)
    perm = torch.tensor([4, 2, 0, 1, 3])
    out, _ = mha(x, x, x)
    out_p, _ = mha(x[:, perm], x[:, perm], x[:, perm])
    torch.testing.assert_close(out_p, out[:, perm], atol=1e-5, rtol=1e-5)  # without positions
    y, y_p = enc(x), enc(x[:, perm])
    out, _ = mha(y, y, y)
    out_p, _ = mha(y_p, y_p, y_p)
    assert not torch.allclose(out_p, out[:, perm], atol=1e-3)  # with positions


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: sinusoidal_encoding(10, 7), "d_model must be even"),
        (lambda: sinusoidal_encoding(0, 8), "n_positions must be >= 1"),
        (lambda: sinusoidal_encoding(10, 8, base=1.0), "base must be > 1"),
        (lambda: PositionalEncoding(8, kind="rotary"), "kind must be one of"),
        (lambda: PositionalEncoding(8, dropout=1.0), "dropout"),
        (lambda: relative_shift_matrix(1.5, 8), "offset must be an int"),
    ],
)
def test_bad_arguments_get_clear_errors(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bad()
