"""The JavaScript the built book's pages load, served from the book itself (no CDN).

MathJax, RequireJS, the ipywidgets HTML manager and onnxruntime-web (which runs chapter 13's
live block) come from pinned npm packages: `npm pack` fetches each tarball from the npm
registry, its sha256 must equal the one recorded below, and the files the pages need are
unpacked into a folder that `_config.yml` hands to Sphinx as `html_extra_path` (so the book's
HTML gets a `vendor/` folder, and no page links a script it does not use; a folder in
`html_static_path` would have every .js in it linked into every page by Jupyter Book). The tarballs are cached in .cache/js (git-ignored); the repository
holds none of these files.

`make book` (and `make js-assets`) runs: python tests/book_js.py
"""

import fnmatch
import hashlib
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "js"
SITE = CACHE / "site"  # html_extra_path in _config.yml: copied into the book's HTML folder
VENDOR = "vendor"

# name, version, sha256 of the registry's tarball (the file `npm pack` writes), the folder
# under vendor/ and the files to copy from the package (paths inside `package/`, a trailing /
# takes a folder).
PACKAGES = [
    (
        "requirejs",
        "2.3.4",
        "583693b373f6ab0528ea6644fab5cdb5822011c9b5b1ff1615590d5f2f473dcd",
        "requirejs@2.3.4",
        ["require.js"],
    ),
    (
        "@jupyter-widgets/html-manager",
        "1.0.6",
        "6c198ceb99ba7e7526990a1de16e8147ad7d3a714e3fb06741183623c04b5f6e",
        "html-manager@1.0.6",
        # the AMD bundle of the widget manager and the Font Awesome files its CSS names
        ["dist/embed-amd.js", "dist/*.woff2", "dist/*.woff", "dist/*.ttf", "dist/*.eot"],
    ),
    (
        "mathjax",
        "3.2.2",
        "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09",
        "mathjax@3.2.2",
        # the component the pages load, what it loads on demand (TeX extensions, CHTML fonts,
        # the menu) and the accessibility extensions its menu can switch on
        [
            "es5/tex-mml-chtml.js",
            "es5/input/",
            "es5/output/chtml.js",
            "es5/output/chtml/",
            "es5/ui/",
            "es5/a11y/",
            "es5/sre/",
            "es5/adaptors/",
        ],
    ),
    (
        "onnxruntime-web",
        "1.30.0",
        "d2228df7e4616bc3348bf504ee888f3bec43789a273f0a63f3e68d203ce3bf71",
        "onnxruntime-web@1.30.0",
        # what chapter 13's live block loads when the reader asks (attnbook/live.js): the
        # WebAssembly build's ES module, its loader and the SIMD binary (one thread: it needs
        # no cross-origin isolation). 14 MB, 3.7 MB gzipped; not the WebGPU/JSEP builds.
        [
            "dist/ort.wasm.min.mjs",
            "dist/ort-wasm-simd-threaded.mjs",
            "dist/ort-wasm-simd-threaded.wasm",
        ],
    ),
]


class JsError(RuntimeError):
    pass


def tarball_name(name: str, version: str) -> str:
    """The file name `npm pack` gives a package's tarball."""
    return f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(name: str, version: str, expected: str, folder: Path) -> Path:
    """The package's tarball in ``folder``, fetched with `npm pack` unless already there and
    checked against ``expected``."""
    path = folder / tarball_name(name, version)
    if path.exists() and sha256(path) == expected:
        return path
    npm = shutil.which("npm")
    if npm is None:
        raise JsError(
            f"npm is not installed: the book serves {name}@{version} (and the other pinned JS "
            "packages in tests/book_js.py) from its own pages, fetched with `npm pack` from the "
            "npm registry. Install Node.js (it brings npm), then run `make book` again."
        )
    folder.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        [npm, "pack", "--silent", f"{name}@{version}"],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    if run.returncode != 0 or not path.exists():
        raise JsError(
            f"`npm pack {name}@{version}` failed (is the npm registry reachable?):\n"
            + (run.stderr.strip() or run.stdout.strip())
        )
    got = sha256(path)
    if got != expected:
        path.unlink()
        raise JsError(
            f"{path.name} from the npm registry has sha256 {got}, but tests/book_js.py records "
            f"{expected}: the registry served a different file for {name}@{version}; refusing "
            "to put it in the book"
        )
    return path


def wanted(member: str, patterns: list[str]) -> bool:
    inner = member.split("/", 1)[1] if "/" in member else ""
    for p in patterns:
        if p.endswith("/") and inner.startswith(p):
            return True
        if "*" in p and fnmatch.fnmatchcase(inner, p):
            return True
        if inner == p:
            return True
    return False


def unpack(tgz: Path, patterns: list[str], dest: Path) -> int:
    """Copies the package files matching ``patterns`` into ``dest`` (``es5/`` and ``dist/``
    prefixes dropped, so the folder looks like the CDN's). Returns the bytes written."""
    total = 0
    with tarfile.open(tgz) as tar:
        for m in tar.getmembers():
            if not m.isfile() or not wanted(m.name, patterns):
                continue
            inner = m.name.split("/", 1)[1]
            for prefix in ("es5/", "dist/"):
                inner = inner.removeprefix(prefix)
            target = (dest / inner).resolve()
            if dest.resolve() not in target.parents:
                raise JsError(f"{tgz.name}: {m.name} would land outside {dest}")
            target.parent.mkdir(parents=True, exist_ok=True)
            data = tar.extractfile(m).read()
            target.write_bytes(data)
            total += len(data)
    return total


def main() -> int:
    stamp = CACHE / ".done"
    try:
        tarballs = CACHE / "tgz"
        vendor = SITE / VENDOR
        shutil.rmtree(SITE, ignore_errors=True)
        stamp.unlink(missing_ok=True)
        for name, version, digest, folder, patterns in PACKAGES:
            tgz = fetch(name, version, digest, tarballs)
            size = unpack(tgz, patterns, vendor / folder)
            if size == 0:
                raise JsError(f"{tgz.name} holds none of {patterns}")
            print(f"{VENDOR}/{folder}: {size / 2**20:.1f} MiB from {name}@{version}")
    except JsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    stamp.write_text("".join(f"{p[3]}\n" for p in PACKAGES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
