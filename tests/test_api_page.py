"""The API reference (book/api.md) documents every public name, and the build enforces it."""

import importlib.util
import inspect
import re
from pathlib import Path
from types import SimpleNamespace

import attnbook

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "book" / "api.md").read_text(encoding="utf-8")
DIRECTIVE = re.compile(r"^\.\. auto(?:function|class|data):: ([\w.]+)$", re.M)


def load_extension():
    spec = importlib.util.spec_from_file_location(
        "attnbook_api", ROOT / "book/_ext/attnbook_api.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def homes(obj, name: str) -> set[str]:
    """Where a reader finds a public callable: the module that defines it, and each package
    above it that re-exports it (``attnbook.transformer``, for a class defined in
    ``attnbook.transformer.model``)."""
    parts = obj.__module__.split(".")
    prefixes = (".".join(parts[:k]) for k in range(2, len(parts) + 1))
    return {p for p in prefixes if getattr(importlib.import_module(p), name, None) is obj}


def test_every_public_name_is_on_the_api_page_under_its_module():
    documented = set(DIRECTIVE.findall(PAGE))
    for name in attnbook.__all__:
        obj = getattr(attnbook, name)
        where = homes(obj, name) if callable(obj) else {"attnbook.data.tasks"}
        assert {f"{home}.{name}" for home in where} & documented, (
            f"attnbook.{name} is not on book/api.md under {sorted(where)}"
        )


def test_a_name_is_found_under_the_package_that_re_exports_it():
    from attnbook.transformer import Transformer

    assert homes(Transformer, "Transformer") == {"attnbook.transformer", Transformer.__module__}
    assert load_extension().homes(Transformer, "Transformer") == [
        "attnbook.transformer",
        Transformer.__module__,
    ]


def test_every_public_callable_has_a_docstring():
    missing = [n for n in attnbook.__all__ if callable(getattr(attnbook, n))]
    missing = [n for n in missing if not inspect.getdoc(getattr(attnbook, n))]
    assert not missing, f"public names without a docstring: {missing}"


def test_every_group_names_the_chapters_that_teach_it():
    groups = re.split(r"^## ", PAGE, flags=re.M)[1:]
    assert len(groups) >= 6
    for group in groups:
        if group.startswith("Also named"):
            continue
        assert "{numref}`" in group, f"API group {group.splitlines()[0]!r} links no chapter"


def test_the_build_check_warns_on_a_name_left_off_the_page(monkeypatch):
    ext = load_extension()
    warnings = []
    monkeypatch.setattr(ext.logger, "warning", warnings.append)
    on_page = {
        f"{getattr(attnbook, n).__module__}.{n}"
        for n in attnbook.__all__
        if callable(getattr(attnbook, n))
    } | {"attnbook.data.tasks.TASKS"}
    entry = SimpleNamespace(docname=ext.API_DOC)

    def env(names):
        domain = SimpleNamespace(objects={n: entry for n in names})
        return SimpleNamespace(found_docs={ext.API_DOC}, get_domain=lambda _: domain)

    ext.check_api(None, env(on_page))
    assert warnings == []
    under_package = on_page - {"attnbook.transformer.model.Transformer"}
    ext.check_api(None, env(under_package | {"attnbook.transformer.Transformer"}))
    assert warnings == []  # documented where the chapters import it from
    ext.check_api(None, env(on_page - {"attnbook.decode.greedy_decode"}))
    assert warnings == ["attnbook.greedy_decode is public but not on the API page (book/api.md)"]
