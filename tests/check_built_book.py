"""Check the built HTML: every page that shows a widget embeds its state; report page weight.

`jupyter-book build -W` does not notice a widget whose state was not saved: the page then
shows a blank space. Usage: python tests/check_built_book.py _build/html
"""

import json
import re
import sys
from pathlib import Path

VIEW = re.compile(r'<script type="application/vnd.jupyter.widget-view\+json">(.*?)</script>', re.S)
STATE = re.compile(
    r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', re.S
)


def main(root: str) -> int:
    pages = sorted(Path(root).rglob("*.html"))
    if not pages:
        print(f"no HTML pages under {root}: build the book first")
        return 1
    problems, rows = [], []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        views = [json.loads(v)["model_id"] for v in VIEW.findall(text)]
        if not views:
            continue
        states = STATE.findall(text)
        state = json.loads(states[0])["state"] if states else {}
        missing = [v for v in views if v not in state]
        if missing:
            problems.append(f"{page}: {len(missing)} widget view(s) without embedded state")
        rows.append((page.relative_to(root), len(views), len(text.encode()) / 1024))
    for name, n, kb in rows:
        print(f"{str(name):45s} {n:3d} widget views  {kb:8.1f} KiB")
    for p in problems:
        print("ERROR:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "_build/html"))
