"""Figures of the Transformer chapters: positional encoding, Add & Norm, the feed-forward
network, the whole model and the key-value cache (chapters 9 to 16)."""

from __future__ import annotations

import math
from dataclasses import astuple

from .canvas import (  # noqa: F401
    _GREY,
    _HEAD_COLOURS,
    WIDTH,
    _Box,
    _Canvas,
    _dark,
    _figure,
    _num,
    _role,
    _text_width,
    _tint,
)

__all__: list[str] = []  # the figures register themselves with _figure


@_figure(
    "positional_encoding",
    "Sinusoidal positional encoding: one wave per dimension, added to the embedding",
    """Left: the positional encoding's values at positions 0 to 40 for four dimensions of a
    d_model = 16 encoding. Dimensions 0 and 1 (pair i = 0) are sin(pos) and cos(pos), the fastest
    waves; dimension 4 (i = 2) and dimension 12 (i = 6) are sines with longer and longer
    wavelengths: the frequency falls with the dimension pair i and does not depend on the
    position. Right: at each position pos the encoding vector PE_pos is added to the token's
    embedding, and the sum enters the first layer.""",
    height=440,
)
def _positional_encoding(c: _Canvas) -> None:
    d_model, n = 16, 40
    x0, x1 = 150, 440
    rows = [(0, "sin"), (1, "cos"), (4, "sin"), (12, "sin")]
    for r, (dim, fn) in enumerate(rows):
        i = dim // 2
        yc, amp = 58 + r * 78, 24
        c.path(f"M{x0} {yc} L{x1} {yc}", stroke="#CCCCCC", width=1)
        pts = []
        for p in range(4 * n + 1):
            pos = p / 4
            angle = pos / 10000 ** (2 * i / d_model)
            v = math.sin(angle) if fn == "sin" else math.cos(angle)
            pts.append(f"{_num(x0 + (x1 - x0) * pos / n)} {_num(yc - amp * v)}")
        c.path("M" + " L".join(pts), stroke=_dark(_HEAD_COLOURS[r]), width=2.2)
        c.text(x0 - 10, yc - 9, f"dim {dim}", anchor="end", bold=True, size=14)
        c.text(x0 - 10, yc + 11, f"{fn}, i = {i}", anchor="end", size=13, colour=_GREY)
    base = 58 + 3 * 78 + 34
    c.arrow((x0, base), (x1 + 10, base), colour=_GREY, width=1.2)
    for p in range(0, n + 1, 10):
        c.text(x0 + (x1 - x0) * p / n, base + 14, str(p), size=13, colour=_GREY)
    c.text((x0 + x1) / 2, base + 34, "position pos (from 0)", size=14)
    c.text(WIDTH / 2, 396, "PE(pos, 2i) = sin(pos · ω_i),   PE(pos, 2i+1) = cos(pos · ω_i)")
    c.text(
        WIDTH / 2,
        422,
        "ω_i = 1 / 10000^{2i/d} with d = d_{model}: the frequency falls with i",
        size=14,
        colour=_GREY,
    )
    # right: embedding + PE
    cell = 18
    vx = 480
    emb = c.matrix(vx, 64, 6, 1, cell, "emb")
    pe = c.matrix(vx + 80, 64, 6, 1, cell, "ctx")
    out = c.matrix(vx + 160, 64, 6, 1, cell, "enc")
    c.text(emb.cx, 42, "embedding", size=13)
    c.text(pe.cx, 42, "PE_{pos}", size=14)
    c.text(out.cx, 42, "input", size=13)
    c.text((emb.x + emb.w + pe.x) / 2, emb.cy, "+", size=22, bold=True)
    c.text((pe.x + pe.w + out.x) / 2, emb.cy, "=", size=22, bold=True)
    c.text(
        pe.cx,
        226,
        "at each position pos:\nd_{model} numbers,\nadded to the token's\nembedding",
        size=13,
        colour=_GREY,
    )


def _sublayer_stack(c: _Canvas, x: float, pre: bool) -> None:
    """One sublayer with its residual and LayerNorm, bottom to top."""
    cx = x + 120
    c.text(cx, 408, "x", size=17, bold=True)
    order = [("LayerNorm", "norm"), ("Sublayer", "attn")] if pre else [("Sublayer", "attn")]
    y = 330
    prev = (cx, 396)
    for label, role in order:
        b = c.box(cx - 70, y - 40, 140, 40, label, role)
        c.arrow(prev, b.bottom)
        prev, y = b.top, y - 72
    add = c.circle(cx, y - 20, 16, "+", "plain")
    c.arrow(prev, add.bottom)
    # the residual: from x, around on the left, into the add
    c.line((cx, 376), (x + 20, 376), (x + 20, add.cy), add.left)
    c.text(x + 14, (376 + add.cy) / 2, "residual", size=13, colour=_GREY, anchor="end")
    top = add.top
    if not pre:
        b = c.box(cx - 70, add.y - 72, 140, 40, "LayerNorm", "norm")
        c.arrow(top, b.bottom)
        top = b.top
    c.arrow(top, (cx, 44))
    c.text(cx, 32, "output", size=14)


@_figure(
    "add_and_norm",
    "Post-LN (the paper) and pre-LN: where the LayerNorm sits",
    """Two panels, each a sublayer (attention or feed-forward) with its residual connection,
    drawn from the input x at the bottom to the output at the top. Post-LN, as in the paper: the
    sublayer's output is added to x and the sum is normalised, LayerNorm(x + Sublayer(x)). Pre-LN:
    x is normalised first, the sublayer runs on that, and its output is added to the untouched
    x, x + Sublayer(LayerNorm(x)); the residual path then carries x through the whole stack
    unnormalised, and a pre-LN stack ends with one final LayerNorm.""",
    height=500,
)
def _add_and_norm(c: _Canvas) -> None:
    for x, title, formula in [
        (6, "post-LN (the paper)", "LayerNorm(x + Sublayer(x))"),
        (358, "pre-LN (norm\\_first=True)", "x + Sublayer(LayerNorm(x))"),
    ]:
        c.rect(x, 8, 336, 484, fill="#FAFAFA", stroke="#DDDDDD", rx=8)
        _sublayer_stack(c, x + 60, pre=x > 100)
        if x > 100:
            c.text(x + 96, 96, "the stack ends with\none more LayerNorm", size=13, colour=_GREY)
        c.text(x + 168, 446, title, size=17, bold=True)
        c.text(x + 168, 472, formula, size=15)


@_figure(
    "feed_forward",
    "The position-wise feed-forward network",
    """Left: the network for one position, widening the vector from d_model to d_ff (4 times
    wider in the paper: 512 to 2048) with W₁ and a ReLU, then narrowing it back to d_model with W₂:
    FFN(x) = max(0, x W₁ + b₁) W₂ + b₂. Right: four positions x₁ to x₄, each passed through the
    same FFN with the same weights, separately; no arrow joins two positions, because the
    feed-forward network does not mix positions (attention does).""",
    height=400,
)
def _feed_forward(c: _Canvas) -> None:
    cx = 160
    top, mid, bot = (
        _Box(cx - 40, 80, 80, 26),
        _Box(cx - 150, 200, 300, 26),
        _Box(cx - 40, 320, 80, 26),
    )
    c.box(*astuple(bot), role="emb")
    c.box(*astuple(mid), "ReLU(x W_1 + b_1): d_{ff} = 2048", "ffn", size=14)
    c.box(*astuple(top), role="enc")
    c.text(cx + 50, bot.cy, "x: d_{model} = 512", size=14, anchor="start")
    c.text(cx + 50, top.cy, "FFN(x): d_{model} = 512", size=14, anchor="start")
    for lo, hi in ((bot, mid), (mid, top)):
        c.path(
            f"M{_num(lo.x)} {_num(lo.y)} L{_num(hi.x)} {_num(hi.y + hi.h)}"
            f" M{_num(lo.x + lo.w)} {_num(lo.y)} L{_num(hi.x + hi.w)} {_num(hi.y + hi.h)}",
            stroke=_GREY,
            width=1,
        )
    c.text(cx, 273, "W_1: d_{model} × d_{ff}", size=14)
    c.text(cx, 153, "W_2: d_{ff} × d_{model}", size=14)
    c.text(cx, 30, "one position", bold=True, size=16)
    c.text(cx, 376, "FFN(x) = max(0, x W_1 + b_1) W_2 + b_2", size=14)
    # right: the same FFN at every position
    c.text(520, 30, "every position, the same weights", bold=True, size=16)
    c.text(520, 54, "one copy of W_1, b_1, W_2, b_2", size=14, colour=_GREY)
    xs = [370 + 78 * k for k in range(4)]
    for k, x in enumerate(xs):
        b = c.box(x, 180, 62, 60, "FFN", "ffn", bold=True)
        c.text(b.cx, 340, f"x_{k + 1}")
        c.arrow((b.cx, 326), b.bottom)
        c.arrow(b.top, (b.cx, 100))
        c.text(b.cx, 86, f"z_{k + 1}")
    c.text(520, 376, "no arrow between positions:\nthe FFN does not mix them", size=14)


def _tag(c: _Canvas, x: float, y: float, chapters: str) -> None:
    """A small grey pill at ``x`` (its left edge), ``y`` naming the chapters that build a block."""
    w = _text_width(chapters, 13) + 10
    c.rect(x, y - 10, w, 20, fill="#FFFFFF", stroke=_GREY, rx=10, width=1)
    c.text(x + w / 2, y, chapters, size=13, colour=_GREY)


def _column(c: _Canvas, x: float, blocks, side: float) -> list[_Box]:
    """A column of blocks, bottom to top, joined by arrows, with residual connections drawn on
    ``side`` (-1 left, +1 right) and chapter tags on the right. ``blocks`` holds
    (y, label, role, tags, height); an Add & Norm takes its residual from below the block
    under it."""
    bw = 190
    boxes = []
    for y, label, role, tags, h in blocks:
        b = c.box(x, y, bw, h, label, role, size=14)
        if boxes:
            c.arrow(boxes[-1].top, b.bottom)
        if label == "Add & Norm":
            below = boxes[-1]
            start = below.y + below.h + 14
            edge = x + bw + 8 if side > 0 else x - 8
            end = (x + bw, b.cy) if side > 0 else (x, b.cy)
            c.line((below.cx, start), (edge, start), (edge, b.cy), end, colour=_GREY, width=1.3)
        _tag(c, x + bw + (22 if side > 0 else 8), b.cy, tags)
        boxes.append(b)
    return boxes


def _pe_input(c: _Canvas, x: float, label: str, circle_x: float) -> _Box:
    """Tokens, embedding and the positional encoding added, under a stack at ``x``."""
    c.text(x + 95, 772, label, size=14)
    emb = c.box(x, 706, 190, 36, label.split(" ")[0].capitalize() + " embedding", "emb", size=14)
    c.arrow((x + 95, 760), emb.bottom)
    plus = c.circle(x + 95, 664, 12, "+", "plain")
    c.arrow(emb.top, plus.bottom)
    c.circle(circle_x, 664, 16, "~", "ctx")
    c.arrow(
        (circle_x + (16 if circle_x < x else -16), 664), plus.left if circle_x < x else plus.right
    )
    c.text(circle_x, 700, "positional\nencoding", size=13)
    _tag(c, circle_x - 13, 634, "12")
    _tag(c, x + 198 if circle_x < x else x - 38, emb.cy, "13")
    return plus


def _stack(c: _Canvas, x: float, tokens: str, frame_top: float, n_label: str, blocks, side):
    """One side of the Transformer: tokens, embedding and positional encoding, then the
    layer's blocks (see :func:`_column`) in a dashed frame marked ``n_label`` (N times)."""
    plus = _pe_input(c, x, tokens, x - 36 if side < 0 else x + 226)
    fill = "#F4F4F4" if side < 0 else "none"
    c.rect(x - 14, frame_top, 218, 642 - frame_top, fill=fill, stroke=_GREY, dashed=True)
    if side < 0:
        c.text(x - 20, 450, n_label, size=18, bold=True, anchor="end")
    else:
        c.text(x + 212, 415, n_label, size=18, bold=True, anchor="start")
    boxes = _column(c, x, blocks, side)
    c.arrow(plus.top, boxes[0].bottom)
    return boxes


@_figure(
    "transformer",
    "The Transformer (Vaswani et al. 2017, Figure 1), with the chapters that build each block",
    """The encoder-decoder Transformer, bottom to top. Left, the encoder: source tokens, input
    embedding plus positional encoding, then N identical layers of multi-head self-attention and a
    feed-forward network, each followed by Add & Norm with a residual connection. Right, the
    decoder: the target tokens shifted right, output embedding plus positional encoding, then N
    identical layers of masked multi-head self-attention, multi-head cross-attention whose keys
    and values come from the encoder's output (the memory), and a feed-forward network, each
    followed by Add & Norm; then a linear layer and a softmax give the output probabilities. Each
    block carries the numbers of the chapters that build it: 04, 07 and 08 for attention, 09 for
    Add & Norm, 10 for the feed-forward network, 11 for the mask, 12 for the positional encoding,
    13 for the embeddings and the whole model, 14 for training and decoding.""",
    height=912,
)
def _transformer(c: _Canvas) -> None:
    ex, dx = 70, 390  # left edges of the encoder and decoder columns
    enc = _stack(c, ex, "input tokens x_1 … x_S", 346, "N×", [
        (566, "Multi-head\nself-attention", "attn", "04 07 08", 48),
        (506, "Add & Norm", "norm", "09", 36),
        (424, "Feed forward", "ffn", "10", 48),
        (364, "Add & Norm", "norm", "09", 36),
    ], side=-1)  # fmt: skip
    dec = _stack(c, dx, "output tokens, shifted right", 206, "×N", [
        (566, "Masked multi-head\nself-attention", "attn", "07 08 11", 48),
        (506, "Add & Norm", "norm", "09", 36),
        (424, "Multi-head\ncross-attention", "attn", "07 08", 48),
        (364, "Add & Norm", "norm", "09", 36),
        (282, "Feed forward", "ffn", "10", 48),
        (222, "Add & Norm", "norm", "09", 36),
        (150, "Linear", "dec", "13", 36),
        (96, "Softmax", "dec", "13", 36),
    ], side=1)  # fmt: skip
    cross = dec[2]
    blue = _dark("blue")
    c.line(
        enc[-1].top,
        (enc[-1].cx, 300),
        (dx - 40, 300),
        (dx - 40, cross.cy),
        cross.left,
        colour=blue,
        width=1.8,
    )
    c.text(enc[-1].cx + 40, 286, "memory (encoder output)", size=13, colour=blue)
    c.text(dx - 46, cross.cy - 14, "K, V", size=13, colour=blue, anchor="end")
    c.arrow(dec[-1].top, (dec[-1].cx, 58))
    c.text(dec[-1].cx, 42, "output probabilities", size=14)
    _tag(c, dec[-1].cx + 76, 42, "14")
    _tag(c, dx + 95 + 104, 772, "14")
    c.text(
        20,
        806,
        "The numbers are the chapters that build each block:",
        size=13,
        anchor="start",
        bold=True,
    )
    legend = [
        "03  attention in three steps",
        "04  query, key, value",
        "05  score functions",
        "07  self- and cross-attention",
        "08  multi-head attention",
        "09  Add & Norm",
        "10  feed-forward network",
        "11  masking",
        "12  positional encoding",
        "13  the Transformer",
        "14  training and inference",
    ]
    for k, item in enumerate(legend):
        col, row = divmod(k, 4)
        c.text(20 + col * 230, 830 + row * 22, item, size=13, anchor="start")


@_figure(
    "kv_cache",
    "Decoding with a key-value cache",
    """One decoding step t of one decoder layer. Only the newest token, the one written at step
    t-1, is projected: one query row q_t, one key row k_t and one value row v_t. The key and value
    rows are appended to this layer's cache, which already holds k₁ to k_{t-1} and v₁ to v_{t-1}
    from the earlier steps; the query attends over all t cached rows. Below, the cross-attention
    keys and values of the encoder's memory, S rows each, were computed once before the first
    step and are reused, unchanged, at every step. Every decoder layer keeps its own cache.""",
    height=520,
)
def _kv_cache(c: _Canvas) -> None:
    cell = 20
    c.text(90, 28, "step t: new token", size=14, bold=True)
    tok = c.box(40, 44, 100, 36, "y_{t-1}", "dec")
    xs = [("q", "q", 60), ("k", "k", 200), ("v", "v", 340)]
    rows = {}
    for name, role, x in xs:
        r = c.matrix(x + 160, 110, 1, 4, cell, role)
        c.text(r.x - 12, r.cy, f"{name}_t", anchor="end", bold=True)
        rows[name] = r
    c.line(tok.bottom, (tok.cx, 96), (rows["v"].cx, 96), arrow=False, colour=_GREY)
    for r in rows.values():
        c.arrow((r.cx, 96), r.top, colour=_GREY)
    c.text(
        tok.x + tok.w + 14,
        62,
        "only this token is projected: 1 row each, not t rows",
        size=14,
        anchor="start",
    )
    # caches
    t = 5
    for name, key, x in [("K cache", "k", 320), ("V cache", "v", 500)]:
        stroke, fill = _role(key)
        g = c.grid(
            x, 180, t, 4, cell, lambda r, k, fill=fill: fill if r == t - 1 else _tint("grey", 0.8)
        )
        c.rect(x, 180, g.w, g.h, stroke=stroke, rx=2)
        c.text(g.cx, 166, name, bold=True, size=14)
        last, turn = 180 + (t - 0.5) * cell, rows[key].x + rows[key].w + 16
        c.line(rows[key].right, (turn, rows[key].cy), (turn, last), (x + g.w, last), colour=stroke)
        for r in range(t):
            sub = "t" if r == t - 1 else ("{t-1}" if r == t - 2 else str(r + 1))
            if r == t - 3:
                continue
            c.text(x - 8, 180 + (r + 0.5) * cell, f"{key}_{sub}", size=13, anchor="end")
    c.text(395, 296, "k_t, v_t appended; earlier rows reused", size=13, colour=_GREY)
    att = c.box(40, 200, 200, 64, "", "attn")
    c.text(att.cx, 218, "self-attention", bold=True, size=14)
    c.text(att.cx, 244, "softmax(q_t Kᵀ/√d_k) V", size=14)
    c.line(
        rows["q"].bottom, (rows["q"].cx, 150), (att.cx, 150), att.top, colour=_dark("vermillion")
    )
    c.arrow((320, 230), att.right, colour=_GREY)
    c.text(272, 214, "K, V", size=13, colour=_GREY)
    c.text(140, 288, "over all t cached rows", size=13, colour=_GREY)
    # cross-attention memory
    c.rect(20, 320, 660, 150, fill="#FAFAFA", stroke="#DDDDDD", rx=8)
    cross = c.box(40, 360, 200, 64, "", "attn")
    c.text(cross.cx, 378, "cross-attention", bold=True, size=14)
    c.text(cross.cx, 404, "query from above", size=14)
    c.arrow(att.bottom, cross.top)
    for name, key, x in [("memory K", "k", 320), ("memory V", "v", 500)]:
        stroke, fill = _role(key)
        g = c.grid(x, 360, 3, 4, cell, lambda r, k, fill=fill: fill)
        c.rect(x, 360, g.w, g.h, stroke=stroke, rx=2)
        c.text(g.cx, 344, name, bold=True, size=14)
    c.arrow((320, 390), cross.right, colour=_GREY)
    c.text(280, 378, "K, V", size=13, colour=_GREY)
    c.text(
        435,
        446,
        "S rows each: computed once from the encoder output, reused at every step",
        size=13,
    )
    c.text(
        WIDTH / 2, 500, "Every decoder layer keeps its own cache and its own memory K, V.", size=14
    )
