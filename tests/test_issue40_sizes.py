"""Issue 40: absurd sizes are refused before any work (attnbook._limits).

Each case the issue reproduced (minutes of work, or the allocator's raw message) is refused
within seconds, by a message that names the argument, the estimate and the limit; the
override (ATTNBOOK_MEMORY_LIMIT) is shown with a tiny fake limit, so no test needs big memory;
ordinary sizes pass as before.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook import _limits
from attnbook._limits import (
    ENV,
    TooLargeError,
    check_memory,
    check_threads,
    decode_bytes,
    format_bytes,
    parse_size,
    rnn_parameters,
    transformer_parameters,
)
from attnbook.attention import MultiHeadAttention, SelfAttentionHead, causal_mask, padding_mask
from attnbook.cli import main
from attnbook.decode import beam_search, greedy_decode
from attnbook.positional import PositionalEncoding, sinusoidal_encoding
from attnbook.rnn import Seq2Seq
from attnbook.runs import train_run
from attnbook.runs.evaluation import evaluate_run
from attnbook.train import TrainConfig
from attnbook.transformer import Transformer

FAST = 5.0  # seconds: a refusal comes at once (the issue's cases ran for minutes)
ESTIMATE = re.compile(r"needs about [\d.]+ [kMGTPEZY]?B")
LIMIT = re.compile(r"(this machine has [\d.]+ [kMGTPEZY]?B available|in all|does not say)")


@pytest.fixture(autouse=True)
def machine_limit(monkeypatch):
    """The machine's own limit, whatever the environment says (a test sets its own)."""
    monkeypatch.delenv(ENV, raising=False)


def refused(fn, *names):
    """Call ``fn``: it must raise TooLargeError within FAST seconds, naming each of ``names``,
    an estimate and a limit. Returns the message."""
    start = time.perf_counter()
    with pytest.raises(TooLargeError) as info:
        fn()
    assert time.perf_counter() - start < FAST
    message = str(info.value)
    for name in names:
        assert name in message, message
    assert ESTIMATE.search(message), message
    assert ENV in message and "knowingly" in message, message
    return message


# --------------------------------------------------------------------------------------------
# the library's edges: the cases of the issue
# --------------------------------------------------------------------------------------------


def test_the_reproduced_library_cases_are_refused_at_once_with_estimate_and_limit():
    message = refused(lambda: MultiHeadAttention(10**6, 2), "MultiHeadAttention", "d_model=1000000")
    assert "16.0 TB for its 4 projections' weights" in message
    assert LIMIT.search(message), message
    message = refused(lambda: causal_mask(10**6), "causal_mask", "n=1000000")
    assert "2.00 TB" in message
    refused(
        lambda: padding_mask(torch.tensor([3, 4]), max_len=10**12),
        "padding_mask",
        "max_len=1000000000000",
    )


@pytest.mark.parametrize(
    "make, names",
    [
        (lambda: Transformer(10, 10, d_model=64, n_heads=4, n_layers=10**6, d_ff=256), "n_layers="),
        (lambda: Transformer(10, 10, max_len=10**9), "max_len=1000000000"),
        (lambda: Transformer(10**9, 10), "src_vocab_size=1000000000"),
        (lambda: Seq2Seq(10, 10, hidden_dim=10**6), "hidden_dim=1000000"),
        (lambda: PositionalEncoding(512, 10**9), "max_len=1000000000"),
        (lambda: PositionalEncoding(512, 10**9, kind="learned"), "max_len=1000000000"),
        (lambda: sinusoidal_encoding(10**9, 512), "n_positions=1000000000"),
        (lambda: SelfAttentionHead(64, 16, n_positions=10**9), "n_positions=1000000000"),
    ],
)
def test_models_and_tables_are_refused_before_any_layer_is_built(make, names):
    refused(make, names)


def test_decoding_more_hypotheses_than_memory_is_refused_before_the_encoder_runs():
    model = Transformer(8, 8, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=64)
    src = torch.tensor([[4, 5, 6]])
    refused(
        lambda: beam_search(model, src, bos_id=1, eos_id=2, max_len=20, beam_size=10**9),
        "beam_search",
        "beam_size=1000000000",
    )
    rnn = Seq2Seq(8, 8, emb_dim=8, hidden_dim=16, attention="additive")
    refused(
        lambda: greedy_decode(
            rnn, src.repeat(10**4, 1), bos_id=1, eos_id=2, max_len=10**6, return_attention=True
        ),
        "greedy_decode",
        "max_len=1000000",
    )


def test_a_training_history_that_cannot_fit_is_refused_unless_time_bounds_the_run():
    refused(lambda: TrainConfig(steps=10**12), "TrainConfig", "steps=1000000000000")
    TrainConfig(steps=10**12, max_seconds=5.0, schedule="constant")  # the budget ends it


def test_threads_beyond_four_per_cpu_are_refused_and_as_many_pass():
    most = _limits.THREADS_PER_CPU * _limits.usable_cpus()
    assert check_threads("--threads", most) == most
    with pytest.raises(TooLargeError, match=rf"--threads {most + 1}: .* usable CPU"):
        check_threads("--threads", most + 1)


# --------------------------------------------------------------------------------------------
# the override, with a tiny fake limit
# --------------------------------------------------------------------------------------------


def test_the_limit_variable_refuses_an_ordinary_size_and_takes_a_tiny_one(monkeypatch):
    MultiHeadAttention(64, 4)  # 66 kB: far below any machine's limit
    monkeypatch.setenv(ENV, "50kB")
    message = refused(lambda: MultiHeadAttention(64, 4), "d_model=64")
    assert f"{ENV} is 50kB" in message and "66.6 kB" in message
    MultiHeadAttention(32, 4)  # 16.9 kB
    refused(lambda: causal_mask(1000), "n=1000")  # 2 MB
    assert causal_mask(100).shape == (100, 100)  # 20 kB
    monkeypatch.setenv(ENV, "off")
    check_memory("f", {"n": 10**9}, "a table", 10.0**18)  # no limit: nothing refused
    monkeypatch.setenv(ENV, "a lot")
    with pytest.raises(ValueError, match=f"{ENV} must be a size such as 64GB"):
        MultiHeadAttention(64, 4)


def test_the_cli_takes_the_limit_variable_too(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(ENV, "1MB")
    code = main(["train", "--task", "copy", "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert f"{ENV} is 1MB" in err and "needs about" in err
    assert not (tmp_path / "run").exists()  # refused before the folder was made


def test_sizes_read_and_written():
    assert parse_size("64GB") == 64 * 10**9
    assert parse_size("512MiB") == 512 * 2**20
    assert parse_size("1.5T") == 1.5e12
    assert parse_size("2e9") == 2 * 10**9
    assert parse_size("100") == 100
    assert parse_size("off") is None and parse_size("none") is None
    for bad in ("", "lots", "-3GB", "0", "5 iB"):
        with pytest.raises(ValueError, match=ENV):
            parse_size(bad)
    assert format_bytes(16e12) == "16.0 TB"
    assert format_bytes(22.8e9) == "22.8 GB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(2.5e6) == "2.50 MB"


# --------------------------------------------------------------------------------------------
# properties: the estimates are exact or monotone, sizes within the limit are accepted
# --------------------------------------------------------------------------------------------

small = st.integers(min_value=1, max_value=48)


@settings(max_examples=25, deadline=None)
@given(
    vocab=st.tuples(small, small),
    heads=st.sampled_from([1, 2, 4]),
    d_k=st.integers(1, 6),
    layers=st.integers(1, 3),
    d_ff=small,
    max_len=small,
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    positional=st.sampled_from(["sinusoidal", "learned", None]),
)
def test_the_transformer_estimate_counts_its_parameters_exactly(
    vocab, heads, d_k, layers, d_ff, max_len, flags, positional
):
    norm_first, share, tie = flags
    d_model = 2 * heads * d_k  # even: the sinusoidal table wants pairs
    src, tgt = (vocab[0] + 1, vocab[0] + 1) if share else (vocab[0] + 1, vocab[1] + 1)
    model = Transformer(
        src, tgt, d_model, heads, layers, d_ff, 0.0, max_len, norm_first, share, tie,
        positional=positional,
    )  # fmt: skip
    parts = transformer_parameters(
        src, tgt, d_model, layers, d_ff, max_len, norm_first=norm_first,
        share_embeddings=share, tie_output=tie, positional=positional,
    )  # fmt: skip
    assert sum(parts.values()) == sum(p.numel() for p in model.parameters())


@settings(max_examples=25, deadline=None)
@given(
    vocab=st.tuples(small, small),
    emb=small,
    hidden=small,
    cell=st.sampled_from(["gru", "lstm", "rnn"]),
    bidirectional=st.booleans(),
    attention=st.sampled_from([None, "additive", "general", "dot"]),
    attn_dim=st.one_of(st.none(), small),
)
def test_the_rnn_estimate_counts_its_parameters_exactly(
    vocab, emb, hidden, cell, bidirectional, attention, attn_dim
):
    if attention == "dot" and bidirectional:
        bidirectional = False
    attn_dim = attn_dim if attention == "additive" else None
    src, tgt = vocab[0] + 1, vocab[1] + 1
    model = Seq2Seq(
        src, tgt, emb, hidden, cell, bidirectional, attention, 0, 0.0, attn_dim
    )  # fmt: skip
    parts = rnn_parameters(
        src, tgt, emb, hidden, cell=cell, bidirectional=bidirectional, attention=attention,
        attn_dim=attn_dim,
    )  # fmt: skip
    assert sum(parts.values()) == sum(p.numel() for p in model.parameters())


sizes = st.integers(min_value=1, max_value=10**6)


@settings(max_examples=200, deadline=None)
@given(a=st.lists(sizes, min_size=6, max_size=6), which=st.integers(0, 5), more=sizes)
def test_the_estimates_grow_with_every_size(a, which, more):
    bigger = list(a)
    bigger[which] += more
    total = lambda s: sum(transformer_parameters(*s, positional="learned").values())  # noqa: E731
    assert total(bigger) > total(a)
    rnn = lambda s: sum(rnn_parameters(*s[:4], attention="additive").values())  # noqa: E731
    assert rnn(bigger) >= rnn(a)
    decode = lambda s: decode_bytes(*s[:3], vocab=s[3], width=s[4], n_layers=s[5])  # noqa: E731
    assert decode(bigger) > decode(a)
    assert _limits.sinusoidal_bytes(*bigger[:2]) >= _limits.sinusoidal_bytes(*a[:2])
    assert _limits.causal_mask_bytes(bigger[0]) >= _limits.causal_mask_bytes(a[0])


@settings(max_examples=100, deadline=None)
@given(d_model=st.integers(1, 4096), limit=st.integers(10**3, 10**9))
def test_a_size_is_accepted_exactly_when_its_estimate_is_within_the_limit(d_model, limit):
    need = 4 * _limits.mha_parameters(d_model)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV, str(limit))
        if need <= limit:
            check_memory("MultiHeadAttention", {"d_model": d_model}, "weights", need)
        else:
            with pytest.raises(TooLargeError, match=f"d_model={d_model} needs about"):
                check_memory("MultiHeadAttention", {"d_model": d_model}, "weights", need)


def test_ordinary_sizes_pass_without_reading_the_machine(monkeypatch):
    def no_reading(*args, **kwargs):
        raise AssertionError("the machine was read for an ordinary size")

    monkeypatch.setattr(_limits, "memory_limit", no_reading)
    Transformer(20, 20, d_model=64, n_heads=4, n_layers=2, d_ff=256, max_len=512)
    MultiHeadAttention(512, 8)
    causal_mask(512)
    sinusoidal_encoding(5000, 512)


# --------------------------------------------------------------------------------------------
# the command line: exit status 1, one line, at once
# --------------------------------------------------------------------------------------------


def cli(argv, capsys):
    start = time.perf_counter()
    code = main([str(a) for a in argv])
    seconds = time.perf_counter() - start
    err = capsys.readouterr().err.strip()
    return code, err, seconds


@pytest.mark.parametrize(
    "extra, names",
    [
        (["--layers", "1000000"], ["--layers 1000000", "needs about"]),
        (["--max-len", "1000000"], ["--max-len 1000000", "512 positions", "--max-len 511"]),
        (["--model", "rnn", "--max-len", "1000000"], ["--max-len 1000000", "needs about"]),
        (["--d-model", "1000000"], ["--d-model 1000000", "needs about"]),
        (["--n-train", "1000000000"], ["--n-train 1000000000", "pairs", "needs about"]),
        (["--steps", "1000000000000"], ["--steps 1000000000000", "history", "needs about"]),
        (["--epochs", "1000000000"], ["--epochs 1000000000", "history", "needs about"]),
        (["--threads", "1000000"], ["--threads 1000000", "usable CPU"]),
        (["--model", "rnn", "--hidden", "1000000"], ["--hidden 1000000", "needs about"]),
    ],
)
def test_train_refuses_absurd_sizes_at_once(extra, names, tmp_path, capsys):
    out = tmp_path / "run"
    code, err, seconds = cli(["train", "--task", "copy", "--out", out, *extra], capsys)
    assert code == 1 and seconds < FAST and len(err.splitlines()) == 1, err
    assert err.startswith("python -m attnbook train: error: ")
    for name in names:
        assert name in err, err
    assert not out.exists()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("issue40") / "copy"
    train_run(
        out,
        task="copy",
        steps=2,
        n_train=100,
        n_val=5,
        n_test=5,
        min_len=2,
        max_len=4,
        n_symbols=4,
        d_model=16,
        heads=2,
        d_ff=32,
        batch_size=16,
        eval_every=2,
        quiet=True,
    )
    return out / "checkpoint.pt"


def test_evaluate_refuses_more_inputs_than_the_task_has_naming_the_maximum(tiny_run, capsys):
    code, err, seconds = cli(
        ["evaluate", "--checkpoint", tiny_run, "--n-per-length", "1000000000"], capsys
    )
    assert code == 1 and seconds < FAST and len(err.splitlines()) == 1, err
    match = re.search(r"only (\d+) fresh inputs? of length 5 \((\d+) sources", err)
    assert match and int(match[2]) == 4**5, err
    assert f"use --n-per-length {match[1]} or less" in err
    with pytest.raises(ValueError, match=f"use --n-per-length {match[1]} or less"):
        evaluate_run(tiny_run, lengths=[5], n_per_length=int(match[1]) + 1, device="cpu")
    result = evaluate_run(tiny_run, lengths=[5], n_per_length=int(match[1]), device="cpu")
    assert result["examples"] == {"5": int(match[1])}


def test_evaluate_refuses_a_beam_that_cannot_fit(tiny_run, capsys):
    code, err, seconds = cli(
        ["evaluate", "--checkpoint", tiny_run, "--lengths", "12", "--beam", "100000000"], capsys
    )
    assert code == 1 and seconds < FAST and len(err.splitlines()) == 1, err
    assert "--beam 100000000" in err and "needs about" in err and "hypotheses" in err


def test_a_subprocess_exits_1_with_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    env.pop(ENV, None)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "attnbook", "train", "--task", "copy", "--layers", "1000000"]
        + ["--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--layers 1000000" in proc.stderr and "needs about" in proc.stderr
    assert time.perf_counter() - start < 60  # the import of torch included
