"""What machine a benchmark ran on, recorded next to its results."""

import os
import platform
import sys

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


def run_command(script: str, argv=None) -> str:
    """The command that re-runs ``benchmarks/<script>`` with the arguments it was given."""
    args = argv if argv is not None else sys.argv[1:]
    return " ".join([f".venv/bin/python benchmarks/{script}", *args])


def measured_on(results: dict) -> str:
    """The results page's first sentence: the machine and how to run the benchmark again."""
    m = results["machine"]
    return (
        f"Measured on {m['cpu_count']} CPU cores ({m['processor'] or m['machine']}), "
        f"torch {m['torch']} with {m['threads']} threads, Python {m['python']}, "
        f"{m['platform']}; load average before the run {m['load_before']}. Re-run with "
        f"`{results['command']}` from the repository root."
    )
