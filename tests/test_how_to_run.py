"""book/how_to_run.md says which chapters train on a GPU: checked against the chapters' code.

The page names three groups: chapters whose `train_model` call leaves the device to the
package (a GPU when there is one), chapters that pass `device="cpu"`, and chapters that train
with a loop of their own (on CPU tensors). A chapter that adds, drops or changes a training
call makes this test fail until the page says so.
"""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def _code(nb_path: Path) -> str:
    cells = json.loads(nb_path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def _train_model_calls(code: str) -> list[str]:
    """The argument text of every `train_model(...)` call (imports and signatures excluded)."""
    calls = []
    for match in re.finditer(r"(?<![\w.])train_model\(", code):
        depth, i = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        calls.append(code[match.end() : i - 1])
    return calls


def _groups() -> tuple[set[str], set[str], set[str]]:
    auto, cpu, own_loop = set(), set(), set()
    for nb in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")):
        code = _code(nb)
        calls = _train_model_calls(code)
        if any('device="cpu"' in c for c in calls):
            cpu.add(nb.stem)
        elif calls:
            assert all("device=" not in c for c in calls), f"{nb.name}: a device other than cpu"
            auto.add(nb.stem)
        elif re.search(r"\.backward\(\)", code) and "opt.step()" in code:
            own_loop.add(nb.stem)
        assert ".to(device)" not in code and ".cuda()" not in code, f"{nb.name} moves a tensor"
    return auto, cpu, own_loop


def _docs(text: str, start: str, end: str) -> set[str]:
    i = text.index(start)
    return set(re.findall(r"\{doc\}`(\w+)`", text[i : text.index(end, i)]))


def test_how_to_run_names_the_chapters_that_train_where_they_train():
    text = " ".join((BOOK / "how_to_run.md").read_text(encoding="utf-8").split())
    auto, cpu, own_loop = _groups()
    assert auto and cpu and own_loop
    assert _docs(text, "Three chapters do that:", "They get the model back") == auto
    assert _docs(text, '`device="cpu"`, so that a GPU', "The small models") == cpu
    assert _docs(text, "The small models that", "run on the CPU") == own_loop
    words = {1: "One", 2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six"}
    assert f"{words[len(auto)]} chapters do that:" in text
    if len(cpu) == 1:
        assert "One chapter trains with `train_model` but passes" in text
    else:
        assert f"{words[len(cpu)]} chapters train with `train_model` but pass" in text


def test_readme_names_the_same_chapters():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    auto, cpu, _ = _groups()
    a, c = ([str(int(name[:2])) for name in sorted(names)] for names in (auto, cpu))
    assert f"Chapters {', '.join(a[:-1])} and {a[-1]} leave `train_model` to choose" in readme
    if len(c) == 1:
        assert f'chapter {c[0]} passes `device="cpu"`' in readme
    else:
        assert f'chapters {", ".join(c[:-1])} and {c[-1]} pass `device="cpu"`' in readme
