"""attnbook.decode: greedy decoding and beam search, on the Transformer and on a toy model."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.decode import beam_search, greedy_decode, length_penalty_factor, sequence_log_prob
from attnbook.transformer import Transformer

PAD, BOS, EOS = 0, 1, 2


# ------------------------------------------------------------------------------ a toy model


class ToyModel(nn.Module):
    """A third model of the seq2seq protocol (attnbook.seq2seq), neither RNN nor Transformer:
    the next-token logits are a fixed random function of (step, last two tokens) plus a
    per-example bias computed from the source, so that every hypothesis can be scored by hand.
    """

    max_len = None

    def __init__(self, vocab=5, max_steps=6, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.pad_id, self.vocab = PAD, vocab
        self.table = nn.Parameter(2 * torch.randn(max_steps, vocab, vocab, vocab, generator=g))
        self.src_bias = nn.Parameter(torch.randn(vocab, vocab, generator=g))
        self.init_calls = 0

    def src_mask(self, src):
        return torch.ones(src.shape[0], 1, src.shape[1], dtype=torch.bool)  # no padding

    def encode(self, src):
        return self.src_bias[src]  # (B, S, V)

    def init_decoder(self, src, use_cache=False):
        self.init_calls += 1
        return {"bias": self.encode(src).mean(1), "src_len": torch.full((len(src),), src.shape[1])}

    def forward(self, src, tgt, *, return_attention=False):
        bias = self.encode(src).mean(1)
        steps = [self.logits(tgt[:, : t + 1], bias) for t in range(tgt.shape[1])]
        return torch.stack(steps, dim=1)  # (B, T, V)

    def logits(self, tokens, bias):
        prev = tokens[:, -2] if tokens.shape[1] > 1 else torch.full_like(tokens[:, -1], BOS)
        return self.table[tokens.shape[1] - 1, prev, tokens[:, -1]] + bias

    def decode_step(self, tokens, state):
        logits = self.logits(tokens, state["bias"])  # (B, V)
        cross = torch.softmax(logits[:, :3], dim=-1)  # (B, 3), fake weights
        return logits, state, {"cross": cross[:, None, None]}  # (B, layers=1, H=1, 3)

    def reorder_state(self, state, index):
        return {k: v.index_select(0, index) for k, v in state.items()}


def exhaustive_best(model, src, max_len, alpha):
    """Score every possible output (ending at its first EOS, or at max_len) by hand."""
    best = []
    for row in src:
        bias = model.src_bias[row].mean(0, keepdim=True)
        best_score, best_seq = -math.inf, None
        for n in range(1, max_len + 1):
            for seq in itertools.product(range(model.vocab), repeat=n):
                if EOS in seq[:-1] or (n < max_len and seq[-1] != EOS):
                    continue
                tokens, log_p = torch.tensor([[BOS]]), 0.0
                for y in seq:
                    log_p += F.log_softmax(model.logits(tokens, bias), -1)[0, y].item()
                    tokens = torch.cat([tokens, torch.tensor([[y]])], dim=1)
                score = log_p / length_penalty_factor(n, alpha)
                if score > best_score:
                    best_score, best_seq = score, list(seq)
        best.append(best_seq)
    return best


def padded(rows):
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_a_wide_beam_finds_the_exhaustive_best(alpha):
    model = ToyModel()
    src = torch.tensor([[3, 4, 1], [0, 2, 2], [4, 4, 4]])
    expected = padded(exhaustive_best(model, src, max_len=4, alpha=alpha))
    got = beam_search(
        model, src, bos_id=BOS, eos_id=EOS, max_len=4, beam_size=400, length_penalty=alpha
    )
    assert got.tolist() == expected.tolist()


def test_beam_search_works_with_any_model_of_the_protocol_and_stacks_attention():
    model = ToyModel(seed=1)
    src = torch.tensor([[3, 4, 1, 2], [0, 2, 2, 1]])
    ids, att = beam_search(
        model, src, bos_id=BOS, eos_id=EOS, max_len=5, beam_size=3, return_attention=True
    )
    assert model.init_calls == 1  # encoder once
    assert att["cross"].shape == (2, ids.shape[1], 1, 1, 3)
    is_eos = (ids == EOS).long()
    live = (is_eos.cumsum(1) - is_eos) == 0  # up to and at EOS
    torch.testing.assert_close(att["cross"][:, :, 0, 0].sum(-1), live.float())  # 0 after EOS
    g_ids, g_att = greedy_decode(
        model, src, bos_id=BOS, eos_id=EOS, max_len=5, return_attention=True
    )
    assert g_att["cross"].shape == (2, g_ids.shape[1], 1, 1, 3)


# ------------------------------------------------------------------------------ on a Transformer


def random_transformer(seed=0):
    torch.manual_seed(seed)
    return Transformer(9, 9, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=16).eval()


def test_beam_size_one_is_greedy():
    for seed in range(3):
        model = random_transformer(seed)
        src = torch.randint(3, 9, (6, 5), generator=torch.Generator().manual_seed(seed))
        greedy, g_att = greedy_decode(
            model, src, bos_id=BOS, eos_id=EOS, max_len=10, return_attention=True
        )
        beam, b_att = beam_search(
            model, src, bos_id=BOS, eos_id=EOS, max_len=10, beam_size=1, return_attention=True
        )
        assert torch.equal(beam, greedy)
        for name in g_att:
            torch.testing.assert_close(b_att[name], g_att[name])


def test_batched_decoding_equals_one_example_at_a_time():
    model = random_transformer(1)
    src = torch.randint(3, 9, (4, 6), generator=torch.Generator().manual_seed(5))
    src[2, 4:] = PAD
    for decode in (greedy_decode, beam_search):
        together = decode(model, src, bos_id=BOS, eos_id=EOS, max_len=8)
        for i in range(4):
            alone = decode(model, src[i : i + 1], bos_id=BOS, eos_id=EOS, max_len=8)
            row = together[i, : alone.shape[1]]
            assert torch.equal(row, alone[0]), decode.__name__
            assert (together[i, alone.shape[1] :] == PAD).all()


def test_outputs_end_at_eos_and_are_padded_after_it():
    model = ToyModel(seed=3)
    src = torch.randint(0, 5, (12, 3), generator=torch.Generator().manual_seed(0))
    for decode in (greedy_decode, beam_search):
        ids = decode(model, src, bos_id=BOS, eos_id=EOS, max_len=6)
        lengths = []
        for row in ids.tolist():
            n = row.index(EOS) + 1 if EOS in row else len(row)
            assert all(t == PAD for t in row[n:]), row
            lengths.append(n)
        assert ids.shape[1] == max(lengths) <= 6  # as wide as the longest
        assert min(lengths) < max(lengths)  # some stopped early


def test_transformer_attention_per_step_shapes():
    model = random_transformer(0)
    src = torch.randint(3, 9, (2, 5))
    ids, att = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=6, return_attention=True)
    n = ids.shape[1]
    assert att["cross"].shape == (2, n, 2, 2, 5)  # (B, L, layers, H, S)
    assert att["decoder_self"].shape == (2, n, 2, 2, n)  # (B, L, layers, H, L)
    for i in range(n):  # step i attends over BOS and the i tokens before
        assert (att["decoder_self"][:, i, ..., i + 1 :] == 0).all()


def test_model_mode_restored_no_gradients_and_encoder_runs_once():
    model = random_transformer(0).train()
    calls = []
    model.encoder.register_forward_hook(lambda *args: calls.append(1))
    src = torch.randint(3, 9, (3, 5))
    for decode in (greedy_decode, beam_search):
        calls.clear()
        ids = decode(model, src, bos_id=BOS, eos_id=EOS, max_len=6)
        assert model.training and not ids.requires_grad and len(calls) == 1
    model.eval()
    greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=3)
    assert not model.training
    # deterministic: dropout is off while decoding
    assert torch.equal(
        beam_search(model.train(), src, bos_id=BOS, eos_id=EOS, max_len=6),
        beam_search(model.eval(), src, bos_id=BOS, eos_id=EOS, max_len=6),
    )


# ------------------------------------------------------------------------------ key/value cache


def padded_sources(seed, b=5, s=7, vocab=9):
    """A batch of sources of different lengths (3 to s tokens), right-padded."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (b, s), generator=g)
    lengths = torch.randint(3, s + 1, (b,), generator=g)
    lengths[0] = s
    src[torch.arange(s)[None, :] >= lengths[:, None]] = PAD
    return src


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("share_embeddings", [False, True])
def test_the_cache_gives_the_same_ids_and_attention_as_the_full_prefix(
    norm_first, share_embeddings
):
    for seed in range(3):
        torch.manual_seed(seed)
        model = Transformer(
            9,
            9,
            d_model=16,
            n_heads=2,
            n_layers=2,
            d_ff=32,
            max_len=16,
            norm_first=norm_first,
            share_embeddings=share_embeddings,
        ).eval()
        src = padded_sources(seed)
        for decode, extra in ((greedy_decode, {}), (beam_search, {"beam_size": 3})):
            cached, att_c = decode(
                model, src, bos_id=BOS, eos_id=EOS, max_len=12, return_attention=True, **extra
            )
            full, att_f = decode(
                model,
                src,
                bos_id=BOS,
                eos_id=EOS,
                max_len=12,
                return_attention=True,
                use_cache=False,
                **extra,
            )
            assert torch.equal(cached, full), (seed, decode.__name__)
            assert att_c.keys() == att_f.keys() == {"cross", "decoder_self"}
            for name in att_f:
                assert att_c[name].shape == att_f[name].shape
                torch.testing.assert_close(att_c[name], att_f[name], rtol=1e-5, atol=1e-6)
            # the default is the cache
            assert torch.equal(
                decode(model, src, bos_id=BOS, eos_id=EOS, max_len=12, **extra), cached
            )


EIGHT = torch.tensor([8])


def test_the_cache_runs_one_position_per_step():
    model = random_transformer(0)
    src = padded_sources(0)
    lengths = []
    model.decoder.layers[0].feed_forward.register_forward_hook(
        lambda module, args, out: lengths.append(args[0].shape[1])
    )
    # token 8 is never produced: its logit is -inf, so decoding runs to max_len
    model.output.register_forward_hook(lambda module, args, out: out.index_fill(-1, EIGHT, -1e9))
    greedy_decode(model, src, bos_id=BOS, eos_id=8, max_len=6)
    assert lengths == [1] * 6
    lengths.clear()
    greedy_decode(model, src, bos_id=BOS, eos_id=8, max_len=6, use_cache=False)
    assert lengths == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("use_cache", [True, False])
def test_models_without_a_cache_decode_the_same_with_either_flag(use_cache):
    from attnbook.rnn import Seq2Seq

    torch.manual_seed(0)
    rnn = Seq2Seq(9, 9, emb_dim=8, hidden_dim=16, attention="additive").eval()
    src = padded_sources(1)
    for decode in (greedy_decode, beam_search):
        ids = decode(rnn, src, bos_id=BOS, eos_id=EOS, max_len=8, use_cache=use_cache)
        assert torch.equal(ids, decode(rnn, src, bos_id=BOS, eos_id=EOS, max_len=8))
        toy = ToyModel(seed=2)  # init_decoder ignores use_cache
        ids = decode(toy, src % 5, bos_id=BOS, eos_id=EOS, max_len=5, use_cache=use_cache)
        assert torch.equal(ids, decode(toy, src % 5, bos_id=BOS, eos_id=EOS, max_len=5))


M = random_transformer(0)
SRC = torch.randint(3, 9, (2, 4))


@pytest.mark.parametrize(
    "bad, err, match",
    [
        (
            lambda: greedy_decode(M, SRC.float(), bos_id=1, eos_id=2, max_len=5),
            TypeError,
            "src must be an integer tensor",
        ),
        (
            lambda: greedy_decode(M, SRC[0], bos_id=1, eos_id=2, max_len=5),
            ValueError,
            r"src must have 2 dimensions \(B, S\) of token ids, got shape \(4,\)",
        ),
        (
            lambda: greedy_decode(M, SRC[:, :0], bos_id=1, eos_id=2, max_len=5),
            ValueError,
            "at least one token",
        ),
        (
            lambda: greedy_decode(M, SRC, bos_id=1, eos_id=2, max_len=0),
            ValueError,
            "max_len must be >= 1, got 0",
        ),
        (
            lambda: greedy_decode(M, SRC, bos_id=1.0, eos_id=2, max_len=5),
            TypeError,
            "bos_id must be an int",
        ),
        (
            lambda: beam_search(M, SRC, bos_id=1, eos_id=2, max_len=5, beam_size=0),
            ValueError,
            "beam_size must be >= 1, got 0",
        ),
        (
            lambda: beam_search(M, SRC, bos_id=1, eos_id=2, max_len=5, length_penalty=-1.0),
            ValueError,
            "length_penalty must be >= 0",
        ),
        (
            lambda: beam_search(nn.Linear(2, 2), SRC, bos_id=1, eos_id=2, max_len=5),
            TypeError,
            r"model must be a seq2seq model .*lacks \['pad_id', 'max_len', 'src_mask'",
        ),
        (
            lambda: greedy_decode(M, SRC + 20, bos_id=1, eos_id=2, max_len=5),
            ValueError,
            "src holds token id",
        ),
        (
            lambda: greedy_decode(M, SRC, bos_id=1, eos_id=2, max_len=20, use_cache=False),
            ValueError,
            "tokens has length 17 .* max_len=16",
        ),
        (
            lambda: greedy_decode(M, SRC, bos_id=1, eos_id=2, max_len=20),
            ValueError,
            "tokens has length 17, but the model was built with max_len=16: the positional "
            "encoding and the key/value cache hold at most max_len positions",
        ),
        (
            lambda: beam_search(M, SRC, bos_id=1, eos_id=2, max_len=5, use_cache=1),
            TypeError,
            r"use_cache must be a bool \(True: key/value cache, False: re-run the whole prefix "
            r"each step\), got int 1",
        ),
        (
            lambda: greedy_decode(M, SRC, bos_id=1, eos_id=2, max_len=5, use_cache="yes"),
            TypeError,
            "use_cache must be a bool .* got str 'yes'",
        ),
    ],
)
def test_bad_arguments_get_clear_errors(bad, err, match):
    with pytest.raises(err, match=match):
        bad()


# ------------------------------------------------------------------------------ learning

V, MIN_LEN, MAX_LEN = 12, 2, 6


def copy_batch(n, generator):
    """The copy task: src = x EOS, tgt = BOS x EOS, x of 2..6 tokens from 3..11, right-padded."""
    lengths = torch.randint(MIN_LEN, MAX_LEN + 1, (n,), generator=generator)
    tokens = torch.randint(3, V, (n, MAX_LEN), generator=generator)
    src = torch.full((n, MAX_LEN + 1), PAD)
    tgt = torch.full((n, MAX_LEN + 2), PAD)
    for i, n_tok in enumerate(lengths.tolist()):
        src[i, :n_tok], src[i, n_tok] = tokens[i, :n_tok], EOS
        tgt[i, 0], tgt[i, 1 : n_tok + 1], tgt[i, n_tok + 1] = BOS, tokens[i, :n_tok], EOS
    return src, tgt


def test_a_small_transformer_learns_to_copy_exactly():
    torch.manual_seed(0)
    model = Transformer(
        V,
        V,
        d_model=32,
        n_heads=2,
        n_layers=1,
        d_ff=64,
        dropout=0.0,
        max_len=16,
        share_embeddings=True,
        tie_output=True,
    )
    steps = 400
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=5e-3, total_steps=steps, pct_start=0.1
    )
    g = torch.Generator().manual_seed(1)
    seen = set()
    for _ in range(steps):
        src, tgt = copy_batch(64, g)
        seen.update(map(tuple, src.tolist()))
        logits = model(src, tgt[:, :-1])  # teacher forcing
        loss = F.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
    src, tgt = copy_batch(300, torch.Generator().manual_seed(99))
    held_out = torch.tensor([tuple(row) not in seen for row in src.tolist()])
    src, tgt = src[held_out], tgt[held_out]
    assert len(src) >= 100  # unseen in training (short ones all were)
    expected = tgt[:, 1:]  # x EOS PAD...
    for decode in (greedy_decode, beam_search):
        out = decode(model, src, bos_id=BOS, eos_id=EOS, max_len=MAX_LEN + 2)
        width = out.shape[1]
        assert width == MAX_LEN + 1  # the longest: 6 + EOS
        exact = (out == expected[:, :width]).all(dim=1)
        assert exact.float().mean().item() == 1.0, f"{decode.__name__}: {exact.float().mean():.3f}"
    # the cross-attention of the last layer looks at the token being copied
    ids, att = greedy_decode(
        model, src[:20], bos_id=BOS, eos_id=EOS, max_len=MAX_LEN + 2, return_attention=True
    )
    looked_at = att["cross"][:, :, -1].mean(2).argmax(-1)  # (B, L): source position
    real = ids != PAD
    diagonal = torch.arange(ids.shape[1]).expand_as(ids)
    assert (looked_at == diagonal)[real].float().mean() > 0.8


def test_sequence_log_prob_equals_the_step_by_step_scores():
    from attnbook.rnn import Seq2Seq

    torch.manual_seed(0)
    models = [random_transformer(2), Seq2Seq(9, 9, emb_dim=8, hidden_dim=12, attention="additive")]
    src = torch.randint(3, 9, (5, 6), generator=torch.Generator().manual_seed(7))
    for model in models:
        model.train()
        ids = beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len=7, beam_size=3)
        got = sequence_log_prob(model, src, ids, bos_id=BOS)
        assert model.training  # mode restored
        with torch.no_grad():  # the slow way: step by step
            model.eval()
            state, tokens = model.init_decoder(src), torch.full((5, 1), BOS)
            want = torch.zeros(5)
            for t in range(ids.shape[1]):
                logits, state, _ = model.decode_step(tokens, state)
                step = F.log_softmax(logits, -1).gather(1, ids[:, t : t + 1])[:, 0]
                want += step * (ids[:, t] != PAD)
                tokens = torch.cat([tokens, ids[:, t : t + 1]], dim=1)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        greedy = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=7)
        assert got.shape == (5,) and torch.isfinite(got).all()
        assert (sequence_log_prob(model, src, greedy, bos_id=BOS) <= 0).all()


def test_sequence_log_prob_names_bad_arguments():
    model = random_transformer(0)
    src = torch.randint(3, 9, (2, 4))
    with pytest.raises(ValueError, match=r"ids must be \(B=2, L >= 1\)"):
        sequence_log_prob(model, src, torch.ones(3, 4, dtype=torch.long), bos_id=BOS)
    with pytest.raises(TypeError, match="ids"):
        sequence_log_prob(model, src, torch.ones(2, 4), bos_id=BOS)
    with pytest.raises(TypeError, match="pad_id"):
        sequence_log_prob(nn.Linear(2, 2), src, src, bos_id=BOS)


# ------------------------------------------------------------------------------ devices


class _Reached(Exception):
    """Raised by the probe with the devices of the tensors the model was given."""


class _ProbeOnMeta(nn.Module):
    """A model whose parameters live on the meta device (standing in for a GPU, which these
    machines lack): it records the devices of the tensors a decoding function hands it."""

    pad_id, max_len = PAD, None

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(3, device="meta"))

    def src_mask(self, src):
        raise _Reached([src.device])

    def encode(self, src):
        raise _Reached([src.device])

    def init_decoder(self, src, use_cache=False):
        raise _Reached([src.device])

    def decode_step(self, tokens, state):
        raise _Reached([tokens.device])

    def reorder_state(self, state, index):
        return state

    def forward(self, src, tgt_in):
        raise _Reached([src.device, tgt_in.device])


@pytest.mark.parametrize(
    "call",
    [
        lambda m, src: greedy_decode(m, src, bos_id=BOS, eos_id=EOS, max_len=3),
        lambda m, src: beam_search(m, src, bos_id=BOS, eos_id=EOS, max_len=3, beam_size=2),
        lambda m, src: sequence_log_prob(m, src, torch.tensor([[3, EOS], [4, EOS]]), bos_id=BOS),
    ],
    ids=["greedy_decode", "beam_search", "sequence_log_prob"],
)
def test_decoding_moves_cpu_inputs_to_the_models_device(call):
    with pytest.raises(_Reached) as reached:
        call(_ProbeOnMeta(), torch.tensor([[3, 4], [4, 3]]))  # CPU tensors, as chapters make
    assert [d.type for d in reached.value.args[0]] == ["meta"] * len(reached.value.args[0])


def test_model_device_is_where_the_parameters_are():
    from attnbook.utils import model_device

    assert model_device(_ProbeOnMeta()).type == "meta"
    assert model_device(ToyModel()).type == "cpu"
    assert model_device(nn.ReLU()).type == "cpu"  # no parameters: the CPU
    buffers_only = nn.Module()
    buffers_only.register_buffer("table", torch.zeros(2, device="meta"))
    assert model_device(buffers_only).type == "meta"
