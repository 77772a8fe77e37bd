"""Every page of the book has an audit record (docs/audit/), with its three sections."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AUDIT = ROOT / "docs" / "audit"
PAGES = sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("page", PAGES)
def test_every_chapter_has_an_audit_record_with_its_three_sections(page):
    record = AUDIT / f"{page}.md"
    assert record.exists(), f"no audit record {record.relative_to(ROOT)} for book/{page}.ipynb"
    text = record.read_text(encoding="utf-8")
    for section in ("Checked", "Found and fixed", "Left alone"):
        assert f"## {section}" in text, f"{record.name} has no '## {section}' section"
