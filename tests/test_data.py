"""attnbook.data: vocabularies, the synthetic tasks, the TSV loader and batching."""

import calendar
import datetime
import pickle
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook.data import (
    BOS,
    EOS,
    PAD,
    SPECIALS,
    TASKS,
    UNK,
    Batch,
    BucketBatchSampler,
    Seq2SeqDataset,
    TaskData,
    Vocab,
    collate,
    length_controlled,
    load_tsv,
    make_loader,
    make_task,
    normalise_text,
    tokenize_words,
)

FAST = settings(max_examples=40, deadline=None)


def sources(data: TaskData, split: str) -> set[str]:
    return {s for s, _ in getattr(data, split)}


# ------------------------------------------------------------------------------ Vocab


def test_special_ids_come_first():
    v = Vocab("abc")
    assert (PAD, BOS, EOS, UNK) == (0, 1, 2, 3)
    assert v.itos[:4] == list(SPECIALS)
    assert (v.pad_id, v.bos_id, v.eos_id, v.unk_id) == (0, 1, 2, 3)
    assert len(v) == 7 and v.stoi["a"] == 4 and "c" in v and "z" not in v


def test_char_encode_decode_by_hand():
    v = Vocab("abc")
    assert v.encode("cab") == [6, 4, 5]
    assert v.encode("cab", add_bos=True, add_eos=True) == [BOS, 6, 4, 5, EOS]
    assert v.decode([BOS, 6, 4, 5, EOS, PAD, PAD]) == "cab"
    assert v.decode([BOS, 6, EOS, 4, 5]) == "c"  # stops at the first EOS
    assert v.decode([BOS, 6, EOS, 4], strip_special=False) == "<bos>c<eos>a"
    assert v.decode(torch.tensor([4, 5])) == "ab"


@FAST
@given(st.lists(st.text(alphabet="xyz .", min_size=1, max_size=12), min_size=1, max_size=5))
def test_char_round_trip(texts):
    v = Vocab.build(texts, level="char")
    for text in texts:
        assert v.decode(v.encode(text, add_bos=True, add_eos=True)) == text
    batch = v.encode_batch(texts, add_eos=True)
    assert batch.shape == (len(texts), max(len(t) for t in texts) + 1)
    assert v.decode_batch(batch) == texts


@FAST
@given(
    st.lists(
        st.lists(st.sampled_from(["the", "cat", "sat", "on", "mat", ","]), min_size=1, max_size=8),
        min_size=1,
        max_size=5,
    )
)
def test_word_round_trip(sentences):
    texts = [" ".join(words) for words in sentences]
    v = Vocab.build(texts, level="word")
    for text in texts:
        ids = v.encode(text, add_bos=True, add_eos=True)
        assert len(ids) == len(text.split()) + 2
        assert v.decode(ids) == text


def test_build_orders_by_frequency_then_alphabet_and_filters():
    v = Vocab.build(["b a c a", "c a d"], level="word", min_freq=2)
    assert v.itos[4:] == ["a", "c"]  # a x3, c x2; b, d dropped
    assert Vocab.build(["bca", "abc"], max_size=2).itos[4:] == ["a", "b"]
    assert Vocab.build(["xy"]) == Vocab.build(["yx"])  # independent of text order


def test_unseen_symbol_is_a_clear_error_or_unk():
    v = Vocab("abc")
    with pytest.raises(ValueError, match=r"unknown symbol 'x' at position 2 of 'abxc'"):
        v.encode("abxc")
    assert v.encode("abxc", unknown="unk") == [4, 5, UNK, 6]
    lenient = Vocab("abc", unknown="unk")
    assert lenient.encode("xa") == [UNK, 4]
    assert lenient.decode(lenient.encode("xa")) == "<unk>a"
    with pytest.raises(ValueError, match="unknown symbol '<pad>'"):
        Vocab(["hi"], level="word").encode("hi <pad>")


def test_vocab_argument_errors():
    with pytest.raises(ValueError, match="level must be one of"):
        Vocab("ab", level="byte")
    with pytest.raises(ValueError, match="unknown must be one of"):
        Vocab("ab", unknown="skip")
    with pytest.raises(ValueError, match=r"symbols\[1\] must be one character"):
        Vocab(["a", "bc"])
    with pytest.raises(ValueError, match=r"symbols\[1\] = 'a' is a duplicate \(symbols\[0\]\)"):
        Vocab("aa")
    with pytest.raises(ValueError, match="special symbol"):
        Vocab(["<eos>"], level="word")
    with pytest.raises(ValueError, match="without whitespace"):
        Vocab(["a b"], level="word")
    with pytest.raises(TypeError, match="list of words"):
        Vocab("hello", level="word")
    with pytest.raises(TypeError, match="text must be a str"):
        Vocab("ab").encode(["a"])
    with pytest.raises(ValueError, match=r"ids\[1\] = 9 is not a token id"):
        Vocab("ab").decode([4, 9])
    with pytest.raises(TypeError, match="min_freq must be an int"):
        Vocab.build(["ab"], min_freq=0.5)


def test_vocab_dict_round_trip():
    v = Vocab.build(["hello world", "hello"], level="word", unknown="unk")
    assert Vocab.from_dict(v.to_dict()) == v
    assert Vocab.from_dict(v.to_dict()).unknown == "unk"


def test_tokenize_words_and_normalise_text():
    assert tokenize_words("Don't go, Tom!") == ["Don't", "go", ",", "Tom", "!"]
    assert tokenize_words("  Hi  there. ", lower=True) == ["hi", "there", "."]
    assert normalise_text("Go,  Tom!") == "Go , Tom !"
    assert normalise_text(" Go,  Tom! ", level="char", lower=True) == "go, tom!"


# ------------------------------------------------------------------------------ tasks


@pytest.mark.parametrize("name", list(TASKS))
def test_tasks_are_deterministic_from_the_seed(name):
    a = make_task(name, 50, 10, 10, seed=3)
    b = make_task(name, 50, 10, 10, seed=3)
    c = make_task(name, 50, 10, 10, seed=4)
    assert (a.train, a.val, a.test) == (b.train, b.val, b.test)
    assert a.src_vocab == b.src_vocab and a.tgt_vocab == b.tgt_vocab
    assert a.train != c.train


@pytest.mark.parametrize("name", list(TASKS))
def test_splits_do_not_overlap(name):
    data = make_task(name, 400, 100, 100, seed=0)
    assert (len(data.train), len(data.val), len(data.test)) == (400, 100, 100)
    train, val, test = sources(data, "train"), sources(data, "val"), sources(data, "test")
    assert len(train) == 400 and len(val) == 100 and len(test) == 100  # distinct inside too
    assert not train & val and not train & test and not val & test


@pytest.mark.parametrize(
    "name, rule",
    [("copy", lambda s: s), ("reverse", lambda s: s[::-1]), ("sort", lambda s: "".join(sorted(s)))],
)
def test_sequence_tasks_targets_and_lengths(name, rule):
    data = make_task(name, 300, 0, 20, seed=1, min_len=2, max_len=7, n_symbols=5)
    for src, tgt in data.train + data.test:
        assert tgt == rule(src)
        assert 2 <= len(src) <= 7 and set(src) <= set("abcde")
        data.src_vocab.encode(src)  # every symbol is in the vocabulary
        data.tgt_vocab.encode(tgt)
    assert {len(s) for s, _ in data.train} == set(range(2, 8))
    assert len(data.src_vocab) == 4 + 5


def test_too_many_distinct_examples_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot draw 20 distinct sequences: only 12"):
        make_task("copy", 10, 5, 5, min_len=1, max_len=2, n_symbols=3)  # 3 + 9 exist
    data = make_task("copy", 7, 3, 2, min_len=1, max_len=2, n_symbols=3)  # all 12 exist
    assert len(sources(data, "train") | sources(data, "val") | sources(data, "test")) == 12


def test_task_argument_errors():
    with pytest.raises(ValueError, match="name must be one of"):
        make_task("translate")
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['max_length'\]"):
        make_task("copy", max_length=5)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['min_len'\] for task 'dates'"):
        make_task("dates", min_len=5)
    with pytest.raises(ValueError, match="min_len must be <= max_len"):
        make_task("copy", min_len=5, max_len=3)
    with pytest.raises(ValueError, match="n_symbols must be <= 26"):
        make_task("copy", n_symbols=27)
    with pytest.raises(ValueError, match="n_train must be >= 1"):
        make_task("copy", n_train=0)
    with pytest.raises(ValueError, match="start_year must be <= end_year"):
        make_task("dates", start_year=2000, end_year=1999)


# An oracle independent of attnbook.data's own name lists: the standard library's (English in
# Python's default C locale).
_MONTH_PREFIX = {m[:3].lower(): i for i, m in enumerate(calendar.month_name) if m}
_WEEKDAY_PREFIX = {d[:3].lower(): i for i, d in enumerate(calendar.day_name)}


def read_date(text: str) -> tuple[datetime.date, int | None]:
    """An independent reader of the task's inputs: (the date, the weekday named or None)."""
    s = text.lower()
    weekday = None
    m = re.match(r"([a-z]+),? ", s)
    if m and m.group(1)[:3] in _WEEKDAY_PREFIX and m.group(1) not in ("the",):
        weekday = _WEEKDAY_PREFIX[m.group(1)[:3]]
        s = s[m.end() :]
    if m := re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", s):
        year, month, day = (int(g) for g in m.groups())
    elif m := re.fullmatch(r"(\d{1,2})[./-](\d{1,2})[./-](\d{4})", s):
        day, month, year = (int(g) for g in m.groups())  # day first, always
    else:
        months = re.findall(r"[a-z]{3,}", s)
        names = [w for w in months if w[:3] in _MONTH_PREFIX and w not in ("the",)]
        assert len(names) == 1, text
        month = _MONTH_PREFIX[names[0][:3]]
        year = int(re.search(r"\d{4}", s).group())
        day_match = re.search(r"\b(\d{1,2})(st|nd|rd|th)?\b", s)
        day = int(day_match.group(1))
        if day_match.group(2):
            want = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
            assert day_match.group(2) == want, text
    return datetime.date(year, month, day), weekday


def test_dates_have_exactly_one_right_answer_and_true_weekdays():
    data = make_task("dates", 1500, 0, 0, seed=0)
    with_weekday = 0
    for src, tgt in data.train:
        date, weekday = read_date(src)
        assert date.isoformat() == tgt, (src, tgt)
        if weekday is not None:
            with_weekday += 1
            assert weekday == date.weekday(), (src, tgt)
        data.src_vocab.encode(src)
        data.tgt_vocab.encode(tgt)
    assert 200 < with_weekday < 1000


def test_dates_come_in_many_shapes_and_cases():
    data = make_task("dates", 1500, 0, 0, seed=0)
    srcs = [s for s, _ in data.train]
    shapes = {re.sub(r"[a-z]+", "w", re.sub(r"\d", "9", s.lower())) for s in srcs}
    assert len(shapes) >= 15
    assert any(s.islower() and s[0].isalpha() for s in srcs)
    assert any(s.isupper() for s in srcs)
    assert any(s[0].isupper() and not s.isupper() for s in srcs)
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", t) for _, t in data.train)


def test_dates_split_by_date():
    data = make_task("dates", 300, 100, 100, seed=2, start_year=2000, end_year=2004)
    days = [{t for _, t in getattr(data, split)} for split in ("train", "val", "test")]
    assert [len(d) for d in days] == [300, 100, 100]
    assert not days[0] & days[1] and not days[0] & days[2] and not days[1] & days[2]
    assert all("2000" <= t[:4] <= "2004" for d in days for t in d)


def test_length_controlled_examples():
    data = make_task("reverse", 500, 50, 50, seed=0, min_len=3, max_len=6)
    by_length = length_controlled(data, [3, 6, 12], n_per_length=40, seed=0)
    assert sorted(by_length) == [3, 6, 12]
    seen = sources(data, "train") | sources(data, "val") | sources(data, "test")
    for length, pairs in by_length.items():
        assert len(pairs) == 40 and len({s for s, _ in pairs}) == 40
        for src, tgt in pairs:
            assert len(src) == length and tgt == src[::-1] and src not in seen
            data.src_vocab.encode(src)  # longer inputs, same vocabulary
    # deterministic, and each length independent of the others
    assert length_controlled(data, [12], 40, seed=0)[12] == by_length[12]
    assert length_controlled("copy", [4], 5, seed=1) == length_controlled("copy", [4], 5, seed=1)
    assert length_controlled("copy", [4], 5, seed=1) != length_controlled("copy", [4], 5, seed=2)


def test_length_controlled_errors():
    with pytest.raises(ValueError, match="sequence tasks"):
        length_controlled("dates", [5])
    with pytest.raises(ValueError, match="only 8 sequences"):
        length_controlled("copy", [3], n_per_length=9, n_symbols=2)
    with pytest.raises(ValueError, match="lengths must name at least one"):
        length_controlled("copy", [])


# ------------------------------------------------------------------------------ TSV loader


def write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_tsv_tokenises_filters_and_splits(tmp_path):
    lines = [f"I saw {i} cats.\tJ'ai vu {i} chats.\tCC-BY attribution #{i}" for i in range(40)]
    lines += [
        "",
        "Go!\tVa !",
        "Go!\tMarche.",
        "A very long sentence indeed , far too long .\tx",
        "Hi.\tSalut.",
    ]
    path = write(tmp_path / "fra.txt", lines)
    data = load_tsv(path, lower=True, max_len=6, val_fraction=0.2, test_fraction=0.2, seed=0)
    assert data.name == "fra"
    all_pairs = data.train + data.val + data.test
    assert len(all_pairs) == 43  # 40 + 2 "go !" + "hi ."
    assert ("i saw 7 cats .", "j'ai vu 7 chats .") in all_pairs
    assert data.options["n_too_long"] == 1 and data.options["n_lines"] == 44
    train, val, test = sources(data, "train"), sources(data, "val"), sources(data, "test")
    assert not train & val and not train & test and not val & test
    assert [len(x) for x in (train, val, test)] == [26, 8, 8]  # 42 sources
    go = [split for split in (data.train, data.val, data.test) if ("go !", "va !") in split]
    assert len(go) == 1 and ("go !", "marche .") in go[0]  # one source, one split
    assert data.src_vocab.level == "word" and "cats" in data.src_vocab
    assert data.src_vocab.unknown == "unk"  # val/test words may be unseen
    again = load_tsv(path, lower=True, max_len=6, val_fraction=0.2, test_fraction=0.2, seed=0)
    assert (again.train, again.val, again.test) == (data.train, data.val, data.test)


def test_load_tsv_character_level(tmp_path):
    path = write(tmp_path / "pairs.tsv", ["ab  c\tcba", "de\ted", "fg\tgf"])
    data = load_tsv(path, level="char", val_fraction=0.0, test_fraction=0.0)
    assert sorted(data.train) == [("ab c", "cba"), ("de", "ed"), ("fg", "gf")]
    assert data.src_vocab.level == "char"


def test_load_tsv_malformed_line_names_the_line(tmp_path):
    path = write(tmp_path / "bad.tsv", ["hello\tbonjour", "", "a line without a tab", "x\ty"])
    with pytest.raises(
        ValueError,
        match=r"bad\.tsv, line 3: expected at least 2 tab-separated "
        r"fields \(source<TAB>target\), got 1",
    ):
        load_tsv(path)
    path = write(tmp_path / "empty_side.tsv", ["hello\tbonjour", "hi\t   "])
    with pytest.raises(ValueError, match=r"line 2: the target is empty"):
        load_tsv(path)


def test_load_tsv_other_errors(tmp_path):
    path = write(tmp_path / "long.tsv", ["one two three\tun deux trois"])
    with pytest.raises(ValueError, match="no sentence pair left"):
        load_tsv(path, max_len=2)
    with pytest.raises(ValueError, match="val_fraction \\+ test_fraction must be < 1"):
        load_tsv(path, val_fraction=0.5, test_fraction=0.5)
    with pytest.raises(FileNotFoundError):
        load_tsv(tmp_path / "missing.tsv")


# ------------------------------------------------------------------------------ batching


def small_task():
    return make_task("reverse", 200, 0, 0, seed=0, min_len=1, max_len=12, n_symbols=6)


def test_dataset_items_and_collate():
    data = small_task()
    ds = Seq2SeqDataset(data.train, data.src_vocab, data.tgt_vocab)
    src, tgt = ds[0]
    s, t = data.train[0]
    assert src.tolist() == data.src_vocab.encode(s)
    assert tgt.tolist() == [BOS, *data.tgt_vocab.encode(t), EOS]
    batch = collate([ds[i] for i in range(5)])
    assert isinstance(batch, Batch)
    lengths = [len(data.train[i][0]) for i in range(5)]
    assert batch.src.shape == (5, max(lengths)) and batch.src_lengths.tolist() == lengths
    assert batch.tgt_in.shape == batch.tgt_out.shape == (5, max(lengths) + 1)
    for i, n in enumerate(lengths):
        assert (batch.src[i, n:] == PAD).all() and (batch.src[i, :n] != PAD).all()
        full = [BOS, *data.tgt_vocab.encode(data.train[i][1]), EOS]
        assert batch.tgt_in[i, : n + 1].tolist() == full[:-1]
        assert batch.tgt_out[i, : n + 1].tolist() == full[1:]
        assert (batch.tgt_out[i, n + 1 :] == PAD).all()
    with_eos = Seq2SeqDataset(data.train, data.src_vocab, data.tgt_vocab, src_eos=True)
    assert with_eos[0][0].tolist() == [*src.tolist(), EOS]


def test_dataset_errors():
    v = Vocab("ab")
    with pytest.raises(ValueError, match="unknown symbol 'c'"):
        Seq2SeqDataset([("ab", "ba"), ("ac", "ca")], v, v)
    with pytest.raises(ValueError, match="non-empty list"):
        Seq2SeqDataset([], v, v)
    with pytest.raises(ValueError, match=r"pairs\[0\] must be a \(source, target\) pair"):
        Seq2SeqDataset([("ab",)], v, v)
    with pytest.raises(ValueError, match=r"pairs\[0\] has an empty source"):
        Seq2SeqDataset([("", "a")], v, v)
    with pytest.raises(TypeError, match="must be Vocab"):
        Seq2SeqDataset([("a", "a")], "ab", v)
    with pytest.raises(ValueError, match="batch is empty"):
        collate([])


def test_bucket_sampler_covers_every_index_once_with_little_padding():
    lengths = [(i * 7919) % 40 + 1 for i in range(1000)]
    sampler = BucketBatchSampler(lengths, batch_size=32, seed=0, pool_batches=10)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches)
    assert spread / len(batches) < 5  # random batches: ~35
    second = list(sampler)  # the next epoch: new order
    assert second != batches
    again = BucketBatchSampler(lengths, batch_size=32, seed=0, pool_batches=10)
    assert list(again) == batches  # deterministic from the seed
    again.set_epoch(1)
    assert list(again) == second


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("drop_last", [True, False])
def test_bucket_sampler_len(shuffle, drop_last):
    sampler = BucketBatchSampler(
        list(range(103)), 10, shuffle=shuffle, drop_last=drop_last, pool_batches=3
    )
    batches = list(sampler)
    assert len(sampler) == len(batches)
    if drop_last:
        assert all(len(b) == 10 for b in batches)
    if not shuffle:  # in length order
        assert [i for b in batches for i in b] == list(range(100 if drop_last else 103))


def test_make_loader_gives_padded_batches():
    data = small_task()
    for bucket in (True, False):
        loader = make_loader(
            data.train, data.src_vocab, data.tgt_vocab, batch_size=16, bucket=bucket, seed=0
        )
        batches = list(loader)
        assert sum(len(b.src) for b in batches) == 200
        assert all(isinstance(b, Batch) and b.src.dtype == torch.long for b in batches)
        assert [b.src.tolist() for b in batches] == [
            b.src.tolist()
            for b in make_loader(
                data.train, data.src_vocab, data.tgt_vocab, batch_size=16, bucket=bucket, seed=0
            )
        ]
    ds = Seq2SeqDataset(data.train, data.src_vocab, data.tgt_vocab)
    assert len(list(make_loader(ds, batch_size=50))) == 4
    with pytest.raises(ValueError, match="src_vocab and tgt_vocab are needed"):
        make_loader(data.train)


def test_make_loader_works_under_spawn():
    """Workers started by "spawn" (macOS', Windows' default) get the collate function by
    pickling: it must be a module-level callable, not a closure, and the batches the same."""
    pairs = [(f"{'ab' * (1 + i % 3)}", f"{'ba' * (1 + i % 3)}") for i in range(12)]
    vocab = Vocab.build(s for pair in pairs for s in pair)
    pickle.dumps(make_loader(pairs, vocab, vocab, batch_size=4).collate_fn)
    for bucket in (True, False):
        options = {"batch_size": 4, "bucket": bucket, "seed": 3}
        serial = list(make_loader(pairs, vocab, vocab, **options))
        spawned = list(
            make_loader(
                pairs, vocab, vocab, num_workers=2, multiprocessing_context="spawn", **options
            )
        )
        assert len(spawned) == len(serial) == 3
        for got, want in zip(spawned, serial, strict=True):
            assert isinstance(got, Batch)
            assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    # the cause of a skipped epoch with workers: DataLoader calls iter() twice, draws once
    sampler = BucketBatchSampler([len(src) for src, _ in pairs], 4, seed=3)
    iter(sampler)  # made, never drawn from
    first = iter(sampler)
    assert list(first) == list(BucketBatchSampler([len(s) for s, _ in pairs], 4, seed=3))
    assert sampler.epoch == 1
    with pytest.raises(ValueError, match="num_workers must be >= 0, got -1"):
        make_loader(pairs, vocab, vocab, num_workers=-1)
