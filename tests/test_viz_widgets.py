"""attnbook.viz and attnbook.widgets, driven headless."""

import ipywidgets as W
import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from attnbook import viz, widgets  # noqa: E402
from attnbook.worked import single_head_example  # noqa: E402


def test_matrix_to_latex_rounds_and_highlights():
    tex = viz.matrix_to_latex(
        [[1.0, 0.49551], [-0.00001, 2.5]], digits=3, name="A", highlight=[(1, 1)]
    )
    assert tex.startswith(r"A = \begin{bmatrix} 1 & 0.496 \\ 0 & ")
    assert r"\mathbf{2.5}" in tex and tex.endswith(r"\end{bmatrix}")


def test_matrix_to_html_highlights_cells_and_labels():
    html = viz.matrix_to_html(
        torch.eye(2), title="I", highlight=[(0, 1)], row_labels=["a", "b"], col_labels=["c", "d"]
    )
    assert html.count("<td") == 4 and html.count("background:") == 1 and ">I</caption>" in html
    with pytest.raises(ValueError, match="2-D"):
        viz.matrix_to_html([1, 2, 3])


def test_heatmap_labels_and_errors():
    ax = viz.heatmap(torch.tensor([[0.2, 0.8], [1.0, 0.0]]), ["a", "b"], ["x", "y"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    assert len(ax.texts) == 4  # annotated cells
    with pytest.raises(ValueError, match="x_labels must have 2 labels"):
        viz.heatmap(torch.zeros(2, 2), ["a"])


def test_as_view_accepts_the_documented_kinds():
    import matplotlib.pyplot as plt

    assert isinstance(widgets.as_view("<b>x</b>"), W.HTML)
    assert isinstance(widgets.as_view(plt.figure()), W.Image)
    with pytest.raises(TypeError, match="a view must be"):
        widgets.as_view(3)


def test_static_stepper_switches_views_and_is_jslinked():
    box = widgets.static_stepper(
        ["<p>zero</p>", "<p>one</p>", "<p>two</p>"], labels=["a", "b", "c"]
    )
    # the jslink is what the static page runs: control.value -> stack.selected_index
    assert box.links[0].source == (box.control, "value")
    assert box.links[0].target == (box.stack, "selected_index")
    box.control.value = 2
    assert box.stack.selected_index == 2
    assert box.stack.children[box.stack.selected_index].value == "<p>two</p>"
    with pytest.raises(ValueError, match="one entry per view"):
        widgets.static_stepper(["a", "b"], labels=["x"])


def test_decoder_steps_explorer_has_one_view_per_step():
    w = torch.softmax(torch.randn(3, 4), -1)
    box = widgets.decoder_steps_explorer(
        list("abcd"), ["X", "Y", "Z"], torch.randn(3, 4), w, torch.randn(3, 2)
    )
    assert len(box.stack.children) == 3 and all(isinstance(c, W.Image) for c in box.stack.children)
    assert box.control.max == 2
    with pytest.raises(ValueError, match="len\\(outputs\\), len\\(keys\\)"):
        widgets.decoder_steps_explorer(list("abc"), ["X"], torch.zeros(1, 4), torch.zeros(1, 4))


def test_worked_stage_explorer_views_follow_token_and_stage():
    ex = single_head_example()
    box = widgets.worked_stage_explorer(ex)
    assert len(box.stack.children) == 3
    box.row_control.index = 2
    box.control.value = 5
    assert box.stack.selected_index == 2 and box.stack.children[2].selected_index == 5
    assert {ln.target[0] for ln in box.links} >= {*box.stack.children, box.stack}
    html = widgets.shown_view(box).value
    assert "Z = weights · V" in html and "token x3" in html
    assert viz._fmt(float(ex.Z[2, 0]), 3) in html


def test_worked_example_editor_recomputes_everything():
    ed = widgets.WorkedExampleEditor()
    before = ed.output.value
    ed.matrix.value = "X"
    ed.row.value, ed.col.value = 2, 1
    ed.value.value = 0.0  # X[2, 1]: 1 -> 0
    expected = single_head_example(X=((1, 0, 1, 0), (0, 1, 0, 1), (1, 0, 1, 1)))
    torch.testing.assert_close(ed.example.Z, expected.Z)
    assert ed.output.value != before
    assert viz._fmt(float(expected.weights[2, 2]), 3) in ed.output.value
    ed.set_entry("W_K", 0, 0, 3.0)  # W_K now differs from W_Q
    assert not torch.equal(ed.example.W_K, ed.example.W_Q)
    ed._on_reset()
    torch.testing.assert_close(ed.example.Z, single_head_example().Z)
    with pytest.raises(ValueError, match="must index W_Q of shape"):
        ed.set_entry("W_Q", 4, 0, 1.0)


def test_static_grid_checks_shapes_and_links_every_row():
    views = [[f"<p>{r}{c}</p>" for c in "xyz"] for r in "ab"]
    box = widgets.static_grid(views, ["a", "b"], ["x", "y", "z"], col_control="buttons")
    box.row_control.index, box.control.index = 1, 2
    assert widgets.shown_view(box).value == "<p>bz</p>"
    assert len(box.links) == 3  # one per row stack + the row stack
    assert len(widgets.static_grid(views, ["a", "b"], ["x", "y", "z"]).links) == 4  # + names
    with pytest.raises(
        ValueError, match=r"depth 1 must have one entry per label of axis 1 \(1\), got 2"
    ):
        widgets.static_grid([["a"], ["b", "c"]], ["r1", "r2"], ["c1"])
    with pytest.raises(ValueError, match="control must be"):
        widgets.static_grid([["a"]], ["r"], ["c"], col_control="knob")


def test_temperature_explorer_views_match_the_saturation_numbers():
    from attnbook.attention import dot_score, softmax_saturation

    box = widgets.temperature_explorer((4, 256), n_keys=5, seed=3)
    assert [len(r.children) for r in box.stack.children] == [2, 2]
    box.row_control.index, box.control.value = 0, 1
    raw_view = widgets.shown_view(box).value
    box.row_control.index = 1
    assert widgets.shown_view(box).value != raw_view
    g = torch.Generator().manual_seed(3)
    for d in (4, 256):  # the draws the explorer made, in its order
        q = torch.randn(1, d, generator=g, dtype=torch.float64)
        k = torch.randn(5, d, generator=g, dtype=torch.float64)
    raw = softmax_saturation(dot_score(q, k)[0])
    scaled = softmax_saturation(dot_score(q, k)[0] / 16)
    assert raw["entropy"] < scaled["entropy"]  # d_k = 256: unscaled is sharper
    with pytest.raises(ValueError, match="d_ks"):
        widgets.temperature_explorer(())


def test_softmax_saturation_limits():
    from attnbook.attention import softmax_saturation

    uniform = softmax_saturation(torch.zeros(4))
    assert abs(float(uniform["entropy"]) - float(torch.log(torch.tensor(4.0)))) < 1e-6
    peaked = softmax_saturation(torch.tensor([100.0, 0.0, 0.0, 0.0]))
    assert float(peaked["max_weight"]) > 0.999 and float(peaked["jacobian_norm"]) < 1e-6
    assert float(uniform["jacobian_norm"]) > 0.4


def test_attention_grid_lays_out_layers_by_heads():
    import matplotlib.pyplot as plt

    w = torch.softmax(torch.randn(2, 3, 4, 5), -1)
    fig = viz.attention_grid(w, list("abcde"), list("wxyz"))
    assert len(fig.axes) == 6 and fig.axes[0].get_title() == "layer 1, head 1"
    plt.close(fig)
    assert len(viz.attention_grid(w[0, 0]).axes) == 1
    with pytest.raises(ValueError, match="layers, heads, queries, keys"):
        viz.attention_grid(torch.zeros(1, 2, 3, 4, 5))


def test_positional_encoding_figure_checks_shape():
    fig = viz.positional_encoding_figure(torch.zeros(10, 8))
    assert fig.axes[0].get_xlabel() == "dimension i"
    with pytest.raises(ValueError, match="2-D"):
        viz.positional_encoding_figure(torch.zeros(3))


def test_attention_explorer_views_every_example_type_and_layer():
    def example(name, seed):
        g = torch.Generator().manual_seed(seed)
        w = lambda *shape: torch.softmax(torch.randn(*shape, generator=g), -1)  # noqa: E731
        return {
            "name": name,
            "attention": {
                "encoder self": (w(2, 2, 3, 3), list("abc"), list("abc")),
                "cross": (w(2, 2, 4, 3), list("abc"), list("wxyz")),
            },
        }

    box = widgets.attention_explorer([example("one", 0), example("two", 1)])
    example_control, type_control, layer_control = box.controls
    assert example_control.options == ("one", "two") and type_control.options == (
        "encoder self",
        "cross",
    )
    seen = set()
    for e in range(2):
        for t in range(2):
            for layer in range(2):
                example_control.index, type_control.index, layer_control.value = e, t, layer
                seen.add(widgets.shown_view(box).value)
    assert len(seen) == 8  # every combination has its own view
    bad = example("three", 2)
    del bad["attention"]["cross"]
    with pytest.raises(ValueError, match="must have the attention types"):
        widgets.attention_explorer([example("one", 0), bad])


def test_positional_encoding_explorer_steppers():
    n, d = 50, 16
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    box = widgets.positional_encoding_explorer(pe, dims=(0, 3), positions=(0, 10, 40))
    assert len(box.by_dimension.stack.children) == 2 and len(box.by_position.stack.children) == 3
    box.by_position.control.value = 2
    assert widgets.shown_view(box.by_position) is box.by_position.stack.children[2]
    with pytest.raises(ValueError, match=r"dims must be non-empty and in 0..7"):
        widgets.positional_encoding_explorer(pe, dims=(8,))
    with pytest.raises(ValueError, match="even d_model"):
        widgets.positional_encoding_explorer(torch.zeros(4, 3))


def test_attention_types_figure_one_panel_per_type():
    w = torch.softmax(torch.randn(3, 3), -1)
    fig = viz.attention_types_figure(
        {"encoder self": (w, list("abc"), list("abc")), "cross": (w, list("abc"), list("xyz"))}
    )
    assert [ax.get_title() for ax in fig.axes] == ["encoder self", "cross"]
    with pytest.raises(ValueError, match="at least one"):
        viz.attention_types_figure({})


def test_attention_explorer_shows_the_models_own_weights():
    from attnbook.attention import MultiHeadAttention, causal_mask

    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 4, 8)
    _, self_w = mha(x, x, x)  # (1, H, 4, 4)
    _, causal_w = mha(x, x, x, causal_mask(4))
    tokens = list("abcd")
    box = widgets.attention_explorer(
        [
            {
                "name": "x",
                "attention": {
                    "self": (self_w, tokens, tokens),
                    "causal self": (causal_w, tokens, tokens),
                },
            }
        ]
    )
    box.controls[1].index = 1
    expected = viz.view_png(
        viz.attention_grid(
            causal_w[0], tokens, tokens, layer_names=["causal self, layer 1"], max_cols=4
        )
    )
    assert widgets.shown_view(box).value == expected  # the same picture, byte for byte


def test_bottleneck_figure_draws_the_recorded_curves():
    from attnbook.utils import recorded_result

    bench = recorded_result("bottleneck")
    fig = viz.bottleneck_figure(bench)
    assert len(fig.axes) == 2  # exact match, per token
    for ax, metric in zip(fig.axes, ("exact", "token"), strict=True):
        curves = [
            line for line in ax.get_lines() if line.get_label() in viz.BOTTLENECK_MODELS.values()
        ]
        assert [c.get_label() for c in curves] == [
            viz.BOTTLENECK_MODELS[m] for m in ("context", "attention")
        ]
        for curve, model in zip(curves, ("context", "attention"), strict=True):
            assert list(curve.get_xdata()) == [r["length"] for r in bench["by_length"]]
            assert list(curve.get_ydata()) == [r[model][metric] for r in bench["by_length"]]
    one = viz.bottleneck_figure(bench, ["context"], metrics=["exact"])
    assert len(one.axes) == 1 and len(one.axes[0].get_lines()) == 1
    with pytest.raises(ValueError, match="models must be"):
        viz.bottleneck_figure(bench, ["rnn"])
    with pytest.raises(ValueError, match="metrics must be"):
        viz.bottleneck_figure(bench, metrics="exact")
    with pytest.raises(TypeError, match="bottleneck"):
        viz.bottleneck_figure({"rows": []})


def test_token_weights_html_shades_each_token_by_its_weight():
    html = viz.token_weights_html(
        ["a", "<eos>", " "],
        torch.tensor([0.25, 0.75, 0.0]),
        scores=[1.0, 2.1, -3.0],
        caption="<b>step 1</b>",
    )
    assert "<div><b>step 1</b></div><table" in html
    assert "rgba(31,119,180,0.25)" in html and "rgba(31,119,180,0.75)" in html
    assert "&lt;eos&gt;" in html and "<eos>" not in html  # tokens are escaped
    assert html.count("<td") == 3 * 3 + 2  # tokens, weights, scores
    assert ">0.25<" in html and ">2.1<" in html and ">-3<" in html
    assert viz.token_weights_html("ab", [0.5, 0.5]).count("<tr") == 2  # no scores row
    with pytest.raises(ValueError, match="same length"):
        viz.token_weights_html(["a"], [0.5, 0.5])
    with pytest.raises(ValueError, match="one value per token"):
        viz.token_weights_html(["a", "b"], [0.5, 0.5], scores=[1.0])
