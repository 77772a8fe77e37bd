"""attnbook.live: the example a live block shows, its messages and its HTML.

The block's script runs in tests/browser/test_live.py (Chromium, the built chapter 13); here,
what Python computes: the example equals `greedy_decode` and holds attention weights of the
right shapes, `check_text` refuses what the page refuses with the words the page uses, and the
HTML carries its data intact.
"""

import importlib.util
import json
import re
import sys
from pathlib import Path

import polib
import pytest
import torch

from attnbook import live
from attnbook.data import BOS, EOS, Vocab
from attnbook.decode import greedy_decode
from attnbook.live import check_text, live_block, live_example, weights_digest
from attnbook.transformer import Transformer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import i18n_check  # noqa: E402
import live_catalog  # noqa: E402

SRC = Vocab("abc </sript>")  # characters that could break out of a <script> element
TGT = Vocab("xyz")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Transformer(len(SRC), len(TGT), d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=40)


def test_check_text_refuses_what_the_page_refuses():
    for text in ["", "   "]:
        with pytest.raises(ValueError, match="^The input is empty"):
            check_text(text, SRC, 40)
    with pytest.raises(ValueError, match="^The input has 41 characters; .* at most 40"):
        check_text("a" * 41, SRC, 40)
    with pytest.raises(ValueError) as err:
        check_text("abäcädé\t", SRC, 40)
    message = str(err.value)
    assert message.startswith('The model does not know "ä" (U+00E4), "d" (U+0064), "é" (U+00E9)')
    assert '"\\t" (U+0009)' in message  # named once each, in order, invisible ones too
    assert message.endswith(": the space and /<>abciprst")  # what it does know
    check_text("a b", SRC, 40)  # nothing to say
    with pytest.raises(TypeError, match="text must be a str, got int"):
        check_text(3, SRC, 40)


def test_the_example_is_greedy_decode_with_its_attention(model):
    text = "abc cab"
    example = live_example(model, SRC, TGT, text, max_output=6)
    ids = greedy_decode(model, torch.tensor([SRC.encode(text)]), bos_id=BOS, eos_id=EOS, max_len=6)
    ids = ids[0].tolist()
    assert example["writes"] == [TGT.itos[i] for i in ids]
    assert example["reads"] == ["<bos>"] + example["writes"][:-1]
    assert example["translation"] == TGT.decode(ids)
    assert example["finished"] == (ids[-1] == EOS)
    s, t = len(text), len(ids)
    shapes = {"cross": (t, s), "encoder_self": (s, s), "decoder_self": (t, t)}
    for kind, shape in shapes.items():
        maps = torch.tensor(example["attention"][kind])
        assert maps.shape == (2, 2, *shape), kind
        assert torch.allclose(maps.sum(-1), torch.ones(()), atol=1e-4), kind
    assert torch.equal(
        torch.tensor(example["attention"]["decoder_self"]).triu(1), torch.zeros(2, 2, t, t)
    )
    for step, top in enumerate(example["top"]):
        assert top[0][0] == example["writes"][step]  # greedy: the likeliest token
        assert [p for _, p in top] == sorted((p for _, p in top), reverse=True)


def test_the_html_carries_the_block_and_its_data(model):
    block = live_block(model, SRC, TGT, sample="</script> abc", max_output=5)
    other = block.translate("cab")
    assert block.id != other.id and other.example["text"] == "cab"
    page = block._repr_html_()
    config = re.search(
        r'<script type="application/json" id="([^"]+)-config">(.*?)</script>', page, re.S
    )
    assert config.group(1) == block.id
    data = json.loads(config.group(2))  # "</" written "<\/" inside the element
    assert data["example"]["text"] == "</script> abc" and data["max_output"] == 5
    assert data["weights"] == weights_digest(model) and data["src_itos"] == SRC.itos
    assert data["runtime"] == live.RUNTIME and data["model"] == "live/dates-transformer.onnx"
    assert f'mount("{block.id}");' in page and "async function translate" in page
    assert "</script> abc →" not in page  # the static line is escaped
    assert "&lt;/script&gt; abc →" in page
    assert repr(block).startswith("LiveBlock('</script> abc' -> ")
    # its words in Chinese, for the Chinese edition's page (tests/live_catalog.py)
    table = json.loads(live_catalog.COMPILED.read_text(encoding="utf-8"))
    assert data["messages"] == {"zh_CN": table} and table


# ------------------------------------------------------------------ the block's words (live.po)


def test_the_catalog_holds_every_message_translated_and_is_compiled():
    """Every _("...") and N_("...") of live.js is a message of live.po (none missing, none left
    over), translated, not fuzzy, with the {names} of its English, in the glossary's terms; and
    the package's JSON is the catalog compiled (python tests/live_catalog.py)."""
    assert live_catalog.main(["--check"]) == 0
    po = polib.pofile(str(live_catalog.PO))
    assert [e.msgid for e in po] == live_catalog.messages()
    assert not live_catalog.problems(po), live_catalog.problems(po)
    terms = i18n_check.glossary_terms()
    bad = [
        f"{e.msgid!r}: {p}" for e in po for p in i18n_check.term_problems(e.msgid, e.msgstr, terms)
    ]
    assert not bad, "\n".join(bad)


# what live.js writes that is not a word for the reader: element and attribute names, classes,
# ONNX names and types, events, states, and the characters shown as they are
NOT_WORDS = re.compile(
    r"^(?:[\w.-]+|al-[\w -]+|aria-label|data-[\w-]+|on\w+|[◀▶␣→⟨⟩ ]+|<\w+>|⟨eos⟩|[\d.,\s%]*"
    r"|\[layer\]\[head\]\[query\]\[key\].*)$"
)


def test_every_word_of_the_script_is_a_message():
    """A string literal of live.js with a letter in it is a message (inside _( or N_( ), or
    not a word for the reader (a class, an attribute, an ONNX name, a state)."""
    script = live_catalog.SCRIPT.read_text(encoding="utf-8")
    code = re.sub(r"//[^\n]*", "", script)  # comments are not shown
    code = live_catalog.CALL.sub("_(0,", code)  # the messages
    literals = re.findall(r'"((?:[^"\\\n]|\\.)*)"|\'((?:[^\'\\\n]|\\.)*)\'', code)
    templates = re.findall(r"`([^`]*)`", code)
    words = [a or b for a, b in literals] + [re.sub(r"\$\{[^}]*\}", "", s) for s in templates]
    css_and_protocols = {"file:", "rgb()", "auto repeat(, px)"}
    shown = [
        w
        for w in words
        if re.search(r"[A-Za-z]{2,}", w) and not NOT_WORDS.match(w) and w not in css_and_protocols
    ]
    assert not shown, shown


def test_live_block_checks_its_arguments(model):
    with pytest.raises(ValueError, match="max_output must be a positive int, got 0"):
        live_block(model, SRC, TGT, sample="abc", max_output=0)
    with pytest.raises(ValueError, match="name must be a file name"):
        live_block(model, SRC, TGT, sample="abc", name="a/b")
    with pytest.raises(ValueError, match="The model does not know"):
        live_block(model, SRC, TGT, sample="Wednesday")
    with pytest.raises(TypeError, match="character-level"):
        live_block(
            model,
            Vocab(["a", "b", "c"] + list("<>/sript") + ["x"], level="word"),
            TGT,
            sample="a",
        )
    with pytest.raises(TypeError, match="model must be an attnbook Transformer"):
        live_block(torch.nn.Linear(2, 2), SRC, TGT, sample="abc")


def test_the_weights_digest_changes_with_any_weight(model):
    before = weights_digest(model)
    last = list(model.parameters())[-1]
    with torch.no_grad():
        last.view(-1)[0] += 1e-6
        changed = weights_digest(model)
        last.view(-1)[0] -= 1e-6
    assert changed != before


def test_the_runtime_folder_is_the_one_the_book_vendors():
    spec = importlib.util.spec_from_file_location("book_js", ROOT / "tests" / "book_js.py")
    book_js = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(book_js)
    folders = {p[3] for p in book_js.PACKAGES}
    assert live.RUNTIME == f"{book_js.VENDOR}/{live.RUNTIME.split('/')[1]}/"
    assert live.RUNTIME.split("/")[1] in folders
    assert "ort.wasm.min.mjs" in (ROOT / "src/attnbook/assets/live.js").read_text()


def test_the_command_says_what_went_wrong(tmp_path, capsys):
    assert live.main(["--checkpoint", str(tmp_path / "none.pt"), "--out", str(tmp_path)]) == 1
    assert "none.pt does not exist" in capsys.readouterr().err
