"""Sphinx extension: the API page documents every public name of attnbook (issue 27).

After the build has read every page, it warns (an error under ``-W``) for each name in
``attnbook.__all__`` that the API page does not document, and for each that has no docstring,
so a new public name without documentation fails the book build.
"""

import inspect
import sys

from sphinx.util import logging

logger = logging.getLogger(__name__)
API_DOC = "book/api"


def homes(obj, name: str) -> list[str]:
    """The modules a reader may find ``obj`` under: the one that defines it
    (``attnbook.transformer.model``) and each package above it that re-exports it under ``name``
    (``attnbook.transformer``, where the chapters import it from)."""
    module = getattr(obj, "__module__", None) if callable(obj) else None
    if not module:
        return []
    parts = module.split(".")
    found = []
    for k in range(2, len(parts) + 1):
        home = ".".join(parts[:k])
        if getattr(sys.modules.get(home), name, None) is obj:
            found.append(home)
    return found


def check_api(app, env):
    import attnbook

    if API_DOC not in env.found_docs:
        return
    documented = {
        name for name, entry in env.get_domain("py").objects.items() if entry.docname == API_DOC
    }
    for name in attnbook.__all__:
        obj = getattr(attnbook, name)
        where = (
            {f"attnbook.{name}"}
            | {f"{home}.{name}" for home in homes(obj, name)}
            | {n for n in documented if n.rsplit(".", 1)[-1] == name and not callable(obj)}
        )
        if not where & documented:
            logger.warning(f"attnbook.{name} is public but not on the API page ({API_DOC}.md)")
        doc = inspect.getdoc(obj) if callable(obj) else None
        if callable(obj) and not doc:
            logger.warning(f"attnbook.{name} is public but has no docstring")


def setup(app):
    app.connect("env-check-consistency", check_api)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
