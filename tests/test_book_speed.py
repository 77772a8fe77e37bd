"""benchmarks/book_speed.py times ``make test`` stage by stage as the Makefile runs it, and
``make test`` still runs every check it ran before it was split into phases."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import book_speed  # noqa: E402


def make_dry_run(*targets: str) -> str:
    """The commands ``make -n`` would run, sub-makes included (-n recurses into $(MAKE))."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", *targets],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_benchmark_reads_the_phases_of_make_test():
    phases = book_speed.make_test_phases(ROOT / "Makefile")
    # the install first, beside the Colab-like environment's (which needs no .venv)
    assert phases[0] == {
        "stages": [book_speed.INSTALL_STAGE, "colab-env"],
        "jobs": 2,
        "env": {},
    }
    stages = [s for p in phases[1:] for s in p["stages"]]
    assert len(stages) == len(set(stages)), stages
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    assert set(stages) <= targets, set(stages) - targets
    assert all(p["jobs"] >= 1 for p in phases)
    # the phase that runs the chapters (strict nbval in the Colab-like environment) runs each
    # on one thread, as make does
    chapters = next(p for p in phases if "colab-check" in p["stages"])
    assert chapters["env"]["OMP_NUM_THREADS"] == "1"


def test_a_continued_recipe_line_is_one_phase(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text(
        "test: $(STAMP)\n"
        "\t$(MAKE) -j2 lint unit\n"
        "\t$(MAKE) -j2 --output-sync=target A=1 \\\n"
        "\t  B=2 nbval colab-check\n"
        "\nlint:\n"
    )
    phases = book_speed.make_test_phases(makefile)
    assert phases[1:] == [
        {"stages": ["lint", "unit"], "jobs": 2, "env": {}},
        {"stages": ["nbval", "colab-check"], "jobs": 2, "env": {"A": "1", "B": "2"}},
    ]


def test_make_test_runs_every_check():
    planned = make_dry_run("test")
    for check, command in {
        "lint": "ruff check src tests benchmarks book",
        "unit": "-m pytest tests --ignore=tests/browser",
        # strict nbval over every chapter, in the Colab-like environment, on other CPU paths
        "colab-check": "ATEN_CPU_CAPABILITY=default MKL_CBWR=AVX2 .venv/bin/python "
        "tests/check_colab.py\n",
        "colab-env": "tests/check_colab.py --env-only",
        "build-check": "tests/check_built_book.py _build/html",
        "browser": "-m pytest tests/browser",
    }.items():
        assert command in planned, f"make test no longer runs {check} ({command!r})"
    # the chapters run under strict nbval there (never --nbval-lax), with make nbval's sanitizer
    source = (ROOT / "tests" / "check_colab.py").read_text()
    assert '"--nbval",' in source and "--nbval-lax" not in source
    assert "nbval_sanitize.cfg" in source
    # the browser test reads the build: it must come after it
    assert planned.index("check_built_book.py") < planned.index("pytest tests/browser")


def test_the_include_states_measured_times():
    results = {
        "machine": {"cpu_count": 2, "threads": 2},
        "chapters": [
            {"chapter": "01_a.ipynb", "seconds": 12.4},
            {"chapter": "02_b.ipynb", "seconds": 40.6},
        ],
        "suite": {"seconds": 630.0},
    }
    text = book_speed.include_text(results)
    assert "12 to 41 seconds" in text and "`02_b.ipynb`" in text
    assert "all 2 in 0.9 min" in text and "takes 10.5 min" in text


MACHINE = {
    "cpu_count": 2,
    "threads": 2,
    "processor": "x86_64",
    "machine": "x86_64",
    "platform": "Linux",
    "python": "3.11.7",
    "torch": "2.13.0",
    "load_before": [0.1, 0.2, 0.3],
}


def test_repeated_chapter_runs_show_their_median_and_every_run():
    results = {
        "machine": {"cpu_count": 2, "threads": 2},
        "runner": "nbval",
        "chapters": [
            {
                "chapter": "01_a.ipynb",
                "seconds": 12.4,
                "runs": [12.4, 11.0, 15.0],
                "passed": True,
                "reference_s": 0.6,
            },
            {
                "chapter": "02_b.ipynb",
                "seconds": 40.6,
                "runs": [40.6, 41.0, 39.0],
                "passed": True,
                "reference_s": 0.61,
            },
        ],
        "suite": {"seconds": 630.0},
    }
    assert "0.9 min (the median of 3 runs of each)" in book_speed.include_text(results)
    chapters_only = {k: v for k, v in results.items() if k != "suite"}
    page = book_speed.markdown(
        {**chapters_only, "machine": MACHINE, "command": "c", "load_after": None, "checks": {}}
    )
    assert "| 01_a.ipynb | 12.4 | 12.4, 11.0, 15.0 | yes | 0.60 |" in page
    assert "| all 2 | 53.0 | 53.0, 52.0, 54.0 | | |" in page  # the runs' sums, in order


def test_the_results_page_states_the_machine_speed():
    results = {
        "machine": MACHINE,
        "command": ".venv/bin/python benchmarks/book_speed.py",
        "load_after": [1.0, 1.0, 1.0],
        "reference_s": {"before": 1.234, "after": 1.5},
        "checks": {},
    }
    page = book_speed.markdown(results)
    assert "took 1.23 s before the run and 1.50 s after it" in page


def test_the_reference_work_runs_and_takes_longer_for_more_steps():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _machine import reference_seconds

    short, longer = reference_seconds(steps=10), reference_seconds(steps=300)
    assert 0 < short < longer
