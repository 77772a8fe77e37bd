"""The worked examples of notes 05, recomputed and compared with the notes."""

import pytest
import torch

from attnbook.attention import scaled_dot_product_attention
from attnbook.worked import (
    NOTES_SINGLE_HEAD,
    NOTES_X,
    NOTES_Z2,
    differences_from_notes,
    layer_norm_example,
    single_head_example,
    two_head_example,
)


def test_single_head_matches_package_attention_and_hand_rules():
    ex = single_head_example()
    X = torch.tensor(NOTES_X, dtype=torch.float64)
    assert torch.equal(ex.Q, X @ ex.W_Q)
    # row 3 of X is (1, 1, 1, 1): each column of W sums two ones -> (2, 2, 2, 2)
    assert ex.Q[2].tolist() == [2.0, 2.0, 2.0, 2.0]
    assert torch.equal(ex.scores, ex.Q @ ex.K.T)
    assert torch.equal(ex.scaled, ex.scores / 2)  # sqrt(d_k) = sqrt(4)
    out, w = scaled_dot_product_attention(ex.Q, ex.K, ex.V)
    torch.testing.assert_close(ex.weights, w)
    torch.testing.assert_close(ex.Z, out)
    torch.testing.assert_close(ex.weights.sum(-1), torch.ones(3, dtype=torch.float64))


def test_differences_from_notes_find_the_slips_and_only_them():
    diff = differences_from_notes()
    assert [c[:2] for c in diff["Q"]] == [(2, 0), (2, 1), (2, 2), (2, 3)]  # the third row
    assert diff["scores"] and diff["weights"] and diff["Z"]
    # an example built from the notes' own printed Q reproduces their scores exactly
    notes_q = torch.tensor(NOTES_SINGLE_HEAD["Q"], dtype=torch.float64)
    assert torch.equal(
        notes_q @ notes_q.T, torch.tensor(NOTES_SINGLE_HEAD["scores"], dtype=torch.float64)
    )
    # ... but the softmax of their own scaled matrix is not their printed weights (rows 2, 3)
    theirs = torch.softmax(torch.tensor(NOTES_SINGLE_HEAD["scaled"], dtype=torch.float64), -1)
    printed = torch.tensor(NOTES_SINGLE_HEAD["weights"], dtype=torch.float64)
    assert torch.allclose(theirs[0], printed[0], atol=1e-3)
    assert not torch.allclose(theirs[1:], printed[1:], atol=1e-2)


def test_differences_are_empty_when_compared_with_itself():
    ex = single_head_example(X=((1, 0, 1, 0), (0, 1, 0, 1), (2, 0, 2, 0)))  # X3 giving their Q
    assert ex.Q.tolist() == [list(map(float, r)) for r in NOTES_SINGLE_HEAD["Q"]]
    assert differences_from_notes(ex)["Q"] == []
    assert differences_from_notes(ex)["scores"] == []


def test_two_head_concat_then_project():
    ex = two_head_example()
    assert ex.concat.shape == (3, 8) and ex.W_O.shape == (8, 4) and ex.output.shape == (3, 4)
    assert torch.equal(ex.concat[:, :4], single_head_example().Z)
    assert torch.equal(ex.concat[:, 4:], torch.tensor(NOTES_Z2, dtype=torch.float64))
    torch.testing.assert_close(ex.output, ex.Z1 @ ex.W_O[:4] + ex.Z2 @ ex.W_O[4:])
    summed = two_head_example(W_O=torch.cat([torch.eye(4), torch.eye(4)]).double())
    torch.testing.assert_close(summed.output, ex.Z1 + ex.Z2)  # adding is one special W^O


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: single_head_example(X=((1, 0, 1),)), "W_Q must have 3 rows"),
        (
            lambda: single_head_example(W_K=torch.ones(4, 3, dtype=torch.float64)),
            "same number of columns",
        ),
        (lambda: two_head_example(Z2=((1, 2),)), r"Z2 must have shape \(3, 4\)"),
        (lambda: two_head_example(W_O=torch.ones(4, 4)), "W_O must have 8 rows"),
        (lambda: single_head_example(X=torch.ones(3)), "2 dimensions"),
    ],
)
def test_worked_examples_reject_bad_matrices(bad, match):
    with pytest.raises(ValueError, match=match):
        bad()


# ---------------------------------------------------------------------------- LayerNorm


def _torch_layer_norm(ex):
    ln = torch.nn.LayerNorm(ex.x.shape[1], eps=ex.eps, dtype=torch.float64)
    with torch.no_grad():
        ln.weight.copy_(ex.gamma)
        ln.bias.copy_(ex.beta)
        return ln(ex.x)


def test_layer_norm_example_hand_values_and_torch():
    ex = layer_norm_example()
    assert ex.mean.flatten().tolist() == [5.0, 0.5, 50.0, 3.0]
    assert ex.var.flatten().tolist() == [5.0, 0.25, 500.0, 0.0]  # divides by d = 4
    torch.testing.assert_close(
        ex.var_unbiased.flatten(), torch.tensor([20 / 3, 1 / 3, 2000 / 3, 0.0], dtype=torch.float64)
    )
    torch.testing.assert_close(ex.centered.sum(-1), torch.zeros(4, dtype=torch.float64))
    torch.testing.assert_close(ex.std, torch.sqrt(ex.var + 1e-5))
    torch.testing.assert_close(
        ex.normalized[0],
        torch.tensor([-3.0, -1.0, 1.0, 3.0], dtype=torch.float64) / (5 + 1e-5) ** 0.5,
    )
    assert torch.equal(ex.normalized[3], torch.zeros(4, dtype=torch.float64))  # constant row
    assert torch.equal(ex.output[3], ex.beta)
    torch.testing.assert_close(ex.output, ex.gamma * ex.normalized + ex.beta)
    assert (_torch_layer_norm(ex) - ex.output).abs().max() < 1e-6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_layer_norm_example_matches_torch_on_random_input(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(5, 7, generator=g, dtype=torch.float64) * 3 + 2
    gamma = torch.randn(7, generator=g, dtype=torch.float64)
    beta = torch.randn(7, generator=g, dtype=torch.float64)
    ex = layer_norm_example(x, gamma, beta, eps=1e-3)
    torch.testing.assert_close(ex.output, _torch_layer_norm(ex), atol=1e-12, rtol=0)
    torch.testing.assert_close(ex.var, x.var(-1, unbiased=False, keepdim=True))
    # without gamma and beta: PyTorch's initial values, rows of mean 0 and variance ~1
    plain = layer_norm_example(x, None, None)
    assert torch.equal(layer_norm_example(x, [1.0] * 7, [0.0] * 7).output, plain.output)
    assert torch.equal(plain.output, plain.normalized)
    torch.testing.assert_close(plain.normalized.mean(-1), torch.zeros(5, dtype=torch.float64))
    torch.testing.assert_close(
        plain.normalized.var(-1, unbiased=False),
        torch.ones(5, dtype=torch.float64),
        atol=1e-4,
        rtol=0,
    )


def test_layer_norm_example_ignores_scale_and_offset_of_a_row():
    a = layer_norm_example(((1, 2, 3, 4),), None, None, eps=0.0)
    b = layer_norm_example(((-7, -2, 3, 8),), None, None, eps=0.0)  # 5 x - 12
    torch.testing.assert_close(a.normalized, b.normalized)
    assert torch.isnan(layer_norm_example(eps=0.0).normalized[3]).all()  # 0 / 0 without eps


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(x=torch.ones(4)), ValueError, "x must have 2 dimensions"),
        (dict(x=((1,), (2,))), ValueError, "at least 2 features"),
        (dict(gamma=(1.0, 2.0)), ValueError, r"gamma must have shape \(4,\)"),
        (dict(beta=torch.ones(2, 4)), ValueError, "beta must have 1 dimensions"),
        (dict(gamma="wide"), TypeError, "gamma must be a tensor or a sequence of 4 numbers"),
        (dict(eps=-1e-5), ValueError, "eps must be a finite float >= 0"),
        (dict(eps="small"), TypeError, "eps must be a float"),
        (dict(eps=True), TypeError, "eps must be a float"),
    ],
)
def test_layer_norm_example_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        layer_norm_example(**kwargs)


def test_non_numeric_matrix_is_a_clear_error():
    with pytest.raises(TypeError, match=r"X must be a tensor or a nested sequence of numbers"):
        single_head_example(X="not a matrix")
