"""Sizes a machine can hold: every size a caller gives is checked before any work.

A width, a number of layers, a length, a beam, a batch size or a count turns into memory. The
estimators here say roughly how many bytes a size needs (the tensors it makes: parameters at 4
bytes each, 16 when trained with Adam, a mask's ``n * n`` booleans, a positional table, a
batch's activations, the data's strings), and :func:`check_memory` compares that estimate with
what the machine has, before anything is allocated. A size beyond it raises
:class:`TooLargeError` (a ``ValueError``) whose message names the argument, the estimate and
the limit, instead of the allocator's raw message minutes later. The estimates are rough
(within a small factor: no allocator overheads, no kernel workspaces) and run once, at an API's
edge (a constructor, the start of a command), never on the trainer's hot path. Under 64 MiB
nothing is read from the machine at all: ordinary sizes pass untouched.

The limit:

- ``ATTNBOOK_MEMORY_LIMIT``, if set: a size such as ``64GB``, ``512MiB``, ``1.5TB`` or a number
  of bytes, used instead of the machine's, to go past the checks knowingly (swap, memory that
  will be freed, an estimate that overshoots) or to try them with a small one; ``off`` turns
  them off.
- on a CUDA device, the device's total memory (for what runs there: training, decoding);
- otherwise the memory available now: ``MemAvailable`` of ``/proc/meminfo`` (within a cgroup's
  ``memory.max``), else psutil's or ``os.sysconf``'s figure; where none says, no limit.

:func:`check_threads` refuses more than :data:`THREADS_PER_CPU` threads per usable CPU: torch
would create them, and they would only take turns.

Why one long file: the limit, the message that names it and the estimators it is compared with
are one idea, read together when an estimate is checked or changed; each estimator is a few
lines beside the others, and :func:`check_decoding_memory` combines them for the decoders.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping

__all__ = [
    "ENV",
    "THREADS_PER_CPU",
    "SIZES_HELP",
    "TooLargeError",
    "parse_size",
    "format_bytes",
    "memory_limit",
    "check_memory",
    "check_decoding_memory",
    "check_parts",
    "check_threads",
    "usable_cpus",
    "is_size",
    "FLOAT_BYTES",
    "TRAIN_BYTES_PER_PARAMETER",
    "mha_parameters",
    "transformer_parameters",
    "rnn_parameters",
    "sinusoidal_bytes",
    "causal_mask_bytes",
    "padding_mask_bytes",
    "transformer_activation_bytes",
    "rnn_activation_bytes",
    "pair_bytes",
    "HISTORY_ROW_BYTES",
    "history_bytes",
    "decode_bytes",
]

ENV = "ATTNBOOK_MEMORY_LIMIT"
THREADS_PER_CPU = 4
FLOAT_BYTES = 4  # float32
# trained with Adam: the weights, their gradients and Adam's two moments, float32 each
TRAIN_BYTES_PER_PARAMETER = 4 * FLOAT_BYTES
# below this an estimate is not compared with the machine (nothing is read from it)
_FLOOR = 64 * 2**20
_GATES = {"gru": 3, "lstm": 4, "rnn": 1}

SIZES_HELP = f"""\
sizes:
  every size given (widths, layers, lengths, counts, beam, batch size) is checked against this
  machine's memory (a CUDA device's for what runs there) before any work; a size that cannot
  fit is refused, with the estimate and the limit. {ENV}=SIZE (such as 64GB)
  sets the limit instead, to go past the check knowingly; {ENV}=off turns it
  off. --threads takes at most {THREADS_PER_CPU} threads per CPU.

"""


class TooLargeError(ValueError):
    """A size that needs more memory (or threads) than this machine has: refused before any
    work. A ``ValueError``, so the command line says it in one line (exit status 1)."""


# --------------------------------------------------------------------------------------------
# bytes, read and written
# --------------------------------------------------------------------------------------------

_UNITS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?)\s*([kmgtpe]?)(i?)(b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int | None:
    """``"64GB"`` -> 64e9 bytes (``GiB``: 2^30), ``"2e9"`` -> bytes; ``"off"`` -> None."""
    if text.strip().lower() in ("off", "none", "inf", "unlimited"):
        return None
    match = _SIZE.match(text)
    if not match or (match.group(3) and not match.group(2)):
        raise ValueError(
            f"{ENV} must be a size such as 64GB, 512MiB or 2e9 (bytes), or off, got {text!r}"
        )
    number, unit, binary = float(match.group(1)), match.group(2).lower(), match.group(3)
    value = int(number * (1024 if binary else 1000) ** _UNITS[unit])
    if value < 1:
        raise ValueError(f"{ENV} must be at least 1 byte (or off), got {text!r}")
    return value


_NAMES = ("B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB")


def _scaled(n: float) -> tuple[float, str]:
    power = 0
    while n >= 1000 and power < len(_NAMES) - 1:
        n, power = n / 1000, power + 1
    return n, _NAMES[power]


def format_bytes(n: float) -> str:
    """``16e12`` -> ``"16.0 TB"``: three significant digits, decimal units."""
    value, unit = _scaled(float(n))
    if unit == "B":
        return f"{int(n)} B"
    if value >= 99.95:
        return f"{value:.0f} {unit}"
    return f"{value:.1f} {unit}" if value >= 9.995 else f"{value:.2f} {unit}"


def _suggest(n: float) -> str:
    """A value of ATTNBOOK_MEMORY_LIMIT a little above ``n`` bytes, such as ``17TB``."""
    value, unit = _scaled(float(n) * 1.05)
    if value < 10:
        return f"{math.ceil(value * 10) / 10:g}{unit}"
    return f"{math.ceil(value)}{unit}"


# --------------------------------------------------------------------------------------------
# the machine
# --------------------------------------------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _available_ram() -> int | None:
    """Bytes of RAM available now, or None where the system does not say."""
    available = None
    meminfo = _read("/proc/meminfo")
    if meminfo:
        for line in meminfo.splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    if available is None:
        try:
            import psutil

            available = int(psutil.virtual_memory().available)
        except Exception:  # not installed, or no figure on this system
            try:
                available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            except (AttributeError, ValueError, OSError):
                try:  # macOS: the physical memory, an upper bound
                    available = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
                except (AttributeError, ValueError, OSError):
                    return None
    # a container's cgroup (v2) may allow less than the machine has
    most, used = _read("/sys/fs/cgroup/memory.max"), _read("/sys/fs/cgroup/memory.current")
    if most and used and most.strip().isdigit() and used.strip().isdigit():
        available = min(available, max(int(most) - int(used), 0))
    return available


def _cuda_total(device) -> tuple[int, str] | None:
    try:
        import torch

        device = torch.device(device)
        if device.type != "cuda" or not torch.cuda.is_available():
            return None
        index = torch.cuda.current_device() if device.index is None else device.index
        total = torch.cuda.get_device_properties(index).total_memory
    except Exception:  # an unknown device name: its own check says so
        return None
    return int(total), f"cuda:{index} has {format_bytes(total)} in all"


def memory_limit(device=None) -> tuple[int | None, str]:
    """``(bytes, what they are)``: the most a size may need here (None: no limit), from
    ``ATTNBOOK_MEMORY_LIMIT``, else the CUDA ``device``'s total memory, else the RAM available
    now (the module's docstring)."""
    env = os.environ.get(ENV, "").strip()
    if env:
        limit = parse_size(env)
        return limit, f"{ENV} is {env}"
    if device is not None:
        cuda = _cuda_total(device)
        if cuda is not None:
            return cuda
    available = _available_ram()
    if available is None:
        return None, "this machine does not say how much memory it has"
    return available, f"this machine has {format_bytes(available)} available"


def is_size(value) -> bool:
    """Whether ``value`` is a size the estimates can use: an int >= 1 (not a bool). Other
    values are left to the argument's own check, which says what is wrong with them."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _shown(name: str, value) -> str:
    return f"{name} {value}" if name.startswith("--") else f"{name}={value}"


def check_memory(
    who: str,
    sizes: Mapping[str, object],
    what: str,
    nbytes: float,
    *,
    total: float | None = None,
    device=None,
) -> None:
    """Refuse ``sizes`` (argument name -> value; the largest value is named first, a name
    starting ``--`` is shown as a flag) if the ``nbytes`` they need for ``what`` (``total``:
    the whole, when ``nbytes`` is its largest part) exceed :func:`memory_limit` of ``device``.
    Raises :class:`TooLargeError`; ``who`` (a function, a class; empty for a command's
    options) starts the message."""
    need = nbytes if total is None else total
    if need < _FLOOR and not os.environ.get(ENV, "").strip():
        return
    limit, where = memory_limit(device)
    if limit is None or need <= limit:
        return
    ordered = sorted(
        sizes.items(),
        key=lambda kv: -kv[1] if isinstance(kv[1], (int, float)) else 0,
    )
    named = ", ".join(_shown(k, v) for k, v in ordered[:1])
    if len(ordered) > 1:
        named += " (with " + ", ".join(_shown(k, v) for k, v in ordered[1:]) + ")"
    whole = ""
    if total is not None and format_bytes(total) != format_bytes(nbytes):
        whole = f", {format_bytes(total)} in all"
    prefix = f"{who}: " if who else ""
    raise TooLargeError(
        f"{prefix}{named} needs about {format_bytes(nbytes)} for {what}{whole}; {where} (set "
        f"{ENV}={_suggest(need)}, or off, to go past this check knowingly)"
    )


def check_parts(who: str, parts, *, device=None) -> None:
    """:func:`check_memory` of a whole made of ``parts``, ``(what, sizes, bytes)`` each: the
    message names the largest part's sizes and gives the whole's bytes."""
    parts = [p for p in parts if p[2] > 0]
    if not parts:
        return
    what, sizes, nbytes = max(parts, key=lambda p: p[2])
    total = sum(p[2] for p in parts)
    check_memory(who, sizes, what, nbytes, total=total if len(parts) > 1 else None, device=device)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system says, else all)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_threads(name: str, threads: int) -> int:
    """Refuse more than :data:`THREADS_PER_CPU` threads per usable CPU; return ``threads``."""
    cpus = usable_cpus()
    if isinstance(threads, int) and threads > THREADS_PER_CPU * cpus:
        raise TooLargeError(
            f"{_shown(name, threads)}: this machine has {cpus} usable CPU"
            f"{'s' if cpus > 1 else ''}; more than {THREADS_PER_CPU * cpus} threads "
            f"({THREADS_PER_CPU} per CPU) only take turns on them; use {name} "
            f"{min(cpus, THREADS_PER_CPU * cpus)}"
        )
    return threads


# --------------------------------------------------------------------------------------------
# estimates: parameters (counts) and bytes
# --------------------------------------------------------------------------------------------


def mha_parameters(d_model: int, bias: bool = True) -> int:
    """The parameters of :class:`~attnbook.attention.MultiHeadAttention`: four
    ``d_model x d_model`` projections (and their biases)."""
    return 4 * (d_model * d_model + (d_model if bias else 0))


def transformer_parameters(
    src_vocab_size: int,
    tgt_vocab_size: int,
    d_model: int,
    n_layers: int,
    d_ff: int,
    max_len: int,
    *,
    norm_first: bool = False,
    share_embeddings: bool = False,
    tie_output: bool = False,
    positional: str | None = "sinusoidal",
) -> dict[str, int]:
    """The parameters of :class:`~attnbook.transformer.Transformer`, by part: ``"layers"``
    (encoder and decoder), ``"embeddings"`` (and the output projection), ``"positions"``
    (learned positions only; the sinusoidal table is a buffer: :func:`sinusoidal_bytes`)."""
    d = d_model
    ffn = 2 * d * d_ff + d_ff + d
    encoder_layer = mha_parameters(d) + ffn + 2 * 2 * d  # two LayerNorms
    decoder_layer = 2 * mha_parameters(d) + ffn + 3 * 2 * d
    embeddings = src_vocab_size * d + (0 if share_embeddings else tgt_vocab_size * d)
    return {
        "layers": n_layers * (encoder_layer + decoder_layer) + (4 * d if norm_first else 0),
        "embeddings": embeddings + (0 if tie_output else tgt_vocab_size * d),
        "positions": 2 * max_len * d if positional == "learned" else 0,
    }


def rnn_parameters(
    src_vocab_size: int,
    tgt_vocab_size: int,
    emb_dim: int,
    hidden_dim: int,
    *,
    cell: str = "gru",
    bidirectional: bool = False,
    attention: str | None = None,
    attn_dim: int | None = None,
) -> dict[str, int]:
    """The parameters of :class:`~attnbook.rnn.Seq2Seq`, by part: ``"recurrence"`` (the
    encoder's and decoder's cells, the bridge, the attention), ``"embeddings"`` (and the output
    layer)."""
    g, h, e = _GATES.get(cell, 4), hidden_dim, emb_dim
    dirs = 2 if bidirectional else 1
    cell_params = g * h * (e + h + 2)  # W_ih, W_hh and their biases
    memory = dirs * h
    recurrence = dirs * cell_params + cell_params
    if bidirectional:
        recurrence += (2 if cell == "lstm" else 1) * (memory * h + h)
    if attention is not None:
        a = attn_dim or h
        recurrence += {"additive": (h + memory) * a + a, "general": h * memory}.get(attention, 0)
        recurrence += (memory + h) * h + h  # W_c
    embeddings = src_vocab_size * e + tgt_vocab_size * e + h * tgt_vocab_size + tgt_vocab_size
    return {"recurrence": recurrence, "embeddings": embeddings}


def sinusoidal_bytes(n_positions: int, d_model: int) -> int:
    """The peak bytes of :func:`~attnbook.positional.sinusoidal_encoding`: the angles and the
    table in float64, one sine or cosine at a time, then the float32 table."""
    return 16 * n_positions * d_model + 8 * n_positions


def causal_mask_bytes(n: int) -> int:
    """:func:`~attnbook.attention.causal_mask`: ``(n, n)`` booleans, then its lower triangle."""
    return 2 * n * n


def padding_mask_bytes(batch: int, max_len: int) -> int:
    """:func:`~attnbook.attention.padding_mask` from lengths: the positions (int64) and the
    ``(B, max_len)`` mask."""
    return 8 * max_len + batch * max_len


def transformer_activation_bytes(
    batch: int,
    src_len: int,
    tgt_len: int,
    *,
    d_model: int,
    n_heads: int,
    n_layers: int,
    d_ff: int,
    vocab: int,
) -> int:
    """Roughly what one training step of a Transformer keeps for its backward pass: each
    layer's activations and attention weights, and the logits with their log-softmax."""
    d, s, t, h = d_model, src_len, tgt_len, n_heads
    encoder = s * (12 * d + 2 * d_ff) + 3 * h * s * s
    decoder = t * (18 * d + 2 * d_ff) + 3 * h * t * t + 3 * h * t * s
    per_example = n_layers * (encoder + decoder) + 3 * t * vocab + 4 * (s + t) * d
    return FLOAT_BYTES * batch * per_example


def rnn_activation_bytes(
    batch: int,
    src_len: int,
    tgt_len: int,
    *,
    emb_dim: int,
    hidden_dim: int,
    vocab: int,
    cell: str = "gru",
    bidirectional: bool = False,
    attention: str | None = None,
    attn_dim: int | None = None,
) -> int:
    """Roughly what one training step of an RNN ``Seq2Seq`` keeps for its backward pass: the
    gates and states of every step, the scores of every step's attention, the logits."""
    g, h, e, s, t = _GATES.get(cell, 4), hidden_dim, emb_dim, src_len, tgt_len
    dirs = 2 if bidirectional else 1
    encoder = s * (e + dirs * (g + 2) * h)
    decoder = t * (e + (g + 2) * h)
    if attention is not None:
        width = (attn_dim or h) + 2 if attention == "additive" else 2
        decoder += t * s * width + t * (dirs + 2) * h
    return FLOAT_BYTES * batch * (encoder + decoder + 3 * t * vocab)


def pair_bytes(src_len: int, tgt_len: int) -> int:
    """A ``(source, target)`` pair of text held in Python (two strings, a tuple, a list slot, a
    set entry while drawn) and as token ids: roughly."""
    return 300 + 10 * (src_len + tgt_len)


# a row of the trainer's history: a dict of about ten numbers
HISTORY_ROW_BYTES = 700


def history_bytes(steps: int, log_every: int, eval_every: int) -> int:
    """The trainer's history after ``steps`` steps: a row every ``log_every`` steps and at every
    evaluation."""
    return HISTORY_ROW_BYTES * (steps // log_every + steps // eval_every + 1)


def decode_bytes(
    rows: int,
    src_len: int,
    max_len: int,
    *,
    vocab: int,
    width: int,
    n_layers: int = 1,
    n_heads: int = 1,
    beam: bool = False,
    cache: bool = True,
    attention: bool = False,
) -> int:
    """Roughly the peak of greedy decoding (``beam=False``) or beam search of ``rows``
    sequences (batch x beam) for ``max_len`` steps: the tokens (copied each step), the
    encoder's memory and a key/value cache of ``width``-wide vectors per layer (copied when
    beams are reordered), a step's scores over the vocabulary, and the attention of every step
    when it is returned."""
    tokens = 2 * 8 * rows * (max_len + 1)
    state = FLOAT_BYTES * rows * width * (src_len * (1 + 2 * n_layers))
    if cache:
        state += FLOAT_BYTES * rows * width * 2 * n_layers * max_len
    scores = FLOAT_BYTES * rows * vocab * (6 if beam else 2)
    kept = 0
    if attention:
        kept = FLOAT_BYTES * rows * max_len * n_layers * n_heads * (src_len + max_len)
    return tokens + (2 if beam else 1) * state + scores + (2 if beam else 1) * kept


def check_decoding_memory(
    who: str,
    sizes: dict,
    model,
    batch: int,
    src_len: int,
    max_len: int,
    beam: int = 1,
    *,
    return_attention: bool = False,
    use_cache: bool = True,
) -> None:
    """Refuse (:mod:`attnbook._limits`) a decoding of ``batch`` sources of ``src_len`` tokens to
    ``max_len`` tokens, ``beam`` hypotheses each, that the model's device cannot hold: its
    tokens, states (a Transformer's key/value cache), a step's scores and, with
    ``return_attention``, every step's attention. ``sizes`` are the arguments to name. The
    model's sizes are read from the attributes the package's models have (``d_model`` or
    ``hidden_dim``, ``n_layers``, ``n_heads``, ``max_len``, ``tgt_vocab_size``), each with a
    small default where a model lacks it: an estimate, not a question of which kind it is."""
    if not all(is_size(v) for v in (batch, src_len, max_len, beam)):
        return  # the arguments' own checks say what is wrong
    d_model = getattr(model, "d_model", None)
    hidden = getattr(model, "hidden_dim", None)
    width = d_model if is_size(d_model) else 2 * hidden if is_size(hidden) else 1
    limit = getattr(model, "max_len", None)
    steps = min(max_len, limit) if is_size(limit) else max_len
    n_layers = getattr(model, "n_layers", 1)
    n_heads = getattr(model, "n_heads", 1)
    vocab = getattr(model, "tgt_vocab_size", 1)
    rows = batch * beam
    nbytes = decode_bytes(
        rows,
        src_len,
        steps,
        vocab=vocab if is_size(vocab) else 1,
        width=width,
        n_layers=n_layers if is_size(n_layers) else 1,
        n_heads=n_heads if is_size(n_heads) else 1,
        beam=beam > 1,
        cache=use_cache and is_size(d_model),
        attention=return_attention,
    )
    from .utils import model_device  # (torch: imported only when a model is checked)

    try:
        device = model_device(model)
    except Exception:  # no parameters: the protocol's check says what is missing
        device = None
    hypotheses = f"{rows} hypotheses" if beam > 1 else f"{rows} sequences"
    check_memory(
        who,
        sizes,
        f"decoding {batch} sources of {src_len} tokens to {steps} tokens ({hypotheses}: "
        "their states, scores and tokens"
        + (", every step's attention)" if return_attention else ")"),
        nbytes,
        device=device,
    )
