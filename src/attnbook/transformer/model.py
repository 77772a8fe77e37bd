"""The encoder-decoder Transformer, from token ids to next-token logits (section 3).

:class:`Transformer` embeds the tokens (scaled by ``sqrt(d_model)``), adds the positional
encoding, runs the :class:`~attnbook.transformer.layers.Encoder` and
:class:`~attnbook.transformer.layers.Decoder` stacks and projects to the vocabulary. It builds
its masks from ``pad_id``, returns every layer's attention weights on request, and decodes one
token at a time, with or without a key/value cache (the seq2seq protocol of
:mod:`attnbook.seq2seq`).

Shapes: ``B`` batch, ``S`` source length, ``T`` target length, ``H`` heads, ``V`` vocabulary.
"""

from __future__ import annotations

import inspect
import math

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import (
    check_device,
    check_positive_int,
    check_probability,
    check_tensor,
    check_token_ids,
    checked,
    checks_active,
)
from .._limits import (
    FLOAT_BYTES,
    check_parts,
    is_size,
    sinusoidal_bytes,
    transformer_parameters,
)
from ..attention import causal_mask, padding_mask
from ..positional import PositionalEncoding
from .checks import (
    _check_decode,
    _check_decode_step,
    _check_encode,
    _check_forward,
    _check_transformer_init,
)
from .layers import Decoder, Encoder

__all__ = [
    "POSITIONAL_KINDS",
    "Transformer",
]

POSITIONAL_KINDS = ("sinusoidal", "learned", None)


class Transformer(nn.Module):
    """The encoder-decoder Transformer, from token ids to next-token logits.

    ``Transformer(src_vocab_size, tgt_vocab_size)`` is the paper's base model (d_model 512,
    8 heads, 6 + 6 layers, d_ff 2048, dropout 0.1). Token embeddings are multiplied by
    ``sqrt(d_model)`` and the positional encoding is added (section 3.4-3.5).

    - ``share_embeddings``: one embedding table for source and target (needs equal
      vocabularies), as the paper does with its shared 37,000-token vocabulary.
    - ``tie_output``: the pre-softmax projection reuses the target embedding matrix (3.4).
    - ``pad_id``: the padding token of both vocabularies; padding masks are built from it.
    - ``positional``: ``"sinusoidal"`` (the paper), ``"learned"``, or ``None`` (no position
      information at all, to show that attention alone ignores order).

    Weights are initialised as the paper's reference implementations (tensor2tensor, fairseq)
    do: Xavier uniform for every linear map, zero biases, ``N(0, d_model^-0.5)`` embeddings
    (so that after the ``sqrt(d_model)`` scaling they have unit variance).

    The output projection ``output`` has no bias (as in tensor2tensor; the tied matrix has
    none either).

    It is a :class:`attnbook.seq2seq.Seq2SeqModel` (``encode``, ``forward``, ``init_decoder``,
    ``decode_step``, ``reorder_state``), as the RNN ``Seq2Seq`` is: the decoders and the
    evaluator treat both alike.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        n_heads: int = 8,
        n_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        norm_first: bool = False,
        share_embeddings: bool = False,
        tie_output: bool = False,
        *,
        pad_id: int = 0,
        positional: str | None = "sinusoidal",
    ):
        super().__init__()
        check_positive_int("src_vocab_size", src_vocab_size)
        check_positive_int("tgt_vocab_size", tgt_vocab_size)
        check_positive_int("d_model", d_model)
        check_positive_int("n_heads", n_heads)
        check_positive_int("n_layers", n_layers)
        check_positive_int("d_ff", d_ff)
        check_positive_int("max_len", max_len)
        check_probability("dropout", dropout)
        if d_model % n_heads:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={d_model} and "
                f"n_heads={n_heads} (d_model % n_heads = {d_model % n_heads})"
            )
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                "share_embeddings=True needs one vocabulary for source and target, "
                f"got src_vocab_size={src_vocab_size} and "
                f"tgt_vocab_size={tgt_vocab_size}"
            )
        if isinstance(pad_id, bool) or not isinstance(pad_id, int):
            raise TypeError(f"pad_id must be an int, got {type(pad_id).__name__} {pad_id!r}")
        if not 0 <= pad_id < min(src_vocab_size, tgt_vocab_size):
            raise ValueError(
                f"pad_id must be a token id in both vocabularies, 0 <= pad_id < "
                f"{min(src_vocab_size, tgt_vocab_size)}, got {pad_id}"
            )
        if positional not in POSITIONAL_KINDS:
            raise ValueError(f"positional must be one of {POSITIONAL_KINDS}, got {positional!r}")
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.d_model, self.n_heads, self.n_layers = d_model, n_heads, n_layers
        self.max_len, self.pad_id = max_len, pad_id

        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = (
            self.src_embed if share_embeddings else nn.Embedding(tgt_vocab_size, d_model)
        )
        if positional is None:
            self.src_pos = self.tgt_pos = nn.Dropout(dropout)
        else:
            self.src_pos = PositionalEncoding(d_model, max_len, dropout, kind=positional)
            self.tgt_pos = PositionalEncoding(d_model, max_len, dropout, kind=positional)
        self.encoder = Encoder(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.decoder = Decoder(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.output = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self._reset_parameters()
        if tie_output:
            self.output.weight = self.tgt_embed.weight  # (V, d_model), shared

    def _reset_parameters(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):  # tokens (and learned positions)
                nn.init.normal_(module.weight, mean=0.0, std=self.d_model**-0.5)

    # ---------------------------------------------------------------------------- checks, masks

    def _check_tokens(self, name: str, tokens, vocab: str) -> torch.Tensor:
        """Check token ids: ``(B, L)`` integer, 1 <= L <= max_len, ids in ``[0, vocab)``.
        Steps aside where checks do not run (:func:`attnbook._checks.checks_active`): the range
        check reads the ids, a host sync on a GPU."""
        if not checks_active():
            return tokens
        vocab_size = getattr(self, vocab)
        check_token_ids(name, tokens, ndim=2, shape_hint="(B, L) of token ids")
        check_device(name, tokens, self.output.weight.device, "the model")
        b, n = tokens.shape
        if b == 0 or n == 0:
            raise ValueError(
                f"{name} must hold at least one sequence of at least one token, got "
                f"shape {tuple(tokens.shape)}"
            )
        if n > self.max_len:
            raise ValueError(
                f"{name} has length {n} (shape {tuple(tokens.shape)}) but the model "
                f"was built with max_len={self.max_len}"
            )
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(
                f"{name} holds token id {bad}, outside the vocabulary: ids must be in "
                f"[0, {vocab_size - 1}] ({vocab}={vocab_size})"
            )
        return tokens

    @staticmethod
    def _check_mask(name: str, mask, b: int, l_q: int, l_k: int, like=None) -> None:
        if mask is None or not checks_active():
            return
        check_tensor(
            name,
            mask,
            ndim=(2, 3),
            boolean=True,
            shape_hint=f"({l_q}, {l_k}) or ({b}, {l_q} or 1, {l_k})",
        )
        if like is not None:
            check_device(name, mask, like.device, "the model")
        try:
            ok = torch.broadcast_shapes(mask.shape, (b, l_q, l_k)) == (b, l_q, l_k)
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"{name} must be broadcastable to (B, L_q, L_k) = ({b}, {l_q}, "
                f"{l_k}), got shape {tuple(mask.shape)}"
            )

    def src_mask(self, src: torch.Tensor) -> torch.Tensor:
        """Padding mask of the source, ``(B, 1, S)``: True at real tokens (keys to attend to)."""
        return padding_mask(src, self.pad_id)

    def tgt_mask(self, tgt: torch.Tensor) -> torch.Tensor:
        """Look-ahead and padding mask of the target, ``(B, T, T)``: position ``i`` may attend
        to positions ``<= i`` that are not padding."""
        return causal_mask(tgt.shape[1], device=tgt.device) & padding_mask(tgt, self.pad_id)

    # ---------------------------------------------------------------------------- the passes

    @checked(_check_encode)
    def encode(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        return_attention: bool = False,
    ):
        """src ``(B, S)`` token ids -> memory ``(B, S, d_model)``.

        ``src_mask`` defaults to :meth:`src_mask` (padding). With ``return_attention`` returns
        ``(memory, [per layer self-attention weights (B, H, S, S)])``.
        """
        src_mask = self.src_mask(src) if src_mask is None else src_mask
        x = self.src_pos(self.src_embed(src) * math.sqrt(self.d_model))  # (B, S, d_model)
        memory, weights = self.encoder(x, src_mask, need_weights=return_attention)
        return (memory, weights) if return_attention else memory

    @checked(_check_decode)
    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        return_attention: bool = False,
    ):
        """tgt ``(B, T)`` token ids (the shifted target, starting with BOS), memory
        ``(B, S, d_model)`` -> logits ``(B, T, V)``; position ``i`` predicts token ``i + 1``.

        ``memory_mask`` should be the source padding mask ``(B, 1, S)`` (:meth:`src_mask`);
        None lets every position attend to every source position. ``tgt_mask`` defaults to
        :meth:`tgt_mask` (look-ahead and padding). With ``return_attention`` returns ``(logits,
        {"decoder_self": [per layer (B, H, T, T)], "cross": [per layer (B, H, T, S)]})``.
        """
        tgt_mask = self.tgt_mask(tgt) if tgt_mask is None else tgt_mask
        x = self.tgt_pos(self.tgt_embed(tgt) * math.sqrt(self.d_model))  # (B, T, d_model)
        x, self_ws, cross_ws = self.decoder(
            x, memory, tgt_mask, memory_mask, need_weights=return_attention
        )
        logits = self.output(x)  # (B, T, V)
        if return_attention:
            return logits, {"decoder_self": self_ws, "cross": cross_ws}
        return logits

    @checked(_check_forward)
    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        return_attention: bool = False,
    ):
        """src ``(B, S)``, tgt ``(B, T)`` token ids -> logits ``(B, T, V)``.

        Masks default to those built from ``pad_id``: ``src_mask`` (padding, ``(B, 1, S)``),
        ``tgt_mask`` (look-ahead and padding, ``(B, T, T)``) and ``memory_mask`` (the source
        padding). Without ``return_attention`` no weights are kept and the fused attention
        kernel runs. With it, returns ``(logits, attention)`` where ``attention`` is
        ``{"encoder_self": [per layer (B, H, S, S)], "decoder_self": [per layer (B, H, T, T)],
        "cross": [per layer (B, H, T, S)]}``.
        """
        if memory_mask is None:
            memory_mask = self.src_mask(src)  # (B, 1, S)
        if return_attention:
            memory, enc_ws = self.encode(src, src_mask, return_attention=True)
            logits, dec = self.decode(tgt, memory, memory_mask, tgt_mask, return_attention=True)
            return logits, {"encoder_self": enc_ws, **dec}
        return self.decode(tgt, self.encode(src, src_mask), memory_mask, tgt_mask)

    # ---------------------------------------------------------------------------- decoding

    def init_decoder(self, src: torch.Tensor, use_cache: bool = False) -> dict:
        """Run the encoder once: ``{"memory": (B, S, d_model), "memory_mask": (B, 1, S)}``.

        Part of the seq2seq protocol (:mod:`attnbook.seq2seq`). With ``use_cache`` the state
        also holds a key/value cache (KV 缓存) for incremental decoding, batch first:

        - ``"cross_k"``, ``"cross_v"``: per decoder layer ``(B, H, S, d_k)``, the
          cross-attention keys and values of the memory, computed here, once;
        - ``"self_k"``, ``"self_v"``: per decoder layer ``(B, H, capacity, d_k)``, buffers whose
          first ``t`` positions hold the self-attention keys and values of the ``t`` target
          positions fed so far (the capacity doubles when it runs out);
        - ``"self_mask"`` ``(B, t)``: False where one of those positions is padding. Its width
          ``t`` is the number of positions in the cache (0 here).

        Without it (the default) :meth:`decode_step` re-runs the decoder over the whole prefix.
        """
        if not isinstance(use_cache, bool):
            raise TypeError(
                f"use_cache must be a bool (True: keep a key/value cache), got "
                f"{type(use_cache).__name__} {use_cache!r}"
            )
        memory = self.encode(src)  # (B, S, d_model); checks src
        state = {"memory": memory, "memory_mask": self.src_mask(src)}
        if use_cache:
            cross = [layer.cross_attn.heads(None, memory, memory) for layer in self.decoder.layers]
            state["cross_k"] = [k for _, k, _ in cross]  # per layer (B, H, S, d_k)
            state["cross_v"] = [v for _, _, v in cross]
            empty = cross[0][1][:, :, :0]  # (B, H, 0, d_k)
            state["self_k"] = [empty] * self.n_layers
            state["self_v"] = [empty] * self.n_layers
            state["self_mask"] = torch.zeros(src.shape[0], 0, dtype=torch.bool, device=src.device)
        return state

    def decode_step(self, tokens: torch.Tensor, state: dict):
        """tokens ``(B, t)``, the prefix so far starting with BOS -> ``(logits (B, V) of the
        next token, state, {"decoder_self": (B, n_layers, H, t), "cross": (B, n_layers, H, S)})``,
        the attention of the newest position in every layer.

        Without a cache (``init_decoder(src)``) the decoder re-runs over the whole prefix and
        ``state`` comes back unchanged: ``t`` positions of work for every new token. With one
        (``init_decoder(src, use_cache=True)``) only the positions not yet in the cache run
        (just the newest token when the returned state is passed back each step); their
        queries attend over the cached keys and values. Both give the same logits and weights,
        to float rounding. The new keys and values are written into the cache's buffers in
        place: pass the returned state on, and branch with :meth:`reorder_state` (it copies).
        """
        if "self_k" not in state:
            logits, att = self.decode(
                tokens, state["memory"], state["memory_mask"], return_attention=True
            )
            newest = {
                name: torch.stack([w[:, :, -1] for w in ws], dim=1)  # (B, n_layers, H, .)
                for name, ws in att.items()
            }
            return logits[:, -1], state, newest
        return self._decode_cached(tokens, state)

    def _decode_cached(self, tokens: torch.Tensor, state: dict):
        """:meth:`decode_step` with a key/value cache: run only the ``n`` new positions."""
        check_tensor("tokens", tokens, ndim=2, integer=True, shape_hint="(B, t) of token ids")
        (b, t), (batch, cached) = tokens.shape, state["self_mask"].shape
        if b != batch or t <= cached:
            raise ValueError(
                f"tokens must be (B={batch}, t > {cached}): the state caches {cached} positions, "
                f"so tokens must hold them and at least one more; got shape {tuple(tokens.shape)}"
            )
        if t > self.max_len:
            raise ValueError(
                f"tokens has length {t}, but the model was built with max_len={self.max_len}: "
                "the positional encoding and the key/value cache hold at most max_len positions"
            )
        new = self._check_tokens("tokens", tokens[:, cached:], "tgt_vocab_size")  # (B, n)
        n, state = new.shape[1], dict(state)  # a new dict: the caller's keeps its entries
        state["self_mask"] = torch.cat([state["self_mask"], new != self.pad_id], dim=1)  # (B, t)
        mask = state["self_mask"][:, None, None, :]  # (B, 1, 1, t): padding keys masked
        if n > 1:  # several new positions: each sees itself and the positions before it
            mask = mask & torch.ones(n, t, dtype=torch.bool, device=tokens.device).tril(cached)
        capacity = state["self_k"][0].shape[2]
        if t > capacity:  # grow the buffers, at least doubling them
            grow = min(max(t, 2 * capacity), self.max_len) - capacity
            for name in ("self_k", "self_v"):
                state[name] = [F.pad(c, (0, 0, 0, grow)) for c in state[name]]
        x = self.tgt_embed(new) * math.sqrt(self.d_model)  # (B, n, d_model)
        if isinstance(self.tgt_pos, PositionalEncoding):  # at positions cached .. t - 1
            x = self.tgt_pos(x, offset=cached)
        else:  # positional=None: dropout only
            x = self.tgt_pos(x)
        memory_mask = state["memory_mask"][:, None]  # (B, 1, 1, S)
        self_ws, cross_ws = [], []
        for i, layer in enumerate(self.decoder.layers):
            k_cache, v_cache = state["self_k"][i], state["self_v"][i]  # (B, H, capacity, d_k)

            def self_attention(h, layer=layer, k_cache=k_cache, v_cache=v_cache):
                q, k, v = layer.self_attn.heads(h, h, h)  # (B, H, n, d_k)
                k_cache[:, :, cached:t], v_cache[:, :, cached:t] = k, v  # into the cache
                return layer.self_attn.attend(q, k_cache[:, :, :t], v_cache[:, :, :t], mask)

            def cross_attention(h, i=i, mha=layer.cross_attn):
                q = mha._split_heads(mha.w_q(h))  # (B, H, n, d_k)
                return mha.attend(q, state["cross_k"][i], state["cross_v"][i], memory_mask)

            x, self_w = layer.residual_self(x, self_attention)  # (B, n, d_model)
            x, cross_w = layer.residual_cross(x, cross_attention)
            x = layer.residual_ffn(x, layer.feed_forward)
            self_ws.append(self_w[:, :, -1])  # (B, H, t): the newest position
            cross_ws.append(cross_w[:, :, -1])  # (B, H, S)
        if self.decoder.norm is not None:
            x = self.decoder.norm(x)
        logits = self.output(x[:, -1])  # (B, V)
        newest = {"decoder_self": torch.stack(self_ws, 1), "cross": torch.stack(cross_ws, 1)}
        return logits, state, newest

    @staticmethod
    def reorder_state(state: dict, index: torch.Tensor) -> dict:
        """Select (and repeat) batch rows of the state, the key/value cache included: ``index``
        ``(B',)`` -> batch ``B'`` (beam search moves and copies beams with it)."""
        return {
            name: [t.index_select(0, index) for t in value]
            if isinstance(value, list)
            else value.index_select(0, index)
            for name, value in state.items()
        }

    def extra_repr(self) -> str:
        return (
            f"src_vocab_size={self.src_vocab_size}, tgt_vocab_size={self.tgt_vocab_size}, "
            f"pad_id={self.pad_id}, max_len={self.max_len}"
        )


_INIT = inspect.signature(Transformer.__init__)
_SIZES = ("src_vocab_size", "tgt_vocab_size", "d_model", "n_layers", "d_ff", "max_len")


def _check_transformer_sizes(self, *args, **kwargs) -> None:
    """The flags' types (:func:`~attnbook.transformer.checks._check_transformer_init`), then
    the memory the model's weights and positional tables need (:mod:`attnbook._limits`),
    before any layer is built: ``n_layers=1000000`` is refused at once, not after minutes."""
    _check_transformer_init(self, *args, **kwargs)
    try:
        given = _INIT.bind(self, *args, **kwargs)
    except TypeError:  # Python's own message comes from the call
        return
    given.apply_defaults()
    a = given.arguments
    if not all(is_size(a[name]) for name in _SIZES):
        return  # the constructor says what is wrong
    v_s, v_t, d, n, max_len = (a[k] for k in _SIZES[:4] + ("max_len",))
    params = transformer_parameters(
        v_s,
        v_t,
        d,
        n,
        a["d_ff"],
        max_len,
        norm_first=a["norm_first"] is True,
        share_embeddings=a["share_embeddings"] is True,
        tie_output=a["tie_output"] is True,
        positional=a["positional"],
    )
    positions = FLOAT_BYTES * params["positions"]
    if a["positional"] == "sinusoidal":  # one table kept while the other is computed
        positions = FLOAT_BYTES * max_len * d + sinusoidal_bytes(max_len, d)
    check_parts(
        "Transformer",
        [
            (
                f"the weights of its {n} encoder and {n} decoder layers",
                {"n_layers": n, "d_model": d, "d_ff": a["d_ff"]},
                FLOAT_BYTES * params["layers"],
            ),
            (
                "its embeddings and output projection",
                {"src_vocab_size": v_s, "tgt_vocab_size": v_t, "d_model": d},
                FLOAT_BYTES * params["embeddings"],
            ),
            (
                f"its two {a['positional']} positional tables",
                {"max_len": max_len, "d_model": d},
                positions,
            ),
        ],
    )


Transformer.__init__ = checked(_check_transformer_sizes)(Transformer.__init__)
Transformer.decode_step = checked(_check_decode_step)(Transformer.decode_step)
