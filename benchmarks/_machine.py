"""What machine a benchmark ran on, recorded next to its results."""

import os
import platform
import subprocess
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


# A fixed piece of work like the chapters' (a small model's training steps: many small
# operations and an Adam update) on one thread, timed in a fresh process. Its time shows how
# fast the machine was around a measurement, which helps to read timings taken at different
# hours (it is an indication, not a correction: it does not track every workload exactly).
REFERENCE_WORK = """
import time, torch
from torch import nn
torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(64, 64)
best = float("inf")
for _ in range(3):
    start = time.perf_counter()
    for _ in range({steps}):
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    best = min(best, time.perf_counter() - start)
print(best)
"""
REFERENCE_STEPS = 1000


def reference_seconds(steps: int = REFERENCE_STEPS) -> float:
    """The machine's speed now: the best of 3 timings of ``steps`` Adam steps of a small MLP on
    one thread (:data:`REFERENCE_WORK`), in seconds, in a fresh Python. On a shared host it
    moves from moment to moment (0.53 to 0.85 s within one run of book_speed.py)."""
    done = subprocess.run(
        [sys.executable, "-c", REFERENCE_WORK.format(steps=steps)],
        env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return round(float(done.stdout.strip().splitlines()[-1]), 3)
