"""Write the CJK font the package ships: a subset of Noto Sans CJK SC (SIL Open Font License).

matplotlib's default font (DejaVu Sans) has no Chinese glyphs, so a figure labelled 猫 or 学生
shows boxes. A full CJK font is 16-33 MB; this subset keeps the 3,755 most common characters
(GB 2312 level 1), every CJK character the book and the package use, and CJK punctuation:
about 1.5 MB, shipped inside ``attnbook/fonts`` so it works wherever the package is installed
(Colab, Binder, a laptop) with nothing more to install.

Run it again when a chapter needs a character outside the subset (tests/test_viz_fonts.py
names it). It needs the full font once: ``pip install noto-cjk-sans-otc==0.0.1``.

    python tests/make_cjk_font.py
"""

import re
import sys
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTCollection

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "attnbook" / "fonts"
FONT = OUT / "NotoSansSC-attnbook.otf"
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def gb2312_level1() -> set[str]:
    """The 3,755 characters of GB 2312 level 1 (rows 16-55), the common ones of Chinese."""
    chars = set()
    for row in range(16, 56):
        for cell in range(1, 95):
            try:
                chars.add(bytes([0xA0 + row, 0xA0 + cell]).decode("gb2312"))
            except UnicodeDecodeError:
                pass  # row 55 ends early
    return chars


def used_characters() -> set[str]:
    """Every CJK character in the chapters, the book's pages, the package's code and the
    Chinese edition (its catalogs' translations and its configuration, locale/zh_CN)."""
    files = [*ROOT.glob("book/*.ipynb"), *ROOT.glob("book/*.md"), *ROOT.glob("src/**/*.py")]
    files += [*ROOT.glob("locale/*/LC_MESSAGES/**/*.po"), *ROOT.glob("locale/*/_config.yml")]
    return {c for f in files for c in CJK.findall(f.read_text(encoding="utf-8"))}


def main() -> None:
    import noto_cjk_sans_otc  # pip install noto-cjk-sans-otc==0.0.1

    collection = TTCollection(str(noto_cjk_sans_otc.FONT_PATH))
    (font,) = [f for f in collection.fonts if f["name"].getDebugName(1) == "Noto Sans CJK SC"]
    chars = gb2312_level1() | used_characters() | {chr(c) for c in range(0x3000, 0x3040)}
    chars |= {chr(c) for c in range(0xFF01, 0xFF5F)} | {chr(c) for c in range(0x20, 0x7F)}
    options = subset.Options()
    options.name_IDs = ["*"]  # keep the name table: the family name, the copyright, the license
    options.layout_features = ["*"]
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in sorted(chars)])
    subsetter.subset(font)
    OUT.mkdir(exist_ok=True)
    font.recalcTimestamp = False  # the same file every time it is made
    font.save(str(FONT))
    license_text = (
        Path(noto_cjk_sans_otc.__file__).parent.parent / "noto_cjk_sans_otc-0.0.1.dist-info"
    )
    (OUT / "OFL.txt").write_text(
        (license_text / "licenses" / "LICENSE").read_text(encoding="utf-8"), encoding="utf-8"
    )
    print(f"wrote {FONT.relative_to(ROOT)}: {len(chars)} characters, {FONT.stat().st_size} bytes")


if __name__ == "__main__":
    sys.exit(main())
