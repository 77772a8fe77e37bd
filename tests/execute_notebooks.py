"""Re-execute chapters in place, top to bottom in one fresh kernel each, reproducibly.

Usage: python tests/execute_notebooks.py [--check | --pin-only] book/01_rnn_encoder_decoder.ipynb [...]

Two runs on one machine write the same file: no per-cell timing metadata is recorded, and
the random ids that ipywidgets gives its models are renamed to ids derived from the
notebook's name and the order the models were created in. The widget state is saved, so
the explorers work on the static page.

The setup cell's Colab install line is pinned to the commit of the package the chapter ran
with (the last commit that changed ``src/`` or ``pyproject.toml``), so a reader on Colab gets
the code that made the stored outputs, never a moving branch.

``--pin-only`` rewrites only that pin, running nothing: for a package change that leaves
every stored output as it was (strict nbval passing proves that).

``--check`` runs the chapters without writing anything: every chapter is run, and the exit
status is 1 if any cell raised (``benchmarks/book_speed.py --runner nbclient`` times it).
"""

import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
# The setup cell: commit = "<40 hex digits>", then %pip install "...attnbook@{commit}"
PINNED_COMMIT = re.compile(r'(?<=\bcommit = ")[0-9a-f]{40}(?=")')

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


def package_commit() -> str | None:
    """The last commit that changed the package (``src/``, ``pyproject.toml``), or None.

    None when git or the history is missing; a warning is printed when the package has
    changes that are not committed, since no commit then holds the code the chapters ran.
    """

    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)

    try:
        found = git("log", "-1", "--format=%H", "--", "src", "pyproject.toml")
    except OSError:
        return None
    commit = found.stdout.strip()
    if found.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None
    if git("diff", "--quiet", "HEAD", "--", "src", "pyproject.toml").returncode != 0:
        print(
            "warning: src/ or pyproject.toml has uncommitted changes; the Colab install line "
            f"pins {commit[:12]}, which does not hold them. Commit the package, then re-run.",
            file=sys.stderr,
        )
    return commit


def pin_install(nb: nbformat.NotebookNode, commit: str) -> int:
    """Set the ``commit = "..."`` that the setup cell's Colab install line uses."""
    pinned = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and "github.com/attnbook/attnbook" in cell.source:
            cell.source, n = PINNED_COMMIT.subn(commit, cell.source)
            pinned += n
    return pinned


def coalesce_streams(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Each run of stream outputs of one stream (stdout, stderr) as one output: how the kernel's
    output arrives in pieces depends on timing (a busy machine split a table of chapter 13 into
    three), and the stored notebook should not (nbval joins them too before it compares)."""
    for cell in nb.cells:
        merged = []
        for out in cell.get("outputs", []):
            last = merged[-1] if merged else None
            if (
                out.get("output_type") == "stream"
                and last is not None
                and last.get("output_type") == "stream"
                and last.get("name") == out.get("name")
            ):
                last["text"] = "".join(last["text"]) + "".join(out["text"])
            else:
                merged.append(out)
        if "outputs" in cell:
            cell["outputs"] = merged
    return nb


def execute(path: Path, *, check: bool = False, commit: str | None = None) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    if commit and not check:
        pin_install(nb, commit)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=900,
        record_timing=False,
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    if check:
        return
    nb = stable_widget_ids(coalesce_streams(nb), path.stem)
    nbformat.write(nb, path)


def main(args: list[str]) -> int:
    check, pin_only = "--check" in args, "--pin-only" in args
    paths = [a for a in args if a not in ("--check", "--pin-only")]
    if not paths or (check and pin_only):
        print(__doc__)
        return 2
    commit = None if check else package_commit()
    if pin_only:
        if commit is None:
            print("no git history: nothing to pin to", file=sys.stderr)
            return 1
        for p in map(Path, paths):
            nb = nbformat.read(p, as_version=4)
            if pin_install(nb, commit):
                nbformat.write(nb, p)
        print(f"pinned {len(paths)} chapter(s) to {commit[:12]}")
        return 0
    failed = []
    for p in map(Path, paths):
        start = time.perf_counter()
        print(f"{'checking' if check else 'executing'} {p}", flush=True)
        try:
            execute(p, check=check, commit=commit)
        except CellExecutionError as error:
            if not check:
                raise
            failed.append(p.name)
            print(f"  FAILED: {str(error).strip().splitlines()[-1]}", flush=True)
            continue
        print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
    if failed:
        print(f"{len(failed)} chapter(s) raised: {', '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
