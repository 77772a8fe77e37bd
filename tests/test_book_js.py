"""tests/book_js.py, which puts the pages' JavaScript into the book (no CDN), without the network.

The download itself is checked by `make book` (sha256) and the pages by tests/browser; here:
the paths _config.yml gives the pages are the folders book_js.py fills, a tarball whose sha256
differs from the recorded one is refused, a missing npm is named, and only the listed files
of a package are copied.
"""

import hashlib
import io
import os
import re
import stat
import tarfile
from pathlib import Path

import book_js
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def config():
    return yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]


def test_config_points_the_pages_at_the_folders_book_js_fills():
    cfg = config()
    # the vendored JavaScript, and the live block's model file that `make live-model` writes
    live_site = re.search(r"^LIVE_DIR\s*:=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)[1]
    assert cfg["html_extra_path"] == [book_js.SITE.relative_to(ROOT).as_posix(), live_site]
    folders = {p[3] for p in book_js.PACKAGES}
    named = [cfg["mathjax_path"], *cfg["nb_ipywidgets_js"]]
    named += [
        m
        for b in cfg["nb_ipywidgets_js"].values()
        for m in re.findall(r'"(vendor/[^"]+)"', b.get("body", ""))
    ]
    vendored = [n for n in named if "vendor/" in n]
    assert len(vendored) == 4, named  # MathJax, RequireJS, the widget manager, its fonts
    for path in vendored:
        assert "://" not in path, f"{path} is not served by the book"
        folder = path.split("vendor/", 1)[1].split("/")[0]
        assert folder in folders, f"_config.yml names {folder}, which book_js.py does not fill"
    # each pinned version is the one the folder's name says
    for name, version, digest, folder, _ in book_js.PACKAGES:
        assert folder.endswith(f"@{version}") and re.fullmatch(r"[0-9a-f]{64}", digest), name


def test_tarball_names_are_those_npm_pack_writes():
    assert book_js.tarball_name("mathjax", "3.2.2") == "mathjax-3.2.2.tgz"
    assert (
        book_js.tarball_name("@jupyter-widgets/html-manager", "1.0.6")
        == "jupyter-widgets-html-manager-1.0.6.tgz"
    )


def fake_npm(tmp_path, content: bytes) -> Path:
    """An `npm` whose `pack NAME@VERSION` writes ``content`` as that package's tarball."""
    data = tmp_path / "payload"
    data.write_bytes(content)
    npm = tmp_path / "bin" / "npm"
    npm.parent.mkdir()
    npm.write_text(
        "#!/bin/sh\n"
        'spec="$3"; name="${spec%@*}"; version="${spec##*@}"\n'
        'name=$(echo "$name" | sed "s#^@##; s#/#-#")\n'
        f'cp {data} "$name-$version.tgz"\n'
    )
    npm.chmod(npm.stat().st_mode | stat.S_IEXEC)
    return npm.parent


def test_a_tarball_with_another_sha256_is_refused_and_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_npm(tmp_path, b'not the package')}:{os.environ['PATH']}")
    with pytest.raises(book_js.JsError, match="has sha256 .* but tests/book_js.py records"):
        book_js.fetch("mathjax", "3.2.2", "0" * 64, tmp_path / "tgz")
    assert not (tmp_path / "tgz" / "mathjax-3.2.2.tgz").exists()


def test_a_tarball_with_the_recorded_sha256_is_kept_and_reused(tmp_path, monkeypatch):
    content = b"the package"
    digest = hashlib.sha256(content).hexdigest()
    monkeypatch.setenv("PATH", f"{fake_npm(tmp_path, content)}:{os.environ['PATH']}")
    path = book_js.fetch("@jupyter-widgets/html-manager", "1.0.6", digest, tmp_path / "tgz")
    assert path.read_bytes() == content
    monkeypatch.setenv("PATH", "/nonexistent")  # no npm: the cached, checked file serves
    assert book_js.fetch("@jupyter-widgets/html-manager", "1.0.6", digest, tmp_path / "tgz") == path


def test_without_npm_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(book_js.JsError, match="npm is not installed.*Install Node.js"):
        book_js.fetch("mathjax", "3.2.2", "0" * 64, tmp_path)


def test_unpack_copies_only_the_listed_files_without_the_dist_prefix(tmp_path):
    tgz = tmp_path / "p.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        for name in ("dist/embed-amd.js", "dist/a.woff2", "dist/embed.js.map", "lib/x.js"):
            data = name.encode()
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    size = book_js.unpack(tgz, ["dist/embed-amd.js", "dist/*.woff2"], tmp_path / "out")
    files = sorted(
        p.relative_to(tmp_path / "out").as_posix()
        for p in (tmp_path / "out").rglob("*")
        if p.is_file()
    )
    assert files == ["a.woff2", "embed-amd.js"]
    assert size == len("dist/embed-amd.js") + len("dist/a.woff2")
