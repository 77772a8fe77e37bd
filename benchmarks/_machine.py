"""What machine a benchmark ran on, recorded next to its results."""

import os
import platform

import torch


def machine_info() -> dict:
    """CPU count, torch's threads, processor, platform, Python and torch versions, and the
    load average just before the run (a loaded machine gives slower timings)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "processor": platform.processor(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "load_before": [round(x, 2) for x in load] if load else None,
    }
