"""Chapter 13's live block in Chromium with no network: the book's model runs in the page.

The built chapter (conftest.py serves it and refuses every request off localhost) must show
the block's example before any click, without asking for the runtime or the model. The test
then types three dates, two from the dates task's data and one the task never produced: each
translation must equal `greedy_decode`'s in PyTorch, and every attention map (cross, encoder
and decoder self, every layer and head) must lie within 1e-4 of PyTorch's. Then the three
inputs the model cannot read (empty, unknown characters, too long), each with the message
`attnbook.live.check_text` gives; and every kind, layer and head of the menus draws its own
map, and the stepper moves along the output. The model file is also checked against PyTorch in Python's
onnxruntime at lengths the export never saw. Where the runtime cannot come (the chapter's
stored output shown as JupyterLab shows it; the page opened from disk), the example is drawn
and Translate says why it cannot run and what to do.

Screenshots before and after a translation, and the times from the click to each
translation (the first one loads the runtime and the model), land in test-artifacts/.
"""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
PAGE = "book/13_transformer.html"
NEW_DATE = "the 1st of March, 2031"  # in none of the task's splits (checked below)
STATE = "document.querySelector('.attnbook-live').dataset.state"
SHOWN = """() => { const r = document.querySelector('.attnbook-live');
  return {state: r.dataset.state, message: r.querySelector('.al-message').textContent,
          output: r.querySelector('.al-output').textContent, result: r.attnbook.result,
          times: r.attnbook.times, weights: r.attnbook.cfg.weights,
          cells: r.querySelectorAll('.al-cell').length,
          keys: [...r.querySelectorAll('.al-key')].map(e => e.textContent)}; }"""


def book_model():
    """The model the chapter's block was made from (attnbook.pretrained's dates Transformer),
    with its vocabularies and task."""
    from attnbook import pretrained

    model, task, _ = pretrained.load("dates-transformer")
    return model, task.src_vocab, task.tgt_vocab, task


@pytest.fixture(scope="module")
def live(new_page, book_url, book_html, blocked):
    """The chapter page, loaded once: what it showed before any click, then the page."""
    from attnbook.live import weights_digest

    model, src_vocab, tgt_vocab, task = book_model()
    page = new_page({"width": 1200, "height": 1000})
    errors, asked = [], []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("request", lambda r: asked.append(r.url))
    before_blocked = len(blocked)
    page.goto(f"{book_url}/{PAGE}")
    page.wait_for_function(f"{STATE} === 'example'", timeout=30_000)
    block = page.locator(".attnbook-live")
    block.scroll_into_view_if_needed()
    ARTIFACTS.mkdir(exist_ok=True)
    block.screenshot(path=str(ARTIFACTS / "live-before.png"))
    before = page.evaluate(SHOWN) | {"asked": list(asked), "visible": block.is_visible()}
    errors.clear()  # the theme's and the widget manager's, at load: from here on, the block's
    assert before["weights"] == weights_digest(model), (
        "the page's block was made from other weights than attnbook.pretrained's "
        "dates-transformer (re-execute chapter 13, then make book)"
    )
    yield page, before, (model, src_vocab, tgt_vocab, task), errors
    assert len(blocked) == before_blocked, (
        f"asked for URLs off localhost: {blocked[before_blocked:]}"
    )
    page.close()


def ask(page, text):
    page.fill(".al-input", text)
    page.evaluate(f"{STATE} = 'asked'")
    page.click(".al-button")
    page.wait_for_function(f"['done', 'refused', 'error'].includes({STATE})", timeout=60_000)
    return page.evaluate(SHOWN)


def test_the_example_shows_before_any_click_without_the_runtime(live):
    _, before, (model, src_vocab, tgt_vocab, _), _ = live
    example = before["result"]
    assert before["visible"] and before["cells"] > 0 and not before["message"]
    assert example["translation"] and example["translation"] in before["output"]
    assert before["keys"] == ["␣" if c == " " else c for c in example["text"]]
    loaded = [u for u in before["asked"] if "onnxruntime" in u or "/live/" in u]
    assert not loaded, f"the runtime or the model loaded before any click: {loaded}"


def test_three_dates_translate_as_greedy_decode_with_pytorchs_attention(live, book_html):
    import numpy as np

    from attnbook.live import live_example

    page, _, (model, src_vocab, tgt_vocab, task), errors = live
    seen = {s for part in (task.train, task.val, task.test) for s, _ in part}
    assert NEW_DATE not in seen
    dates = [task.test[0][0], task.train[1][0], NEW_DATE]
    got = {}
    for text in dates:
        shown = ask(page, text)
        assert shown["state"] == "done", (text, shown["message"])
        want = live_example(model, src_vocab, tgt_vocab, text)  # greedy_decode, PyTorch
        mine = shown["result"]
        assert mine["translation"] == want["translation"], text
        assert mine["writes"] == want["writes"] and mine["reads"] == want["reads"], text
        for kind, maps in want["attention"].items():
            diff = np.abs(np.array(mine["attention"][kind]) - np.array(maps)).max()
            assert diff < 1e-4, f"{text!r} {kind}: {diff:.1e} from PyTorch's"
        got[text] = shown
    assert len({s["result"]["translation"] for s in got.values()}) == 3
    page.locator(".attnbook-live").screenshot(path=str(ARTIFACTS / "live-after.png"))
    times = got[NEW_DATE]["times"]
    model_file = book_html / "live/dates-transformer.onnx"
    runtime = sorted((book_html / "vendor").glob("onnxruntime-web@*/*"))
    measured = {
        "click_to_translation_ms": [round(t["ms"], 1) for t in times],
        "first_click_loading_ms": round(times[0]["load_ms"], 1),
        "model_file_bytes": model_file.stat().st_size,
        "runtime_bytes": sum(p.stat().st_size for p in runtime),
        "translations": {t: s["result"]["translation"] for t, s in got.items()},
    }
    (ARTIFACTS / "live-timings.json").write_text(json.dumps(measured, indent=1) + "\n")
    print(measured)
    assert times[0]["first"] and not any(t["first"] for t in times[1:])
    assert not errors, f"console errors: {errors}"


def test_input_the_model_cannot_read_gets_its_message(live):
    from attnbook.live import check_text

    page, _, (model, src_vocab, _, _), errors = live
    shown_before = page.evaluate(SHOWN)["result"]["translation"]
    messages = []
    for text in ["", "12 März 2018", "9" * (model.max_len + 1)]:
        with pytest.raises(ValueError) as refused:
            check_text(text, src_vocab, model.max_len)
        shown = ask(page, text)
        assert shown["state"] == "refused" and shown["message"] == str(refused.value), text
        assert shown["result"]["translation"] == shown_before  # the last translation stays
        messages.append(shown["message"])
    assert "empty" in messages[0]
    assert '"ä" (U+00E4), "z" (U+007A)' in messages[1]  # named, each once, in order
    assert f"has {model.max_len + 1} characters" in messages[2]
    assert not errors, f"console errors: {errors}"


def test_the_books_model_file_matches_pytorch_at_new_lengths(live, book_html):
    import numpy as np
    import torch

    from attnbook.data import BOS
    from attnbook.export import OUTPUT_NAMES, AttentionOutputs

    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    _, _, (model, src_vocab, tgt_vocab, _), _ = live
    session = ort.InferenceSession(str(book_html / "live/dates-transformer.onnx"))
    g = torch.Generator().manual_seed(0)
    for s, t in [(1, 1), (13, 4), (37, 11), (64, 30)]:  # the export's example was 9 and 6
        src = torch.randint(4, len(src_vocab), (1, s), generator=g)
        tgt = torch.randint(4, len(tgt_vocab), (1, t), generator=g)
        tgt[0, 0] = BOS
        with torch.no_grad():
            want = AttentionOutputs(model.eval())(src, tgt)
        got = session.run(list(OUTPUT_NAMES), {"src": src.numpy(), "tgt": tgt.numpy()})
        for name, mine, theirs in zip(OUTPUT_NAMES, got, want, strict=True):
            diff = np.abs(mine - theirs.numpy()).max()
            assert diff < 1e-5, f"lengths {s}, {t}: {name} differs from PyTorch by {diff:.1e}"


# What JupyterLab does with a trusted HTML output (rendermime's evalInnerHTMLScriptTags): the
# HTML goes in through innerHTML, then each <script> is replaced by a copy of itself, which runs.
AS_JUPYTERLAB = """html => {
  const host = document.createElement('div');
  document.body.append(host);
  host.innerHTML = html;
  for (const old of [...host.querySelectorAll('script')]) {
    const copy = document.createElement('script');
    for (const a of old.attributes) copy.setAttribute(a.name, a.value);
    copy.textContent = old.textContent;
    old.replaceWith(copy);
  }
}"""


def test_in_a_notebook_the_block_shows_its_example_and_says_how_to_translate(new_page):
    """Chapter 13's stored output, put in a page as JupyterLab does (no book around it): the
    example is drawn, and Translate says why it cannot run here and what to do instead."""
    notebook = json.loads((ROOT / "book/13_transformer.ipynb").read_text(encoding="utf-8"))
    outputs = [o for c in notebook["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    html = [
        "".join(o["data"]["text/html"])
        for o in outputs
        if "attnbook-live" in "".join(o.get("data", {}).get("text/html", ""))
    ]
    assert len(html) == 1, f"{len(html)} live blocks in chapter 13's outputs"
    page = new_page({"width": 900, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.set_content("<!doctype html><html><head><meta charset='utf-8'></head><body></body></html>")
    page.evaluate(AS_JUPYTERLAB, html[0])
    page.wait_for_function(f"{STATE} === 'example'", timeout=10_000)
    assert page.evaluate(SHOWN)["cells"] > 0
    shown = ask(page, "12/11/1987")
    assert shown["state"] == "refused", shown
    assert "JupyterLab" in shown["message"] and 'block.translate("your date")' in shown["message"]
    assert not errors, f"console errors: {errors}"
    page.close()


def test_opened_as_a_file_the_block_says_how_to_serve_the_book(browser, book_html):
    """A reader who opens _build/html's page from disk (file://) sees the example, and
    Translate says why the runtime cannot load there and how to serve the folder."""
    page = browser.new_page(viewport={"width": 900, "height": 900})
    off = []
    page.route("http*://**", lambda r: (off.append(r.request.url), r.abort()))
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.goto((book_html / PAGE).as_uri())
    page.wait_for_function(f"{STATE} === 'example'", timeout=30_000)
    errors.clear()  # the theme's, at load
    shown = ask(page, "12/11/1987")
    assert shown["state"] == "refused" and "python -m http.server" in shown["message"], shown
    assert not errors, f"console errors: {errors}"
    assert not off, f"asked for {off}"
    page.close()


VIEW = """() => { const r = document.querySelector('.attnbook-live');
  return {titles: [...r.querySelectorAll('.al-cell')].map(e => e.title),
          now: r.querySelector('.al-output .al-now').textContent,
          row: r.querySelector('.al-query.al-row-now')?.textContent ?? null,
          step: r.querySelector('.al-steptext').textContent, result: r.attnbook.result}; }"""


def test_the_menus_and_the_stepper_change_the_view(live):
    """Each kind, layer and head draws its own map (the cells' values are that map's), and
    the stepper moves the highlighted output character and query row (in the decoder and cross
    views; the encoder view highlights no row)."""
    page = live[0]
    result = page.evaluate(VIEW)["result"]
    layers = len(result["attention"]["cross"])
    shown = lambda t: "␣" if t == " " else t  # noqa: E731
    rows = {"cross": result["writes"], "encoder_self": result["source"]}
    rows["decoder_self"] = result["writes"]
    cols = {"cross": result["source"], "encoder_self": result["source"]}
    cols["decoder_self"] = result["reads"]
    for kind in ("encoder_self", "decoder_self", "cross"):
        page.select_option(".al-kind", kind)
        # chapter 13: the decoder and cross maps highlight the row of the step shown, the encoder
        # map (whose rows are source characters, not steps) highlights none
        assert (page.evaluate(VIEW)["row"] is None) == (kind == "encoder_self"), kind
        for layer in range(layers):
            page.select_option(".al-layer", str(layer))
            for head in range(len(result["attention"][kind][layer])):
                page.select_option(".al-head", str(head))
                maps = result["attention"][kind][layer][head]
                want = [
                    (f"{shown(q)} → {shown(k)}", maps[i][j])
                    for i, q in enumerate(rows[kind])
                    for j, k in enumerate(cols[kind])
                ]
                got = [t.rsplit(": ", 1) for t in page.evaluate(VIEW)["titles"]]
                assert [g[0] for g in got] == [w[0] for w in want], (kind, layer, head)
                # each cell shows its weight to 3 decimals
                assert all(
                    abs(float(g[1]) - w[1]) <= 5e-4 + 1e-9 for g, w in zip(got, want, strict=True)
                ), (kind, layer, head)
    n = len(result["writes"])
    page.click(".al-back")
    view = page.evaluate(VIEW)
    assert view["step"].startswith(f"Step {n - 1} of {n}:")
    assert view["now"] == result["writes"][n - 2] and view["row"] == shown(result["writes"][n - 2])
    page.click(".al-play")  # starts again from the first step
    view = page.evaluate(VIEW)
    assert view["step"].startswith(f"Step 1 of {n}:") and view["now"] == result["writes"][0]
    page.click(".al-play")  # pause
