"""Chapter 16's explorer on the built page: pair, date and decoder step switch with no kernel.

Runs on the built book (conftest.py); skipped, saying why, without Chromium, Playwright or the
build. Uses test_static_page.py's page fixture and helpers."""

from test_static_page import book_errors, browser_page, first_explorer, shot  # noqa: F401


def visible_text(box):
    return box.evaluate("e => e.innerText")


def test_real_languages_explorer_switches_pair_date_and_step(browser_page):  # noqa: F811
    page, errors = browser_page("16_real_languages")
    box = first_explorer(page)
    text = visible_text(box)
    assert "step 1 writes 2" in text  # Chinese first: the year comes first
    assert "RNN + attention" in text and "Transformer, heads averaged" in text
    shot(page, box, "16_explorer_zh_step1")
    steps = box.locator("select:visible").nth(1)  # the date's dropdown, then its steps'
    steps.select_option(index=4)
    page.wait_for_function(
        "() => document.querySelector('.widget-vbox').innerText.includes('step 5 writes 年')",
        timeout=5_000,
    )
    box.get_by_role("button", name="German").click()
    page.wait_for_function(
        "() => document.querySelector('.widget-vbox').innerText.includes('step 1 writes M')",
        timeout=5_000,
    )
    shot(page, box, "16_explorer_de_step1")
    dates = box.locator("select:visible").first
    dates.select_option(index=1)  # the second date: a test date, in German
    page.wait_for_timeout(300)
    assert visible_text(box) != text
    assert not book_errors(errors), book_errors(errors)
