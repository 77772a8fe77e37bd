"""The Trainer's multi-tensor (``foreach=True``) optimiser gives bitwise the weights of
torch's per-tensor loop, so switching it on changed no chapter's output.

Each case trains two copies of one model on one task, one with the Trainer as it is and one
with its optimiser's groups set back to ``foreach=False`` (the loop, torch's CPU default), and
compares every parameter and every optimiser moment with ``torch.equal``: no tolerance.
"""

import pytest
import torch

from attnbook.data import make_task
from attnbook.rnn import Seq2Seq
from attnbook.train import TrainConfig, Trainer
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


def trained(make_model, task, config: TrainConfig, foreach: bool) -> Trainer:
    torch.manual_seed(1)
    trainer = Trainer(make_model(task), task, config=config)
    assert all(g["foreach"] is True for g in trainer.optimizer.param_groups)
    if not foreach:  # torch reads the flag at every step()
        for group in trainer.optimizer.param_groups:
            group["foreach"] = False
    trainer.fit()
    return trainer


@pytest.mark.parametrize(
    "make_model, settings",
    [
        # the defaults: AdamW with weight decay, gradient clipping, the default schedule
        (transformer, {}),
        (rnn, {"optimizer": "adam", "weight_decay": 0.01, "grad_clip": None, "schedule": "noam"}),
        (transformer, {"grad_clip": 0.05, "weight_decay": 0.1}),  # clipping at every step
    ],
    ids=["transformer-defaults", "rnn-adam-noam", "transformer-clipped"],
)
def test_foreach_optimiser_gives_bitwise_the_weights_of_the_loop(make_model, task, settings):
    config = TrainConfig(
        steps=12, batch_size=16, eval_every=10_000, progress=False, device="cpu", **settings
    )
    start = [p.detach().clone() for p in make_model(task).parameters()]
    fast = trained(make_model, task, config, foreach=True)
    loop = trained(make_model, task, config, foreach=False)
    assert fast.step == loop.step == 12
    moved = 0
    for before, a, b in zip(start, fast.model.parameters(), loop.model.parameters(), strict=True):
        assert torch.equal(a, b)
        moved += not torch.equal(a, before)
    assert moved == len(start)  # every tensor trained, so the comparison is not vacuous
    for a, b in zip(
        fast.optimizer.state_dict()["state"].values(),
        loop.optimizer.state_dict()["state"].values(),
        strict=True,
    ):
        assert torch.equal(a["exp_avg"], b["exp_avg"])
        assert torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])


def test_a_resumed_run_keeps_the_foreach_optimiser(task):
    config = TrainConfig(steps=3, batch_size=16, progress=False, device="cpu")
    first = Trainer(transformer(task), task, config=config)
    first.fit()
    saved = first.state_dict()
    for group in saved["optimizer"]["param_groups"]:
        assert group["foreach"] is True
    # a checkpoint saved by an older version holds foreach=None: resuming switches it on
    for group in saved["optimizer"]["param_groups"]:
        group["foreach"] = None
    second = Trainer(transformer(task), task, config=config)
    second.load_checkpoint(saved)
    assert all(g["foreach"] is True for g in second.optimizer.param_groups)
