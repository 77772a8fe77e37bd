"""The optimiser a trainer builds: AdamW (or Adam) with its update in one kernel where torch
has one for the device.

``fused=True`` runs the whole update of every parameter in one call of torch's fused kernel
(CPU, CUDA, MPS, XPU...), where ``foreach=True`` runs one multi-tensor call per operation
(on a CPU each is a loop over the tensors); both beat torch's default on a CPU, a Python loop
over the tensors. The fused kernel computes the same update in a different order of
floating-point operations, so its weights differ from the loop's in the last bits
(``tests/test_train_foreach.py`` measures how much); ``foreach`` gives bitwise the loop's.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["update_kernel", "make_optimizer"]


def _fused_devices() -> tuple[str, ...]:
    try:  # private, but the list torch itself checks fused=True against
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        return tuple(_get_fused_kernels_supported_devices())
    except ImportError:  # an older or newer torch: the devices that have had it since 2.4
        return ("cuda", "cpu", "mps", "xpu")


def update_kernel(params: list[torch.Tensor]) -> dict[str, bool | None]:
    """``{"fused": True, "foreach": None}`` when torch has a fused Adam(W) kernel for every
    parameter's device and dtype (floating point), else ``{"fused": None, "foreach": True}``:
    the keyword arguments (and param-group entries) that pick the update's implementation."""
    devices = _fused_devices()
    if params and all(p.device.type in devices and p.is_floating_point() for p in params):
        return {"fused": True, "foreach": None}
    return {"fused": None, "foreach": True}


def make_optimizer(model: nn.Module, config) -> torch.optim.Optimizer:
    """AdamW (``config.optimizer == "adamw"``; weight decay on matrices and embeddings only,
    not on biases and LayerNorm gains) or Adam (L2 ``weight_decay`` on all) over the trainable
    parameters of ``model``, with ``lr=1`` (a scheduler multiplies it by the learning rate),
    ``config.betas`` and ``config.adam_eps``; fused where :func:`update_kernel` allows."""
    params = [p for p in model.parameters() if p.requires_grad]
    kernel = update_kernel(params)
    c = config
    if c.optimizer == "adamw":
        decay = [p for p in params if p.dim() >= 2]  # matrices and embeddings
        no_decay = [p for p in params if p.dim() < 2]  # biases, LayerNorm gains
        groups = [
            {"params": decay, "weight_decay": c.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=1.0, betas=c.betas, eps=c.adam_eps, **kernel)
    return torch.optim.Adam(
        params, lr=1.0, betas=c.betas, eps=c.adam_eps, weight_decay=c.weight_decay, **kernel
    )
