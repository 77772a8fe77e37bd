"""Figures of the RNN chapters: the encoder-decoder and its bottleneck, attention in three
steps, the RNN decoder with attention, and the score functions (chapters 1 to 6)."""

from __future__ import annotations

import math

from .canvas import (  # noqa: F401
    _GREY,
    _Canvas,
    _cells,
    _chain,
    _dark,
    _figure,
    _tint,
)

__all__: list[str] = []  # the figures register themselves with _figure


@_figure(
    "rnn_encoder_decoder",
    "The RNN encoder-decoder and its bottleneck",
    """An encoder RNN reads the source tokens x₁ to x_S and produces hidden states h₁ to h_S.
    Only its last state is kept as the context vector c = h_S, a single fixed-size vector
    between encoder and decoder: the bottleneck. A decoder RNN with states s₁ to s_T writes the
    target tokens y₁ to y_T, each step reading the token it wrote before (the first step reads
    the start token <s>). A solid arrow from c to the first decoder state marks Sutskever et al.
    (2014), where c is only the decoder's initial state; dashed arrows from c to every decoder
    step mark Cho et al. (2014), where c also enters every step.""",
    height=370,
)
def _rnn_encoder_decoder(c: _Canvas) -> None:
    w, h, y = 50, 46, 130
    enc = _cells(c, [30, 98, 166, 250], y, w, h, ["h_1", "h_2", "h_3", "h_S"], "enc")
    dec = _cells(c, [392, 460, 528, 614], y, w, h, ["s_1", "s_2", "s_3", "s_T"], "dec")
    c.text(165, 40, "Encoder: reads x_1 … x_S", bold=True, colour=_dark("blue"))
    c.text(528, 40, "Decoder: writes y_1 … y_T", bold=True, colour=_dark("vermillion"))
    for cells in (enc, dec):
        _chain(c, cells[:3])
        c.text((cells[2].right[0] + cells[3].x) / 2, y + h / 2, "…", size=18)
    for b, lab in zip(enc, ["x_1", "x_2", "x_3", "x_S"], strict=True):
        c.text(b.cx, y + h + 44, lab)
        c.arrow((b.cx, y + h + 34), b.bottom)
    ins, outs = ["<s>", "y_1", "y_2", "y_{T-1}"], ["y_1", "y_2", "y_3", "y_T"]
    for b, lab, out in zip(dec, ins, outs, strict=True):
        c.text(b.cx + 10, y + h + 44, lab)
        c.arrow((b.cx + 10, y + h + 34), (b.cx + 10, y + h))
        c.arrow(b.top, (b.cx, y - 26))
        c.text(b.cx, y - 38, out)
    ctx = c.box(322, y - 4, 46, h + 8, "c", "ctx", size=18, bold=True)
    c.arrow(enc[3].right, ctx.left, colour="green", width=2.2)
    c.arrow(ctx.right, dec[0].left, colour="green", width=2.2)
    c.text(ctx.cx, y - 50, "c = h_S", bold=True, colour=_dark("green"))
    c.text(ctx.cx, y - 30, "one fixed vector", size=13, colour=_dark("green"))
    # Cho et al.: c enters every decoder step, along a bus under the inputs
    bus = y + h + 76
    c.line(ctx.bottom, (ctx.cx, bus), (dec[-1].x + 8, bus), colour="green", dashed=True, arrow=0)
    for b in dec:
        c.line((b.x + 8, bus), (b.x + 8, y + h), colour="green", dashed=True)
    c.text(ctx.cx, bus + 20, "the bottleneck: all of x_1 … x_S in one vector", size=13)
    # the legend
    ly = 322
    c.line((40, ly), (90, ly), colour="green", width=2.2)
    c.text(
        100, ly, "Sutskever et al. (2014): c is only the decoder's initial state", anchor="start"
    )
    c.line((40, ly + 26), (90, ly + 26), colour="green", dashed=True)
    c.text(100, ly + 26, "Cho et al. (2014): c also enters every decoder step", anchor="start")


@_figure(
    "attention_three_steps",
    "Attention in three steps: score, softmax, weighted sum",
    """Three encoder states h₁, h₂, h₃ and the decoder state s_t go through three steps. Step
    1 scores each encoder state against the decoder state, e_{t,i} = score(s_t, h_i), giving
    2.0, 1.0 and 0.1. Step 2 turns the scores into weights with a softmax over i: α_{t,i} = 0.66,
    0.24 and 0.10, which sum to 1. Step 3 sums the encoder states with these weights into the
    context vector c_t = Σ_i α_{t,i} h_i = 0.66 h₁ + 0.24 h₂ + 0.10 h₃.""",
    height=360,
)
def _attention_three_steps(c: _Canvas) -> None:
    scores = [2.0, 1.0, 0.1]
    total = sum(math.exp(e) for e in scores)
    alphas = [math.exp(e) / total for e in scores]
    top, row = 118, 56
    for x, head, formula in [
        (200, "1  score", "e_{t,i} = score(s_t, h_i)"),
        (390, "2  softmax over i", "α_{t,i} = exp e_{t,i} / Σ_j exp e_{t,j}"),
        (600, "3  weighted sum", "c_t = Σ_i α_{t,i} h_i"),
    ]:
        c.text(x, 28, head, size=17, bold=True)
        c.text(x, 56, formula)
    q = c.box(18, 28, 84, 44, "s_t", "dec")
    c.text(q.cx, 86, "query", size=13, colour=_GREY)
    ctx = c.box(560, top + row - 26, 84, 52, "c_t", "ctx", size=18, bold=True)
    c.line(q.right, (125, q.cy), (125, top + 2 * row + 20), colour=_GREY, dashed=True, arrow=0)
    for i, (e, a) in enumerate(zip(scores, alphas, strict=True)):
        y = top + i * row
        hb = c.box(18, y, 84, 40, f"h_{i + 1}", "enc")
        sb = c.box(150, y, 100, 40, f"e_{{t,{i + 1}}} = {e:.1f}", "attn", size=14)
        c.arrow(hb.right, sb.left)
        c.circle(125, y + 20, 3, role="plain")
        c.arrow(sb.right, (300, y + 20))
        # the weight as a bar whose length is alpha
        c.rect(302, y + 6, 150 * a, 28, fill=_tint("purple", 0.35), stroke=_dark("purple"), rx=3)
        c.text(302 + 150 * a + 8, y + 20, f"α_{{t,{i + 1}}} = {a:.2f}", anchor="start", size=14)
        c.line((500, y + 20), ctx.left, colour="purple", width=1 + 5 * a)
    c.text(125, top + 3 * row + 4, "s_t compared\nwith each h_i", size=13, colour=_GREY)
    c.text(ctx.cx, ctx.y + ctx.h + 48, "= 0.66 h_1\n+ 0.24 h_2\n+ 0.10 h_3", size=14)
    c.text(390, top + 3 * row + 6, "weights ≥ 0, sum to 1", size=13, colour=_GREY)
    c.text(350, 340, "Of the three steps, only step 1 differs between variants.", size=14)


@_figure(
    "rnn_with_attention",
    "The RNN decoder with attention, one step",
    """At decoder step t the previous decoder state s_{t-1} is the query. It is scored against
    every encoder state h₁ to h_S; the scores become weights α_{t,1} to α_{t,S} by a softmax, drawn
    as lines whose thickness is the weight. The weighted sum of the encoder states is the context
    vector c_t, which enters the new decoder state s_t together with the previous output
    y_{t-1}; s_t then predicts y_t. The same happens again at every step, with new weights.""",
    height=420,
)
def _rnn_with_attention(c: _Canvas) -> None:
    alphas = [0.05, 0.1, 0.6, 0.2, 0.05]
    labels = ["h_1", "h_2", "h_3", "h_4", "h_S"]
    xs = [40 + 110 * k for k in range(5)]
    ey = 330
    enc = _cells(c, xs, ey, 64, 42, labels, "enc")
    _chain(c, enc)
    for b, k in zip(enc, ["x_1", "x_2", "x_3", "x_4", "x_S"], strict=True):
        c.text(b.cx, ey + 70, k)
        c.arrow((b.cx, ey + 60), b.bottom)
    c.text(xs[4] - 23, ey + 21, "…", size=16)
    att = c.box(190, 200, 330, 60, "", "attn")
    c.text(att.cx, att.cy - 10, "score → softmax → weighted sum", bold=True)
    c.text(att.cx, att.cy + 14, "α_{t,i} = softmax_i score(s_{t-1}, h_i)", size=14)
    for b, a in zip(enc, alphas, strict=True):
        tx = att.x + 20 + (b.cx - 72) * (att.w - 40) / (xs[4] - xs[0])
        c.line((b.cx, ey - 24), (tx, att.y + att.h), colour="purple", width=1 + 7 * a, arrow=0)
        c.text(b.cx, ey - 12, f"{a:.2f}", size=13, colour=_dark("purple"))
    c.text(566, ey - 12, "weights α_{t,i}", size=13, colour=_dark("purple"), anchor="start")
    prev = c.box(60, 60, 100, 46, "s_{t-1}", "dec")
    cur = c.box(420, 60, 100, 46, "s_t", "dec")
    c.arrow(prev.right, cur.left)
    c.text(cur.x - 34, 150, "y_{t-1}", size=14)
    c.line((cur.x - 34, 138), (cur.x - 34, 128), (cur.x + 20, 128), (cur.x + 20, cur.y + cur.h))
    ctx = c.circle(600, 150, 30, "c_t", "ctx")
    c.elbow(att.right, (ctx.cx, ctx.y + ctx.h), colour="green", vertical_first=False)
    c.line((ctx.cx, ctx.y), (ctx.cx, 83), cur.right, colour="green")
    c.text(ctx.cx + 40, 118, "context", size=13, anchor="start", colour=_dark("green"))
    c.elbow(prev.bottom, att.left, vertical_first=True)
    c.text(prev.cx + 10, 160, "query", size=13, colour=_GREY, anchor="start")
    c.arrow(cur.top, (cur.cx, 20))
    c.text(cur.cx + 14, 24, "y_t", anchor="start")


def _flow(c: _Canvas, x: float, steps: list[tuple[str, str]], y0: float) -> None:
    """One score function drawn as q and k flowing down through ``steps`` (label, role)."""
    q = c.box(x + 12, y0, 54, 36, "q", "q")
    k = c.box(x + 100, y0, 54, 36, "k", "k")
    y = y0 + 70
    prev = None
    for label, role in steps:
        b = c.box(x + 12, y, 142, 36, label, role, size=14)
        if prev is None:
            c.arrow(q.bottom, (q.cx, b.y))
            c.arrow(k.bottom, (k.cx, b.y))
        else:
            c.arrow(prev.bottom, b.top)
        prev, y = b, y + 62
    c.arrow(prev.bottom, (prev.cx, prev.y + 56))
    c.text(prev.cx, prev.y + 70, "a score (a number)", size=13, colour=_GREY)


@_figure(
    "score_functions",
    "Four score functions side by side",
    """Four panels, one per score function, each turning a query q and a key k into one number.
    Dot: q · k, no parameters. Scaled dot: q · k / √d_k, no parameters. General (Luong):
    qᵀ W_a k, with a learned matrix W_a. Additive (Bahdanau): v_aᵀ tanh(W_a [q; k]), with a
    learned matrix W_a and vector v_a. The first three score all pairs with one matrix product
    (general after multiplying the queries by W_a); additive runs a small network per pair.""",
    height=420,
)
def _score_functions(c: _Canvas) -> None:
    panels = [
        ("dot", "q · k", "no parameters", [("q · k", "attn")]),
        ("scaled dot", "q · k / √d_k", "no parameters", [("q · k", "attn"), ("÷ √d_k", "attn")]),
        ("general", "qᵀ W_a k", "learns W_a", [("q W_a", "attn"), ("· k", "attn")]),
        (
            "additive",
            "v_aᵀ tanh(W_a [q; k])",
            "learns W_a, v_a",
            [("W_a [q; k]", "attn"), ("tanh", "attn"), ("· v_a", "attn")],
        ),
    ]
    for n, (name, formula, params, steps) in enumerate(panels):
        x = 6 + n * 173
        c.rect(x, 8, 166, 404, fill="#FAFAFA", stroke="#DDDDDD", rx=8)
        c.text(x + 83, 32, name, size=17, bold=True)
        c.text(x + 83, 58, formula, size=14)
        c.text(x + 83, 82, params, size=13, colour=_GREY)
        _flow(c, x, steps, 104)
    c.text(x + 83, 395, "Bahdanau et al.", size=13, colour=_GREY)
    c.text(6 + 2 * 173 + 83, 395, "Luong et al.", size=13, colour=_GREY)
    c.text(6 + 173 + 83, 395, "Vaswani et al.", size=13, colour=_GREY)
    c.text(6 + 83, 395, "Luong et al.", size=13, colour=_GREY)
