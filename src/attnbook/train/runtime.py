"""Where and how training runs: processes (``torchrun``, DDP), the device, mixed precision,
the random-number generators' state, and stopping cleanly on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import os
import random
import signal
import threading

import numpy as np
import torch
import torch.distributed as dist

from ..utils import get_device

__all__ = ["init_distributed"]


# --------------------------------------------------------------------------------------------
# processes and devices
# --------------------------------------------------------------------------------------------


def init_distributed(backend: str | None = None) -> tuple[int, int]:
    """Join the process group that ``torchrun`` describes in the environment.

    Returns ``(rank, world_size)``; ``(0, 1)`` without ``torchrun`` (WORLD_SIZE unset or 1).
    The backend is NCCL when CUDA is available, else gloo.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    if not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=backend)
    return dist.get_rank(), dist.get_world_size()


def _distributed() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _resolve_device(preference: str, world_size: int) -> torch.device:
    if str(preference).startswith("cuda:"):
        return torch.device(preference)
    device = get_device(preference)
    if device.type == "cuda" and world_size > 1:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def _amp_settings(device: torch.device, amp: bool | None) -> tuple[torch.dtype | None, bool]:
    """(autocast dtype or None when off, whether a gradient scaler is needed)."""
    if amp is None:
        amp = device.type == "cuda"
    if not amp:
        return None, False
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return torch.bfloat16, False
        return torch.float16, True
    if device.type == "mps":
        return torch.float16, True
    return torch.bfloat16, False  # CPU


def _rng_state() -> dict:
    np_state = np.random.get_state()
    state = {
        "python": random.getstate(),
        "torch": torch.get_rng_state(),
        "numpy": (
            np_state[0],
            torch.from_numpy(np_state[1].astype(np.int64)),
            int(np_state[2]),
            int(np_state[3]),
            float(np_state[4]),
        ),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(_as_tuples(state["python"]))
    torch.set_rng_state(state["torch"].cpu())
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if (
        "cuda" in state
        and torch.cuda.is_available()
        and len(state["cuda"]) == torch.cuda.device_count()
    ):
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _as_tuples(x):
    """Python's random state is nested tuples; a round trip may give lists."""
    return tuple(_as_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x


class _StopOnSignal:
    """While active (main thread only), the first Ctrl-C (SIGINT) or SIGTERM asks the loop to
    stop at the next step boundary; a second Ctrl-C interrupts at once. A signal the process
    ignores (``SIG_IGN``: a background job of a non-interactive shell ignores SIGINT) stays
    ignored. On exit the handlers found on entry are put back (the command line's: see
    :mod:`attnbook._signals`)."""

    def __init__(self):
        self.requested: str | None = None
        self._previous: dict = {}

    def _handle(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = self.requested or signal.Signals(signum).name

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        return False
