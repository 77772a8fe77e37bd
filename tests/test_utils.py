"""attnbook.utils: glue writes what myst-nb's glue writes, and refuses what the book cannot format."""

import numpy as np
import pytest
import torch
from IPython.utils.capture import capture_output

from attnbook import glue
from attnbook.utils import GLUE_PREFIX


@pytest.fixture(autouse=True)
def shell():
    """A kernel has an IPython shell; display() needs one to reach capture_output."""
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


def captured(fn, *args, **kwargs):
    with capture_output() as out:
        fn(*args, **kwargs)
    return [(o.data, o.metadata) for o in out.outputs]


@pytest.mark.parametrize("value", [0.9771, 42, "97.7%"])
@pytest.mark.parametrize("display", [False, True])
def test_glue_writes_what_myst_nb_writes(value, display):
    myst_glue = pytest.importorskip("myst_nb").glue
    assert captured(glue, "acc", value, display=display) == \
        captured(myst_glue, "acc", value, display=display)


def test_glue_hides_the_value_by_default_and_returns_it():
    with capture_output() as out:
        assert glue("ratio", 1.5) == 1.5
    (o,) = out.outputs
    assert set(o.data) == {GLUE_PREFIX + "text/plain"}
    assert o.metadata["scrapbook"] == {"name": "ratio", "mime_prefix": GLUE_PREFIX}


def test_glue_turns_numpy_scalars_into_numbers_the_prose_can_format():
    (data, _), = captured(glue, "x", np.float64(0.25))
    assert data[GLUE_PREFIX + "text/plain"] == "0.25"
    (data, _), = captured(glue, "n", np.int64(7))
    assert data[GLUE_PREFIX + "text/plain"] == "7"


@pytest.mark.parametrize("name", ["", "two words", "1st", None])
def test_glue_rejects_names_the_prose_cannot_refer_to(name):
    with pytest.raises(ValueError, match="name must be"):
        glue(name, 1.0)


@pytest.mark.parametrize("value", [torch.tensor(1.0), [1, 2], True, None])
def test_glue_rejects_values_it_cannot_print_as_a_number_or_text(value):
    with pytest.raises(TypeError, match="value for 'x' must be a str, int or float"):
        glue("x", value)
