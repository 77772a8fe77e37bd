"""How much CPU an explorer's view costs to draw, before and after a change to the package.

Three workloads, each drawn by the package of the working tree ("after") and by the package
of an earlier commit (``--before``, "before"; its ``src/`` taken with ``git archive``), each in
its own Python process, alternating round by round:

1. **grid view**: ``viz.view_png(viz.attention_grid(...))`` of one layer, four heads of
   11 x 20 maps with one character per tick label (chapter 14's cross-attention);
2. **attention explorer**: ``widgets.attention_explorer`` over chapter 14's shape, 3 examples
   x 3 attention types x 2 layers of 4 heads (18 views);
3. **figure stepper**: ``widgets.static_stepper`` over 8 matplotlib figures (an ``imshow``
   with a colorbar, like chapter 13's flow of a batch), which ``as_view`` turns into PNGs;
   the figures are built before the timing starts (that is the chapter's own code).

Each is timed by ``time.process_time`` (the CPU of the drawing process, less sensitive to
other processes than wall time, not immune to them); the table gives the median over the
rounds, per view. The SHA-256 of every PNG is compared between the two packages: "identical"
means the readers see the same bytes.

Run from the repository root (about two minutes on 2 cores)::

    .venv/bin/python benchmarks/render_speed.py --before 85e245d

It writes ``benchmarks/results/render_speed.{md,json}``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
WORKLOADS = {
    "grid view": "one attention_grid (4 heads of 11 x 20) through view_png",
    "attention explorer": "attention_explorer, 3 examples x 3 types x 2 layers of 4 heads",
    "figure stepper": "static_stepper over 8 ready imshow figures with a colorbar",
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--before", default="85e245d", help="the commit whose package is 'before'")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds, each package")
    p.add_argument("--grid-views", type=int, default=6, help="grid views drawn per round")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--worker", help=argparse.SUPPRESS)  # internal: time one package
    return p.parse_args(argv)


# --------------------------------------------------------------------------------------------
# the worker: runs with PYTHONPATH set to one package's src/
# --------------------------------------------------------------------------------------------


def _examples(torch):
    g = torch.Generator().manual_seed(0)
    examples = []
    for source, target in [
        ("Wednesday 9 May 2018", "2018-05-09"),
        ("3/1/99", "1999-03-01"),
        ("May 5, 2000", "2000-05-05"),
    ]:
        src, tgt_in, tgt_out = list(source), ["<bos>", *target], [*target, "<eos>"]

        def w(queries, keys):
            return torch.rand(2, 4, len(queries), len(keys), generator=g).softmax(-1)

        examples.append(
            {
                "name": f"{source} -> {target}",
                "attention": {
                    "encoder self": (w(src, src), src, src),
                    "decoder self (masked)": (w(tgt_out, tgt_in), tgt_in, tgt_out),
                    "cross": (w(tgt_out, src), src, tgt_out),
                },
            }
        )
    return examples


def worker(grid_views: int) -> dict:
    import ipywidgets as W
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import torch

    from attnbook import viz, widgets

    def pngs(widget):
        if isinstance(widget, W.Image):
            yield bytes(widget.value)
        for child in getattr(widget, "children", ()):
            yield from pngs(child)

    rng = np.random.default_rng(0)
    maps = rng.dirichlet(np.ones(20), size=(grid_views, 4, 11))
    keys, queries = list("Wednesday 9 May 2018"), [*"2018-05-09", "<eos>"]

    def grid():
        return [
            viz.view_png(
                viz.attention_grid(m, keys, queries, layer_names=["cross, layer 1"], max_cols=4)
            )
            for m in maps
        ]

    def explorer():
        return list(pngs(widgets.attention_explorer(_examples(torch))))

    g = torch.Generator().manual_seed(0)
    figures = []  # the chapter's own figures: drawn before the timing starts
    for i in range(8):
        fig, ax = plt.subplots(figsize=(6.5, 1.9))
        im = ax.imshow(torch.randn(12, 32, generator=g).numpy(), cmap="RdBu", aspect="auto")
        ax.set_title(f"stage {i + 1}: a batch of (3, 12, 64)", fontsize=8)
        ax.set_ylabel("token")
        ax.set_xlabel("dimension (first 32)")
        fig.colorbar(im, ax=ax, fraction=0.03)
        fig.tight_layout()
        figures.append(fig)

    def stepper():
        return list(pngs(widgets.static_stepper(figures, description="stage")))

    out = {}
    for name, work in zip(WORKLOADS, (grid, explorer, stepper), strict=True):
        start = time.process_time()
        images = work()
        cpu = time.process_time() - start
        out[name] = {
            "views": len(images),
            "cpu_s": cpu,
            "sha256": hashlib.sha256(b"".join(images)).hexdigest(),
            "widths": sorted({int.from_bytes(p[16:20], "big") for p in images}),
        }
    return out


def run_worker(src: Path, grid_views: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, __file__, "--worker", str(grid_views)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# the driver
# --------------------------------------------------------------------------------------------


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(int(args.worker))))
        return {}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _machine import machine_info, measured_on, run_command

    before = git("rev-parse", "--short", args.before)
    after = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--", "src"))
    results = {
        "machine": machine_info(),
        "command": run_command("render_speed.py", argv),
        "before": before,
        "after": after + (" with uncommitted changes to src/" if dirty else ""),
        "rounds": {"before": [], "after": []},
    }
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "before.tar"
        with open(archive, "wb") as f:
            subprocess.run(["git", "archive", before, "src"], cwd=ROOT, stdout=f, check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "before", filter="data")
        sources = {"before": Path(tmp) / "before" / "src", "after": ROOT / "src"}
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for which in order:
                results["rounds"][which].append(run_worker(sources[which], args.grid_views))
                print(f"round {r + 1} {which}: {results['rounds'][which][-1]}", file=sys.stderr)
    results["machine"]["load_after"] = [round(x, 2) for x in os.getloadavg()]
    rows = {}
    for name in WORKLOADS:
        per_view = {}
        for which in ("before", "after"):
            runs = results["rounds"][which]
            per_view[which] = statistics.median(x[name]["cpu_s"] / x[name]["views"] for x in runs)
        first = {w: results["rounds"][w][0][name] for w in ("before", "after")}
        rows[name] = {
            "views": first["after"]["views"],
            "before_ms_per_view": 1000 * per_view["before"],
            "after_ms_per_view": 1000 * per_view["after"],
            "speedup": per_view["before"] / per_view["after"],
            "identical": first["before"]["sha256"] == first["after"]["sha256"],
            "widths": first["after"]["widths"],
        }
    results["table"] = rows
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "render_speed.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [
        "# Drawing the explorers' views: CPU per view",
        "",
        measured_on(results),
        "",
        f"Before: the package at `{results['before']}`; after: at `{results['after']}`. Each "
        f"workload ran {args.rounds} times per package in alternating fresh processes (one "
        "thread); the CPU time of the process doing the drawing, median over the rounds, per "
        "view. *Identical*: the two packages' PNGs have the same bytes.",
        "",
        "| workload | views | before ms/view | after ms/view | less CPU | PNGs identical | widths px |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name}: {WORKLOADS[name]} | {row['views']} | {row['before_ms_per_view']:.0f} | "
            f"{row['after_ms_per_view']:.0f} | **{row['speedup']:.2f}x** | "
            f"{'yes' if row['identical'] else 'no'} | {', '.join(map(str, row['widths']))} |"
        )
    lines += ["", f"Load average after the run: {results['machine']['load_after']}.", ""]
    (args.out / "render_speed.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return results


if __name__ == "__main__":
    main()
