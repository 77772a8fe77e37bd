"""attnbook.languages: dates between real languages from the package's CLDR snapshot."""

import datetime
import json
import random
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook.languages import (
    FIELDS,
    LOCALES,
    STYLES,
    alignment_accuracy,
    format_date,
    human_english,
    make_dates_between,
)

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = json.loads(resources.files("attnbook").joinpath("cldr", "dates.json").read_text())
babel = pytest.importorskip("babel")
same_babel = pytest.mark.skipif(
    babel.__version__ != SNAPSHOT["babel"],
    reason=f"the snapshot was written by Babel {SNAPSHOT['babel']}, this is {babel.__version__}",
)
dates = st.dates(datetime.date(1900, 1, 1), datetime.date(2099, 12, 31))


def test_the_notes_example_in_four_languages():
    d = datetime.date(2018, 5, 9)
    assert format_date(d, "en_US", "full").text == "Wednesday, May 9, 2018"
    assert format_date(d, "zh_CN", "full").text == "2018年5月9日星期三"
    assert format_date(d, "de_DE", "full").text == "Mittwoch, 9. Mai 2018"
    assert format_date(d, "ru_RU", "full").text == "среда, 9 мая 2018\u202fг."


@same_babel
@settings(max_examples=60, deadline=None)
@given(dates)
def test_every_locale_and_style_writes_what_babel_writes(date):
    from babel.dates import format_date as babel_format

    for locale in LOCALES:
        for style in STYLES:
            assert format_date(date, locale, style).text == babel_format(date, style, locale)


@same_babel
def test_the_snapshot_is_what_this_babel_writes():
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "make_cldr_snapshot.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def number_in(spelled, name):
    return "".join(c for c, f in zip(spelled.text, spelled.fields, strict=True) if f == name)


@settings(max_examples=60, deadline=None)
@given(dates, st.sampled_from(LOCALES), st.sampled_from(STYLES))
def test_each_character_knows_the_field_that_wrote_it(date, locale, style):
    s = format_date(date, locale, style)
    assert len(s.fields) == len(s.text) and set(s.fields) <= {"", *FIELDS}
    year = number_in(s, "year")
    assert year in (str(date.year), f"{date.year % 100:02d}")
    if number_in(s, "day"):
        assert int(number_in(s, "day")) == date.day
    names = SNAPSHOT["locales"][locale]
    month = number_in(s, "month")
    assert month in (
        str(date.month),
        f"{date.month:02d}",
        names["months"]["wide"][date.month - 1],
        names["months"]["abbreviated"][date.month - 1],
    )
    weekday = number_in(s, "weekday")
    assert weekday in ("", *(names["days"][w][date.weekday()] for w in ("wide", "abbreviated")))


def test_the_english_tasks_spellings_carry_fields_too():
    s = human_english(datetime.date(2018, 5, 9), "the {o} of {M}, {y}", weekday=True)
    assert s.text == "Wednesday, the 9th of May, 2018"
    assert number_in(s, "day") == "9th" and number_in(s, "weekday") == "Wednesday"


@pytest.mark.parametrize("src,tgt", [("en_US", "zh_CN"), ("en_US", "de_DE"), ("ru_RU", "en_US")])
def test_a_task_between_two_languages(src, tgt):
    task = make_dates_between(src, tgt, 300, 60, 60, seed=3)
    assert task == make_dates_between(src, tgt, 300, 60, 60, seed=3)  # deterministic
    splits = (task.train, task.val, task.test)
    pairs = [p for split in splits for p in split]
    assert len({s for s, _ in pairs}) == len(pairs)
    # every character of every pair is in its vocabulary
    for s, t in pairs:
        task.src_vocab.encode(s, unknown="error")
        task.tgt_vocab.encode(t, unknown="error")

    # a date is in one split only: the target's day, month and year fields name the date
    def key(target):
        spelled = task.fields[target]
        return tuple(
            "".join(c for c, f in zip(target, spelled, strict=True) if f == n) for n in FIELDS[1:]
        )

    keys = [{key(t) for _, t in split} for split in splits]
    assert not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    # the target shows the weekday exactly when the source does, and no year is cut to 2 digits
    for s, t in pairs:
        assert ("weekday" in task.fields[s]) == ("weekday" in task.fields[t])
        assert task.fields[s].count("year") == 4


def test_the_tasks_bad_arguments_are_named():
    with pytest.raises(ValueError, match="src"):
        make_dates_between("xx_XX", "zh_CN")
    with pytest.raises(ValueError, match="src and tgt must differ"):
        make_dates_between("de_DE", "de_DE")
    with pytest.raises(ValueError, match="weekday_share"):
        make_dates_between(weekday_share=1.5)
    with pytest.raises(ValueError, match="src_styles"):
        make_dates_between("de_DE", "zh_CN", src_styles=("human",))
    with pytest.raises(TypeError, match="unknown option"):
        make_dates_between(start_yr=1950)
    with pytest.raises(TypeError, match="date must be a datetime.date"):
        format_date("2018-05-09", "en_US")


def test_alignment_accuracy_scores_perfect_and_uniform_attention():
    task = make_dates_between("en_US", "de_DE", 20, 0, 0, seed=1)
    src, tgt = task.train[0]
    fs, ft = task.fields[src], task.fields[tgt]
    perfect = torch.zeros(len(tgt) + 1, len(src) + 1)  # + <eos> row and column
    for t, name in enumerate(ft):
        on = [j for j, f in enumerate(fs) if f == name]
        if name and on:
            perfect[t, on] = 1.0 / len(on)
        else:
            perfect[t, -1] = 1.0
    assert alignment_accuracy(perfect, fs, ft) == pytest.approx(1.0)
    uniform = torch.full((len(tgt), len(src)), 1.0 / len(src))
    expected = [fs.count(f) / len(fs) for f in ft if f and f in fs]
    assert alignment_accuracy(uniform, fs, ft) == pytest.approx(sum(expected) / len(expected))
    shifted = perfect.roll(1, dims=1)  # attention one character off
    assert alignment_accuracy(shifted, fs, ft) < 0.9
    with pytest.raises(ValueError, match="weights must cover"):
        alignment_accuracy(perfect[:2], fs, ft)
    with pytest.raises(ValueError, match="2-D"):
        alignment_accuracy(perfect[None], fs, ft)


def test_random_attention_is_far_from_perfect():
    rng = random.Random(0)
    task = make_dates_between("en_US", "zh_CN", 50, 0, 0, seed=rng.randrange(100))
    scores = []
    for src, tgt in task.train:
        w = torch.softmax(torch.randn(len(tgt), len(src)), dim=-1)
        scores.append(alignment_accuracy(w, task.fields[src], task.fields[tgt]))
    assert sum(scores) / len(scores) < 0.5


def test_the_command_line_trains_between_two_languages(tmp_path, capsys):
    from attnbook.cli import main

    def run(*argv):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
        return code, capsys.readouterr().err

    tiny = ("--n-train", 64, "--n-val", 8, "--n-test", 8, "--d-model", 16, "--heads", 2)
    out = tmp_path / "run"
    args = ("train", "--task", "dates", "--steps", 2, "--d-ff", 32, "--quiet", *tiny)
    code, err = run(*args, "--src-lang", "en_US", "--tgt-lang", "de_DE", "--out", out)
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["task"] == "dates-en_US-de_DE" and metrics["test_examples"] == 8
    code, err = run(*args, "--src-lang", "en_US", "--out", tmp_path / "one")
    assert code == 1 and "--src-lang and --tgt-lang go together" in err
    code, err = run(*args, "--src-lang", "en_US", "--tgt-lang", "en_US", "--out", tmp_path / "s")
    assert code != 0 and "src and tgt must differ" in err
    code, err = run(*args[:2], "copy", *args[3:], "--src-lang", "en_US", "--tgt-lang", "de_DE")
    assert code == 1 and "--src-lang applies to --task dates" in err


def test_bleu_reads_chinese_one_character_a_token():
    from attnbook.evaluate import corpus_bleu

    hyp, ref = ["2018年5月9日星期三"], ["2018年5月9日星期四"]  # one weekday character wrong
    assert corpus_bleu(hyp, ref) == 0.0  # 13a: the whole date is one word, and it is wrong
    assert 50 < corpus_bleu(hyp, ref, tokenize="zh") < 100
    assert corpus_bleu(ref, ref, tokenize="zh") == pytest.approx(100)
    with pytest.raises(ValueError, match="tokenize must be one of"):
        corpus_bleu(hyp, ref, tokenize="klingon")


# Field labels read by hand, character by character, for one date in every language and style
# (W weekday, D day, M month, Y year, · pattern): the labels alignment accuracy scores against.
HAND_CHECKED = {
    ("en_US", "full"): "Friday, December 31, 1999\nWWWWWW··MMMMMMMM·DD··YYYY",
    ("en_US", "short"): "12/31/99\nMM·DD·YY",
    ("zh_CN", "full"): "1999年12月31日星期五\nYYYY· MM· DD· W W W ",
    ("zh_CN", "short"): "1999/12/31\nYYYY·MM·DD",
    ("de_DE", "full"): "Freitag, 31. Dezember 1999\nWWWWWWW··DD··MMMMMMMM·YYYY",
    ("de_DE", "medium"): "31.12.1999\nDD·MM·YYYY",
    ("ru_RU", "full"): "пятница, 31 декабря 1999\u202fг.\nWWWWWWW··DD·MMMMMMM·YYYY···",
    ("ru_RU", "medium"): "31 дек. 1999\u202fг.\nDD·MMMM·YYYY···",
    ("fr_FR", "full"): "vendredi 31 décembre 1999\nWWWWWWWW·DD·MMMMMMMM·YYYY",
    ("ja_JP", "full"): "1999年12月31日金曜日\nYYYY· MM· DD· W W W ",
}


@pytest.mark.parametrize("locale,style", sorted(HAND_CHECKED))
def test_the_field_labels_are_right_on_hand_checked_examples(locale, style):
    from attnbook.languages import field_marks

    assert (
        field_marks(format_date(datetime.date(1999, 12, 31), locale, style))
        == (HAND_CHECKED[locale, style])
    )


def test_the_english_spellings_labels_are_right_by_hand():
    from attnbook.languages import field_marks

    s = human_english(datetime.date(1999, 12, 31), "the {o} of {M}, {y}", weekday=True)
    assert field_marks(s) == (
        "Friday, the 31st of December, 1999\nWWWWWW······DDDD····MMMMMMMM··YYYY"
    )
    with pytest.raises(TypeError, match="spelled must be a Spelled"):
        field_marks("Friday")


def test_no_date_is_in_two_splits_of_a_full_size_task():
    """The size the chapter and the shipped models use: 20,000 training dates, 500 + 500."""
    task = make_dates_between("en_US", "ru_RU", 20000, 500, 500, seed=0)

    def dates(split):
        out = set()
        for _, t in split:
            f = task.fields[t]
            out.add(tuple("".join(c for c, x in zip(t, f, strict=True) if x == n) for n in FIELDS))
        return {d[1:] for d in out}  # day, month, year

    train, val, test = dates(task.train), dates(task.val), dates(task.test)
    assert len(train) == 20000 and len(val) == len(test) == 500
    assert not (train & val or train & test or val & test)


def test_cross_attention_and_alignment_scores_of_a_model():
    from attnbook import Seq2Seq, Transformer
    from attnbook.languages import alignment_scores, cross_attention

    task = make_dates_between("en_US", "de_DE", 40, 0, 6, seed=2)
    torch.manual_seed(0)
    models = {
        "transformer": Transformer(
            len(task.src_vocab), len(task.tgt_vocab), d_model=16, n_heads=2, n_layers=2, d_ff=32
        ),  # fmt: skip
        "rnn-attention": Seq2Seq(
            len(task.src_vocab), len(task.tgt_vocab), 8, 16, attention="additive"
        ),
    }
    for name, model in models.items():
        model.train()
        maps = cross_attention(model, task, task.test)
        assert model.training  # its mode is restored
        layers, heads = (2, 2) if name == "transformer" else (1, 1)
        for w, (s, t) in zip(maps, task.test, strict=True):
            assert w.shape == (layers, heads, len(t) + 1, len(s))
            assert torch.allclose(w.sum(-1), torch.ones(()), atol=1e-5)  # no weight on padding
        scores = alignment_scores(model, task, task.test)
        assert scores["per_head"].shape == (layers, heads)
        assert scores["heads_averaged"].shape == (layers,)
        assert set(scores["per_field"]) <= set(FIELDS) and "year" in scores["per_field"]
        assert all(
            0 <= float(v.min()) and float(v.max()) <= 1 for v in scores["per_field"].values()
        )
        by_hand = [
            alignment_accuracy(m[-1].mean(0), task.fields[a], task.fields[b])
            for m, (a, b) in zip(maps, task.test, strict=True)
        ]
        assert float(scores["heads_averaged"][-1]) == pytest.approx(sum(by_hand) / len(by_hand))
        assert 0 < float(scores["heads_averaged"][0]) < 1
    fixed = Seq2Seq(len(task.src_vocab), len(task.tgt_vocab), 8, 16, attention=None)
    with pytest.raises(ValueError, match="no attention"):
        cross_attention(fixed, task, task.test)
