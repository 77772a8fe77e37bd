"""Check translated catalogs: what a translation must keep exactly (docs/i18n/translating.md).

``python tests/i18n_check.py [PO ...]`` (default: every catalog of locale/zh_CN) prints, for
each message whose translation changed a formula, an inline code span, a role (its target, for
roles with an explicit title) or a link target, the message and the difference; and counts the
messages untranslated, fuzzy or obsolete. Exit status 1 when anything is wrong.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[1]
CATALOGS = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"

# a role: {name}`content`; content "title <target>" keeps only the target
ROLE = re.compile(r"(?<!`)\{([a-z][a-z0-9:_-]*)\}`([^`]*)`")
DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)((?:\\.|[^$\\])+?)\$")
CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
TITLED = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)
# a role or, where it starts first, a code span (`` {glue:text}`x` `` is code, not a role)
ROLE_OR_CODE = re.compile(ROLE.pattern + r"|(?<!`)(`+)(?!`)(.+?)(?<!`)\3(?!`)", re.S)
# a docstring's msgid is RST, its msgstr MyST (Sphinx parses a translated message with the
# page's parser): :role:`target` is {role}`target` there, ``literal`` a MyST code span
RST_ROLE = re.compile(r"(?<![\w`]):([a-z][a-z0-9_-]*(?::[a-z][a-z0-9_-]*)?):`([^`]+)`(?!`)")
RST_LITERAL = re.compile(r"(?<!`)``(?![\s`])(.+?)(?<!\s)``(?!`)", re.S)


def kept(text: str, rst: bool = False) -> Counter:
    """The parts of a message that its translation keeps exactly, counted (``rst``: the text is
    RST, an autodoc docstring's msgid; it is first written as the MyST its translation uses)."""
    parts: Counter = Counter()
    if rst:
        text = RST_ROLE.sub(r"{\1}`\2`", text)

        def code_span(m: re.Match) -> str:  # fenced by more backticks than it holds, padded
            fence = "`" * (max(map(len, re.findall("`+", m[1])), default=0) + 1)
            return f"{fence} {m[1]} {fence}"

        text = RST_LITERAL.sub(code_span, text)
    rest = text
    roles = [m.group(1, 2) for m in ROLE_OR_CODE.finditer(rest) if m[1] is not None]
    for name, content in roles:
        m = TITLED.match(content)
        if m and name in ("term", "ref", "doc", "numref", "download", "eq"):
            parts[f"{{{name}}} -> {m.group(2)}"] += 1
        elif name == "term":
            parts[f"{{term}} -> {content}"] += 1
        else:
            parts[f"{{{name}}}`{content}`"] += 1
    rest = ROLE_OR_CODE.sub(lambda m: " " if m[1] is not None else m[0], rest)
    for m in DISPLAY_MATH.findall(rest):
        parts[f"$${' '.join(m.split())}$$"] += 1
    rest = DISPLAY_MATH.sub(" ", rest)
    for _, code in CODE.findall(rest):
        # CommonMark strips one space from both ends of a code span padded on both sides
        if code[0] == code[-1] == " " and code.strip():
            code = code[1:-1]
        parts[f"`{code}`"] += 1
    rest = CODE.sub(" ", rest)
    for m in INLINE_MATH.findall(rest):
        parts[f"${' '.join(m.split())}$"] += 1
    rest = INLINE_MATH.sub(" ", rest)
    for target in LINK.findall(rest):
        parts[f"link -> {target}"] += 1
    return parts


def check(path: Path) -> list[str]:
    """The problems of one catalog, one line each."""
    po = polib.pofile(str(path))
    problems = []
    for entry in po:
        if entry.obsolete:
            problems.append(f"{path.name}: obsolete message: {entry.msgid[:70]!r}")
            continue
        if "fuzzy" in entry.flags:
            problems.append(f"{path.name}:{entry.linenum}: fuzzy: {entry.msgid[:70]!r}")
        if not entry.msgstr:
            problems.append(f"{path.name}:{entry.linenum}: untranslated: {entry.msgid[:70]!r}")
            continue
        # a message of an autodoc docstring (its occurrence is no .md/.ipynb file) is RST
        rst = not all(src.endswith((".md", ".ipynb")) for src, _ in entry.occurrences)
        a, b = kept(entry.msgid, rst), kept(entry.msgstr)
        if a != b:
            lost, added = a - b, b - a
            problems.append(
                f"{path.name}:{entry.linenum}: changed "
                + (f"lost {sorted(lost)} " if lost else "")
                + (f"added {sorted(added)}" if added else "")
            )
    for entry in po.obsolete_entries():
        problems.append(f"{path.name}: obsolete message: {entry.msgid[:70]!r}")
    return problems


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted(CATALOGS.rglob("*.po"))
    problems = [line for path in paths for line in check(path)]
    for line in problems:
        print(line)
    print(f"{len(problems)} problems in {len(paths)} catalogs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
