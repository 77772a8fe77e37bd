"""The portability matrix (issue 38): every chapter ran under strict nbval on each CPU code path
of benchmarks/portability.py (the ATen and MKL paths its machine could simulate, on 1 and 2
threads) since its code, cell tags or stored outputs last changed, and no run failed. (A change
to the attnbook package alone is not seen here: re-run the chapters that use it.)

``benchmarks/portability.py`` (``make portability``) runs the matrix and records it in
``benchmarks/results/portability.json``. This file checks that record against the chapters as
they are now, so a chapter whose code or stored outputs changed since its matrix ran fails here
until ``make portability NB=book/NN_name.ipynb`` runs it again; and it tests the script's own
parts (which paths it runs, how it reads nbval's results, what the digest sees).
"""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import portability  # noqa: E402

CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
RECORD = ROOT / "benchmarks" / "results" / "portability.json"


@pytest.fixture(scope="module")
def record():
    assert RECORD.exists(), "no portability record: run make portability"
    return json.loads(RECORD.read_text(encoding="utf-8"))


# ------------------------------------------------------------------ the record of the chapters


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_the_matrix_ran_on_the_chapter_as_it_is_now(record, chapter):
    entry = record["chapters"].get(chapter.name)
    assert entry is not None, f"{chapter.name} is not in the portability record"
    assert entry["digest"] == portability.chapter_digest(chapter), (
        f"{chapter.name} changed (code or stored outputs) since the portability matrix ran on "
        f"it ({entry['commit']}, {entry['date']}): run make portability NB=book/{chapter.name}"
    )


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_every_path_ran_and_passed(record, chapter):
    runs = record["chapters"][chapter.name]["runs"]
    ran = {(r["path"], r["threads"]) for r in runs}
    wanted = {(p, t) for p in record["paths"] for t in portability.THREADS}
    assert wanted <= ran, f"{chapter.name}: no run of {sorted(wanted - ran)}"
    failed = [r for r in runs if not portability.row_passed(r)]
    assert not failed, f"{chapter.name}: failed on {failed}"


def test_the_record_covers_the_paths_a_cpu_may_take(record):
    paths = set(record["paths"])
    assert {"native", "aten=default", "mkl=COMPATIBLE", "mkl=AVX2", "mkl=AVX512"} <= paths
    assert "aten=avx2" in paths or record["native"].lower() == "avx2"


# ------------------------------------------------------------------ the script's parts


def test_cpu_paths_name_each_kernel_choice_once(monkeypatch):
    monkeypatch.setattr(portability.torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(portability.torch.backends.mkl, "is_available", lambda: True)
    names = [p["name"] for p in portability.cpu_paths()]
    assert names == [
        "native",
        "aten=default",
        "aten=avx2",
        "mkl=COMPATIBLE",
        "mkl=AVX2",
        "mkl=AVX512",
        "aten=default mkl=COMPATIBLE",
    ]
    monkeypatch.setattr(portability.torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setattr(portability.torch.backends.mkl, "is_available", lambda: False)
    paths = portability.cpu_paths()
    assert [p["name"] for p in paths] == ["native", "aten=default"]  # no AVX-512, no MKL
    assert paths[1]["env"] == {"ATEN_CPU_CAPABILITY": "default"}


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="book.11_masking.ipynb" name="Cell 3"/>
<testcase classname="book.11_masking.ipynb" name="Cell 26">
<failure message="#x1B[91mCell execution caused an exception#x1B[0m">Traceback
#x1B[32m----&gt; 9#x1B[39m #x1B[38;5;28;01massert#x1B[39;00m acc_ok &gt; 0.9
#x1B[31mAssertionError#x1B[39m: only the masked model can generate</failure></testcase>
<testcase classname="book.11_masking.ipynb" name="Cell 30">
<failure message="Cell outputs differ">Expected: 2.89962 Got: 2.89963</failure></testcase>
</testsuite></testsuites>
"""


def test_failures_tell_differing_outputs_from_raised_cells(tmp_path):
    junit = tmp_path / "r.xml"
    junit.write_text(JUNIT)
    differ, raised = portability.failures(junit)
    assert differ == [30]
    assert raised == [
        {
            "cell": 26,
            "error": "AssertionError: only the masked model can generate at assert acc_ok > 0.9",
        }
    ]


def test_the_digest_sees_code_and_outputs_but_not_comments_prose_or_the_pin(tmp_path):
    def chapter(code, output="1", prose="Text.", pin="a" * 40):
        nb = {
            "cells": [
                {"cell_type": "markdown", "metadata": {}, "source": [prose]},
                {
                    "cell_type": "code",
                    "metadata": {"tags": ["remove-cell"]},
                    "source": [f'commit = "{pin}"\n', code],
                    "outputs": [{"output_type": "stream", "name": "stdout", "text": [output]}],
                },
            ]
        }
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.ipynb"
        path.write_text(json.dumps(nb))
        return portability.chapter_digest(path)

    base = chapter("x = 1\nassert x == 1")
    assert chapter("x = 1  # one\n# the claim\nassert x == 1") == base
    assert chapter("x = 1\nassert x == 1", prose="Other text.") == base
    assert chapter("x = 1\nassert x == 1", pin="b" * 40) == base
    assert chapter("x = 2\nassert x == 2") != base
    assert chapter("x = 1\nassert x == 1", output="2") != base


def test_the_results_page_shows_each_path_and_each_failure():
    record = {
        "machine": {"processor": "", "machine": "x86_64", "cpu_count": 2, "torch": "2.13.0"},
        "native": "AVX512",
        "paths": ["native", "aten=default"],
        "chapters": {
            "11_masking.ipynb": {
                "digest": "d",
                "commit": "abc",
                "date": "2026-11-28",
                "runs": [
                    {"path": "native", "threads": 1, "differ": [], "raised": [], "seconds": 1},
                    {
                        "path": "aten=default",
                        "threads": 1,
                        "differ": [4],
                        "raised": [{"cell": 26, "error": "AssertionError"}],
                        "seconds": 1,
                    },
                ],
            }
        },
    }
    page = portability.markdown(record)
    assert "| 11 | abc | 2026-11-28 | ok | differ 4, raised 26 | - | - |" in page
    assert "- 11_masking.ipynb, aten=default, 1 thread(s), cell 26: `AssertionError`" in page
    assert "2 runs, 1 with a failure." in page
