"""attnbook.utils: glue writes what myst-nb's glue writes, and refuses what the book cannot format."""

import inspect
import json

import numpy as np
import pytest
import torch
from IPython.utils.capture import capture_output

from attnbook import best_time, glue
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
    ((ours, our_meta),) = captured(glue, "acc", value, display=display)
    ((theirs, their_meta),) = captured(myst_glue, "acc", value, display=display)
    assert ours == theirs
    # the same metadata, and for a float the value before rounding (which myst-nb ignores)
    assert our_meta.pop("attnbook", None) == (
        {"value": repr(value), "digits": 5} if isinstance(value, float) else None
    )
    assert our_meta == their_meta


def test_glue_hides_the_value_by_default_and_returns_it():
    with capture_output() as out:
        assert glue("ratio", 1.5) == 1.5
    (o,) = out.outputs
    assert set(o.data) == {GLUE_PREFIX + "text/plain"}
    assert o.metadata["scrapbook"] == {"name": "ratio", "mime_prefix": GLUE_PREFIX}


def test_glue_turns_numpy_scalars_into_numbers_the_prose_can_format():
    ((data, _),) = captured(glue, "x", np.float64(0.25))
    assert data[GLUE_PREFIX + "text/plain"] == "0.25"
    ((data, _),) = captured(glue, "n", np.int64(7))
    assert data[GLUE_PREFIX + "text/plain"] == "7"


@pytest.mark.parametrize("name", ["", "two words", "1st", None])
def test_glue_rejects_names_the_prose_cannot_refer_to(name):
    with pytest.raises(ValueError, match="name must be"):
        glue(name, 1.0)


@pytest.mark.parametrize("value", [torch.tensor(1.0), [1, 2], True, None])
def test_glue_rejects_values_it_cannot_print_as_a_number_or_text(value):
    with pytest.raises(TypeError, match="value for 'x' must be a str, int or float"):
        glue("x", value)


def test_best_time_is_the_fastest_run_after_a_warm_up():
    calls = []
    # perf_counter at the start and end of each run: the runs take 0.5, 0.2, 0.1 and 0.2 s
    seconds = iter([0.0, 0.5, 0.5, 0.7, 0.7, 0.8, 0.8, 1.0])

    import attnbook.utils as utils

    real = utils.time.perf_counter
    utils.time.perf_counter = lambda: next(seconds)
    try:
        best = best_time(lambda: calls.append(1), repeats=4)
    finally:
        utils.time.perf_counter = real
    assert len(calls) == 5  # one warm-up, then one call per repeat
    assert best == pytest.approx(0.1)  # the fastest run


def test_best_time_averages_number_calls_per_run():
    calls = []
    assert best_time(lambda: calls.append(1), repeats=2, number=3) >= 0
    assert len(calls) == 1 + 2 * 3


@pytest.mark.parametrize(
    "kwargs", [{"repeats": 0}, {"number": -1}, {"repeats": 2.0}, {"number": True}]
)
def test_best_time_rejects_counts_that_are_not_positive_ints(kwargs):
    with pytest.raises(ValueError, match="must be a positive int"):
        best_time(lambda: None, **kwargs)


def test_best_time_needs_something_to_call():
    with pytest.raises(TypeError, match="fn must be callable"):
        best_time(3)


def test_show_source_is_the_real_code_of_a_function_method_and_class():
    from attnbook import show_source
    from attnbook.attention import MultiHeadAttention, scaled_dot_product_attention

    src = show_source(scaled_dot_product_attention)
    assert src.code == inspect.getsource(scaled_dot_product_attention)
    assert src.path == "attnbook/attention/functional.py"
    md = src._repr_markdown_()
    assert md.startswith(
        "`attnbook.attention.functional.scaled_dot_product_attention` in "
        "`src/attnbook/attention/functional.py`:"
    )
    assert "```python\n@checked(_check_sdpa)\ndef scaled_dot_product_attention(" in md  # its check
    assert md.rstrip().endswith("```")
    method = show_source(MultiHeadAttention.forward)
    assert method.code.startswith("@checked(_check_forward)\ndef forward(\n    self,")  # dedented
    assert method.name == "attnbook.attention.multihead.MultiHeadAttention.forward"
    assert show_source(MultiHeadAttention).code.startswith("class MultiHeadAttention(")
    assert repr(method).splitlines()[0] == (
        "# attnbook.attention.multihead.MultiHeadAttention.forward "
        "(src/attnbook/attention/multihead.py)"
    )


def test_show_source_rejects_what_is_not_package_code():
    from attnbook import show_source

    with pytest.raises(TypeError, match="obj must be a class, function, method or module.*int"):
        show_source(3)
    with pytest.raises(ValueError, match="obj must come from the attnbook package.*'json'"):
        show_source(json.dumps)


def test_setup_notebook_prints_arrays_and_tensors_as_wide_as_the_books_column():
    from pathlib import Path

    import tomllib

    from attnbook import setup_notebook
    from attnbook.utils import PRINT_WIDTH

    saved_np, saved_torch = np.get_printoptions(), torch._tensor_str.PRINT_OPTS.linewidth
    try:
        with capture_output():
            setup_notebook(threads=None)
        assert np.get_printoptions()["linewidth"] == PRINT_WIDTH
        wide = str(torch.arange(200.0))
        assert max(map(len, wide.splitlines())) <= PRINT_WIDTH < len(str(list(range(60))))
    finally:
        np.set_printoptions(**saved_np)
        torch.set_printoptions(linewidth=saved_torch)
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    assert tomllib.loads(pyproject.read_text())["tool"]["ruff"]["line-length"] == PRINT_WIDTH


def test_glue_rounds_floats_to_5_significant_digits_so_last_bits_do_not_show():
    # float32 carries about 7 significant digits, and CPUs differ in the 7th (issue 38: a
    # softmax glued at 10 digits read 2.899628878 on one machine and 2.899628639 on another)
    a, b = 2.899628878, 2.899628639
    (((data_a, meta_a),), ((data_b, _),)) = captured(glue, "x", a), captured(glue, "x", b)
    assert data_a == data_b == {GLUE_PREFIX + "text/plain": "2.8996"}
    assert meta_a["attnbook"] == {"value": "2.899628878", "digits": 5}  # kept for the tests
    with capture_output():
        assert glue("x", 0.1 + 0.2) == 0.3
        assert glue("x", 12345.678, digits=3) == 12300.0
        assert glue("x", np.float32(0.7)) == 0.7
        assert glue("n", 123456789) == 123456789  # ints are exact: never rounded


@pytest.mark.parametrize("digits", [0, 6, 10, 2.5, True, "3"])
def test_glue_digits_must_be_a_sensible_int(digits):
    with pytest.raises(ValueError, match="digits must be an int from 1 to 5 .*, got"):
        glue("x", 1.0, digits=digits)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_glue_refuses_a_float_that_is_not_finite(value):
    with pytest.raises(ValueError, match="value for 'x' must be finite, got"):
        glue("x", value)


def test_glue_digits_refuses_text():
    with pytest.raises(TypeError, match="digits rounds numbers"):
        glue("x", "97.7%", digits=3)


@pytest.mark.parametrize(
    ("env", "asked", "expected"),
    [
        ("1", 2, 1),  # make test's side-by-side phase: one thread per chapter
        ("2", 2, 2),
        ("8", 2, 2),  # the chapter's own choice when the environment allows more
        ("4", 1, 1),
        (None, 2, 2),
        ("", 2, 2),
        ("two", 2, 2),  # unusable values say nothing
        ("0", 2, 2),
    ],
)
def test_setup_notebook_threads_are_capped_by_omp_num_threads(monkeypatch, env, asked, expected):
    from attnbook import setup_notebook

    if env is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    saved = torch.get_num_threads()
    saved_np, saved_torch = np.get_printoptions(), torch._tensor_str.PRINT_OPTS.linewidth
    try:
        with capture_output():
            setup_notebook(threads=asked)
        assert torch.get_num_threads() == expected
    finally:
        torch.set_num_threads(saved)
        np.set_printoptions(**saved_np)
        torch.set_printoptions(linewidth=saved_torch)
