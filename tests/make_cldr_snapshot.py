"""Write src/attnbook/cldr/dates.json: the CLDR date data that attnbook.languages reads.

Usage: python tests/make_cldr_snapshot.py [--check]

Babel ships CLDR, Unicode's locale data, but its content changes between releases (Colab's
Babel is older than ours), so the package reads a snapshot of what it needs instead of Babel:
each locale's four date patterns (full, long, medium, short), its month names (wide and
abbreviated, in the format form that dates use) and its weekday names, Monday first. The same
pairs then come out on every machine, with or without Babel. ``--check`` exits 1 if the file
differs from what this Babel writes (tests/test_languages.py runs the check when this Babel is
the one that wrote the file).
"""

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "attnbook" / "cldr" / "dates.json"
LOCALES = ("en_US", "zh_CN", "de_DE", "ru_RU", "fr_FR", "ja_JP")
STYLES = ("full", "long", "medium", "short")


def snapshot() -> str:
    import babel
    from babel import Locale

    data = {
        "source": "CLDR through Babel; regenerate with python tests/make_cldr_snapshot.py",
        "babel": babel.__version__,
        "locales": {},
    }
    for name in LOCALES:
        loc = Locale.parse(name)
        data["locales"][name] = {
            "patterns": {s: loc.date_formats[s].pattern for s in STYLES},
            "months": {
                w: [loc.months["format"][w][m] for m in range(1, 13)]
                for w in ("wide", "abbreviated")
            },
            "days": {
                w: [loc.days["format"][w][d] for d in range(7)] for w in ("wide", "abbreviated")
            },
        }
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"


def main(argv: list[str]) -> int:
    text = snapshot()
    if "--check" in argv:
        same = OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.name}: {'matches' if same else 'DIFFERS FROM'} this Babel's CLDR data")
        return 0 if same else 1
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {OUT} ({len(text.encode())} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
