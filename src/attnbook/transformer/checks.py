"""The argument checks of the Transformer's layers and model, attached at the API edge.

:mod:`~attnbook.transformer.layers` and :mod:`~attnbook.transformer.model` wrap their methods
with these (:func:`attnbook._checks.checked`): a caller who passes a wrong shape, dtype, device
or mask gets an error that names the argument, and the classes read as the book prints them.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from .._checks import (
    check_bool,
    check_device,
    check_module_input,
    check_nonempty,
    check_positive_int,
    check_same_size,
    check_tensor,
    check_token_ids,
    checked,
    checks_active,
)

__all__: list[str] = []  # every name here is private: the checks the package attaches

# --------------------------------------------------------------------------------------------
# the layers
# --------------------------------------------------------------------------------------------


def _check_activations(name: str, x, module: nn.Module, d_model: int, hint: str) -> None:
    check_tensor(name, x, ndim=3, floating=True, shape_hint=hint)
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} must have last dimension d_model={d_model}, got shape {tuple(x.shape)}"
        )
    check_nonempty(name, x, hint)
    check_module_input(name, x, module)


def _check_layer_mask(name: str, mask, b: int, l_q: int, l_k: int, like=None) -> None:
    """A mask a layer hands to its attention: ``(L_q, L_k)``, ``(B, L_q | 1, L_k)`` or
    ``(B, H | 1, L_q | 1, L_k)``, boolean, True = may attend."""
    if mask is None:
        return
    check_tensor(
        name,
        mask,
        ndim=(2, 3, 4),
        boolean=True,
        shape_hint=f"({l_q}, {l_k}) or ({b}, {l_q}, {l_k})",
    )
    if like is not None:
        check_device(name, mask, like.device, "the input")
    want = (b, l_q, l_k) if mask.dim() < 4 else (b, mask.shape[1], l_q, l_k)
    try:
        ok = torch.broadcast_shapes(mask.shape, want) == want
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name} must be broadcastable to (B, L_q, L_k) = ({b}, {l_q}, {l_k}), got shape "
            f"{tuple(mask.shape)}"
        )


def _check_feed_forward(self, x) -> None:  # position-wise: any leading dimensions
    d_model = self.linear1.in_features
    check_tensor("x", x, floating=True, shape_hint="(..., d_model)")
    if x.dim() < 1 or x.shape[-1] != d_model:
        raise ValueError(
            f"x must have last dimension d_model={d_model}, got shape {tuple(x.shape)}"
        )
    check_nonempty("x", x, "(..., d_model)")
    check_module_input("x", x, self)


def _check_sublayer_init(self, d_model, dropout=0.1, norm_first=False) -> None:
    check_positive_int("d_model", d_model)
    check_bool("norm_first", norm_first)


def _check_sublayer(self, x, sublayer) -> None:
    d_model = self.norm.normalized_shape[0]
    check_tensor("x", x, floating=True, shape_hint="(..., d_model)")
    if x.dim() < 1 or x.shape[-1] != d_model:
        raise ValueError(
            f"x must have last dimension d_model={d_model}, got shape {tuple(x.shape)}"
        )
    check_nonempty("x", x)
    check_module_input("x", x, self)
    if not callable(sublayer):
        raise TypeError(
            f"sublayer must be a function or module of x, got {type(sublayer).__name__}"
        )


def _check_encoder_layer(self, x, mask=None, need_weights=False) -> None:
    _check_activations("x", x, self, self.self_attn.d_model, "(B, S, d_model)")
    _check_layer_mask("mask", mask, x.shape[0], x.shape[1], x.shape[1], x)
    check_bool("need_weights", need_weights)


def _check_decoder_layer(self, x, memory, tgt_mask=None, memory_mask=None, need_weights=False):
    layer = self.layers[0] if hasattr(self, "layers") else self  # a Decoder, or one layer
    d_model = layer.self_attn.d_model
    _check_activations("x", x, self, d_model, "(B, T, d_model)")
    _check_activations("memory", memory, self, d_model, "(B, S, d_model)")
    check_same_size("x", x.shape[0], "memory", memory.shape[0], "batch size")
    _check_layer_mask("tgt_mask", tgt_mask, x.shape[0], x.shape[1], x.shape[1], x)
    _check_layer_mask("memory_mask", memory_mask, x.shape[0], x.shape[1], memory.shape[1], x)
    check_bool("need_weights", need_weights)


def _check_encoder(self, x, mask=None, need_weights=False) -> None:
    _check_encoder_layer(self.layers[0], x, mask, need_weights)


def _returns_shape_of(x, sublayer):
    """``sublayer``, made to refuse an output whose shape is not ``x``'s (the residual sum
    would broadcast it silently, or fail inside PyTorch)."""

    def run(inp):
        out = sublayer(inp)
        y = out[0] if isinstance(out, tuple) else out
        if not isinstance(y, torch.Tensor) or y.shape != x.shape:
            got = f"shape {tuple(y.shape)}" if isinstance(y, torch.Tensor) else type(y).__name__
            raise ValueError(
                f"sublayer must return a tensor of x's shape {tuple(x.shape)} (or a pair "
                f"(tensor, extra)), got {got}"
            )
        return out

    return run


def _checked_sublayer(forward):
    """``checked(_check_sublayer)``, and at the API edge the sublayer's output is checked too."""
    inner = checked(_check_sublayer)(forward)

    @functools.wraps(forward)
    def wrapper(self, x, sublayer):
        if checks_active() and callable(sublayer):
            sublayer = _returns_shape_of(x, sublayer)
        return inner(self, x, sublayer)

    wrapper.check = _check_sublayer
    return wrapper


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------


def _check_encode(self, src, src_mask=None, return_attention=False) -> None:
    self._check_tokens("src", src, "src_vocab_size")
    check_bool("return_attention", return_attention)
    self._check_mask("src_mask", src_mask, src.shape[0], src.shape[1], src.shape[1], src)


def _check_decode(
    self, tgt, memory, memory_mask=None, tgt_mask=None, return_attention=False
) -> None:
    self._check_tokens("tgt", tgt, "tgt_vocab_size")
    check_tensor("memory", memory, ndim=3, floating=True, shape_hint="(B, S, d_model)")
    if memory.shape[-1] != self.d_model:
        raise ValueError(
            f"memory must have last dimension d_model={self.d_model}, got shape "
            f"{tuple(memory.shape)}"
        )
    check_nonempty("memory", memory, "(B, S, d_model)")
    check_module_input("memory", memory, self)
    check_bool("return_attention", return_attention)
    check_same_size("tgt", tgt.shape[0], "memory", memory.shape[0], "batch size")
    b, t = tgt.shape
    self._check_mask("tgt_mask", tgt_mask, b, t, t, tgt)
    self._check_mask("memory_mask", memory_mask, b, t, memory.shape[1], tgt)


def _check_forward(
    self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, return_attention=False
) -> None:
    self._check_tokens("src", src, "src_vocab_size")
    self._check_tokens("tgt", tgt, "tgt_vocab_size")
    check_same_size("src", src.shape[0], "tgt", tgt.shape[0], "batch size")
    check_bool("return_attention", return_attention)
    (b, s), t = src.shape, tgt.shape[1]
    self._check_mask("src_mask", src_mask, b, s, s, src)
    self._check_mask("tgt_mask", tgt_mask, b, t, t, src)
    self._check_mask("memory_mask", memory_mask, b, t, s, src)


def _check_transformer_init(self, *args, **kwargs) -> None:
    names = ("norm_first", "share_embeddings", "tie_output")
    given = dict(zip(names, args[8:11], strict=False)) | {
        k: v for k, v in kwargs.items() if k in names
    }
    for name, value in given.items():
        check_bool(name, value)


def _check_decode_step(self, tokens, state) -> None:
    if not isinstance(state, dict) or not {"memory", "memory_mask"} <= state.keys():
        raise TypeError(
            "state must be the dict that init_decoder(src) returns (with 'memory' and "
            f"'memory_mask'), got {type(state).__name__}"
            + (f" with keys {sorted(state)}" if isinstance(state, dict) else "")
        )
    if "self_mask" not in state:  # no cache: the whole prefix runs
        self._check_tokens("tokens", tokens, "tgt_vocab_size")
        check_same_size(
            "tokens", tokens.shape[0], "state['memory']", state["memory"].shape[0], "batch size"
        )
        return
    # a cache: _decode_cached checks the shapes against it; the new ids are checked here
    check_token_ids("tokens", tokens, ndim=2, shape_hint="(B, t) of token ids")
    (b, t), (batch, cached) = tokens.shape, state["self_mask"].shape
    if b == batch and cached < t <= self.max_len:
        self._check_tokens("tokens", tokens[:, cached:], "tgt_vocab_size")
