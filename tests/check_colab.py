"""Run every chapter as a reader on Google Colab would, under strict nbval: fail if any cell
raises or any compared output differs from the stored one.

Usage: python tests/check_colab.py [book/NN_name.ipynb ...]      (``make colab-check``)
       python tests/check_colab.py --env-only       (``make colab-env``: steps 1 and 2 only)

Colab comes with its own packages, and a chapter's setup cell only adds the book's package on
top (``%pip install "attnbook @ git+...@<commit>"``). Colab's published list (2026-08) has
ipywidgets 7.7.1, which has no ``Stack``, and numpy 2.1.3. This script:

1. makes a virtual environment (``.cache/colab-venv``) holding the Colab versions of the
   packages the book imports (``COLAB_PINS``) and otherwise requirements.txt's pins;
2. installs the package the way the setup cell does (a plain ``pip install`` of the source,
   not editable) and fails if pip changed any package already there: the package's own
   dependencies are lower bounds, so a reader's Colab torch, numpy and ipywidgets stay;
3. runs every chapter top to bottom in that environment under strict nbval (``make nbval``'s
   options; the code paths ``ATEN_CPU_CAPABILITY`` and ``MKL_CBWR`` choose are the caller's:
   ``make colab-check`` gives ATen's default and MKL's AVX2 ones, as ``make nbval``) and fails,
   naming the chapter and the cell, if any cell raises or any compared output differs: the
   stored outputs, recorded with requirements.txt's versions, hold with Colab's ipywidgets and
   numpy and the package installed as a reader installs it. (nbval and pytest, which run the
   chapters, are installed too, at requirements.txt's versions: Colab has pytest.)

What it cannot copy here: Colab's Python (3.13) and torch (2.11); this machine has torch's CPU
build only for Python 3.11, so the environment uses Python 3.11 and the pinned torch.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".cache" / "colab-venv"
COLAB_PINS = {"ipywidgets": "7.7.1", "numpy": "2.1.3"}
# what a chapter needs besides the package: the kernel, and nbclient to drive it
RUNTIME = ("torch", "matplotlib", "tqdm", "ipykernel", "nbclient", "nbformat", "pytest", "nbval")


def pins() -> list[str]:
    """requirements.txt's pins for RUNTIME, then Colab's versions of COLAB_PINS."""
    wanted = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==")
            wanted[name.strip().lower()] = version.strip()
    missing = [name for name in RUNTIME if name not in wanted]
    if missing:
        raise SystemExit(f"requirements.txt pins no version of {missing}")
    return [f"{n}=={wanted[n]}" for n in RUNTIME] + [f"{n}=={v}" for n, v in COLAB_PINS.items()]


def run(*cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], check=True, text=True, **kw)


def freeze(python: Path) -> dict[str, str]:
    out = run(
        python,
        "-m",
        "pip",
        "list",
        "--format=freeze",
        "--disable-pip-version-check",
        capture_output=True,
    ).stdout
    return dict(line.lower().split("==", 1) for line in out.splitlines() if "==" in line)


def main(args: list[str]) -> int:
    env_only = "--env-only" in args
    chapters = [a for a in args if a != "--env-only"]
    if env_only and chapters:
        print("--env-only runs no chapter: give it no chapters", file=sys.stderr)
        return 2
    start = time.perf_counter()
    python = VENV / "bin" / "python"
    if not python.exists():
        venv.create(VENV, with_pip=True)
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run(*pip, *pins())
    before = freeze(python)
    for name, version in COLAB_PINS.items():
        assert before.get(name) == version, f"{name} {before.get(name)} is not Colab's {version}"
    before.pop("attnbook", None)
    run(python, "-m", "pip", "uninstall", "-q", "-y", "attnbook")  # no-op in a new venv
    with tempfile.TemporaryDirectory() as tmp:  # what the setup cell does, from this checkout
        source = Path(tmp) / "attnbook"  # (a copy: pip leaves build/ where it builds)
        shutil.copytree(
            ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
        )
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            if (ROOT / name).exists():
                shutil.copy(ROOT / name, source / name)
        run(*pip, source)
    after = freeze(python)
    changed = {n: (before[n], after.get(n)) for n in before if after.get(n) != before[n]}
    added = sorted(set(after) - set(before) - {"attnbook"})
    if changed or added:
        print(
            f"installing the package changed the reader's packages: {changed or ''} "
            f"{'added ' + ', '.join(added) if added else ''}"
        )
        return 1
    installed = ", ".join(f"{n} {after[n]}" for n in ("torch", "numpy", "ipywidgets", "attnbook"))
    print(
        f"Colab-like environment ready in {time.perf_counter() - start:.0f} s: {installed}; "
        "installing the package changed none of its packages",
        flush=True,
    )
    run(
        python,
        "-m",
        "ipykernel",
        "install",
        "--sys-prefix",
        "--name",
        "python3",
        stdout=subprocess.DEVNULL,
    )
    if env_only:
        return 0
    chapters = chapters or sorted(str(p) for p in (ROOT / "book").glob("[0-9]*.ipynb"))
    # the chapters import the installed package, not src/ (no PYTHONPATH; each kernel starts in
    # book/, and nothing puts src/ on its path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "--nbval",
            "--nbval-current-env",
            "--nbval-sanitize-with",
            str(ROOT / "tests" / "nbval_sanitize.cfg"),
            "-p",
            "no:cacheprovider",
            "-q",
            *map(os.path.abspath, chapters),
        ],
        env=env,
        cwd=ROOT,
    )
    print(
        f"Colab check: {len(chapters)} chapters under strict nbval in "
        f"{time.perf_counter() - start:.0f} s, "
        f"{'every output as stored' if done.returncode == 0 else 'some failed'}"
    )
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
