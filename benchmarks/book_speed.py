"""How long a reader and a developer wait: every chapter, and every stage of ``make test``.

1. **Chapters.** Each chapter runs top to bottom on its own, one at a time, in a fresh
   process and kernel, on this machine's native code paths with 2 threads
   (``OMP_NUM_THREADS=2``), as strict nbval (``--runner nbval``, the default: what
   ``make nbval-native`` runs for one chapter) or as a plain execution with nbclient
   (``--runner nbclient``: ``tests/execute_notebooks.py --check``, nothing compared or
   written). The time includes starting the kernel and importing torch, as a reader's "Run
   All" does, and pytest's start-up for nbval (about 0.8 s; Hypothesis's plugin, which no
   chapter uses, is left out, as ``make nbval`` leaves it out).
2. **The suite.** ``make test`` from a fresh clone: the repository is cloned (its committed
   HEAD, so commit first) into a temporary folder, and each stage of the ``test`` target runs
   there as the Makefile runs it: the install (the ``.venv`` stamp), then each line of the
   ``test`` recipe as a phase, its stages started in order, ``-jN`` at a time, with the
   line's variables (read from the Makefile, so this script follows it). The wall time of
   every stage and phase is recorded; the phases' sum is the suite's time. ``--serial`` runs
   every stage alone instead (each stage's own cost, nothing beside it).

Run from the repository root, on a machine with nothing else running (a loaded machine gives
slower times; the load average before and after is recorded)::

    .venv/bin/python benchmarks/book_speed.py

It takes about as long as the chapters plus ``make test`` (20 to 30 minutes on 2 cores) and
writes ``benchmarks/results/book_speed.{md,json}`` and, after a run of every chapter and the
suite, ``book/_generated/timings.md``, the sentence ``book/how_to_run.md`` includes.
``--only chapters`` or ``--only suite`` measures one part; ``--chapters book/NN_x.ipynb ...``
some chapters (such a partial run writes no include). ``--help`` lists the options.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _machine import REFERENCE_STEPS, machine_info, measured_on, reference_seconds, run_command

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
GENERATED = ROOT / "book" / "_generated" / "timings.md"
# issue 30's targets
MAX_CHAPTER_S = 45
MAX_CHAPTERS_S = 4 * 60
MAX_SUITE_S = 12 * 60
THREADS = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
INSTALL_STAGE = ".venv/.installed"  # the Makefile's $(STAMP): venv, requirements, package


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--only", choices=("chapters", "suite"), help="measure one part only")
    p.add_argument(
        "--chapters", nargs="+", type=Path, help="these chapters (default: every book/NN_*.ipynb)"
    )
    p.add_argument("--runner", choices=("nbval", "nbclient"), default="nbval")
    p.add_argument("--repeats", type=int, default=1, help="runs per chapter (the median is kept)")
    p.add_argument(
        "--serial", action="store_true", help="suite: run every stage alone, not as make test"
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--generated",
        type=Path,
        default=GENERATED,
        help="where the include for book/how_to_run.md goes (after a full run only)",
    )
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats must be at least 1, got {args.repeats}")
    for chapter in args.chapters or []:
        if not chapter.is_file() or chapter.suffix != ".ipynb":
            p.error(f"--chapters: {chapter} is not a notebook file")
    return args


def all_chapters() -> list[Path]:
    return sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


def clean_env(**extra: str) -> dict[str, str]:
    """This environment with 2 threads, without PYTHONPATH (the checkout's own package is
    imported through its .venv's editable install) and without another CPU's simulation."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "ATEN_CPU_CAPABILITY", "MKL_CBWR", "MAKEFLAGS", "MFLAGS"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, **THREADS, "PYDEVD_DISABLE_FILE_VALIDATION": "1", **extra}


def timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path | None = None) -> dict:
    """Run ``cmd``; its wall time in seconds, whether it passed, and its output's last lines."""
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    output = done.stdout + done.stderr
    if log is not None:
        log.write_text(output)
    return {
        "seconds": round(seconds, 1),
        "passed": done.returncode == 0,
        "tail": "" if done.returncode == 0 else "\n".join(output.strip().splitlines()[-15:]),
    }


# ------------------------------------------------------------------------------ chapters


def chapter_command(chapter: Path, runner: str) -> list[str]:
    python = str(ROOT / ".venv" / "bin" / "python")
    if runner == "nbclient":
        return [python, "tests/execute_notebooks.py", "--check", str(chapter)]
    return [
        *(python, "-m", "pytest", "--nbval", str(chapter), "--nbval-current-env"),
        *("--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "-p", "no:cacheprovider"),
        *("-p", "no:hypothesispytest", "-q"),  # as make nbval: no Hypothesis in the chapters
    ]


def time_chapters(chapters: list[Path], runner: str, repeats: int) -> list[dict]:
    rows = []
    for chapter in chapters:
        runs, speed = [], []
        for _ in range(repeats):
            speed.append(reference_seconds())  # how fast the machine is just now
            runs.append(timed(chapter_command(chapter, runner), ROOT, clean_env()))
            print(f"{chapter.name}: {runs[-1]['seconds']:.1f} s", flush=True)
        rows.append(
            {
                "chapter": chapter.name,
                "seconds": round(statistics.median(r["seconds"] for r in runs), 1),
                "reference_s": round(statistics.median(speed), 3),
                "runs": [r["seconds"] for r in runs],
                "passed": all(r["passed"] for r in runs),
                "tail": next((r["tail"] for r in runs if not r["passed"]), ""),
            }
        )
    return rows


# ------------------------------------------------------------------------------ the suite


def make_test_phases(makefile: Path) -> list[dict]:
    """The phases of ``make test`` as the Makefile runs them: one phase per recipe line of
    ``test``, each with its stages (``$(STAMP)`` is the install), its ``-jN`` and its
    variables; the install first, as a phase of its own, if ``test`` has it as a
    prerequisite instead."""
    text = re.sub(r"\\\n\s*", " ", makefile.read_text())  # join continued lines
    found = re.search(r"^test:([^\n]*)\n((?:\t[^\n]*\n)+)", text, re.M)
    if found is None:
        raise SystemExit(f"{makefile} has no `test:` target with a recipe")
    phases = []
    if "$(STAMP)" in found.group(1).split():
        phases.append({"stages": [INSTALL_STAGE], "jobs": 1, "env": {}})
    for line in found.group(2).splitlines():
        words = shlex.split(line.strip())
        if not words or words[0] != "$(MAKE)":
            raise SystemExit(f"make test's recipe line {line.strip()!r} is not a $(MAKE) call")
        stages, jobs, env = [], 1, {}
        for word in words[1:]:
            if re.fullmatch(r"-j\d+", word):
                jobs = int(word[2:])
            elif word.startswith("-"):
                continue  # --no-print-directory, --output-sync=target
            elif "=" in word:
                name, value = word.split("=", 1)
                env[name] = value
            else:
                stages.append(INSTALL_STAGE if word == "$(STAMP)" else word)
        phases.append({"stages": stages, "jobs": jobs, "env": env})
    return phases


def time_suite(serial: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="book-speed-") as tmp:
        clone = Path(tmp) / "attnbook"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        head = subprocess.run(
            ["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        logs = Path(tmp) / "logs"
        logs.mkdir()
        phases = make_test_phases(clone / "Makefile")
        rows, phase_rows, failed = [], [], False
        for phase in phases:
            jobs = 1 if serial else phase["jobs"]
            env = clean_env(**phase["env"])

            def stage(name: str, env=env) -> dict:
                cmd = ["make", "--no-print-directory", name]
                result = timed(cmd, clone, env, logs / f"{name.replace('/', '_')}.log")
                print(f"  {name}: {result['seconds']:.1f} s", flush=True)
                return {"stage": name, **result}

            print(f"phase {' '.join(phase['stages'])} (-j{jobs})", flush=True)
            start = time.perf_counter()
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                results = list(pool.map(stage, phase["stages"]))
            seconds = time.perf_counter() - start
            rows += results
            phase_rows.append({**phase, "jobs": jobs, "seconds": round(seconds, 1)})
            if not all(r["passed"] for r in results):
                failed = True  # make stops at the first failing phase; so does this
                break
    return {
        "commit": head,
        "serial": serial,
        "stages": rows,
        "phases": phase_rows,
        "seconds": round(sum(p["seconds"] for p in phase_rows), 1),
        "passed": not failed,
    }


# ------------------------------------------------------------------------------ reports


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def _repeats(chapters: list[dict]) -> int:
    """How many times each chapter ran (``--repeats``)."""
    return max(len(r.get("runs", [])) for r in chapters)


def markdown(results: dict) -> str:
    lines = [
        "# How long the book and its tests take",
        "",
        f"{measured_on(results)} Load average after the run: {results['load_after']}.",
        "",
    ]
    reference = results.get("reference_s")
    if reference:
        lines += [
            f"The machine's speed at the time: {REFERENCE_STEPS} Adam steps of a small MLP on one "
            f"thread (`benchmarks/_machine.py`, `reference_seconds`, best of 3) took "
            f"{reference['before']:.2f} s before the run and {reference['after']:.2f} s after "
            "it, and was timed again before each chapter (the table's last column), to show "
            "how the machine's speed moved during the run: on a shared host the same code "
            "does not take the same time at every hour.",
            "",
        ]
    chapters = results.get("chapters")
    if chapters:
        total = sum(r["seconds"] for r in chapters)
        repeats = _repeats(chapters)
        several = repeats > 1  # then each chapter's runs are shown beside their median
        lines += [
            f"## Chapters ({results['runner']}, native code paths, 2 threads, one at a time)",
            "",
            *(
                [
                    f"Each chapter ran {repeats} times in a row; *seconds* is the median of its "
                    "runs, *reference* the median of the reference times taken just before them.",
                    "",
                ]
                if several
                else []
            ),
            f"| chapter | seconds |{' runs, s |' if several else ''} passed "
            "| reference just before, s |",
            f"|---|---:|{'---|' if several else ''}---|---:|",
            *(
                f"| {r['chapter']} | {r['seconds']:.1f} |"
                + (f" {', '.join(f'{x:.1f}' for x in r['runs'])} |" if several else "")
                + f" {'yes' if r['passed'] else 'NO'} | {r['reference_s']:.2f} |"
                for r in chapters
            ),
            f"| all {len(chapters)} | {total:.1f} |"
            + (
                " "
                + ", ".join(f"{sum(r['runs'][i] for r in chapters):.1f}" for i in range(repeats))
                + " |"
                if several
                else ""
            )
            + " | |",
            "",
        ]
    suite = results.get("suite")
    if suite:
        mode = "each stage alone" if suite["serial"] else "as `make test` runs them"
        lines += [
            f"## `make test` from a fresh clone ({mode}; commit {suite['commit'][:12]})",
            "",
            "| phase | stages | parallel | seconds |",
            "|---:|---|---:|---:|",
        ]
        by_stage = {r["stage"]: r for r in suite["stages"]}
        for i, phase in enumerate(suite["phases"]):
            stages = ", ".join(
                f"{s} {by_stage[s]['seconds']:.0f} s{'' if by_stage[s]['passed'] else ' FAILED'}"
                for s in phase["stages"]
                if s in by_stage
            )
            lines.append(f"| {i} | {stages} | {phase['jobs']} | {phase['seconds']:.1f} |")
        lines += ["", f"In all {suite['seconds']:.0f} s ({minutes(suite['seconds'])}).", ""]
    checks = results["checks"]
    if checks:
        lines += ["## Targets (issue 30)", ""]
        lines += [f"- {name}: {value}" for name, value in checks.items()]
        lines.append("")
    return "\n".join(lines)


def include_text(results: dict) -> str:
    """The sentence book/how_to_run.md includes: measured times, nothing typed."""
    chapters, suite, m = results["chapters"], results["suite"], results["machine"]
    slowest = max(chapters, key=lambda r: r["seconds"])
    total = sum(r["seconds"] for r in chapters)
    repeats = _repeats(chapters)
    median = f" (the median of {repeats} runs of each)" if repeats > 1 else ""
    return (
        f"<!-- written by benchmarks/book_speed.py; re-run it instead of editing -->\n"
        f"Measured on {m['cpu_count']} CPU cores with {m['threads']} threads: each chapter "
        f"runs top to bottom in {min(r['seconds'] for r in chapters):.0f} to "
        f"{slowest['seconds']:.0f} seconds (the slowest is `{slowest['chapter']}`), all "
        f"{len(chapters)} in {minutes(total)}{median}, and `make test` from a fresh clone takes "
        f"{minutes(suite['seconds'])}.\n"
    )


def main(argv=None) -> dict:
    args = parse_args(argv)
    results = {"machine": machine_info(), "command": run_command("book_speed.py", argv)}
    results["reference_s"] = {"before": reference_seconds()}
    chapters = [c.resolve() for c in args.chapters] if args.chapters else all_chapters()
    if args.only != "suite":
        results["runner"] = args.runner
        results["chapters"] = time_chapters(chapters, args.runner, args.repeats)
    if args.only != "chapters":
        results["suite"] = time_suite(args.serial)
    results["reference_s"]["after"] = reference_seconds()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    results["load_after"] = [round(x, 2) for x in load] if load else None
    checks = {}
    if "chapters" in results:
        rows = results["chapters"]
        checks["all_chapters_passed"] = all(r["passed"] for r in rows)
        checks["slowest_chapter_s"] = max(r["seconds"] for r in rows)
        checks[f"every_chapter_within_{MAX_CHAPTER_S}_s"] = (
            checks["slowest_chapter_s"] <= MAX_CHAPTER_S
        )
        checks["chapters_total_s"] = round(sum(r["seconds"] for r in rows), 1)
        if len(rows) == len(all_chapters()):
            checks[f"all_chapters_within_{MAX_CHAPTERS_S}_s"] = (
                checks["chapters_total_s"] <= MAX_CHAPTERS_S
            )
    if "suite" in results:
        suite = results["suite"]
        checks["suite_passed"] = suite["passed"]
        checks["suite_s"] = suite["seconds"]
        checks[f"suite_within_{MAX_SUITE_S}_s"] = suite["passed"] and suite["seconds"] <= (
            MAX_SUITE_S
        )
    results["checks"] = checks
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "book_speed.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "book_speed.md").write_text(markdown(results))
    full = (
        "chapters" in results
        and len(results["chapters"]) == len(all_chapters())
        and "suite" in results
        and not results["suite"]["serial"]
        and checks.get("all_chapters_passed")
        and checks.get("suite_passed")
    )
    if full:
        args.generated.parent.mkdir(parents=True, exist_ok=True)
        args.generated.write_text(include_text(results))
        print(f"wrote {args.generated}")
    else:
        print(f"not writing {args.generated}: it needs every chapter and make test, all passing")
    failed = [r for r in results.get("chapters", []) if not r["passed"]]
    failed += [r for r in results.get("suite", {}).get("stages", []) if not r["passed"]]
    for row in failed:
        print(f"FAILED {row.get('chapter') or row.get('stage')}:\n{row['tail']}")
    print(f"wrote {args.out / 'book_speed.json'}: {checks}")
    return results


if __name__ == "__main__":
    done = main()
    failed = [r for r in done.get("chapters", []) if not r["passed"]]
    sys.exit(1 if failed or not done.get("suite", {}).get("passed", True) else 0)
