"""Re-execute chapters in place, top to bottom in one fresh kernel each, reproducibly.

Usage: python tests/execute_notebooks.py book/01_rnn_encoder_decoder.ipynb [...]

Two runs on one machine write the same file: no per-cell timing metadata is recorded, and
the random ids that ipywidgets gives its models are renamed to ids derived from the
notebook's name and the order the models were created in. The widget state is saved, so
the explorers work on the static page.
"""

import re
import sys
import time
import uuid
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NAMESPACE = uuid.UUID("6f1c2b9e-3a51-4c8e-9f0e-5d7a2b1c4e80")
HEX_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")


def stable_widget_ids(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """Rename every widget model id to one that depends only on ``name`` and its order."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    ids = list(state.get("state", {}))
    if not ids:
        return nb
    new = {old: uuid.uuid5(NAMESPACE, f"{name}:{i}").hex for i, old in enumerate(ids)}
    text = nbformat.writes(nb)
    text = HEX_ID.sub(lambda m: new.get(m.group(0), m.group(0)), text)
    return nbformat.reads(text, as_version=4)


def execute(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    client = NotebookClient(nb, kernel_name="python3", timeout=900, record_timing=False,
                            store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    nb = stable_widget_ids(nb, path.stem)
    nbformat.write(nb, path)


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__)
        return 2
    for p in map(Path, paths):
        start = time.perf_counter()
        print(f"executing {p}", flush=True)
        execute(p)
        print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
