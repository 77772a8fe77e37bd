"""The benchmark results that ship with the package are the ones the benchmarks recorded."""

import json
import re
from pathlib import Path

import pytest

from attnbook.utils import RECORDED, recorded_result

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


@pytest.mark.parametrize("name", RECORDED)
def test_packaged_copy_equals_benchmark_record(name):
    recorded = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
    assert recorded_result(name) == recorded


def test_bottleneck_record_has_the_curve_the_chapters_plot():
    r = recorded_result("bottleneck")
    lengths = [row["length"] for row in r["by_length"]]
    assert lengths == sorted(lengths) and len(lengths) >= 5
    for row in r["by_length"]:
        for model in ("context", "attention"):
            assert 0.0 <= row[model]["exact"] <= row[model]["token"] <= 1.0


def test_unknown_recorded_result_is_a_clear_error():
    with pytest.raises(
        ValueError, match=r"name must be one of \('bottleneck', 'train_speed'\), got 'nope'"
    ):
        recorded_result("nope")


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_results_show_no_machine_path(name):
    text = json.dumps(recorded_result(name))
    assert not re.search(r"/(work|tmp|root|home|Users)/[\w.-]+", text), text[:200]
