"""The files that set up the readers' environments agree with each other.

Binder (binder/) installs the same pins as requirements.txt, with a CPU-only torch of the
pinned version, on a Python that the pinned numpy supports; the CI workflows use that Python
too; the redundant postBuild stays gone; the licenses say what the README says.
"""

import re
from importlib.metadata import metadata, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def read_requirements(path: Path) -> tuple[dict[str, Requirement], list[str]]:
    """The pinned requirements of a requirements file (not following -r), and its option lines."""
    reqs, options = {}, []
    for raw in path.read_text().splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-") or line == ".":
            options.append(line)
            continue
        req = Requirement(line)
        reqs[req.name.lower()] = req
    return reqs, options


def pinned_version(req: Requirement) -> Version:
    (spec,) = req.specifier
    assert spec.operator == "==", f"{req} is not an exact pin"
    return Version(spec.version)


def project() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def runtime_python() -> str:
    text = (BINDER / "runtime.txt").read_text().strip()
    m = re.fullmatch(r"python-(3\.\d+)", text)
    assert m, f"binder/runtime.txt should read python-3.X, got {text!r}"
    return m.group(1)


def test_binder_reads_the_root_pins_and_adds_only_a_cpu_torch_of_the_same_version():
    root, _ = read_requirements(ROOT / "requirements.txt")
    binder, options = read_requirements(BINDER / "requirements.txt")
    # pip resolves a nested -r relative to the file that includes it
    assert "-r ../requirements.txt" in options, options
    assert f"--extra-index-url {CPU_INDEX}" in options or f"--index-url {CPU_INDEX}" in options
    # the package itself, from the repository root (repo2docker runs pip there)
    assert "-e ." in options or "." in options, options

    torch = pinned_version(binder["torch"])
    assert torch.local == "cpu", f"binder's torch should be the CPU build, got {torch}"
    assert torch.public == str(pinned_version(root["torch"])), (
        f"binder pins torch {torch}, requirements.txt pins {root['torch']}"
    )
    # torch==X in requirements.txt accepts X+cpu, so the two pins resolve together
    assert torch in root["torch"].specifier
    # every other pin comes from requirements.txt alone, so the two lists cannot drift apart
    repeated = [
        f"{binder[n]} (requirements.txt: {root[n]})" for n in binder if n != "torch" and n in root
    ]
    assert not repeated, f"binder/requirements.txt repeats pins of requirements.txt: {repeated}"


def test_binder_python_is_supported_by_the_pinned_numpy_and_the_package():
    python = Version(runtime_python())
    root, _ = read_requirements(ROOT / "requirements.txt")
    numpy_pin = pinned_version(root["numpy"])
    assert Version(version("numpy")) == numpy_pin, "the environment does not hold the pinned numpy"
    numpy_python = SpecifierSet(metadata("numpy")["Requires-Python"])
    assert numpy_python.contains(python), (
        f"binder/runtime.txt asks for Python {python}; numpy {numpy_pin} needs {numpy_python}"
    )
    assert SpecifierSet(project()["requires-python"]).contains(python)


def test_ci_workflows_use_binders_python():
    python = runtime_python()
    for workflow in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        versions = re.findall(r"python-version:\s*[\"']?([\d.]+)", workflow.read_text())
        assert versions == [python] * len(versions) and versions, (workflow.name, versions)


def test_no_postbuild():
    # Binder installs the package from binder/requirements.txt; a postBuild would do it twice
    for place in (ROOT, BINDER, ROOT / ".binder"):
        assert not (place / "postBuild").exists(), f"{place / 'postBuild'} is back"


def test_licenses_match_the_readme_and_pyproject():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    text = (ROOT / "LICENSE-TEXT").read_text()
    assert "Creative Commons Attribution 4.0 International Public License" in text
    assert project()["license"] in ({"text": "MIT"}, "MIT")
    readme = (ROOT / "README.md").read_text()
    assert "## License" in readme and "MIT" in readme and "CC BY 4.0" in readme
