"""attnbook.exercises.check: says "correct" for a right answer and what differs for a wrong one."""

import numpy as np
import pytest
import torch

from attnbook.exercises import check, compare


def test_a_right_answer_is_correct(capsys):
    assert check(torch.tensor([0.25, 0.75]), torch.tensor([0.25, 0.75 + 1e-7]), name="w") is None
    assert capsys.readouterr().out == "w: correct\n"


def test_none_from_an_unfinished_exercise_says_what_is_wanted(capsys):
    check(None, torch.zeros(2, 5))
    out = capsys.readouterr().out
    assert out.startswith("your answer: not yet. got NoneType None, want a tensor of shape (2, 5)")


def test_shape_dtype_and_entries_are_reported():
    assert compare(torch.zeros(3, 2), torch.zeros(2, 3)) == "shape differs: got (3, 2), want (2, 3)"
    assert "dtype differs: got float" in compare(torch.zeros(2), torch.zeros(2, dtype=torch.bool))
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    wrong = mask.clone()
    wrong[0, 2] = True
    assert compare(wrong, mask) == "1 of 9 entries differ: entry (0, 2) is True, want False"
    many = compare(torch.arange(6.0), torch.zeros(6))
    assert (
        many.startswith("5 of 6 entries differ: entry (1,) is 1.0, want 0.0") and "2 more" in many
    )


def test_floats_use_a_tolerance_and_nan_is_never_correct():
    assert compare(1.0 + 1e-7, 1.0) is None
    assert compare(1.1, 1.0) is not None
    assert "want a finite number" in compare(torch.tensor([0.5, float("nan")]), torch.zeros(2))
    assert compare(np.array([1, 2]), [1, 2]) is None
    assert compare("abc", "abd") == "got 'abc', want 'abd'"


@pytest.mark.parametrize("kw", [{"atol": -1}, {"rtol": float("nan")}])
def test_bad_tolerances_are_refused(kw):
    with pytest.raises(ValueError, match="tol must be a finite number >= 0, got"):
        compare(1.0, 1.0, **kw)


def test_name_must_be_text():
    with pytest.raises(TypeError, match="name must be a str"):
        check(1, 1, name=3)
