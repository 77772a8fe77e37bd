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


# the parts, scanned left to right (the leftmost wins: `{term}` is inline code, not a role)
_PART = re.compile(
    rf"(?P<role>{ROLE.pattern})|(?P<display>{DISPLAY_MATH.pattern})"
    r"|(?P<code>(?<!`)(?P<ticks>`+)(?!`).+?(?<!`)(?P=ticks)(?!`))"
    rf"|(?P<inline>{INLINE_MATH.pattern})",
    re.S,
)


# what a pseudo-translation leaves as it is: roles, math, code, link targets, autolinks,
# substitutions and reST roles (the API page's docstrings)
_KEEP = re.compile(
    r"\{[a-z][a-z0-9:_-]*\}`[^`]*`|:[a-z:]+:`[^`]*`|\$\$.+?\$\$|(?<![\\$])\$(?!\$)(?:\\.|[^$\\])+?\$"
    r"|(`+).+?\1|\]\([^)\s]+\)|<[^<>\s]+>|\{\{[^}]*\}\}|&[a-z]+;",
    re.S,
)
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
# common characters (all in the book's CJK font): a word becomes two of them, chosen by a hash
# of the word, so that different terms stay different (the glossary's terms must)
_HANZI = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过"
    "子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体"
)


def _pseudo_word(m: re.Match) -> str:
    import zlib

    h = zlib.crc32(m.group(0).lower().encode())
    return _HANZI[h % len(_HANZI)] + _HANZI[(h // len(_HANZI)) % len(_HANZI)]


def pseudo_translate(text: str, rst: bool = False) -> str:
    """A stand-in translation for tests: every English word outside what a translation keeps
    (``kept``) becomes two Chinese characters, so the markup and the kept parts are those of a
    real translation and no English prose is left (``rst``: a docstring's message, whose
    translation is MyST)."""
    if rst:
        text = RST_ROLE.sub(r"{\1}`\2`", text)
        text = RST_LITERAL.sub(lambda m: f"`` {m[1]} ``" if "`" in m[1] else f"`{m[1]}`", text)
    out, last = [], 0
    for m in _KEEP.finditer(text):
        out.append(_WORD.sub(_pseudo_word, text[last : m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(_WORD.sub(_pseudo_word, text[last:]))
    return "".join(out)


# --- a translation is one paragraph, as its English is -------------------------------------

_MD = None


def blocks(text: str) -> list[str]:
    """The top-level blocks that MyST (the book's extensions) reads in ``text``."""
    global _MD
    if _MD is None:
        import yaml
        from markdown_it.renderer import RendererHTML
        from myst_parser.config.main import MdParserConfig
        from myst_parser.parsers.mdit import create_md_parser

        config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
        extensions = set(config["parse"]["myst_enable_extensions"])
        _MD = create_md_parser(MdParserConfig(enable_extensions=extensions), RendererHTML)
    return [t.type for t in _MD.parse(text) if t.level == 0 and t.nesting >= 0]


def block_problem(msgid: str, msgstr: str) -> str | None:
    """Sphinx parses a translation on its own and uses it only if it is one paragraph (else
    the page keeps the English, silently). Block markup at its start is escaped by the build
    (book/_ext/attnbook_i18n.py: ``1. 每层`` is read as ``1\\. 每层``); a line break followed by
    ``- ``, ``1. ``, ``#``, ``>`` or an empty line inside the translation makes another block."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from attnbook_i18n import escape_leading_markup

    if msgstr == msgid or blocks(escape_leading_markup(msgid)) != ["paragraph_open"]:
        return None
    found = blocks(escape_leading_markup(msgstr))
    if found != ["paragraph_open"]:
        return f"reads as {', '.join(b.removesuffix('_open') for b in found)}, not one paragraph"
    return None


# --- the glossary's terms -------------------------------------------------------------------

GLOSSARY = ROOT / "book" / "glossary.md"
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_TERM = re.compile(r"^([A-Za-z][^\n]*?) \(([^()\n]*)\)[ \t]*$", re.M)


def glossary_terms(path: Path = GLOSSARY) -> dict[str, list[str]]:
    """The glossary's terms: English name -> its Chinese names (``前瞻掩码 / 因果掩码``: two)."""
    text = path.read_text(encoding="utf-8")
    start = text.index("```{glossary}")
    block = text[start : text.index("\n```", start + 3)]
    terms = {}
    for english, chinese in _TERM.findall(block):
        names = [n.strip() for n in re.split(r"[/,，]", chinese) if CJK.search(n)]
        if names:
            terms[english.strip()] = names
    return terms


def _squeeze(text: str) -> str:
    """Text compared for a term: no spaces, one kind of hyphen."""
    return re.sub(r"\s+", "", re.sub(r"[‐‑‒–—－]", "-", text))


def _english_form(text: str) -> str:
    """English compared for a term: lower case, hyphens as spaces, -ise spelled -ize."""
    text = re.sub(r"[-‐‑–]", " ", text.lower())
    return re.sub(r"is(ation|ed|ing|e)\b", r"iz\1", text)


def _term_pattern(english: str) -> re.Pattern:
    words = _english_form(english).split()
    return re.compile(r"\b" + r"\s+".join(map(re.escape, words)) + r"(?:s|es)?\b")


_TARGET = re.compile(r"\s*<[^<>`]+>`")  # a titled role's target (its title stays)
_ANNOTATION = re.compile(r"\(([^()]*[\u3400-\u9fff][^()]*)\)")  # "(注意力权重)"
_GLOSSED = re.compile(r"(?<=[\u3400-\u9fff])\s*\([^()]*\)")  # "前馈网络 (feed-forward network)"


def term_problems(msgid: str, msgstr: str, terms: dict[str, list[str]]) -> list[str]:
    """The glossary terms that the English of a message uses and its translation does not
    name in Chinese. The English uses a term when it annotates a word with one of the term's
    Chinese names (its first use, ``**context vector (上下文向量)**``, or a ``{term}`` role's
    text), or names a term of two words or more (``attention weights``, ``layer
    normalisation``, ``self-attention``) in its prose: not in code, math, role targets,
    quotations (the notes' wording may be kept) nor in parentheses after Chinese (a gloss of
    another name). Single words such as *key* or *value* are too common to tell. The
    translation must then hold one of the term's Chinese names, outside role targets, in any
    emphasis."""
    if not msgstr or msgstr == msgid:
        return []
    shown = _squeeze(_TARGET.sub("`", msgstr)).replace("*", "")
    visible = _TARGET.sub("`", msgid)
    annotated = {_squeeze(n) for a in _ANNOTATION.findall(visible) for n in re.split(r"[/,，]", a)}
    prose = _english_form(QUOTED.sub(" ", _GLOSSED.sub(" ", _PART.sub(" ", msgid))))
    problems = []
    for english, names in terms.items():
        used = any(_squeeze(n) in annotated for n in names)
        if not used and len(_english_form(english).split()) > 1:
            used = bool(_term_pattern(english).search(prose))
        if used and not any(_squeeze(n) in shown for n in names):
            problems.append(f"{english!r} is not named {' or '.join(names)}")
    return problems


# --- English left in a Chinese page ----------------------------------------------------------

# a run of English words: what a sentence left untranslated looks like (names are shorter); a
# hyphenated word (pre-LN, encoder-decoder) is one word
_EN_WORD = r"[A-Za-z][A-Za-z'’]*(?:[-–][A-Za-z][A-Za-z'’]*)*"
ENGLISH_RUN = re.compile(rf"{_EN_WORD}(?:[\s,;:()\-–]+{_EN_WORD})+")
# quotations (English quoted on purpose) are not prose to translate
QUOTED = re.compile(r"“[^”]*”|\"[^\"]*\"|‘[^’]*’")


def english_runs(text: str, words: int = 5) -> list[str]:
    """Runs of ``words`` or more English words in ``text`` (quotations left out)."""
    text = QUOTED.sub(" ", text)
    return [
        m.group(0)
        for m in ENGLISH_RUN.finditer(text)
        if len(re.findall(_EN_WORD, m.group(0))) >= words
    ]


def is_docstring(entry) -> bool:
    """Whether a message comes from an autodoc docstring (RST; no .md/.ipynb occurrence)."""
    return not all(src.endswith((".md", ".ipynb")) for src, _ in entry.occurrences)


def check_blocks(path: Path) -> list[str]:
    """The translations of a catalog that Sphinx would not use: not one paragraph."""
    problems = []
    for entry in polib.pofile(str(path)).translated_entries():
        block = block_problem(entry.msgid, entry.msgstr)
        if block:
            problems.append(f"{path.name}:{entry.linenum}: the translation {block}")
    return problems


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted(CATALOGS.rglob("*.po"))
    problems = [line for path in paths for line in check(path) + check_blocks(path)]
    for line in problems:
        print(line)
    print(f"{len(problems)} problems in {len(paths)} catalogs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
