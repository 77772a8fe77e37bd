"""Figures of the attention chapters: Query-Key-Value projections, self against cross
attention, multi-head attention and the masks (chapters 4, 7, 8 and 11)."""

from __future__ import annotations

from .canvas import (  # noqa: F401
    _GREY,
    _HEAD_COLOURS,
    WIDTH,
    _Box,
    _Canvas,
    _dark,
    _figure,
    _tint,
)

__all__: list[str] = []  # the figures register themselves with _figure


@_figure(
    "qkv_projections",
    "Queries, keys and values are three projections of the same X",
    """The input X, n rows (tokens) by d_model columns, is multiplied by three learned matrices
    W^Q, W^K and W^V, each d_model by d_k (d_v for W^V). The products are Q = X W^Q, K = X W^K
    and V = X W^V, each with one row per token: n by d_k (n by d_v for V). The same three matrices
    are used at every position.""",
    height=440,
)
def _qkv_projections(c: _Canvas) -> None:
    cell = 16
    n, d, dk = 4, 6, 3
    xb = c.matrix(30, 170, n, d, cell, "emb", "X")
    c.text(xb.cx, xb.y + xb.h + 18, "n × d_{model}", size=14)
    c.text(xb.cx, xb.y + xb.h + 38, "one row per token", size=13, colour=_GREY)
    rows = [("Q", "q", 14), ("K", "k", 150), ("V", "v", 286)]
    for name, role, y in rows:
        wx = 250
        c.line(
            xb.right,
            (190, xb.cy),
            (190, y + d * cell / 2),
            (wx - 30, y + d * cell / 2),
            colour=_GREY,
        )
        c.text(wx - 16, y + d * cell / 2, "×", size=18)
        w = c.matrix(wx, y, d, dk, cell, role, f"W^{name}")
        c.text(w.x + w.w + 30, w.cy, "=", size=20)
        sub = "v" if name == "V" else "k"
        c.text(w.cx, w.y + w.h + 14, f"d_{{model}} × d_{sub}", size=14)
        out = c.matrix(w.x + w.w + 60, w.y + (d - n) * cell / 2, n, dk, cell, role, name)
        c.text(out.x + out.w + 16, out.cy, f"{name} = X W^{name}", anchor="start", bold=True)
        c.text(out.x + out.w + 16, out.cy + 22, f"n × d_{sub}", anchor="start", size=14)
    c.text(WIDTH / 2, 424, "W^Q, W^K, W^V are learned, and shared by every position.", size=14)


def _token_row(c: _Canvas, x: float, y: float, labels: list[str], role: str, w: float = 58):
    return [c.box(x + k * (w + 8), y, w, 34, lab, role, size=14) for k, lab in enumerate(labels)]


@_figure(
    "self_vs_cross",
    "Self-attention and cross-attention differ only in where Q, K and V come from",
    """Two panels. Self-attention: one sequence X of n tokens provides the queries, the keys and
    the values, Q = X W^Q, K = X W^K, V = X W^V; the weights are n by n and the output has one
    row per token of X. Cross-attention: the decoder's states Y (T target positions) provide the
    queries, Q = Y W^Q, while the encoder's output, the memory M (S source positions), provides
    the keys and values, K = M W^K, V = M W^V; the weights are T by S and the output has one row
    per target position.""",
    height=400,
)
def _self_vs_cross(c: _Canvas) -> None:
    for x, title in [(6, "Self-attention"), (358, "Cross-attention")]:
        c.rect(x, 8, 336, 384, fill="#FAFAFA", stroke="#DDDDDD", rx=8)
        c.text(x + 168, 32, title, size=17, bold=True)
    # self: X gives Q, K, V
    xs = _token_row(c, 30, 330, ["x_1", "x_2", "x_3", "x_4"], "enc", w=62)
    c.text(174, 377, "one sequence X (n tokens)", size=13, colour=_GREY)
    att = c.box(40, 150, 268, 50, "Attention(Q, K, V)", "attn", bold=True)
    for k, (name, role) in enumerate([("Q", "q"), ("K", "k"), ("V", "v")]):
        b = c.box(54 + k * 88, 240, 64, 36, f"X W^{name}", role, size=14)
        c.arrow((b.cx, 326), b.bottom)
        c.arrow(b.top, (b.cx, att.y + att.h))
        c.text(b.cx + 22, 218, name, bold=True, anchor="start")
    c.line((xs[0].x, 318), (xs[-1].x + xs[-1].w, 318), colour=_GREY, width=1.2, arrow=False)
    out = _token_row(c, 30, 66, ["z_1", "z_2", "z_3", "z_4"], "plain", w=62)
    for b in out:
        c.arrow((b.cx, att.y), b.bottom, colour=_GREY, width=1.2)
    c.text(174, 124, "weights n × n", size=13, colour=_GREY, anchor="start")
    # cross: Y gives Q, M gives K and V
    ys = _token_row(c, 372, 330, ["y_1", "y_2", "y_3"], "dec", w=36)
    ms = _token_row(c, 516, 330, ["m_1", "m_2", "m_3", "m_4"], "enc", w=36)
    c.text(ys[1].cx, 377, "decoder Y (T)", size=13, colour=_GREY)
    c.text((ms[0].x + ms[-1].x + 36) / 2, 377, "memory M (S)", size=13, colour=_GREY)
    for row in (ys, ms):
        c.line((row[0].x, 318), (row[-1].x + 36, 318), colour=_GREY, width=1.2, arrow=False)
    att2 = c.box(380, 150, 300, 50, "Attention(Q, K, V)", "attn", bold=True)
    qb = c.box(ys[1].cx - 32, 240, 64, 36, "Y W^Q", "q", size=14)
    kb = c.box(526, 240, 64, 36, "M W^K", "k", size=14)
    vb = c.box(608, 240, 64, 36, "M W^V", "v", size=14)
    c.arrow((qb.cx, 326), qb.bottom)
    for b in (kb, vb):
        c.arrow((b.cx, 326), b.bottom)
    for b, name in [(qb, "Q"), (kb, "K"), (vb, "V")]:
        c.arrow(b.top, (b.cx, att2.y + att2.h))
        c.text(b.cx + 14, 218, name, bold=True, anchor="start")
    out2 = _token_row(c, 380, 66, ["z_1", "z_2", "z_3"], "plain", w=52)
    for b in out2:
        c.arrow((b.cx, att2.y), b.bottom, colour=_GREY, width=1.2)
    c.text(588, 124, "weights T × S", size=13, colour=_GREY)
    c.text(566, 84, "one row per\ntarget position", size=13, colour=_GREY, anchor="start")


@_figure(
    "multi_head",
    "Multi-head attention: split into heads, attend, concatenate, project",
    """Q, K and V, each n by d_model, are split along their columns into h = 4 heads of
    d_k = d_model / h columns, coloured per head. Each head i computes its own scaled dot-product
    attention, head_i = Attention(Q_i, K_i, V_i), giving n by d_k. The four head outputs are
    concatenated side by side back to n by d_model and multiplied by W^O (d_model by d_model),
    which mixes the heads into the output.""",
    height=512,
)
def _multi_head(c: _Canvas) -> None:
    seg, step, x0, bar_h = 150, 160, 50, 28
    c.text(
        WIDTH / 2,
        20,
        "Q = X W^Q,  K = X W^K,  V = X W^V,  each n × d_{model}; h = 4 heads",
        bold=True,
    )
    c.brace(x0, x0 + seg, 60, "d_k = d_{model} / h columns per head", below=False)
    heads = []
    for r, name in enumerate("QKV"):
        y = 66 + r * (bar_h + 6)
        c.text(x0 - 14, y + bar_h / 2, name, bold=True, size=16)
        for k, colour in enumerate(_HEAD_COLOURS):
            c.rect(
                x0 + k * step, y, seg, bar_h, fill=_tint(colour, 0.5), stroke=_dark(colour), rx=2
            )
            c.text(x0 + k * step + seg / 2, y + bar_h / 2, f"{name}_{k + 1}", size=14)
    for k, colour in enumerate(_HEAD_COLOURS):
        b = c.box(x0 + k * step, 204, seg, 60, "", "plain")
        c.rect(b.x, b.y, b.w, b.h, fill=_tint(colour, 0.8), stroke=_dark(colour))
        c.text(b.cx, b.y + 20, f"head_{k + 1}", bold=True)
        c.text(b.cx, b.y + 42, f"Attention(Q_{k + 1}, K_{k + 1}, V_{k + 1})", size=13)
        c.arrow((b.cx, 66 + 3 * (bar_h + 6)), b.top, colour=_dark(colour))
        heads.append(b)
    w = 90
    cx0 = WIDTH / 2 - 2 * w
    for k, colour in enumerate(_HEAD_COLOURS):
        x = cx0 + k * w
        c.rect(x, 330, w, bar_h, fill=_tint(colour, 0.5), stroke=_dark(colour), rx=2)
        c.text(x + w / 2, 330 + bar_h / 2, f"head_{k + 1}", size=14)
        c.arrow(heads[k].bottom, (x + w / 2, 330), colour=_dark(colour))
    c.text(cx0 - 12, 344, "Concat", anchor="end", bold=True)
    c.text(cx0 + 4 * w + 12, 344, "n × d_{model}", anchor="start", size=14)
    wo = c.box(WIDTH / 2 - 70, 384, 140, 34, "× W^O", "attn", bold=True)
    c.arrow((WIDTH / 2, 330 + bar_h), wo.top)
    c.text(wo.x + wo.w + 12, wo.cy, "W^O: d_{model} × d_{model}", anchor="start", size=14)
    c.arrow(wo.bottom, (WIDTH / 2, 450))
    c.text(WIDTH / 2, 466, "output, n × d_{model}", size=14)
    c.text(
        WIDTH / 2,
        496,
        "each head: head_i = softmax(Q_i K_iᵀ / √d_k) V_i, an n × d_k matrix",
        size=14,
        colour=_GREY,
    )


def _mask_grid(c: _Canvas, x: float, title: str, allowed, y: float = 90) -> _Box:
    n, cell = 5, 30
    on, off = _tint("blue", 0.35), "#EEEEEE"
    g = c.grid(
        x,
        y,
        n,
        n,
        cell,
        lambda r, k: on if allowed(r, k) else off,
        lambda r, k: "T" if allowed(r, k) else "F",
    )
    c.text(g.cx, y - 56, title, bold=True)
    for k in range(n):
        c.text(x + (k + 0.5) * cell, y - 14, str(k), size=13, colour=_GREY)
        c.text(x - 12, y + (k + 0.5) * cell, str(k), size=13, colour=_GREY)
    return g


@_figure(
    "masks",
    "A padding mask, a causal mask, and the two combined",
    """Three 5 by 5 grids, rows are query positions 0 to 4 and columns key positions 0 to 4, T
    (True) where attention is allowed and F (False) where it is masked. The padding mask, for a
    sentence of 3 real tokens padded to 5, is False in the last two columns for every query. The
    causal (look-ahead) mask is True on and below the diagonal: position i sees keys 0 to i. The
    decoder's self-attention uses both: their AND is True only where the key is at or before the
    query and not padding.""",
    height=330,
)
def _masks(c: _Canvas) -> None:
    real = 3
    a = _mask_grid(c, 70, "padding mask", lambda r, k: k < real)
    b = _mask_grid(c, 300, "causal mask", lambda r, k: k <= r)
    d = _mask_grid(c, 530, "both (AND)", lambda r, k: k < real and k <= r)
    c.text(a.cx, 52, "3 tokens + 2 <pad>", size=13, colour=_GREY)
    c.text(b.cx, 52, "key j ≤ query i", size=13, colour=_GREY)
    c.text(d.cx, 52, "decoder self-attention", size=13, colour=_GREY)
    c.text((a.x + a.w + b.x) / 2, a.cy, "AND", bold=True)
    c.text((b.x + b.w + d.x) / 2, a.cy, "=", size=22, bold=True)
    for g in (a, b, d):
        c.text(g.cx, g.y + g.h + 18, "key position j →", size=13, colour=_GREY)
    c.text(8, a.cy, "query\ni", size=13, colour=_GREY, anchor="start")
    c.rect(150, 286, 24, 20, fill=_tint("blue", 0.35), stroke="none", rx=0)
    c.text(182, 296, "T = True, attention allowed", anchor="start", size=14)
    c.rect(420, 286, 24, 20, fill="#EEEEEE", stroke="none", rx=0)
    c.text(452, 296, "F = False, masked", anchor="start", size=14)
