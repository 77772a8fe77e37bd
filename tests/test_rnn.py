"""attnbook.rnn: the RNN encoder, the fixed-context and attention decoders, Seq2Seq."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook.data import BOS, EOS, PAD, make_loader, make_task
from attnbook.rnn import (
    CELLS,
    AttentionDecoder,
    ContextDecoder,
    RNNEncoder,
    Seq2Seq,
    gradient_by_distance,
)

FAST = settings(max_examples=25, deadline=None)
V_SRC, V_TGT = 11, 9


def right_padded(lengths, vocab=V_SRC, seed=0):
    """``(B, max(lengths))`` random real tokens (ids >= 4), right-padded with PAD."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (len(lengths), max(lengths)), generator=g)
    for i, n in enumerate(lengths):
        src[i, n:] = PAD
    return src


def tgt_batch(b, t, seed=1):
    g = torch.Generator().manual_seed(seed)
    tgt = torch.randint(4, V_TGT, (b, t), generator=g)
    tgt[:, 0] = BOS
    return tgt


def model(attention=None, cell="gru", bidirectional=False, seed=0, **kw):
    torch.manual_seed(seed)
    return Seq2Seq(
        V_SRC,
        V_TGT,
        emb_dim=8,
        hidden_dim=12,
        cell=cell,
        bidirectional=bidirectional,
        attention=attention,
        **kw,
    ).eval()


def greedy(m, src, max_len):
    """A tiny greedy loop over the decoding interface (independent of attnbook.decode)."""
    with torch.no_grad():
        state = m.init_decoder(src)
        tokens = torch.full((src.shape[0], 1), BOS)
        weights = []
        for _ in range(max_len):
            logits, state, attention = m.decode_step(tokens, state)
            tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
            cross = attention.get("cross")  # (B, 1, 1, S): one layer, one head
            weights.append(None if cross is None else cross[:, 0, 0])  # (B, S)
    return tokens[:, 1:], weights


@pytest.fixture(autouse=True)
def one_thread():
    """These matrices are tiny: one CPU thread is fastest (threads only add synchronisation),
    and it keeps the learning tests' floats independent of the machine's core count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


MODELS = [
    (None, "gru", False),
    ("additive", "gru", False),
    ("dot", "lstm", False),
    ("general", "rnn", True),
    ("additive", "lstm", True),
    (None, "lstm", True),
    ("scaled_dot", "gru", False),
]


# ------------------------------------------------------------------------------ the encoder


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_encoder_returns_every_state_and_the_final_one(cell, bidirectional):
    torch.manual_seed(0)
    enc = RNNEncoder(V_SRC, 8, 6, cell=cell, bidirectional=bidirectional)
    lengths = [5, 2, 3]
    outputs, final = enc(right_padded(lengths))
    d = 12 if bidirectional else 6
    assert enc.output_dim == d and outputs.shape == (3, 5, d)
    h = final[0] if cell == "lstm" else final
    assert h.shape == (3, d)
    if cell == "lstm":
        assert final[1].shape == (3, d)
    for i, n in enumerate(lengths):
        assert (outputs[i, n:] == 0).all()  # padding: no state
        torch.testing.assert_close(h[i, :6], outputs[i, n - 1, :6])  # ->h at the true end
        if bidirectional:
            torch.testing.assert_close(h[i, 6:], outputs[i, 0, 6:])  # <-h at the start


@pytest.mark.parametrize("bidirectional", [False, True])
def test_encoder_padding_changes_nothing(bidirectional):
    torch.manual_seed(0)
    enc = RNNEncoder(V_SRC, 8, 6, bidirectional=bidirectional).eval()
    src = right_padded([3, 6])
    alone_out, alone_final = enc(src[:1, :3])
    batch_out, batch_final = enc(src)
    torch.testing.assert_close(batch_out[:1, :3], alone_out)
    torch.testing.assert_close(batch_final[:1], alone_final)


def test_encoder_rejects_bad_sources():
    enc = RNNEncoder(V_SRC, 8, 6)
    with pytest.raises(ValueError, match=r"src must be right-padded .* row 1 .*\[5, 0, 6\]"):
        enc(torch.tensor([[5, 6, 7], [5, PAD, 6]]))
    with pytest.raises(ValueError, match="src row 0 is all padding"):
        enc(torch.tensor([[PAD, PAD], [5, 6]]))
    with pytest.raises(ValueError, match=r"token ids in \[4, 11\], but the vocabulary has 11"):
        enc(torch.tensor([[4, 11]]))
    with pytest.raises(TypeError, match="src must be an integer tensor"):
        enc(torch.ones(2, 3))
    with pytest.raises(ValueError, match="src must have 2 dimensions"):
        enc(torch.tensor([4, 5]))
    with pytest.raises(ValueError, match="at least one sequence"):
        enc(torch.zeros(0, 3, dtype=torch.long))


# ------------------------------------------------------------------------------ Seq2Seq shapes


@pytest.mark.parametrize("attention, cell, bidirectional", MODELS)
def test_shapes_of_training_and_decoding(attention, cell, bidirectional):
    m = model(attention, cell, bidirectional)
    src, tgt_in = right_padded([4, 7, 1]), tgt_batch(3, 5)
    logits = m(src, tgt_in)
    assert logits.shape == (3, 5, V_TGT) and torch.isfinite(logits).all()
    state = m.init_decoder(src)
    assert all(t.shape[0] == 3 for t in state.values())  # batch first
    expected_keys = {"hidden"} | ({"cell"} if cell == "lstm" else set())
    if attention:
        expected_keys |= {"memory", "src_mask"}
        logits2, attention_ = m(src, tgt_in, return_attention=True)
        torch.testing.assert_close(logits2, logits)
        assert list(attention_) == ["cross"] and len(attention_["cross"]) == 1  # one layer
        assert attention_["cross"][0].shape == (3, 1, 5, 7)  # (B, H=1, T, S)
    assert set(state) == expected_keys
    step_logits, state, att = m.decode_step(tgt_in[:, :1], state)
    assert step_logits.shape == (3, V_TGT)
    assert set(att) == ({"cross"} if attention else set())
    if attention:
        assert att["cross"].shape == (3, 1, 1, 7)  # (B, layers=1, H=1, S)


@pytest.mark.parametrize("attention, cell, bidirectional", MODELS)
def test_teacher_forcing_equals_step_by_step_decoding(attention, cell, bidirectional):
    m = model(attention, cell, bidirectional)
    src, tgt_in = right_padded([6, 3]), tgt_batch(2, 5)
    with torch.no_grad():
        if attention:
            logits, attention_ = m(src, tgt_in, return_attention=True)
            weights = attention_["cross"][0][:, 0]  # (B, T, S)
        else:
            logits, weights = m(src, tgt_in), None
        state = m.init_decoder(src)
        for t in range(5):
            step, state, att = m.decode_step(tgt_in[:, : t + 1], state)
            torch.testing.assert_close(step, logits[:, t])
            if attention:
                torch.testing.assert_close(att["cross"][:, 0, 0], weights[:, t])


@pytest.mark.parametrize("attention, cell, bidirectional", MODELS)
def test_source_padding_changes_nothing(attention, cell, bidirectional):
    m = model(attention, cell, bidirectional)
    src, tgt_in = right_padded([3, 8]), tgt_batch(2, 4)
    with torch.no_grad():
        alone = m(src[:1, :3], tgt_in[:1])
        batched = m(src, tgt_in)
    torch.testing.assert_close(batched[:1], alone)


# ------------------------------------------------------------------------------ attention weights


@FAST
@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=5),
    score=st.sampled_from(["additive", "dot", "general", "scaled_dot"]),
    seed=st.integers(0, 1000),
)
def test_weights_sum_to_one_over_real_tokens_and_are_zero_on_padding(lengths, score, seed):
    m = model(score, seed=seed % 7)
    src = right_padded(lengths, seed=seed)
    real = src != PAD  # (B, S)
    with torch.no_grad():
        _, attention = m(src, tgt_batch(len(lengths), 4, seed), return_attention=True)
        weights = attention["cross"][0][:, 0]  # (B, T, S)
        _, step_weights = greedy(m, src, 3)
    for w in [weights] + [s[:, None] for s in step_weights]:  # (B, T, S)
        assert torch.isfinite(w).all()
        assert (w[~real[:, None, :].expand_as(w)] == 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:2]))
        assert (w >= 0).all()


def test_attention_decoder_formula_by_hand():
    """logits_t = W_o tanh(W_c [c_t; s_t]), c_t = sum_s a_ts h_s, a_t = softmax(s_t . h_s)."""
    torch.manual_seed(0)
    dec = AttentionDecoder(V_TGT, 5, 6, memory_dim=6, score="dot")
    memory, s0 = torch.randn(2, 4, 6), torch.randn(2, 6)
    mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    tgt_in = tgt_batch(2, 3)
    logits, _, weights = dec(tgt_in, s0, memory, mask)
    s, _ = dec.rnn(dec.embedding(tgt_in), s0[None])  # s_1..s_T
    scores = (s @ memory.transpose(1, 2)).masked_fill(~mask[:, None], float("-inf"))
    a = torch.softmax(scores, dim=-1)
    c = a @ memory
    expected = dec.out(torch.tanh(dec.combine(torch.cat([c, s], -1))))
    torch.testing.assert_close(weights, a)
    torch.testing.assert_close(logits, expected)


# ------------------------------------------------------------------------------ the bottleneck


@pytest.mark.parametrize("cell", CELLS)
def test_the_decoder_starts_from_the_context_vector(cell):
    """s_0 = C = h_S, the encoder's last state, unchanged (unidirectional encoder)."""
    m = model(None, cell)
    src = right_padded([5, 2])
    outputs, final = m.encoder(src)
    state = m.init_decoder(src)
    h = final[0] if cell == "lstm" else final
    torch.testing.assert_close(state["hidden"], h)
    torch.testing.assert_close(state["hidden"][1], outputs[1, 1])  # h_S of row 1 (S=2)
    if cell == "lstm":
        torch.testing.assert_close(state["cell"], final[1])
    tgt_in = tgt_batch(2, 3)
    logits, _ = m.decoder(tgt_in, final)  # ContextDecoder(tgt, C)
    torch.testing.assert_close(m(src, tgt_in), logits)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_the_context_decoder_sees_only_h_S(cell, bidirectional):
    """Change h_1..h_{S-1}, keep h_S: the fixed-context model's output does not move; the
    attention model's does (so the check can fail)."""
    src, tgt_in = right_padded([6, 6, 6]), tgt_batch(3, 5)
    g = torch.Generator().manual_seed(5)
    for attention in (None, "additive"):
        m = model(attention, cell, bidirectional)
        with torch.no_grad():
            memory, final = m.encoder(src)
            mask = m.encoder.source_mask(src)
            changed = memory.clone()
            changed[:, :-1] += torch.randn(changed[:, :-1].shape, generator=g)
            before, _, _ = m.decode(tgt_in, m.decoder_state(memory, final, mask))
            after, _, _ = m.decode(tgt_in, m.decoder_state(changed, final, mask))
        if attention is None:
            assert torch.equal(before, after)
            assert not isinstance(m.decoder, AttentionDecoder)
        else:
            assert (before - after).abs().max() > 1e-3


def test_the_context_model_state_holds_only_s0():
    m = model(None, "gru")
    assert set(m.init_decoder(right_padded([3]))) == {"hidden"}
    assert isinstance(m.decoder, ContextDecoder)


# ------------------------------------------------------------------------------ beam interface


@pytest.mark.parametrize("attention, cell, bidirectional", MODELS[:3])
def test_reorder_state_selects_and_repeats_rows(attention, cell, bidirectional):
    m = model(attention, cell, bidirectional)
    src = right_padded([4, 2, 5])
    state = m.init_decoder(src)
    index = torch.tensor([2, 2, 0])
    picked = m.reorder_state(state, index)
    for name, t in picked.items():
        torch.testing.assert_close(t, state[name][index])
    tokens = torch.full((3, 1), BOS)
    with torch.no_grad():
        full, _, _ = m.decode_step(tokens, state)
        sub, _, _ = m.decode_step(tokens, picked)
    torch.testing.assert_close(sub, full[index])


@pytest.mark.parametrize("attention, cell, bidirectional", MODELS[:4])
def test_attnbook_decode_works_for_seq2seq(attention, cell, bidirectional):
    decode = pytest.importorskip("attnbook.decode")
    m = model(attention, cell, bidirectional)
    src = right_padded([5, 3, 4])
    ours, our_weights = greedy(m, src, 6)
    ids = decode.greedy_decode(m, src, bos_id=BOS, eos_id=EOS, max_len=6)
    for row, mine in zip(ids, ours, strict=True):  # equal up to and including EOS
        n = len(row)
        if EOS in mine[:n].tolist():
            n = mine.tolist().index(EOS) + 1
        assert row[:n].tolist() == mine[:n].tolist()
    beam1 = decode.beam_search(m, src, bos_id=BOS, eos_id=EOS, max_len=6, beam_size=1)
    assert torch.equal(beam1, ids)
    beam = decode.beam_search(m, src, bos_id=BOS, eos_id=EOS, max_len=6, beam_size=3)
    assert beam.shape[0] == 3
    if attention:
        ids2, att = decode.greedy_decode(
            m, src, bos_id=BOS, eos_id=EOS, max_len=6, return_attention=True
        )
        assert torch.equal(ids2, ids) and att["cross"].shape == (3, ids.shape[1], 1, 1, 5)
        torch.testing.assert_close(att["cross"][:, 0, 0, 0], our_weights[0])


# ------------------------------------------------------------------------------ arguments


def test_argument_errors():
    with pytest.raises(ValueError, match="cell must be one of"):
        Seq2Seq(5, 5, 4, 4, cell="transformer")
    with pytest.raises(ValueError, match="attention must be None .* or one of"):
        Seq2Seq(5, 5, 4, 4, attention="bahdanau")
    with pytest.raises(ValueError, match="bidirectional encoder's states have 2 \\* hidden_dim"):
        Seq2Seq(5, 5, 4, 4, attention="dot", bidirectional=True)
    with pytest.raises(ValueError, match="attn_dim is the hidden size of the additive score"):
        Seq2Seq(5, 5, 4, 4, attention="general", attn_dim=8)
    with pytest.raises(ValueError, match="pad_id must be a token id below tgt_vocab_size=5"):
        Seq2Seq(9, 5, 4, 4, pad_id=6)
    with pytest.raises(ValueError, match="dropout must be in"):
        Seq2Seq(5, 5, 4, 4, dropout=1.0)
    with pytest.raises(TypeError, match="hidden_dim must be an int"):
        Seq2Seq(5, 5, 4, 4.0)
    m = model(None)
    with pytest.raises(ValueError, match="return_attention=True needs an attention model"):
        m(right_padded([2]), tgt_batch(1, 2), return_attention=True)
    with pytest.raises(
        ValueError, match="src and tgt_in must have the same batch size, got 2 and 1"
    ):
        m(right_padded([2, 2]), tgt_batch(1, 2))
    with pytest.raises(ValueError, match=r"tgt_in holds token ids in \[1, 9\]"):
        m(right_padded([2]), torch.tensor([[BOS, 9]]))
    with pytest.raises(TypeError, match="state must be the dict that init_decoder returns"):
        m.decode_step(torch.tensor([[BOS]]), torch.zeros(1, 12))
    with pytest.raises(ValueError, match=r"state must have shape \(B, H\) = \(2, 12\)"):
        m.decode_step(torch.full((2, 1), BOS), m.init_decoder(right_padded([3])))
    with pytest.raises(TypeError, match="a pair \\(h, c\\)"):
        ContextDecoder(V_TGT, 4, 6, cell="lstm")(tgt_batch(1, 2), torch.zeros(1, 6))
    dec = AttentionDecoder(V_TGT, 4, 6, memory_dim=6)
    with pytest.raises(ValueError, match=r"src_mask must have shape \(B, S\) = \(1, 3\)"):
        dec(
            tgt_batch(1, 2),
            torch.zeros(1, 6),
            torch.zeros(1, 3, 6),
            torch.ones(1, 4, dtype=torch.bool),
        )
    with pytest.raises(TypeError, match="src_mask must be a boolean tensor"):
        dec(tgt_batch(1, 2), torch.zeros(1, 6), torch.zeros(1, 3, 6), torch.ones(1, 3))
    with pytest.raises(ValueError, match="memory must have last dimension memory_dim=6"):
        dec(
            tgt_batch(1, 2),
            torch.zeros(1, 6),
            torch.zeros(1, 3, 5),
            torch.ones(1, 3, dtype=torch.bool),
        )


def test_models_are_deterministic_from_the_seed():
    a, b = model("additive", seed=3), model("additive", seed=3)
    src, tgt_in = right_padded([4, 2]), tgt_batch(2, 3)
    with torch.no_grad():
        assert torch.equal(a(src, tgt_in), b(src, tgt_in))
        assert not torch.equal(a(src, tgt_in), model("additive", seed=4)(src, tgt_in))


# ------------------------------------------------------------------------------ learning


def train_and_score(attention, min_len, max_len, steps, seed=0):
    """Train on `reverse` and return greedy exact-match accuracy on 200 held-out inputs."""
    torch.manual_seed(seed)
    data = make_task(
        "reverse", 2000, 0, 200, seed=seed, min_len=min_len, max_len=max_len, n_symbols=10
    )
    m = Seq2Seq(
        len(data.src_vocab), len(data.tgt_vocab), emb_dim=32, hidden_dim=64, attention=attention
    )
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    loader = make_loader(data.train, data.src_vocab, data.tgt_vocab, batch_size=64, seed=seed)
    step = 0
    while step < steps:
        for batch in loader:
            logits = m(batch.src, batch.tgt_in)
            loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            step += 1
            if step == steps:
                break
    m.eval()
    src = data.src_vocab.encode_batch([s for s, _ in data.test])
    ids, _ = greedy(m, src, max_len + 1)
    predictions = data.tgt_vocab.decode_batch(ids)
    return sum(p == t for p, (_, t) in zip(predictions, data.test, strict=True)) / len(data.test)


@pytest.mark.parametrize("score", ["additive", "general"])
def test_the_attention_model_learns_reverse(score):
    assert train_and_score(score, 3, 6, steps=400) >= 0.9  # seen: 0.965-1.0


def test_the_fixed_context_model_learns_reverse_of_very_short_inputs():
    assert train_and_score(None, 2, 4, steps=400) >= 0.85  # seen: 0.97-0.99


# ------------------------------------------------------------------------------ gradients


@pytest.mark.parametrize("cell", CELLS)
def test_gradient_by_distance_is_the_jacobian_norm(cell):
    torch.manual_seed(0)
    enc = RNNEncoder(V_SRC, 5, 7, cell=cell)
    src = right_padded([6, 6, 6], seed=2)  # no padding
    norms = gradient_by_distance(enc, src)
    assert norms.shape == (6,)

    def final(e):  # (S, E) -> (H,)
        _, last = enc.rnn(e[None])
        return (last[0] if cell == "lstm" else last)[0, 0]

    by_hand = torch.stack(
        [
            torch.autograd.functional.jacobian(final, enc.embedding(row).detach())  # (H, S, E)
            .pow(2)
            .sum((0, 2))
            .sqrt()
            for row in src
        ]
    ).mean(0)  # (S,) by position
    assert torch.allclose(norms, by_hand.flip(0), atol=1e-6)
    assert all(p.grad is None for p in enc.parameters())


def test_gradient_by_distance_vanishes_for_a_plain_rnn():
    torch.manual_seed(0)
    enc = RNNEncoder(V_SRC, 8, 16, cell="rnn")
    norms = gradient_by_distance(enc, right_padded([40] * 4, seed=3))
    assert (norms > 0).all()
    assert norms[-1] < 1e-4 * norms[0]  # the first of 40 inputs barely reaches h_S


def test_gradient_by_distance_checks_its_arguments():
    torch.manual_seed(0)
    enc = RNNEncoder(V_SRC, 5, 7)
    with pytest.raises(TypeError, match="encoder"):
        gradient_by_distance(torch.nn.GRU(5, 7), right_padded([3]))
    with pytest.raises(ValueError, match="unidirectional"):
        gradient_by_distance(RNNEncoder(V_SRC, 5, 7, bidirectional=True), right_padded([3]))
    with pytest.raises(ValueError, match="padding"):
        gradient_by_distance(enc, right_padded([3, 2]))
    with pytest.raises(ValueError, match="src"):
        gradient_by_distance(enc, torch.full((1, 3), V_SRC))
