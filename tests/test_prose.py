"""The prose tells the truth by method (issue 25): what it can be checked against, it is.

1. A number typed in a chapter's prose is a claim nobody re-computes. Numbers a cell computes
   are glued (`{glue:text}`name``); what is left in the text must be something that is not a
   result: inside math or code, a year, a reference ("chapter 5", "Figure 3", "§3.2"), a
   sentence that cites its source, words quoted from the notes, a small count the writer chose,
   or one of the constants below, stated once here with where it comes from.
2. The book shows the model it promises: every function and method the Transformer runs
   (attention, masks, multi-head attention, positional encoding, sublayers, layers, stacks, the
   model, its cached decoding and beam reordering) is printed with ``show_source`` in some
   chapter. Which functions run is measured, by profiling a forward pass, greedy decoding with
   and without the cache, and beam search, so a new function on that path fails this test until
   a chapter shows it.

Set ``ATTNBOOK_ROOT`` to check another checkout's book with this file.
"""

import importlib
import inspect
import json
import os
import pkgutil
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ATTNBOOK_ROOT", Path(__file__).resolve().parents[1]))
BOOK = ROOT / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))

# Constants the prose may state without a cell: each is a fixed fact of a paper or a setting
# the book states as given, never a measured result.
STATED = {
    "512": "d_model of the base Transformer (Vaswani et al. 2017, Table 3)",
    "1024": "d_model of the big Transformer (Table 3)",
    "2048": "d_ff of the base Transformer",
    "4096": "d_ff of the big Transformer",
    "64": "d_k = d_v = 512 / 8 in the base Transformer",
    "0.1": "dropout and label smoothing of the base Transformer",
    "4000": "warm-up steps of the paper's schedule",
    "100,000": "training steps of the paper's base model (Vaswani et al. 2017, section 5.2)",
    "25,000": "source and target tokens per batch in the paper (section 5.1)",
    "10000": "the base of the sinusoidal positional encoding",
    "10,000": "the base of the sinusoidal positional encoding",
    "0.9": "Adam's beta1 in the paper",
    "0.98": "Adam's beta2 in the paper",
    "1e-9": "Adam's epsilon in the paper",
    "-0.5": "the exponents of the paper's learning-rate schedule",
    "-1.5": "the exponents of the paper's learning-rate schedule",
    "100": "percent",
    "50%": "one half, as a percentage",
    "0.5": "one half",
    "1.0": "one",
    "0.0": "zero",
}
SMALL = 10  # counts up to ten that the writer chose (2 heads, 3 sentences, step 4)

# Words after which a number names a place, not a quantity: "chapter 5", "Figure 3", "step 2".
REFERENCE = (
    r"(?:chapters?|ch\.|sections?|§|figures?|fig\.|tables?|eq\.|equations?|steps?|exercises?|"
    r"solutions?|parts?|issues?|lines?|cells?|rows?|columns?|items?|versions?|python|torch|"
    r"pytorch|ipywidgets|numpy|babel|jupyter\s+book|layers?|heads?|positions?|tokens?|"
    r"appendix|page|pages|stage|stages|level|levels|option|lens|notes?)"
)
NOTES_SECTION = re.compile(r"^\d\.\d(?:\.\d)?$")
YEAR = re.compile(r"^(1[6-9]\d\d|20\d\d)[a-z]?$")
NUMBER = re.compile(r"(?<![\w.$\\])[-−]?\d+(?:,\d{3})*(?:\.\d+)?(?:e-?\d+)?%?(?![\w])")

# Fenced blocks: code (```python, ```text, ```) is not prose; a MyST directive (```{admonition})
# is, so only its fence and option lines go.
CODE_FENCE = re.compile(r"^(`{3,})(?!\{)[^\n]*\n.*?^\1\s*$", re.S | re.M)
DIRECTIVE_LINE = re.compile(r"^\s*(?:`{3,}|:{3,})(?:\{[\w:-]+\}[^\n]*)?\s*$", re.M)

STRIP = [
    re.compile(r"<!--.*?-->", re.S),  # comments
    re.compile(r"\$\$.*?\$\$", re.S),  # display math
    re.compile(r"\\begin\{(\w+\*?)\}.*?\\end\{\1\}", re.S),
    re.compile(r"(?<!\\)\$[^$]+?(?<!\\)\$"),  # inline math (may wrap a line)
    re.compile(r"\{[\w:-]+\}`[^`]*`"),  # roles: {glue:text}`x`, {cite:p}`x`, {ref}`x`, {doc}`x`
    re.compile(r"`[^`\n]*`"),  # code spans
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"<[^>\n]+>"),  # HTML tags and their attributes
    re.compile(r"^\s*:[\w-]+:.*$", re.M),  # directive options (:width: 80%)
    re.compile(r"^\s*(?:\d+\.|[-*])\s", re.M),  # list markers
    re.compile(r"^#+\s*\d+(?:\.\d+)*", re.M),  # numbered headings
    re.compile(r"\"[^\"]{0,400}\"|“[^”]{0,400}”|「[^」]{0,400}」|‘[^’\n]*’"),  # quoted words
]
SENTENCE = re.compile(r"(?<=[.!?:])\s+(?=[A-Z(*])|\n\s*\n")


def markdown_cells(path: Path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            yield i, "".join(cell["source"])


TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$", re.M)


def typed_numbers(text: str) -> list[tuple[str, str]]:
    """The numbers in ``text`` that are typed claims, each with the sentence around it."""
    text = DIRECTIVE_LINE.sub("\n", CODE_FENCE.sub("\n", text))
    if "{cite:" in text:  # a table the cell quotes from a cited paper
        text = TABLE_ROW.sub(" ", text)
    found = []
    for sentence in SENTENCE.split(text):
        if "{cite:" in sentence or "et al." in sentence:
            continue  # a sentence that cites its source reports the source's numbers
        plain = sentence
        for pattern in STRIP:
            plain = pattern.sub(" ", plain)
        for m in NUMBER.finditer(plain):
            token = m.group(0).lstrip("-−")
            value = token.rstrip("%")
            before = plain[: m.start()].rstrip().lower()
            if YEAR.match(value) or value in STATED or token in STATED:
                continue
            if value.isdigit() and int(value) <= SMALL:
                continue
            if re.search(REFERENCE + r"\s*$", before):
                continue
            if re.match(r"\s*(?:st|nd|rd|th)\b", plain[m.end() :]):
                continue
            if NOTES_SECTION.match(token) and re.search(r"\bnotes\b", sentence, re.I):
                continue  # "notes 03 (1.4.2)": a section of the source notes
            found.append((m.group(0), " ".join(sentence.split())[:160]))
    return found


def test_the_lint_sees_typed_numbers_and_lets_the_others_pass():
    assert typed_numbers("The model reaches 97.3% after 300 steps.") == [
        ("97.3%", "The model reaches 97.3% after 300 steps."),
        ("300", "The model reaches 97.3% after 300 steps."),
    ]
    allowed = (
        "It reaches {glue:text}`acc:.1%` ($n = 300$, `steps=300`) in 2017, as chapter 12 shows. "
        'The notes call it "the 3rd step, 97 percent". With 512 dimensions and 8 heads, '
        "Vaswani et al. report 28.4 BLEU. We use 3 sentences, as notes 03 (1.4.2) does."
    )
    assert typed_numbers(allowed) == []
    fenced = (
        "```python\nx = 300\n```\n\n```{admonition} Solution 1\n:class: dropdown\nIt is 42.\n```"
    )
    assert [n for n, _ in typed_numbers(fenced)] == ["42"]  # a solution is prose, code is not
    table = "| heads | BLEU |\n|---|---|\n| 8 | 25.8 |\n"
    assert [n for n, _ in typed_numbers(table)] == ["25.8"]
    assert typed_numbers("As {cite:t}`vaswani2017attention` report:\n\n" + table) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_number_is_typed_in_a_chapters_prose(path):
    problems = [
        f"cell {i}: {number!r} in: {sentence}"
        for i, text in markdown_cells(path)
        for number, sentence in typed_numbers(text)
    ]
    assert not problems, (
        f"{path.name}: numbers typed in the prose (glue them from the cell that computes them, "
        "or, for a fixed constant, add it to STATED with its source):\n" + "\n".join(problems)
    )


# --- 2. Every function on the Transformer's code path is shown in a chapter ------------------

SHOWN = re.compile(r"^# (attnbook\.[\w.]+) \(src/", re.M)
PATH_MODULES = ("attention", "positional", "transformer", "decode")


def shown_names() -> set[str]:
    names = set()
    for path in CHAPTERS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            for out in cell.get("outputs", []):
                text = out.get("data", {}).get("text/plain", "")
                names.update(SHOWN.findall("".join(text)))
    return names


def resolve(name: str):
    """The object a listing's header names (``attnbook.transformer.Transformer.forward``), found
    through its module, or None. A header recorded before a module became a package still
    names the object: the package re-exports it."""
    parts = name.split(".")
    for k in range(len(parts), 1, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = inspect.getattr_static(obj, attr, None)
            if isinstance(obj, (staticmethod, classmethod)):
                obj = obj.__func__
            obj = obj.fget if isinstance(obj, property) else obj
        return inspect.unwrap(obj) if obj is not None else None
    return None


def shown_code() -> set:
    """The code objects of what the chapters print: each function shown, and every method of a
    class shown whole."""
    found = set()
    for name in shown_names():
        obj = resolve(name)
        members = vars(obj).values() if inspect.isclass(obj) else [obj]
        for member in members:
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            member = inspect.unwrap(member) if callable(member) else member
            if inspect.isfunction(member):
                found.add(member.__code__)
    return found


# The wrappers of attnbook.attention.functional around the printed masked_softmax and
# scaled_dot_product_attention (issue 40): for finite scores they return what the printed code
# returns, bit for bit (tests/test_issue40_numbers.py), and only on a row whose largest score
# is +-inf (or overflows) do they give the limit instead of NaN, as the module's docstring
# says. The chapters print the code that computes attention; these are its edge cases.
LIMITS_AT_INFINITY = {
    "attnbook.attention.functional._masked_softmax",
    "attnbook.attention.functional._softmax_limits",
    "attnbook.attention.functional._overflow_limit",
    "attnbook.attention.functional._scaled_dot_product_attention",
}


def transformer_code_path() -> dict:
    """The package functions a Transformer runs to train and to decode: qualified name -> code."""
    import torch

    from attnbook import decode
    from attnbook.transformer import Transformer

    files = {}  # file -> module name, every module of a package included
    for m in PATH_MODULES:
        module = importlib.import_module(f"attnbook.{m}")
        files[str(Path(module.__file__).resolve())] = module.__name__
        for info in pkgutil.iter_modules(getattr(module, "__path__", []), f"{module.__name__}."):
            sub = importlib.import_module(info.name)
            files[str(Path(sub.__file__).resolve())] = sub.__name__
    ran = {}

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            module = files.get(code.co_filename)
            if (
                module
                and not code.co_name.startswith(("_check", "<"))
                and (f"{module}.{code.co_qualname}" not in LIMITS_AT_INFINITY)
            ):
                if module != "attnbook.decode" or not code.co_qualname.startswith("_"):
                    ran[f"{module}.{code.co_qualname}"] = code  # decode: public only

    torch.manual_seed(0)
    src = torch.tensor([[5, 6, 7, 2, 0], [8, 9, 2, 0, 0]])
    tgt = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 0]])
    sys.setprofile(profile)
    try:
        model = Transformer(12, 12, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=20)
        model.train()
        model(src, tgt).sum().backward()
        model.eval()
        with torch.no_grad():
            for cache in (False, True):
                decode.greedy_decode(model, src, bos_id=1, eos_id=2, max_len=6, use_cache=cache)
            decode.beam_search(model, src[:1], bos_id=1, eos_id=2, beam_size=3, max_len=6)
    finally:
        sys.setprofile(None)
    return {name: code for name, code in ran.items() if "<locals>" not in name}


def test_every_function_on_the_transformers_code_path_is_shown_in_a_chapter():
    path = transformer_code_path()
    assert "attnbook.transformer.model.Transformer.forward" in path  # the profile saw the model run
    assert "attnbook.transformer.model.Transformer.reorder_state" in path  # and beam search
    shown = shown_code()
    missing = sorted(name for name, code in path.items() if code not in shown)
    assert not missing, (
        "the Transformer runs these package functions, but no chapter prints them with "
        "show_source:\n" + "\n".join(missing)
    )
