"""The portability matrix: every chapter under strict nbval on the CPU code paths that ATen's and
MKL's switches let this machine take, a stand-in for the machines readers have.

A CPU picks its own kernels: ATen (PyTorch's own operators) runs its ``default``, ``avx2`` or
``avx512`` code, MKL (the matrix products) its ``COMPATIBLE``, ``AVX2`` or ``AVX512`` code, on
as many threads as the reader has. Each choice moves float results in their last bits, and a
chaotic training much further (issue 38: one model gave 70% to 100% exact match across these
paths on one Intel Xeon). ``ATEN_CPU_CAPABILITY`` and ``MKL_CBWR`` make this machine take each
path, so the whole matrix runs here:

* ``native``: this machine's own choice;
* ``aten=default``, ``aten=avx2``, ``aten=avx512``: one ATen path each (only those this CPU can
  run, and not the one it picks natively, which ``native`` already is);
* ``mkl=COMPATIBLE``, ``mkl=AVX2``, ``mkl=AVX512``: one MKL path each (x86 builds with MKL);
* ``aten=default mkl=COMPATIBLE``: both at once, the two paths furthest from a native AVX-512
  one (``make nbval`` runs ATen's default with MKL's AVX2: each is a column here);

each on 1 and on 2 threads. Every chapter runs under strict nbval (``make nbval``'s command) on
every path, in a fresh process, as many runs side by side as the machine has cores (``--jobs``).
For each chapter and path the result lists the cells whose stored outputs differ and the cells
that raised (a hidden check's ``AssertionError`` is a claim of the page that does not hold on that path).

Run from the repository root (14 runs of each chapter on an AVX-512 machine with MKL)::

    .venv/bin/python benchmarks/portability.py            # every chapter: make portability
    .venv/bin/python benchmarks/portability.py book/11_masking.ipynb   # some chapters

The result is recorded in ``benchmarks/results/portability.{json,md}``. A run of some chapters
replaces those chapters' rows and keeps the others, so once every chapter has run the record
holds the whole book (its machine line and path list are the latest run's).
Each row records a digest of its chapter's code, cell tags and stored outputs (comments and the
Colab pin left out; the package's code is not in it), and ``tests/test_portability.py`` fails when a chapter's code or outputs changed
since its row was recorded, or when a recorded run failed: run the matrix on a chapter before
its change lands. The exit status is 1 if any path
failed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import tokenize
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

import torch
from _machine import machine_info

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
ATEN_PATHS = ("default", "avx2", "avx512")
MKL_PATHS = ("COMPATIBLE", "AVX2", "AVX512")
THREADS = (1, 2)
# the setup cell's Colab install line names the package's commit; a re-pin changes no result
PIN = re.compile(r'commit = "[0-9a-f]{40}"')
ANSI = re.compile(r"(\x1b|#x1B)\[[0-9;]*m")  # colour codes, as the terminal or JUnit writes them


def _without_comments(source: str) -> str:
    """Python source with its comments dropped (a comment changes no result): the tokens
    joined by spaces, or the source itself where it does not tokenize (IPython magics)."""
    marks = {tokenize.NEWLINE: ";", tokenize.INDENT: "{", tokenize.DEDENT: "}"}
    try:
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        return " ".join(
            marks.get(t.type, t.string)
            for t in tokens
            if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER)
        )
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source


def chapter_digest(path: Path) -> str:
    """A digest of what the matrix tests in a chapter: each code cell's code (comments and the
    Colab pin left out), its tags and its stored outputs. Prose and comment edits leave it as
    it was; a change of code or of a stored output changes it."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    parts = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = PIN.sub('commit = "..."', "".join(cell["source"]))
        outputs = [
            {k: v for k, v in o.items() if k not in ("metadata", "execution_count")}
            for o in cell.get("outputs", [])
        ]
        parts.append(
            {
                "code": _without_comments(source),
                "tags": sorted(cell.get("metadata", {}).get("tags", [])),
                "outputs": outputs,
            }
        )
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cpu_paths() -> list[dict]:
    """The code paths this machine can take: a name and the environment that selects it."""
    native = torch.backends.cpu.get_cpu_capability().lower()  # e.g. "avx512", "avx2", "default"
    runnable = ATEN_PATHS[: ATEN_PATHS.index(native) + 1] if native in ATEN_PATHS else ("default",)
    paths = [{"name": "native", "env": {}}]
    paths += [
        {"name": f"aten={p}", "env": {"ATEN_CPU_CAPABILITY": p}} for p in runnable if p != native
    ]
    if torch.backends.mkl.is_available():
        paths += [{"name": f"mkl={p}", "env": {"MKL_CBWR": p}} for p in MKL_PATHS]
        paths.append(
            {
                "name": "aten=default mkl=COMPATIBLE",
                "env": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
            }
        )
    return paths


def failures(junit: Path) -> tuple[list[int], list[dict]]:
    """From nbval's JUnit XML: the cells whose outputs differ, and the cells that raised (with
    the exception's last line)."""
    differ, raised = [], []
    for case in ET.parse(junit).getroot().iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None:
            continue
        found = re.search(r"Cell (\d+)", case.get("name", ""))
        cell = int(found.group(1)) if found else -1
        text = ANSI.sub("", (problem.get("message") or "") + "\n" + (problem.text or ""))
        if "Cell outputs differ" in text:
            differ.append(cell)
        else:
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            error = next(
                (ln for ln in reversed(lines) if re.match(r"\w+(Error|Exception)", ln)), ""
            )
            error = error or (lines[-1] if lines else "")
            # the line that raised, which IPython marks with an arrow (an assert has no message)
            line = next((ln for ln in reversed(lines) if re.match(r"-+>", ln)), "")
            if line:
                error += " at " + re.sub(r"^-+>\s*\d*\s*", "", line)
            raised.append({"cell": cell, "error": error[:300]})
    return differ, raised


def run_one(chapter: Path, path: dict, threads: int, tmp: Path) -> dict:
    from book_speed import chapter_command, clean_env

    junit = tmp / f"{chapter.stem}-{path['name'].replace(' ', '_')}-{threads}.xml"
    env = clean_env(**path["env"], OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    env["OMP_WAIT_POLICY"] = "PASSIVE"  # waiting threads sleep: jobs side by side do not spin
    start = time.perf_counter()
    done = subprocess.run(
        [*chapter_command(chapter, "nbval"), f"--junitxml={junit}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = round(time.perf_counter() - start, 1)
    if junit.exists():
        differ, raised = failures(junit)
    else:  # pytest itself failed before any cell ran
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        differ, raised = [], [{"cell": -1, "error": tail[0][:300]}]
    if done.returncode != 0 and not differ and not raised:
        raised = [{"cell": -1, "error": f"pytest exited {done.returncode}"}]
    return {
        "path": path["name"],
        "threads": threads,
        "differ": differ,
        "raised": raised,
        "seconds": seconds,
    }


def run_matrix(
    chapters: list[Path], paths: list[dict], threads: tuple[int, ...], jobs: int
) -> dict:
    """Every (chapter, path, threads) run, ``jobs`` of them side by side. Waiting OpenMP
    threads sleep (OMP_WAIT_POLICY=PASSIVE), so two 2-thread runs on two cores share them
    instead of spinning against each other, and no core idles while a run starts its kernel.
    No result depends on the time a run takes."""
    todo = [(c, p, t) for c in chapters for t in sorted(threads, reverse=True) for p in paths]
    results: dict[str, list[dict]] = {c.name: [] for c in chapters}
    lock = threading.Lock()

    def job(chapter: Path, path: dict, t: int, tmp: Path) -> None:
        row = run_one(chapter, path, t, tmp)
        with lock:
            results[chapter.name].append(row)
            state = "ok" if not row["differ"] and not row["raised"] else "FAILED"
            print(
                f"{chapter.name} {path['name']} threads={t}: {state} ({row['seconds']} s)"
                + (f" differ {row['differ']}" if row["differ"] else "")
                + "".join(f"\n    cell {r['cell']}: {r['error']}" for r in row["raised"]),
                flush=True,
            )

    with tempfile.TemporaryDirectory(prefix="portability-") as tmp:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for done in [pool.submit(job, c, p, t, Path(tmp)) for c, p, t in todo]:
                done.result()
    return results


def git_head(chapters: list[Path]) -> str:
    """The commit the chapters ran at, with ``+changes`` where they or the package had changes
    not yet committed."""

    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)

    head = git("rev-parse", "--short=12", "HEAD").stdout.strip() or "unknown"
    dirty = git("status", "--porcelain", "--", "src", *map(str, chapters)).stdout.strip()
    return head + ("+changes" if dirty else "")


def row_passed(row: dict) -> bool:
    return not row["differ"] and not row["raised"]


def markdown(record: dict) -> str:
    paths = record["paths"]
    columns = [(p, t) for t in THREADS for p in paths]
    lines = [
        "# The portability matrix",
        "",
        "Every chapter under strict nbval on each CPU code path this machine can be made to "
        "take with `ATEN_CPU_CAPABILITY` and `MKL_CBWR` (one library's path at a time, and "
        "both libraries' furthest paths at once), on 1 and 2 threads (`benchmarks/portability.py`; "
        "re-run with `make portability`, or `make portability NB=book/NN_x.ipynb` for some "
        "chapters). `ok`: every stored output matched and no cell raised; `differ N`: the "
        "stored output of cell N differs; `raised N`: cell N raised (its error below).",
        "",
        f"Machine: {record['machine']['processor'] or record['machine']['machine']}, "
        f"{record['machine']['cpu_count']} cores, torch {record['machine']['torch']}, native "
        f"ATen path `{record['native']}`.",
        "",
    ]
    header = ["chapter", "commit", "date"] + [f"{p} ({t}t)" for p, t in columns]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    errors = []
    for name, entry in sorted(record["chapters"].items()):
        cells = []
        for p, t in columns:
            row = next((r for r in entry["runs"] if r["path"] == p and r["threads"] == t), None)
            if row is None:
                cells.append("-")
            elif row_passed(row):
                cells.append("ok")
            else:
                bits = [f"differ {c}" for c in row["differ"]]
                bits += [f"raised {r['cell']}" for r in row["raised"]]
                cells.append(", ".join(bits))
                errors += [
                    f"- {name}, {p}, {t} thread(s), cell {r['cell']}: `{r['error']}`"
                    for r in row["raised"]
                ]
        lines.append("| " + " | ".join([name[:2], entry["commit"], entry["date"], *cells]) + " |")
    runs = [r for e in record["chapters"].values() for r in e["runs"]]
    failed = sum(not row_passed(r) for r in runs)
    lines += ["", f"{len(runs)} runs, {failed} with a failure."]
    if errors:
        lines += ["", "## Errors", "", *errors]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("chapters", nargs="*", type=Path, help="default: every book/NN_*.ipynb")
    p.add_argument("--out", type=Path, default=RESULTS, help="where the record goes")
    p.add_argument(
        "--threads",
        type=int,
        nargs="+",
        choices=THREADS,
        default=list(THREADS),
        help="the thread counts to run",
    )
    p.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="runs side by side (default: cores)"
    )
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs must be at least 1, got {args.jobs}")
    for chapter in args.chapters:
        if not chapter.is_file() or chapter.suffix != ".ipynb":
            p.error(f"chapters: {chapter} is not a notebook file")
    chapters = [c.resolve() for c in args.chapters] or sorted(
        (ROOT / "book").glob("[0-9][0-9]_*.ipynb")
    )
    paths = cpu_paths()
    start = time.perf_counter()
    results = run_matrix(chapters, paths, tuple(args.threads), args.jobs)
    record_file = args.out / "portability.json"
    record = json.loads(record_file.read_text()) if record_file.exists() else {"chapters": {}}
    record.update(
        machine=machine_info(),
        native=torch.backends.cpu.get_cpu_capability(),
        paths=[p["name"] for p in paths],
    )
    head, today = git_head(chapters), date.today().isoformat()
    for chapter in chapters:
        runs = sorted(results[chapter.name], key=lambda r: (r["threads"], r["path"]))
        record["chapters"][chapter.name] = {
            "digest": chapter_digest(chapter),
            "commit": head,
            "date": today,
            "runs": runs,
        }
    args.out.mkdir(parents=True, exist_ok=True)
    record_file.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    (args.out / "portability.md").write_text(markdown(record))
    failed = [
        (c.name, r["path"], r["threads"])
        for c in chapters
        for r in results[c.name]
        if not row_passed(r)
    ]
    minutes = (time.perf_counter() - start) / 60
    print(
        f"{len(chapters)} chapter(s) x {len(paths)} paths: {len(failed)} failed, {minutes:.1f} min"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
