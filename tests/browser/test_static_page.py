"""The built book in a real browser: explorers work without a kernel, MathJax typesets.

Runs after `make book` (make test builds it first), on the built book that conftest.py serves
with no network (the pages' scripts come from the book's vendor/). Screenshots of the checked
pages land in test-artifacts/. Skipped, with the reason printed, when Chromium, Playwright or
the built book are missing (conftest.py).
"""

from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# Page errors that come from the toolchain, not from the book, seen with the CDN's files too:
# sphinx-thebe declares THEBE_JS_URL twice, and html-manager 1.0.6 calls MathJax 2's
# `MathJax.Hub.Queue`, which MathJax 3 (the page's) does not have.
KNOWN_TOOLCHAIN_ERRORS = (
    "Identifier 'THEBE_JS_URL' has already been declared",
    "Cannot read properties of undefined (reading 'Queue')",
)


def book_errors(errors):
    return [e for e in errors if e not in KNOWN_TOOLCHAIN_ERRORS]


@pytest.fixture(scope="module")
def browser_page(new_page, book_url):
    page = new_page({"width": 1200, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    def open_page(name):
        errors.clear()
        page.goto(f"{book_url}/book/{name}.html")
        page.wait_for_selector(".widget-vbox", timeout=20_000)
        page.wait_for_function(
            "document.querySelectorAll('mjx-container').length > 0", timeout=20_000
        )
        return page, errors

    yield open_page
    page.close()


def first_explorer(page):
    """The page's first widget box, scrolled into view."""
    box = page.locator(".widget-vbox").first
    box.scroll_into_view_if_needed()
    return box


def slide(page, box, *keys):
    """Focus the box's first slider and press ``keys`` (ArrowRight, End, ...)."""
    box.locator(".noUi-handle, .ui-slider-handle").first.click()
    for key in keys:
        page.keyboard.press(key)


def shot(page, locator, name):
    ARTIFACTS.mkdir(exist_ok=True)
    locator.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def test_decoder_step_explorer_switches_views_without_a_kernel(browser_page):
    page, errors = browser_page("03_attention_three_steps")
    box = first_explorer(page)
    assert "step 1 → māo" in box.inner_text()
    first_image = box.locator("img:visible").first.get_attribute("src")
    shot(page, box, "03_explorer_step1")
    slide(page, box, "ArrowRight", "ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('.widget-vbox').innerText.includes('step 3')", timeout=5_000
    )
    assert "step 3 → diànzi" in box.inner_text()
    assert box.locator("img:visible").first.get_attribute("src") != first_image
    shot(page, box, "03_explorer_step3")
    assert not book_errors(errors), book_errors(errors)


def test_worked_example_explorer_follows_token_and_stage(browser_page):
    page, errors = browser_page("04_query_key_value")
    box = first_explorer(page)
    assert "X and the weights" in box.inner_text()
    box.get_by_text("token x3", exact=True).click()
    slide(page, box, "End")
    page.wait_for_timeout(300)
    text = box.inner_text()
    assert "Z = weights · V" in text and "token x3" in text
    shot(page, box, "04_stage_explorer_x3_Z")
    # MathJax typeset the formulas: no raw LaTeX left in the prose
    assert page.locator("mjx-container").count() > 20
    assert "\\begin{bmatrix}" not in page.locator("article").inner_text()
    assert not book_errors(errors), book_errors(errors)


def test_temperature_explorer_switches_between_scaled_and_unscaled(browser_page):
    page, errors = browser_page("05_score_functions")
    box = first_explorer(page)
    first = box.locator("img:visible").first.get_attribute("src")
    slide(page, box, "End")  # d_k = 1024
    page.wait_for_timeout(300)
    unscaled_1024 = box.locator("img:visible").first.get_attribute("src")
    assert unscaled_1024 != first
    shot(page, box, "05_temperature_unscaled_1024")
    box.get_by_text("q·k / √d_k (scaled)", exact=True).click()
    page.wait_for_timeout(300)
    assert box.locator("img:visible").first.get_attribute("src") not in (first, unscaled_1024)
    shot(page, box, "05_temperature_scaled_1024")
    assert not book_errors(errors), book_errors(errors)


def test_rnn_attention_explorer_steps_through_dates_and_decoder_steps(browser_page):
    page, errors = browser_page("06_rnn_with_attention")
    box = first_explorer(page)
    assert "step 1: writes" in box.inner_text()
    first_view = box.inner_text()
    shot(page, box, "06_explorer_date1_step1")
    slide(page, box, "ArrowRight", "ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('.widget-vbox').innerText.includes('step 3: writes')",
        timeout=5_000,
    )
    dates = box.locator("select").first
    options = dates.locator("option").all_inner_texts()
    dates.select_option(index=1)  # the second date
    page.wait_for_timeout(300)
    text = box.inner_text()
    assert f"{options[1].strip()[1:-1]}, step 3: writes" in text and text != first_view
    shot(page, box, "06_explorer_date2_step3")
    assert not book_errors(errors), book_errors(errors)


def test_transformer_attention_explorer_switches_type_and_layer(browser_page):
    page, errors = browser_page("14_training_and_inference")
    box = first_explorer(page)
    encoder_self = box.locator("img:visible").first.get_attribute("src")
    box.get_by_text("cross", exact=True).click()
    page.wait_for_timeout(300)
    cross = box.locator("img:visible").first.get_attribute("src")
    assert cross != encoder_self
    slide(page, box, "End")  # the last layer
    page.wait_for_function(
        "() => document.querySelector('.widget-vbox').innerText.includes('layer 2')", timeout=5_000
    )
    assert box.locator("img:visible").first.get_attribute("src") not in (encoder_self, cross)
    shot(page, box, "14_explorer_cross_layer2")
    assert not book_errors(errors), book_errors(errors)
