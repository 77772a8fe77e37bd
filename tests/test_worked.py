"""The worked examples of notes 05, recomputed and compared with the notes."""

import pytest
import torch

from attnbook.attention import scaled_dot_product_attention
from attnbook.worked import (
    NOTES_SINGLE_HEAD,
    NOTES_X,
    NOTES_Z2,
    differences_from_notes,
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
    assert torch.equal(ex.scaled, ex.scores / 2)                       # sqrt(d_k) = sqrt(4)
    out, w = scaled_dot_product_attention(ex.Q, ex.K, ex.V)
    torch.testing.assert_close(ex.weights, w)
    torch.testing.assert_close(ex.Z, out)
    torch.testing.assert_close(ex.weights.sum(-1), torch.ones(3, dtype=torch.float64))


def test_differences_from_notes_find_the_slips_and_only_them():
    diff = differences_from_notes()
    assert [c[:2] for c in diff["Q"]] == [(2, 0), (2, 1), (2, 2), (2, 3)]   # the third row
    assert diff["scores"] and diff["weights"] and diff["Z"]
    # an example built from the notes' own printed Q reproduces their scores exactly
    notes_q = torch.tensor(NOTES_SINGLE_HEAD["Q"], dtype=torch.float64)
    assert torch.equal(notes_q @ notes_q.T,
                       torch.tensor(NOTES_SINGLE_HEAD["scores"], dtype=torch.float64))
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
    torch.testing.assert_close(summed.output, ex.Z1 + ex.Z2)         # adding is one special W^O


@pytest.mark.parametrize("bad, match", [
    (lambda: single_head_example(X=((1, 0, 1),)), "W_Q must have 3 rows"),
    (lambda: single_head_example(W_K=torch.ones(4, 3, dtype=torch.float64)), "same number of columns"),
    (lambda: two_head_example(Z2=((1, 2),)), r"Z2 must have shape \(3, 4\)"),
    (lambda: two_head_example(W_O=torch.ones(4, 4)), "W_O must have 8 rows"),
    (lambda: single_head_example(X=torch.ones(3)), "2 dimensions"),
])
def test_worked_examples_reject_bad_matrices(bad, match):
    with pytest.raises(ValueError, match=match):
        bad()
