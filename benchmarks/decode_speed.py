"""Decoding speed on a CPU: greedy decoding and beam search with the Transformer's key/value
cache (``use_cache=True``, the default) against the full-prefix path (``use_cache=False``).

The model of issue 18: :class:`attnbook.Transformer` with d_model 128, 4 heads, 2 + 2 layers,
d_ff 512 (random weights, eval mode), a batch of 8 sources of 16 to 24 tokens with padding.

1. Greedy decoding forced to run 64, 128, 256 and 512 tokens: ``eos_id`` is the vocabulary
   size, a token the model can never produce, so no sequence stops early. Milliseconds per
   generated token (the best of ``--repeats`` runs, :func:`attnbook.utils.best_time`, the
   encoder included), the speedup, and whether the ids are identical.
2. Beam search (beam 4, 64 tokens, forced the same way): identical hypotheses with and without
   the cache, and the time of each.

The cache runs one new position through the decoder per token, so its time per token should
stay about flat as the output grows; the full-prefix path re-runs all ``t`` positions at step
``t``, so its time per token grows with the length.

Run from the repository root (about five minutes)::

    .venv/bin/python benchmarks/decode_speed.py

It writes ``benchmarks/results/decode_speed.{md,json}``. ``--help`` lists the options. Other
processes on the machine slow everything down: the load average before the run is recorded.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from _machine import machine_info, measured_on, run_command

from attnbook.decode import beam_search, greedy_decode
from attnbook.transformer import Transformer
from attnbook.utils import best_time

RESULTS = Path(__file__).resolve().parent / "results"
VOCAB, PAD, BOS = 32, 0, 1
SIZES = {"d_model": 128, "n_heads": 4, "n_layers": 2, "d_ff": 512}
# the proof targets of issue 18
MIN_SPEEDUP_AT_256 = 5.0
MAX_FLATNESS_256_VS_64 = 1.5


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512])
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--repeats", type=int, default=5, help="timed runs per setting (best kept)")
    p.add_argument(
        "--slow-repeats",
        type=int,
        default=2,
        help="timed runs of the full-prefix path at 512 tokens and more (each takes long)",
    )
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--beam-length", type=int, default=64)
    p.add_argument("--out", type=Path, default=RESULTS)
    return p.parse_args(argv)


def make_model_and_batch(batch_size: int, max_len: int) -> tuple[Transformer, torch.Tensor]:
    torch.manual_seed(0)
    model = Transformer(VOCAB, VOCAB, dropout=0.0, max_len=max_len, **SIZES).eval()
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(16, 25, (batch_size,), generator=g)
    src = torch.randint(3, VOCAB, (batch_size, int(lengths.max())), generator=g)
    src[torch.arange(src.shape[1])[None, :] >= lengths[:, None]] = PAD  # right padding
    return model, src


def greedy_row(model, src, n: int, repeats: int, slow_repeats: int) -> dict:
    """Greedy decoding of exactly ``n`` tokens, cached and full-prefix: ms/token and ids."""
    never = VOCAB  # an id outside the vocabulary: no sequence ever ends early

    def run(use_cache: bool) -> torch.Tensor:
        return greedy_decode(model, src, bos_id=BOS, eos_id=never, max_len=n, use_cache=use_cache)

    ids = {flag: run(flag) for flag in (True, False)}
    if ids[True].shape != (src.shape[0], n):
        raise AssertionError(f"decoding stopped early: ids {tuple(ids[True].shape)}")
    seconds = {
        True: best_time(lambda: run(True), repeats=repeats),
        False: best_time(lambda: run(False), repeats=repeats if n < 512 else slow_repeats),
    }
    row = {
        "tokens": n,
        "ms_per_token_cached": 1e3 * seconds[True] / n,
        "ms_per_token_full_prefix": 1e3 * seconds[False] / n,
        "speedup": seconds[False] / seconds[True],
        "ids_identical": bool(torch.equal(ids[True], ids[False])),
    }
    print(
        f"  greedy {n:4d} tokens: cached {row['ms_per_token_cached']:.2f} ms/token, "
        f"full prefix {row['ms_per_token_full_prefix']:.2f} ms/token, "
        f"{row['speedup']:.1f}x, ids identical: {row['ids_identical']}",
        flush=True,
    )
    return row


def beam_row(model, src, beam_size: int, n: int, repeats: int) -> dict:
    def run(use_cache: bool) -> torch.Tensor:
        return beam_search(
            model,
            src,
            bos_id=BOS,
            eos_id=VOCAB,
            max_len=n,
            beam_size=beam_size,
            use_cache=use_cache,
        )

    ids = {flag: run(flag) for flag in (True, False)}
    seconds = {flag: best_time(lambda flag=flag: run(flag), repeats=repeats) for flag in ids}
    row = {
        "beam_size": beam_size,
        "tokens": n,
        "ms_per_token_cached": 1e3 * seconds[True] / n,
        "ms_per_token_full_prefix": 1e3 * seconds[False] / n,
        "speedup": seconds[False] / seconds[True],
        "hypotheses_identical": bool(torch.equal(ids[True], ids[False])),
    }
    print(f"  beam search: {row}", flush=True)
    return row


def markdown(results: dict) -> str:
    c = results["checks"]
    s = results["sizes"]
    lines = [
        "# Decoding speed on the CPU: the key/value cache",
        "",
        measured_on(results),
        "",
        f"`attnbook.Transformer`, d_model {s['d_model']}, {s['n_heads']} heads, "
        f"{s['n_layers']}+{s['n_layers']} layers, d_ff {s['d_ff']}, random weights; a batch of "
        f"{results['batch_size']} sources of 16-24 tokens (padded). Decoding is forced to the "
        "full length (an `eos_id` the model never produces). Time per generated token, the "
        "encoder included, best of several runs. *cached*: `greedy_decode(..., "
        "use_cache=True)` (the default), one new position through the decoder per token; "
        "*full prefix*: `use_cache=False`, the whole prefix re-run every step.",
        "",
        "| tokens | cached ms/token | full prefix ms/token | speedup | ids identical |",
        "|---:|---:|---:|---:|---|",
    ]
    for r in results["greedy"]:
        lines.append(
            f"| {r['tokens']} | {r['ms_per_token_cached']:.2f} | "
            f"{r['ms_per_token_full_prefix']:.2f} | **{r['speedup']:.1f}x** | "
            f"{'yes' if r['ids_identical'] else 'NO'} |"
        )
    b = results["beam"]
    lines += [
        "",
        f"Beam search, beam {b['beam_size']}, {b['tokens']} tokens, the same batch: "
        f"{b['ms_per_token_cached']:.2f} ms/token cached, "
        f"{b['ms_per_token_full_prefix']:.2f} full prefix ({b['speedup']:.1f}x); hypotheses "
        f"identical: {'yes' if b['hypotheses_identical'] else 'NO'}.",
        "",
        "Targets (issue 18): cached at least "
        f"{MIN_SPEEDUP_AT_256:.0f}x faster at 256 tokens: {c['speedup_at_256']:.1f}x "
        f"({'met' if c['speedup_met'] else 'NOT met'}); cached time per token flat in length, "
        f"256 vs 64 tokens within {MAX_FLATNESS_256_VS_64}x: {c['flatness_256_vs_64']:.2f}x "
        f"({'met' if c['flatness_met'] else 'NOT met'}); ids identical at every length: "
        f"{'yes' if c['all_identical'] else 'NO'}.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> dict:
    args = parse_args(argv)
    model, src = make_model_and_batch(args.batch_size, max([1024, *args.lengths, args.beam_length]))
    results = {
        "machine": machine_info(),
        "command": run_command("decode_speed.py", argv),
        "sizes": SIZES,
        "batch_size": args.batch_size,
        "source_lengths": (src != PAD).sum(dim=1).tolist(),
    }
    results["greedy"] = [
        greedy_row(model, src, n, args.repeats, args.slow_repeats) for n in args.lengths
    ]
    results["beam"] = beam_row(model, src, args.beam_size, args.beam_length, args.repeats)
    by_length = {r["tokens"]: r for r in results["greedy"]}
    checks = {"all_identical": all(r["ids_identical"] for r in results["greedy"])}
    if 64 in by_length and 256 in by_length:
        checks["speedup_at_256"] = by_length[256]["speedup"]
        checks["speedup_met"] = checks["speedup_at_256"] >= MIN_SPEEDUP_AT_256
        checks["flatness_256_vs_64"] = (
            by_length[256]["ms_per_token_cached"] / by_length[64]["ms_per_token_cached"]
        )
        checks["flatness_met"] = checks["flatness_256_vs_64"] <= MAX_FLATNESS_256_VS_64
    results["checks"] = checks
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "decode_speed.json").write_text(json.dumps(results, indent=1) + "\n")
    if "speedup_at_256" in checks:
        (args.out / "decode_speed.md").write_text(markdown(results))
    print(f"wrote {args.out / 'decode_speed.json'}: {checks}")
    return results


if __name__ == "__main__":
    main()
