"""attnbook.train: schedules, the label-smoothed loss, the trainer, checkpoints, resume, stops."""

import math
import os
import signal
import sys

import pytest
import torch
import torch.nn.functional as F

import attnbook.train as train_module
from attnbook.data import PAD, Seq2SeqDataset, make_task
from attnbook.rnn import Seq2Seq
from attnbook.train import (
    CheckpointError,
    NonFiniteLossError,
    TrainConfig,
    Trainer,
    atomic_save,
    constant_lr,
    cosine_lr,
    exact_match,
    label_smoothed_loss,
    load_checkpoint,
    noam_lr,
    token_accuracy,
    train_model,
)
from attnbook.transformer import Transformer
from attnbook.utils import get_device


@pytest.fixture(scope="module")
def task():
    return make_task("copy", 300, 40, 40, seed=0, min_len=2, max_len=5, n_symbols=5)


def transformer(task, seed=0, dropout=0.0, **kw):
    torch.manual_seed(seed)
    return Transformer(
        len(task.src_vocab),
        len(task.tgt_vocab),
        d_model=16,
        n_heads=2,
        n_layers=1,
        d_ff=32,
        dropout=dropout,
        max_len=64,
        **kw,
    )


def quiet(**kw):
    kw.setdefault("batch_size", 16)
    kw.setdefault("eval_every", 10_000)
    kw.setdefault("log_every", 1)
    return TrainConfig(progress=False, device="cpu", **kw)


def params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def train_losses(history):
    return [row["train_loss"] for row in history if row["train_loss"] is not None]


# --------------------------------------------------------------------------------------------
# schedules
# --------------------------------------------------------------------------------------------


def test_noam_lr_is_the_formula_of_the_paper():
    d, w = 512, 4000
    for step in (1, 10, 3999, 4000, 4001, 16000):
        want = d**-0.5 * min(step**-0.5, step * w**-1.5)
        assert noam_lr(step, d, w) == pytest.approx(want, rel=1e-12)
    assert noam_lr(w, d, w) == pytest.approx((d * w) ** -0.5)  # the peak
    assert noam_lr(2, d, w) == pytest.approx(2 * noam_lr(1, d, w))  # linear warm-up
    assert noam_lr(4 * w, d, w) == pytest.approx(noam_lr(w, d, w) / 2)  # 1/sqrt decay
    assert noam_lr(100, d, w, scale=2.0) == pytest.approx(2 * noam_lr(100, d, w))
    peak = max(range(1, 3 * w), key=lambda s: noam_lr(s, d, w))
    assert peak == w


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: noam_lr(0, 512, 4000), "step"),
        (lambda: noam_lr(1, 0, 4000), "d_model"),
        (lambda: noam_lr(1, 512, 0), "warmup"),
        (lambda: noam_lr(1, 512, 10, scale=-1.0), "scale"),
        (lambda: cosine_lr(1, 1e-3, 10, 0), "total_steps"),
        (lambda: constant_lr(1, 0.0), "lr"),
    ],
)
def test_schedules_name_the_bad_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
    with pytest.raises(TypeError, match="step"):
        noam_lr(1.5, 512, 4000)


def test_constant_and_cosine_schedules():
    assert constant_lr(1, 0.01) == 0.01
    assert constant_lr(5, 0.01, warmup=10) == pytest.approx(0.005)
    assert constant_lr(50, 0.01, warmup=10) == 0.01
    lr, w, total, floor = 0.01, 10, 110, 0.1
    assert cosine_lr(5, lr, w, total, floor) == pytest.approx(0.005)  # warming up
    assert cosine_lr(w, lr, w, total, floor) == pytest.approx(lr)  # the peak
    assert cosine_lr(60, lr, w, total, floor) == pytest.approx(lr * (floor + (1 - floor) / 2))
    assert cosine_lr(total, lr, w, total, floor) == pytest.approx(lr * floor)
    assert cosine_lr(total + 50, lr, w, total, floor) == pytest.approx(lr * floor)


def test_trainer_steps_the_schedule_once_per_update(task):
    trainer = Trainer(
        transformer(task), task, config=quiet(steps=7, schedule="noam", warmup=4, lr_scale=2.0)
    )
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(noam_lr(1, 16, 4, 2.0))
    trainer.fit()
    # update k ran with noam_lr(k); after 7 updates the 8th's rate is set
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(noam_lr(8, 16, 4, 2.0))
    assert [r["lr"] for r in trainer.history] == pytest.approx(
        [noam_lr(k, 16, 4, 2.0) for k in range(1, 8)]
    )


# --------------------------------------------------------------------------------------------
# loss and accuracy
# --------------------------------------------------------------------------------------------


def test_label_smoothed_loss_equals_a_hand_computation():
    logits = torch.tensor(
        [[[2.0, 0.5, -1.0, 0.0], [0.1, 0.2, 0.3, 3.0], [9.0, 9.0, 9.0, 9.0]]]
    )  # (B=1, T=3, V=4)
    targets = torch.tensor([[1, 3, 0]])  # the last is padding
    eps, v = 0.2, 4
    per_token = []
    for t in range(2):  # the real tokens
        row = logits[0, t].tolist()
        log_z = math.log(sum(math.exp(x) for x in row))
        log_p = [x - log_z for x in row]
        q = [(1 - eps) * (c == targets[0, t].item()) + eps / v for c in range(v)]
        per_token.append(-sum(qc * lp for qc, lp in zip(q, log_p, strict=True)))
    want = sum(per_token) / 2
    got = label_smoothed_loss(logits, targets, pad_id=0, smoothing=eps)
    assert got.item() == pytest.approx(want, rel=1e-6)
    assert label_smoothed_loss(logits, targets, 0, eps, reduction="sum").item() == pytest.approx(
        sum(per_token), rel=1e-6
    )
    torch_loss = F.cross_entropy(
        logits.flatten(0, 1), targets.flatten(), ignore_index=0, label_smoothing=eps
    )
    assert got.item() == pytest.approx(torch_loss.item(), rel=1e-6)
    plain = label_smoothed_loss(logits, targets, pad_id=0, smoothing=0.0)
    assert plain.item() == pytest.approx(
        F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=0).item(), rel=1e-6
    )


def test_label_smoothed_loss_ignores_padding_positions():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 7, generator=g)
    targets = torch.randint(1, 7, (3, 5), generator=g)
    targets[0, 3:] = PAD
    targets[2, 1:] = PAD
    before = label_smoothed_loss(logits, targets, PAD, 0.1)
    changed = logits.clone()
    changed[targets == PAD] = 100.0 * torch.randn(int((targets == PAD).sum()), 7, generator=g)
    assert label_smoothed_loss(changed, targets, PAD, 0.1).item() == pytest.approx(before.item())


def test_loss_and_accuracy_check_their_arguments():
    logits, targets = torch.randn(2, 3, 5), torch.ones(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="agree in B and T"):
        label_smoothed_loss(logits, targets[:, :2])
    with pytest.raises(TypeError, match="targets"):
        label_smoothed_loss(logits, targets.float())
    with pytest.raises(ValueError, match="smoothing"):
        label_smoothed_loss(logits, targets, smoothing=1.0)
    with pytest.raises(ValueError, match="reduction"):
        label_smoothed_loss(logits, targets, reduction="none")
    with pytest.raises(ValueError, match="logits"):
        token_accuracy(logits[0], targets)


def test_token_accuracy_and_exact_match_by_hand():
    targets = torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0]])  # target + EOS, padded
    logits = F.one_hot(torch.tensor([[5, 4, 2, 1], [7, 2, 3, 3]]), 8).float()
    assert token_accuracy(logits, targets, pad_id=0) == pytest.approx(4 / 5)
    predictions = torch.tensor([[5, 6, 2], [7, 3, 2]])  # after BOS, greedy
    assert exact_match(predictions, targets, 0).tolist() == [True, False]
    assert exact_match(torch.tensor([[5, 6, 2, 0, 0, 0]]), targets[:1], 0).tolist() == [True]
    assert exact_match(torch.tensor([[5, 6]]), targets[:1], 0).tolist() == [False]  # no EOS


# --------------------------------------------------------------------------------------------
# configuration and set-up
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"steps": -1}, "steps"),
        ({"steps": 10, "epochs": 2}, "steps or epochs"),
        ({"batch_size": 0}, "batch_size"),
        ({"schedule": "linear"}, "schedule"),
        ({"optimizer": "sgd"}, "optimizer"),
        ({"label_smoothing": 1.0}, "label_smoothing"),
        ({"lr": 0.0}, "lr"),
        ({"grad_clip": -1.0}, "grad_clip"),
        ({"device": "tpu"}, "device"),
        ({"schedule": "cosine", "max_seconds": 5.0}, "cosine"),
        ({"betas": (0.9, 1.5)}, "betas"),
    ],
)
def test_config_rejects_bad_values_naming_them(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        TrainConfig(**kwargs)


def test_trainer_checks_its_arguments(task):
    with pytest.raises(TypeError, match="model"):
        Trainer("not a model", task)
    with pytest.raises(TypeError, match="must be a seq2seq model"):
        Trainer(torch.nn.Linear(2, 2), task)
    with pytest.raises(ValueError, match="src_vocab"):
        Trainer(transformer(task), task.train, task.val)
    with pytest.raises(TypeError, match="config"):
        Trainer(transformer(task), task, config={"steps": 3})


def test_device_is_chosen_cuda_then_mps_then_cpu_with_an_override(task):
    assert Trainer(transformer(task), task, config=quiet(steps=1)).device.type == "cpu"
    auto = Trainer(transformer(task), task, config=TrainConfig(steps=1, progress=False))
    assert auto.device == get_device("auto")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda"):
            Trainer(transformer(task), task, config=TrainConfig(device="cuda"))
    if auto.device.type == "cpu":
        assert auto.amp_dtype is None  # off on the CPU unless asked for


def test_length_of_a_run_by_epochs_and_by_time(task):
    trainer = Trainer(transformer(task), task, config=quiet(epochs=2, log_every=100))
    trainer.fit()
    assert trainer.step == 2 * len(trainer.order) == 2 * (300 // 16)
    trainer = Trainer(
        transformer(task), task, config=quiet(steps=10**6, max_seconds=0.3, log_every=100)
    )
    trainer.fit()
    # stopped by the clock (never by a wall-time bound here: a loaded machine is slow)
    assert 0 < trainer.step < 10**6 and trainer.elapsed >= 0.3


# --------------------------------------------------------------------------------------------
# learning for real
# --------------------------------------------------------------------------------------------


def test_train_model_learns_the_copy_task(task):
    model = transformer(task, norm_first=True)
    history = train_model(
        model, task, steps=250, batch_size=32, schedule="cosine", lr=1e-2, warmup=20
    )
    final = history[-1]
    assert final["step"] == 250
    assert final["exact_match"] >= 0.9, history
    assert final["token_accuracy"] > 0.95
    evaluated = [r for r in history if r["exact_match"] is not None]
    assert len(evaluated) == 4 and evaluated[0]["exact_match"] < final["exact_match"]
    assert train_losses(history)[-1] < train_losses(history)[0] / 2


def test_trainer_trains_an_rnn_with_attention(task):
    torch.manual_seed(0)
    model = Seq2Seq(
        len(task.src_vocab), len(task.tgt_vocab), emb_dim=16, hidden_dim=32, attention="additive"
    )
    trainer = Trainer(
        model,
        task,
        config=quiet(
            steps=120, batch_size=32, schedule="constant", lr=1e-2, warmup=0, eval_every=120
        ),
    )
    history = trainer.fit()
    assert history[-1]["exact_match"] >= 0.5
    assert trainer.d_model == 32  # noam would use hidden_dim


def test_progress_bar_and_its_silence(task, capfd, monkeypatch):
    # the bar fits the terminal: tqdm reads COLUMNS where stderr is not one (pytest-xdist's
    # workers set it to 80, which cuts "exact=" off), so give it room for every field
    monkeypatch.setenv("COLUMNS", "200")
    Trainer(transformer(task), task, config=quiet(steps=3)).fit()
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    Trainer(
        transformer(task),
        task,
        config=TrainConfig(steps=4, batch_size=16, device="cpu", eval_every=2, log_every=2),
    ).fit()
    out, err = capfd.readouterr()
    assert "training" in err and "loss=" in err and "exact=" in err
    assert "step 2:" in out + err


def test_cpu_autocast_runs_the_mixed_precision_path(task):
    model = transformer(task)
    seen = []
    model.output.register_forward_hook(lambda m, i, o: seen.append(o.dtype) if m.training else None)
    trainer = Trainer(model, task, config=quiet(steps=4, amp=True))
    assert trainer.amp_dtype == torch.bfloat16 and not trainer.scaler.is_enabled()
    history = trainer.fit()
    assert seen and set(seen) == {torch.bfloat16}
    assert all(math.isfinite(x) for x in train_losses(history))
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_torch_compile_option_is_used_for_training(task, monkeypatch):
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda m: compiled.append(m) or m)
    Trainer(transformer(task), task, config=quiet(steps=1, compile=True)).fit()
    assert len(compiled) == 1


# --------------------------------------------------------------------------------------------
# checkpoints and resume
# --------------------------------------------------------------------------------------------


def test_resume_continues_exactly(task, tmp_path):
    n = 12
    config = {"steps": 2 * n, "schedule": "noam", "warmup": 5, "lr_scale": 3.0, "log_every": 1}
    straight = Trainer(transformer(task, dropout=0.1), task, config=quiet(**config))
    straight_history = straight.fit()

    first = Trainer(
        transformer(task, dropout=0.1),
        task,
        config=quiet(**{**config, "steps": n}, out_dir=str(tmp_path)),
    )
    first.fit()
    torch.manual_seed(1234)  # a different RNG state, then resume
    second = Trainer(
        transformer(task, seed=99, dropout=0.1), task, config=quiet(**config, out_dir=str(tmp_path))
    )
    second.load_checkpoint(tmp_path / "checkpoint.pt")
    assert second.step == n
    resumed_history = second.fit()
    assert second.step == 2 * n
    assert train_losses(resumed_history) == pytest.approx(train_losses(straight_history), abs=1e-6)
    assert train_losses(resumed_history)[-1] == pytest.approx(
        train_losses(straight_history)[-1], abs=1e-6
    )
    torch.testing.assert_close(params(second.model), params(straight.model), rtol=0, atol=1e-6)


def _send_on_forward(model, call, action):
    """Make the model's training forward pass number ``call`` run ``action`` first."""
    original, count = model.forward, [0]

    def forward(*args, **kwargs):
        if model.training:
            count[0] += 1
            if count[0] == call:
                action()
        return original(*args, **kwargs)

    model.forward = forward


def test_ctrl_c_saves_a_checkpoint_and_resume_is_exact(task, tmp_path):
    config = {"steps": 16, "schedule": "cosine", "lr": 5e-3, "warmup": 3, "eval_every": 5}
    straight = Trainer(transformer(task, dropout=0.1), task, config=quiet(**config))
    straight.fit()

    model = transformer(task, dropout=0.1)
    _send_on_forward(model, 7, lambda: os.kill(os.getpid(), signal.SIGINT))
    stopped = Trainer(model, task, config=quiet(**config, out_dir=str(tmp_path)))
    # A shell that starts the tests in the background ignores SIGINT: the trainer must put
    # back whatever handler it found, whichever that is.
    before = signal.getsignal(signal.SIGINT)
    stopped.fit()  # no KeyboardInterrupt escapes
    assert stopped.interrupted == "SIGINT" and stopped.step == 7
    assert signal.getsignal(signal.SIGINT) is before  # restored
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 7

    resumed = Trainer(
        transformer(task, seed=5, dropout=0.1), task, config=quiet(**config, out_dir=str(tmp_path))
    )
    resumed.load_checkpoint(tmp_path / "checkpoint.pt")
    resumed.fit()
    assert resumed.step == 16 and resumed.interrupted is None
    torch.testing.assert_close(params(resumed.model), params(straight.model), rtol=0, atol=1e-6)


def test_a_keyboard_interrupt_mid_step_saves_the_last_complete_step(task, tmp_path):
    model = transformer(task)

    def interrupt():
        raise KeyboardInterrupt

    _send_on_forward(model, 4, interrupt)
    trainer = Trainer(model, task, config=quiet(steps=10, out_dir=str(tmp_path)))
    trainer.fit()
    assert trainer.interrupted == "KeyboardInterrupt" and trainer.step == 3
    ckpt = load_checkpoint(tmp_path / "checkpoint.pt")
    assert ckpt["step"] == 3 and ckpt["order"]["position"] == 3


def test_checkpoint_holds_everything_needed(task, tmp_path):
    trainer = Trainer(
        transformer(task),
        task,
        config=quiet(steps=3, out_dir=str(tmp_path)),
        meta={"note": "hello"},
    )
    trainer.fit()
    ckpt = load_checkpoint(tmp_path / "checkpoint.pt")
    for key in (
        "model",
        "optimizer",
        "scheduler",
        "scaler",
        "rng",
        "order",
        "step",
        "config",
        "vocab",
        "history",
        "meta",
    ):
        assert key in ckpt, key
    assert ckpt["step"] == 3 and ckpt["meta"] == {"note": "hello"}
    assert ckpt["config"]["steps"] == 3
    assert ckpt["vocab"]["src"] == task.src_vocab.to_dict()
    assert set(ckpt["rng"]) >= {"python", "numpy", "torch"}


def test_atomic_save_interrupted_part_way_keeps_the_previous_checkpoint(
    task, tmp_path, monkeypatch
):
    trainer = Trainer(transformer(task), task, config=quiet(steps=2, out_dir=str(tmp_path)))
    trainer.fit()
    path = tmp_path / "checkpoint.pt"
    before = path.read_bytes()
    real_save = torch.save

    def crash_mid_way(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        f.seek(0)
        f.truncate(100)  # half-written file...
        raise OSError("disk full")  # ...and the crash

    monkeypatch.setattr(torch, "save", crash_mid_way)
    trainer.step = 99
    with pytest.raises(OSError, match="disk full"):
        trainer.save_checkpoint()
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert load_checkpoint(path)["step"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]  # no temp file


def test_atomic_save_replaces_the_file(tmp_path):
    path = tmp_path / "sub" / "x.pt"
    atomic_save({"a": 1}, path)
    atomic_save({"a": 2}, path)
    assert torch.load(path)["a"] == 2


def test_load_checkpoint_rejects_what_is_not_a_checkpoint(task, tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(os.urandom(300))
    with pytest.raises(CheckpointError, match="corrupt or not a checkpoint"):
        load_checkpoint(corrupt)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="not an attnbook"):
        load_checkpoint(foreign)


def test_resume_into_a_different_model_is_refused(task, tmp_path):
    Trainer(transformer(task), task, config=quiet(steps=2, out_dir=str(tmp_path))).fit()
    path = tmp_path / "checkpoint.pt"
    wider = Transformer(
        len(task.src_vocab),
        len(task.tgt_vocab),
        d_model=32,
        n_heads=2,
        n_layers=1,
        d_ff=32,
        dropout=0.0,
        max_len=64,
    )
    with pytest.raises(CheckpointError, match="does not fit"):
        Trainer(wider, task, config=quiet(steps=4)).load_checkpoint(path)
    rnn = Seq2Seq(len(task.src_vocab), len(task.tgt_vocab), 8, 8)
    with pytest.raises(CheckpointError, match="Transformer, not a Seq2Seq"):
        Trainer(rnn, task, config=quiet(steps=4)).load_checkpoint(path)
    with pytest.raises(CheckpointError, match="batch_size"):
        Trainer(transformer(task), task, config=quiet(steps=4, batch_size=8)).load_checkpoint(path)


# --------------------------------------------------------------------------------------------
# a non-finite loss
# --------------------------------------------------------------------------------------------


def test_a_nan_loss_stops_with_the_step_and_saves_nothing_corrupt(task, tmp_path):
    model = transformer(task)
    original = model.forward

    def forward(src, tgt_in, *args, **kwargs):
        logits = original(src, tgt_in, *args, **kwargs)
        return logits * float("nan") if model.training and forward.calls >= 5 else logits

    forward.calls = 0

    def counting(src, tgt_in, *args, **kwargs):
        forward.calls += model.training
        return forward(src, tgt_in, *args, **kwargs)

    model.forward = counting
    trainer = Trainer(model, task, config=quiet(steps=10, eval_every=2, out_dir=str(tmp_path)))
    with pytest.raises(NonFiniteLossError, match="at step 5") as info:
        trainer.fit()
    assert info.value.step == 5 and "checkpoint" in str(info.value)
    assert trainer.step == 4
    assert all(torch.isfinite(p).all() for p in model.parameters())  # the update never ran
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 4


def _nan_from_training_call(model, first_bad: int):
    original = model.forward

    def forward(src, tgt_in, *args, **kwargs):
        logits = original(src, tgt_in, *args, **kwargs)
        forward.calls += model.training
        return logits * float("nan") if model.training and forward.calls >= first_bad else logits

    forward.calls = 0
    model.forward = forward
    return model


def test_a_nan_loss_between_two_syncs_is_found_at_the_next_and_names_its_step(task, tmp_path):
    model = _nan_from_training_call(transformer(task), 3)
    config = quiet(steps=10, log_every=5, eval_every=10, out_dir=str(tmp_path))
    with pytest.raises(NonFiniteLossError, match="at step 3; .* read, at step 5") as info:
        Trainer(model, task, config=config).fit()
    assert (info.value.step, info.value.found_at) == (3, 5)
    assert not (tmp_path / "checkpoint.pt").exists()  # nothing saved from that model


_SYNCS = ("item", "tolist", "__bool__", "__float__", "__int__", "numpy")


@pytest.fixture
def no_host_sync(monkeypatch):
    """Tensor -> Python number conversions called from the package raise (torch's own
    internals, such as the optimiser's step counter on the CPU, are not the package's)."""

    def guard(name):
        original = getattr(torch.Tensor, name)

        def guarded(self, *args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("attnbook"):
                raise AssertionError(f"host sync: Tensor.{name} called in {caller}")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, guarded)

    def install():
        for name in _SYNCS:
            guard(name)

    return install


@pytest.mark.parametrize("kind", ["transformer", "rnn-attention"])
def test_a_training_step_makes_no_host_sync(task, no_host_sync, kind):
    if kind == "transformer":
        model = transformer(task, dropout=0.1)
    else:
        model = Seq2Seq(len(task.src_vocab), len(task.tgt_vocab), 8, 16, attention="additive")
    trainer = Trainer(model, task, config=quiet(steps=4, grad_clip=1.0))
    batch = trainer.order.peek()
    trainer.train_step(batch)  # the first step of a fit checks the model's arguments
    trainer.step += 1
    no_host_sync()
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(2):
        assert trainer.train_step(batch, sync=False) is None
        trainer.step += 1
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert len(trainer._pending) == 2
    with pytest.raises(AssertionError, match="host sync"):  # the guard does catch a sync
        trainer.train_step(batch, sync=True)


def test_the_losses_read_once_per_log_interval_are_the_losses_of_every_step(task):
    every = Trainer(transformer(task), task, config=quiet(steps=12, log_every=1)).fit()
    batched = Trainer(transformer(task), task, config=quiet(steps=12, log_every=4)).fit()
    losses = [r["train_loss"] for r in every]
    assert [r["train_loss"] for r in batched] == [sum(losses[i : i + 4]) / 4 for i in (0, 4, 8)]


# --------------------------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------------------------


def test_evaluate_reports_loss_token_accuracy_and_exact_match(task):
    trainer = Trainer(transformer(task), task, config=quiet(steps=1, eval_examples=10))
    metrics = trainer.evaluate()
    assert set(metrics) == {"val_loss", "token_accuracy", "exact_match"}
    assert metrics["val_loss"] > 0 and 0 <= metrics["exact_match"] <= 1
    everything = trainer.evaluate(
        Seq2SeqDataset(task.test, task.src_vocab, task.tgt_vocab), max_examples=None
    )
    assert 0 <= everything["token_accuracy"] <= 1
    no_val = Trainer(
        transformer(task),
        task.train,
        [],
        quiet(steps=1),
        src_vocab=task.src_vocab,
        tgt_vocab=task.tgt_vocab,
    )
    with pytest.raises(ValueError, match="no data to evaluate"):
        no_val.evaluate()


def test_distributed_helpers_fall_back_to_one_process(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert train_module.init_distributed() == (0, 1)


def test_train_model_hands_the_model_back_on_the_device_it_came_on(task, monkeypatch):
    # No GPU here: the stand-in trainer "moves" the model to CUDA as the real one does on a GPU
    # machine, and model.to records the moves. The chapter's CPU tensors must work with the
    # model afterwards, also when training stops with an error.
    import attnbook.train.trainer as trainer_module  # where train_model finds Trainer

    class TrainsOnCuda:
        fail = False

        def __init__(self, model, task, config):
            self.model = model.to(torch.device("cuda"))

        def fit(self):
            if self.fail:
                raise FloatingPointError("the loss became NaN")
            return [{"step": 1}]

    monkeypatch.setattr(trainer_module, "Trainer", TrainsOnCuda)
    for fail in (False, True):
        TrainsOnCuda.fail = fail
        model, moves = transformer(task), []
        model.to = lambda device, m=model, seen=moves: seen.append(torch.device(device)) or m
        try:
            train_model(model, task, steps=1)
        except FloatingPointError:
            assert fail
        else:
            assert not fail
        assert moves == [torch.device("cuda"), torch.device("cpu")]


def test_train_model_returns_its_trainer_to_resume_with_more_steps(task):
    """Chapter 06's exercise 5: a 2n-step run, and an n-step run resumed from its trainer's
    state with 2n steps, give the same weights (a constant schedule: the rate does not depend
    on the run's length)."""
    from attnbook.train import train_model

    n, opts = 6, {"schedule": "constant", "lr": 3e-3, "warmup": 3, "eval_every": 4}
    straight = transformer(task)
    train_model(straight, task, steps=2 * n, **opts)
    model = transformer(task)
    history, trainer = train_model(model, task, steps=n, return_trainer=True, **opts)
    assert trainer.model is model and trainer.step == n == history[-1]["step"]
    longer = transformer(task, seed=99)  # other weights: the checkpoint replaces them
    resumed = Trainer(longer, task, config=TrainConfig(steps=2 * n, **opts, progress=False))
    resumed.load_checkpoint(trainer.state_dict())
    resumed.fit()
    torch.testing.assert_close(params(longer), params(straight), rtol=0, atol=1e-6)
    assert not torch.equal(params(longer), params(model))  # model itself stays at step n
    with pytest.raises(TypeError, match="return_trainer must be a bool, got str 'yes'"):
        train_model(model, task, steps=1, return_trainer="yes")
