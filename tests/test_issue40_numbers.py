"""Issue 40, "numbers stay numbers": softmax and attention give their limits (never NaN from
finite or infinite scores, nor from finite q, k, v that overflow), finite inputs give exactly
what the printed code gave before, and a checkpoint is either read as written or refused: a
flipped byte, a NaN weight on save or on load, a model whose logits overflow."""

from __future__ import annotations

import inspect
import math
import os
import shutil
import struct
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnbook.attention.functional as functional
from attnbook._checks import unchecked
from attnbook.attention import (
    MultiHeadAttention,
    masked_softmax,
    scaled_dot_product_attention,
    softmax_saturation,
)
from attnbook.cli import main
from attnbook.data import make_task
from attnbook.rnn import Seq2Seq
from attnbook.train import CheckpointError, NonFiniteLossError, TrainConfig, Trainer
from attnbook.train.checkpoint import checkpoint_digest, load_checkpoint
from attnbook.utils import show_source

INF = float("inf")
SETTINGS = settings(  # ATTNBOOK_HYPOTHESIS_EXAMPLES=5000 for a longer search
    max_examples=int(os.environ.get("ATTNBOOK_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# --------------------------------------------------------------------------------------------
# the formulas as they were before issue 40 (copies), for bit-identity
# --------------------------------------------------------------------------------------------


def old_masked_softmax(scores, mask=None):
    if mask is None:
        return torch.softmax(scores, dim=-1)
    mask = mask.expand(scores.shape)
    no_key = ~mask.any(dim=-1, keepdim=True)
    filled = scores.masked_fill(~mask, float("-inf")).masked_fill(no_key, 0.0)
    return torch.softmax(filled, dim=-1).masked_fill(~mask, 0.0)


def old_sdpa(q, k, v, mask=None):
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    weights = old_masked_softmax(scores, mask)
    return weights @ v, weights


def old_saturation(scores):
    p = torch.softmax(scores, dim=-1)
    entropy = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
    jacobian = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)
    return {
        "max_weight": p.amax(-1),
        "entropy": entropy,
        "jacobian_norm": jacobian.flatten(-2).norm(dim=-1),
    }


DTYPES = (torch.float32, torch.float64, torch.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_finite_inputs_give_bit_for_bit_the_old_results(dtype):
    g = torch.Generator().manual_seed(40)
    for trial in range(40):
        shape = (2, 3, 1 + trial % 6, 1 + (trial * 7) % 9)
        scale = (0.01, 1.0, 30.0, 1e4)[trial % 4]
        x = (torch.randn(shape, generator=g) * scale).to(dtype)
        full = torch.rand(shape, generator=g) > 0.4
        for mask in (None, full, full[:, :1], full[..., :1, :]):
            assert torch.equal(masked_softmax(x, mask), old_masked_softmax(x, mask))
        d = 1 + trial % 8
        q, k, v = (
            (torch.randn(2, 3, n, d, generator=g) * scale).to(dtype)
            for n in (shape[2], shape[3], shape[3])
        )
        for mask in (None, full, full[:, :1]):
            out, w = scaled_dot_product_attention(q, k, v, mask)
            ref_out, ref_w = old_sdpa(q, k, v, mask)
            assert torch.equal(w, ref_w) and torch.equal(out, ref_out)
        for key, value in softmax_saturation(x).items():
            assert torch.equal(value, old_saturation(x)[key]), key


def test_finite_inputs_give_the_old_gradients():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 5, 6, generator=g)
    mask = torch.rand(4, 5, 6, generator=g) > 0.3
    mask[0, 0] = False  # a row with no allowed key
    grads = []
    for fn in (masked_softmax, old_masked_softmax):
        s = x.clone().requires_grad_(True)
        (fn(s, mask) * torch.arange(6.0)).sum().backward()
        grads.append(s.grad)
    assert torch.equal(*grads)


def test_multi_head_attention_weights_path_unchanged_and_fused_path_agrees():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    mask = torch.rand(2, 5, 5) > 0.3
    out, w = mha(x, x, x, mask)
    q, k, v = (mha._split_heads(t) for t in mha._project(x, x, x))
    z, ref_w = old_sdpa(q, k, v, mask.unsqueeze(1))
    assert torch.equal(w, ref_w)
    assert torch.equal(out, mha.w_o(z.transpose(1, 2).reshape(2, 5, 16)))
    fused, none = mha(x, x, x, mask, need_weights=False)
    assert none is None and torch.allclose(fused, out, atol=1e-5)


def test_the_book_still_prints_the_same_code():
    for fn, head in (
        (masked_softmax, "@checked(_check_masked_softmax)\ndef masked_softmax("),
        (scaled_dot_product_attention, "@checked(_check_sdpa)\ndef scaled_dot_product_attention("),
    ):
        code = show_source(fn).code
        assert code.startswith(head)
        assert "_limit" not in code and "checks_waived" not in code
    assert show_source(masked_softmax).code == inspect.getsource(functional._printed_masked_softmax)
    assert show_source(scaled_dot_product_attention).code == inspect.getsource(
        functional._printed_sdpa
    )


def test_the_trainers_step_runs_the_printed_code_only(monkeypatch):
    def no(*args, **kwargs):
        raise AssertionError("extra work in the trainer's hot path")

    monkeypatch.setattr(functional, "_softmax_limits", no)
    monkeypatch.setattr(functional, "_overflow_limit", no)
    x = torch.randn(2, 3, 4)
    x[0, 0, 0] = INF
    with unchecked():  # as printed: NaN, as documented (the trainer stops on its loss)
        assert masked_softmax(x)[0, 0].isnan().all()
        scaled_dot_product_attention(x * 1e30, x * 1e30, x)
    with pytest.raises(AssertionError, match="hot path"):
        masked_softmax(x)
    masked_softmax(x[1])  # finite scores: no extra work outside the trainer either


# --------------------------------------------------------------------------------------------
# the limits
# --------------------------------------------------------------------------------------------


def test_the_documented_limits():
    w = masked_softmax(torch.tensor([[1.0, INF, 2.0, INF]]))
    assert w.tolist() == [[0.0, 0.5, 0.0, 0.5]]
    assert masked_softmax(torch.tensor([[-INF, -INF, -INF]])).tolist() == [[0.0, 0.0, 0.0]]
    # the all -inf row is treated like the all-masked row
    allowed = torch.tensor([[True, False]])
    assert masked_softmax(torch.tensor([[-INF, 3.0]]), allowed).tolist() == [[0.0, 0.0]]
    nothing = torch.tensor([[False, False]])
    assert masked_softmax(torch.tensor([[1.0, 2.0]]), nothing).tolist() == [[0.0, 0.0]]
    # a masked +inf is ignored
    assert masked_softmax(torch.tensor([[1.0, INF]]), allowed).tolist() == [[1.0, 0.0]]
    # huge finite scores: the softmax itself is fine
    assert masked_softmax(torch.tensor([[3e38, -3e38]])).tolist() == [[1.0, 0.0]]


def test_nan_propagates_on_its_row_only_where_allowed():
    s = torch.tensor([[float("nan"), 1.0], [0.0, 1.0]])
    w = masked_softmax(s)
    assert w[0].isnan().all() and w[1].isfinite().all()
    w = masked_softmax(s, torch.tensor([[False, True], [True, True]]))
    assert w[0].tolist() == [0.0, 1.0]


scores_strategy = st.integers(1, 4).flatmap(
    lambda rows: st.integers(1, 6).flatmap(
        lambda keys: st.tuples(
            st.lists(
                st.floats(allow_nan=False, allow_infinity=True, width=32),
                min_size=rows * keys,
                max_size=rows * keys,
            ),
            st.lists(st.booleans(), min_size=rows * keys, max_size=rows * keys),
            st.just((rows, keys)),
            st.booleans(),
            st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
        )
    )
)


@SETTINGS
@given(scores_strategy)
def test_weights_are_finite_and_sum_to_one_where_a_key_can_win(case):
    values, allowed, shape, use_mask, dtype = case
    scores = torch.tensor(values, dtype=torch.float32).reshape(shape).to(dtype)
    mask = torch.tensor(allowed).reshape(shape) if use_mask else None
    s = scores.clone().requires_grad_(True)
    w = masked_softmax(s, mask)
    w.sum().backward()
    w = w.detach()
    assert w.isfinite().all() and (w >= 0).all() and s.grad.isfinite().all()
    ok = torch.ones(shape, dtype=torch.bool) if mask is None else mask
    can_win = ok & (scores > -INF)
    sums = w.double().sum(-1)
    for row in range(shape[0]):
        if can_win[row].any():
            assert abs(float(sums[row]) - 1.0) < 1e-2, (scores[row], w[row])
            top = ok[row] & (scores[row] == INF)
            if top.any():  # the limit: equal shares on the +inf entries
                assert torch.equal(w[row][~top], torch.zeros_like(w[row][~top]))
                share = w[row][top].double()
                assert torch.allclose(share, torch.full_like(share, 1 / int(top.sum())))
        else:
            assert float(sums[row]) == 0.0
        assert (w[row][~ok[row]] == 0).all()


@SETTINGS
@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from([1e10, 1e19, 1e25, 1e30, 3e38]),
    st.integers(1, 8),
    st.booleans(),
    st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
)
def test_attention_of_scaled_up_finite_inputs_is_finite_and_the_limit(
    seed, scale, d, use_mask, dtype
):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, n, d, generator=g) for n in (3, 5, 5))
    mask = torch.rand(2, 3, 5, generator=g) > 0.3 if use_mask else None
    big_q, big_k = ((x / x.abs().max() * scale).to(dtype) for x in (q, k))  # max |x|: scale
    assert big_q.isfinite().all() and big_k.isfinite().all()
    out, w = scaled_dot_product_attention(big_q, big_k, v.to(dtype), mask)
    assert out.isfinite().all() and w.isfinite().all() and (w >= 0).all()
    true = big_q.double() @ big_k.double().transpose(-2, -1)  # no overflow in float64
    # what rounding in dtype may blur: d products, each off by a few eps of its size
    blur = 8 * d * torch.finfo(dtype).eps * (big_q.double().abs() @ big_k.double().abs().mT)
    allowed = torch.ones_like(true, dtype=torch.bool) if mask is None else mask
    for b in range(2):
        for i in range(3):
            keys = allowed[b, i]
            if not keys.any():
                assert (w[b, i] == 0).all()
                continue
            assert abs(float(w[b, i].double().sum()) - 1.0) < 1e-2
            row = true[b, i].masked_fill(~keys, -INF)
            best = row.max()
            gap = best - row.masked_fill(row == best, -INF).max()
            if gap > max(1e3 * math.sqrt(d), blur[b, i].max()):  # clear winners take all
                assert float(w[b, i][row == best].double().sum()) > 0.99  # (exact ties share)


def test_q_times_1e30_of_the_issue():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    out, w = scaled_dot_product_attention(q * 1e30, k * 1e30, v)
    assert out.isfinite().all() and w.isfinite().all()
    assert torch.equal(w.argmax(-1), (q @ k.transpose(-2, -1)).argmax(-1))
    mha = MultiHeadAttention(8, 2).eval()
    with torch.no_grad():
        mha.w_q.weight.mul_(1e20)
        mha.w_k.weight.mul_(1e20)
    x = torch.randn(1, 4, 8)
    out, w = mha(x, x, x)
    assert out.isfinite().all() and w.isfinite().all()


# --------------------------------------------------------------------------------------------
# checkpoints
# --------------------------------------------------------------------------------------------


def same(a, b) -> bool:
    """Equal in every bit, dtype, shape, type and order."""
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and (a.dtype, a.shape) == (b.dtype, b.shape)
            and torch.equal(
                a.contiguous().reshape(-1).view(torch.uint8),
                b.contiguous().reshape(-1).view(torch.uint8),
            )
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and repr(a) == repr(b)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    task = make_task("copy", 40, 8, 8, seed=0, min_len=2, max_len=4, n_symbols=3)
    torch.manual_seed(0)
    model = Seq2Seq(len(task.src_vocab), len(task.tgt_vocab), 2, 2)
    out = tmp_path_factory.mktemp("issue40")
    config = TrainConfig(
        steps=1, batch_size=8, eval_every=10_000, log_every=1, progress=False, device="cpu",
        out_dir=str(out),
    )  # fmt: skip
    trainer = Trainer(model, task, config=config)
    trainer.fit()
    return trainer, out / "checkpoint.pt"


def middle_of_a_tensor(path: Path) -> int:
    """The offset of a byte in the middle of the file that belongs to a tensor's data."""
    with zipfile.ZipFile(path) as z:
        records = [i for i in z.infolist() if "/data/" in i.filename and i.file_size >= 4]
    size = path.stat().st_size
    record = min(records, key=lambda i: abs(i.header_offset - size // 2))
    with open(path, "rb") as f:  # past the local header: 30 bytes, the name, the extra field
        f.seek(record.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
    return record.header_offset + 30 + name_len + extra_len + record.file_size // 2


def flip_outcome(data: bytes, offset: int, xor: int, scratch: Path, original: dict) -> str:
    damaged = bytearray(data)
    damaged[offset] ^= xor
    scratch.write_bytes(damaged)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.load on a damaged pickle's "protocol"
            got = load_checkpoint(scratch)
    except CheckpointError as err:
        message = str(err)
        assert str(scratch) in message and "\n" not in message, message
        return "refused"
    assert same(original, got), f"a flip at byte {offset} (^{xor:#x}) loaded something else"
    return "identical"


def test_every_byte_flip_is_refused_or_harmless(small_run, tmp_path):
    """A sweep over the whole file (a stride) and every byte of the pickle's head, where
    the format, the digest and their keys live. ATTNBOOK_FULL_FLIP_SWEEP=1: every byte."""
    _, path = small_run
    data = path.read_bytes()
    original = load_checkpoint(path)
    assert original["digest"].startswith("sha256:") and list(original)[:2] == [
        "format",
        "digest",
    ]
    if os.environ.get("ATTNBOOK_FULL_FLIP_SWEEP"):
        offsets = range(len(data))
    else:
        offsets = sorted(set(range(0, len(data), 97)) | set(range(0, 400)))
    seen = {"refused": 0, "identical": 0}
    for offset in offsets:
        for xor in (0x01, 0xFF):
            seen[flip_outcome(data, offset, xor, tmp_path / "flipped.pt", original)] += 1
    assert seen["refused"] > 0 and seen["identical"] > 0  # zip padding and headers: harmless


def test_the_middle_of_the_file_of_the_issue_is_refused_as_damaged(small_run, tmp_path):
    _, path = small_run
    data = bytearray(path.read_bytes())
    data[middle_of_a_tensor(path)] ^= 0x01  # only the digest can tell
    (tmp_path / "c.pt").write_bytes(data)
    with pytest.raises(CheckpointError, match=r"c\.pt is damaged"):
        load_checkpoint(tmp_path / "c.pt")


def test_digest_is_order_free_and_sees_every_value(small_run):
    _, path = small_run
    ckpt = load_checkpoint(path)
    digest = ckpt["digest"]
    assert checkpoint_digest(dict(reversed(list(ckpt.items())))) == digest
    changed = load_checkpoint(path)
    changed["history"][0]["train_loss"] = float(changed["history"][0]["train_loss"]) + 1e-9
    assert checkpoint_digest(changed) != digest
    changed = load_checkpoint(path)
    changed["vocab"]["tgt"]["symbols"][-1] = "d"
    assert checkpoint_digest(changed) != digest
    changed = load_checkpoint(path)
    key = next(iter(changed["model"]))
    changed["model"][key] = changed["model"][key].double()  # same values, another dtype
    assert checkpoint_digest(changed) != digest


def test_a_checkpoint_without_a_digest_still_loads_but_not_with_a_stray_entry(small_run, tmp_path):
    _, path = small_run
    ckpt = load_checkpoint(path)
    del ckpt["digest"]
    torch.save(ckpt, tmp_path / "old.pt")
    assert same(load_checkpoint(tmp_path / "old.pt"), ckpt)
    ckpt["digesu"] = "sha256:0"  # what a flipped byte in the key "digest" gives
    torch.save(ckpt, tmp_path / "stray.pt")
    with pytest.raises(CheckpointError, match="stray.pt is damaged.*digesu"):
        load_checkpoint(tmp_path / "stray.pt")


@pytest.mark.parametrize("where", ["model", "optimizer"])
@pytest.mark.parametrize("value", [float("nan"), INF])
def test_a_non_finite_weight_is_refused_on_load(small_run, tmp_path, where, value):
    _, path = small_run
    ckpt = load_checkpoint(path)
    state = ckpt["model"] if where == "model" else ckpt["optimizer"]["state"][0]
    name = next(k for k, t in state.items() if torch.is_tensor(t) and t.is_floating_point())
    state[name].view(-1)[0] = value
    ckpt["digest"] = checkpoint_digest(ckpt)  # a well-formed file, with a bad number
    torch.save(ckpt, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match=rf"bad\.pt holds a non-finite .* in {where}/"):
        load_checkpoint(tmp_path / "bad.pt")


@pytest.mark.parametrize("where", ["model", "optimizer"])
def test_a_non_finite_weight_is_refused_on_save(small_run, tmp_path, where):
    trainer, path = small_run
    before = path.read_bytes()
    if where == "model":
        param = next(trainer.model.parameters())
    else:
        param = next(iter(trainer.optimizer.state.values()))["exp_avg"]
    keep = param.detach().clone()
    try:
        with torch.no_grad():
            param.view(-1)[0] = float("nan")
        with pytest.raises(NonFiniteLossError, match=f"non-finite .* in {where}/"):
            trainer.save_checkpoint()
        with pytest.raises(NonFiniteLossError):
            trainer.save_checkpoint(tmp_path / "other.pt")
    finally:
        with torch.no_grad():
            param.copy_(keep)
    assert path.read_bytes() == before and not (tmp_path / "other.pt").exists()


# --------------------------------------------------------------------------------------------
# the command line: never exit 0 with a non-finite model or output
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("issue40cli") / "copy"
    data = ["--n-train", "100", "--n-val", "10", "--n-test", "10", "--min-len", "2"]
    data += ["--max-len", "4", "--n-symbols", "4", "--batch-size", "16", "--quiet"]
    model = ["--d-model", "8", "--heads", "2", "--d-ff", "16"]
    argv = ["train", "--task", "copy", "--steps", "3", "--out", str(out), *data, *model]
    assert main(argv) == 0
    return out / "checkpoint.pt"


def commands(path: Path, tmp_path: Path):
    return {
        "evaluate": ["evaluate", "--checkpoint", str(path), "--lengths", "3"],
        "translate": ["translate", "--checkpoint", str(path), "abc"],
        "export": ["export", "--checkpoint", str(path), "--out", str(tmp_path / "m.onnx")],
    }


@pytest.mark.parametrize("command", ["evaluate", "translate", "export"])
def test_commands_refuse_a_huge_model_whose_logits_overflow(cli_run, tmp_path, capsys, command):
    ckpt = load_checkpoint(cli_run)
    for name in ckpt["model"]:
        if name.endswith("weight"):
            ckpt["model"][name] = ckpt["model"][name] * 1e30  # finite, but overflows
    ckpt["digest"] = checkpoint_digest(ckpt)
    path = tmp_path / "huge" / "checkpoint.pt"
    path.parent.mkdir()
    torch.save(ckpt, path)
    capsys.readouterr()
    assert main(commands(path, tmp_path)[command]) == 1
    err = capsys.readouterr().err
    assert "NaN or infinite" in err or "export needs" in err, err
    assert not (path.parent / "evaluation.json").exists() and not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("command", ["evaluate", "translate", "export"])
def test_commands_refuse_a_damaged_or_nan_checkpoint(cli_run, tmp_path, capsys, command):
    folder = tmp_path / "run"
    shutil.copytree(cli_run.parent, folder)
    path = folder / "checkpoint.pt"
    data = bytearray(path.read_bytes())
    data[middle_of_a_tensor(path)] ^= 0xFF
    path.write_bytes(data)
    capsys.readouterr()
    assert main(commands(path, tmp_path)[command]) == 1
    assert "damaged" in capsys.readouterr().err
    ckpt = load_checkpoint(cli_run)
    next(iter(ckpt["model"].values())).view(-1)[0] = float("nan")
    ckpt["digest"] = checkpoint_digest(ckpt)
    torch.save(ckpt, path)
    assert main(commands(path, tmp_path)[command]) == 1
    assert "non-finite" in capsys.readouterr().err
