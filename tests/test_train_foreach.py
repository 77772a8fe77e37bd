"""The Trainer's optimiser update: torch's fused AdamW/Adam kernel where the device has one
(on a CPU here), else the multi-tensor ``foreach`` update; and the padded training batches.

- ``foreach=True`` gives bitwise the weights of torch's per-tensor loop (``torch.equal``).
- The fused kernel computes the same update with another order of floating-point operations:
  after 12 steps its weights and moments agree with the loop's to a small relative tolerance,
  far below what one step moves a weight, and it is not a different update (every tensor
  moved, and by the same amount to that tolerance).
- A checkpoint written by the foreach optimiser (this package before the fused one) resumes
  under the fused one (``tests/test_train.py`` checks that a run resumes exactly).
- :class:`attnbook.train.batches.PaddedData` gives bitwise the batches of ``collate``.
"""

import random

import pytest
import torch

from attnbook.data import Seq2SeqDataset, collate, make_task
from attnbook.rnn import Seq2Seq
from attnbook.train import TrainConfig, Trainer
from attnbook.train.batches import PaddedData
from attnbook.train.optimizer import update_kernel
from attnbook.transformer import Transformer


@pytest.fixture(scope="module")
def task():
    return make_task("reverse", 200, 20, 20, seed=3, min_len=2, max_len=6, n_symbols=6)


def transformer(task):
    torch.manual_seed(0)
    return Transformer(
        len(task.src_vocab),
        len(task.tgt_vocab),
        d_model=16,
        n_heads=2,
        n_layers=1,
        d_ff=32,
        dropout=0.1,  # dropout draws from the RNG: both runs must draw the same numbers
        max_len=32,
    )


def rnn(task):
    torch.manual_seed(0)
    return Seq2Seq(len(task.src_vocab), len(task.tgt_vocab), 8, 16, attention="additive")


def trained(make_model, task, config: TrainConfig, kernel: str) -> Trainer:
    torch.manual_seed(1)
    trainer = Trainer(make_model(task), task, config=config)
    assert all(g["fused"] is True and not g["foreach"] for g in trainer.optimizer.param_groups)
    if kernel != "fused":  # torch reads the flags at every step(); no state exists yet
        for group in trainer.optimizer.param_groups:
            group["fused"], group["foreach"] = None, kernel == "foreach"
    trainer.fit()
    return trainer


CASES = [
    # the defaults: AdamW with weight decay, gradient clipping, the default schedule
    (transformer, {}),
    (rnn, {"optimizer": "adam", "weight_decay": 0.01, "grad_clip": None, "schedule": "noam"}),
    (transformer, {"grad_clip": 0.05, "weight_decay": 0.1}),  # clipping at every step
]
IDS = ["transformer-defaults", "rnn-adam-noam", "transformer-clipped"]


def config(steps: int = 12, **settings) -> TrainConfig:
    return TrainConfig(
        steps=steps, batch_size=16, eval_every=10_000, progress=False, device="cpu", **settings
    )


def moments(trainer: Trainer) -> list[tuple[torch.Tensor, torch.Tensor]]:
    state = trainer.optimizer.state_dict()["state"].values()
    return [(s["exp_avg"], s["exp_avg_sq"]) for s in state]


@pytest.mark.parametrize("make_model, settings", CASES, ids=IDS)
def test_foreach_gives_bitwise_the_weights_of_the_loop(make_model, task, settings):
    fast = trained(make_model, task, config(**settings), "foreach")
    loop = trained(make_model, task, config(**settings), "loop")
    assert fast.step == loop.step == 12
    for a, b in zip(fast.model.parameters(), loop.model.parameters(), strict=True):
        assert torch.equal(a, b)
    for (m1, v1), (m2, v2) in zip(moments(fast), moments(loop), strict=True):
        assert torch.equal(m1, m2) and torch.equal(v1, v2)


def rounding_only(name: str) -> bool:
    """The key projection's bias: it adds ``q . b`` to every score of a query, which softmax
    ignores, so its gradient is zero but for rounding, and Adam (which divides by the
    gradient's size) turns that rounding into steps of the learning rate's size. Where two
    kernels round differently, this tensor goes its own way without changing the model."""
    return name.endswith("w_k.bias")


@pytest.mark.parametrize("make_model, settings", CASES, ids=IDS)
def test_fused_gives_the_weights_of_the_loop_to_rounding(make_model, task, settings):
    start = dict((n, p.detach().clone()) for n, p in make_model(task).named_parameters())
    fused = trained(make_model, task, config(**settings), "fused")
    loop = trained(make_model, task, config(**settings), "loop")
    assert fused.step == loop.step == 12
    pairs = zip(fused.model.named_parameters(), loop.model.parameters(), strict=True)
    compared = 0
    for (name, a), b in pairs:
        moved = (b - start[name]).abs().max().item()
        assert moved > 1e-6  # every tensor trained, so the comparison is not vacuous
        if not rounding_only(name):
            # rounding differences compounded over 12 steps: 1e-4 of the distance moved
            assert (a - b).abs().max().item() <= 1e-4 * moved, name
            compared += 1
    assert compared >= len(start) - 3  # at most the three attentions' key biases left out
    # the same function, key biases included: the logits of a validation batch agree
    batch = collate([fused.val_data[i] for i in range(len(fused.val_data))])
    fused.model.eval(), loop.model.eval()
    with torch.no_grad():
        got, want = (m.model(batch.src, batch.tgt_in) for m in (fused, loop))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    for (m1, v1), (m2, v2), (name, _) in zip(
        moments(fused), moments(loop), fused.model.named_parameters(), strict=True
    ):
        if not rounding_only(name):
            torch.testing.assert_close(m1, m2, rtol=1e-3, atol=1e-7)
            torch.testing.assert_close(v1, v2, rtol=1e-3, atol=1e-10)


def test_the_kernel_falls_back_to_foreach_without_a_fused_one():
    assert update_kernel([torch.zeros(2, requires_grad=True)]) == {"fused": True, "foreach": None}
    # integer tensors (and devices without the kernel) have no fused update
    assert update_kernel([torch.zeros(2, dtype=torch.long)]) == {"fused": None, "foreach": True}
    assert update_kernel([]) == {"fused": None, "foreach": True}


def test_a_foreach_checkpoint_resumes_under_the_fused_kernel(task):
    """A checkpoint written by the foreach optimiser (before the fused one, or on a device
    without it) resumes: the groups switch to the fused kernel, the moments and step counts
    are those saved, and training goes on to the weights of an unbroken foreach run to
    rounding."""
    total = config(steps=6)
    first = trained(transformer, task, config(steps=3), "foreach")
    saved = first.state_dict()
    assert all(g["foreach"] is True and not g["fused"] for g in saved["optimizer"]["param_groups"])
    resumed = Trainer(transformer(task), task, config=total)
    resumed.load_checkpoint(saved)
    assert all(g["fused"] is True and not g["foreach"] for g in resumed.optimizer.param_groups)
    for (m1, v1), (m2, v2) in zip(moments(resumed), moments(first), strict=True):
        assert torch.equal(m1, m2) and torch.equal(v1, v2)
    steps = [s["step"] for s in resumed.optimizer.state_dict()["state"].values()]
    assert all(float(s) == 3.0 for s in steps)
    resumed.fit()
    unbroken = trained(transformer, task, total, "foreach")
    assert resumed.step == unbroken.step == 6
    pairs = zip(resumed.model.named_parameters(), unbroken.model.parameters(), strict=True)
    for (name, a), b in pairs:
        if not rounding_only(name):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_padded_batches_are_bitwise_those_of_collate(task):
    data = Seq2SeqDataset(task.train, task.src_vocab, task.tgt_vocab)
    padded = PaddedData(data, data.src_vocab.pad_id)
    lengths = {len(s) for s, _ in data.items}
    assert len(lengths) > 1  # the batches need padding, so the check is not vacuous
    rng = random.Random(0)
    for size in (1, 5, 16, len(data)):
        indices = rng.sample(range(len(data)), size)
        got, want = padded.batch(indices), collate([data[i] for i in indices])
        for name, a, b in zip(want._fields, got, want, strict=True):
            assert a.dtype == b.dtype and torch.equal(a, b), name
