"""The mutant catalogue: fault-injected attention kernels difftest must kill.

Each mutant is a small, named, documented deviation from the correct blockwise kernel
(``kernels/blockwise.py``): a subclass overriding one hook (rarely two), reproducing a
class of bug reported in real attention backward kernels (the classes in BUG_CLASSES
below). ``MUTANTS`` maps a name to a ``Mutant`` entry: its bug class, a one-line
description, a factory returning a fresh KernelAdapter, and a hand-picked Problem that
triggers the fault (used by the tests to prove the fault is real).

Importing this module registers every mutant in the kernel registry as
``mutant:<name>`` (the spec its reproducers carry).

TileLang mutants, when ``kernels.tilelang.mutants`` exists and defines a ``MUTANTS``
dict of the same shape, are merged in by ``all_mutants()``; without tilelang they are
skipped with the reason (``skipped_sources()``).
"""

import random
from dataclasses import dataclass
from typing import Callable

import torch

from difftest.errors import InputError
from difftest.execute.adapter import KernelAdapter
from difftest.model import fp8
from difftest.model.inputs import torch_dtype
from difftest.model.problem import FP8_DTYPES, V2_ONLY_KINDS, Problem
from difftest.model.sparsity import Sparsity

from .blockwise import BlockwiseAttention, SparseBlockwiseAttention
from .extra_sources import load_extra
from .masking import selected_blocks
from .variants import Fp8CurrentScaling

# Bug classes, as public bug reports against attention backward kernels name them; every one
# has at least one mutant below.
BUG_CLASSES = {
    "varlen": "varlen boundary bleed and empty sequences",
    "gqa": "GQA/MQA head mapping (and head_dim_qk != head_dim_v)",
    "causal": "causal alignment and fully masked rows",
    "window": "sliding-window edges off by one",
    "tail-blocks": "sequence tail blocks skipped",
    "head-dim-tail": "head-dim tails unwritten",
    "sinks": "dSink wrong or missing",
    "padding": "LSE/Delta padding uninitialised",
    "scale": "missing or double softmax scale",
    "fp16-accum": "float16 accumulation of dQ",
    "nondeterminism": "nondeterministic reduction order in a mode that claims determinism",
    "large-logits": "faults that appear only for large (or very negative) logits",
    "batch": "faults that appear only for batch > 1",
    "second-call": "faults that appear only on the second call",
    "some-heads": "faults that appear only for some heads",
    "dtype-limits": "an intermediate overflows the input dtype before the result does",
    "layout": "memory layouts assumed away: strides, storage offsets, alignment, stride-0 heads",
    "fp8-scaling": "FP8 scale factors forgotten, applied twice, or taken from the wrong tensor",
    "partial-tile": "only part of an MMA tile computed (e.g. only the first 16 rows of dQ)",
    "structured-values": "faults that only activations like a trained model's expose (attention sinks, "
    "heavy tails, tied keys, a dO from a loss)",
    "sparse": "block-sparse masks and top-k selections: ignored or transposed in the backward, empty rows, "
    "duplicate selections",
    "softcap": "softcap formula wrong, or the backward ignoring the cap or its derivative",
    "alibi": "ALiBi bias forgotten in the backward, the wrong head's slope, or the distance misaligned",
    "relpos": "relative-position bias forgotten in the backward, the wrong head's row, the distance's sign "
    "flipped or misaligned, or its clamp one-sided",
}


@dataclass(frozen=True)
class Mutant:
    name: str
    bug_class: str  # a key of BUG_CLASSES
    description: str  # one line: what the deviation is
    factory: Callable[[], KernelAdapter]  # a fresh adapter (mutants may hold state across calls)
    example: Problem | None = None  # a hand-picked Problem that triggers the fault
    source: str = "blockwise"
    clean: Callable[[], KernelAdapter] | None = None  # the correct kernel it deviates from
    # the smallest campaign profile expected to kill it: "ci", or "gpu" for a fault whose
    # trigger lies beyond what the ci profile draws (values near a dtype's limit, many tiles);
    # ``difftest mutants -p ci`` still runs it and shows the outcome, but does not fail on it
    profile: str = "ci"

    def make_clean(self) -> KernelAdapter:
        return (self.clean or BlockwiseAttention)()

    def make(self) -> KernelAdapter:
        return self.factory()


_CATALOGUE: list[Mutant] = []


PROFILES = ("ci", "gpu")  # Mutant.profile values, in the order of the search's reach


def mutant(bug_class: str, example: Problem, profile: str = "ci", clean=BlockwiseAttention):
    """Register a BlockwiseAttention subclass as a mutant named after its ``name``; the
    class docstring's first line is its description. ``profile``: see ``Mutant.profile``;
    ``clean``: the correct kernel it deviates from (the FP8 mutants: the FP8 emulation)."""
    if bug_class not in BUG_CLASSES:
        raise InputError(f"bug_class={bug_class!r}: allowed {sorted(BUG_CLASSES)}")
    if profile not in PROFILES:
        raise InputError(f"profile={profile!r}: allowed {PROFILES}")

    def wrap(cls):
        doc = (cls.__doc__ or "").strip().splitlines()
        cls.description = " ".join(line.strip() for line in doc[: doc.index("") if "" in doc else len(doc)])
        cls.spec = f"mutant:{cls.name}"  # reproducers name the kernel by this catalogue key
        # examples were hand-picked against input version 1's values (difftest/model/inputs.py): a
        # trigger such as a dO row near 10^4.4 is a property of those bytes, so they keep them
        # (the structured kinds exist only in version 2: their examples keep it)
        # (FP8 exists only under version 2 as well)
        keep = example.values in V2_ONLY_KINDS or example.dtype in FP8_DTYPES
        _CATALOGUE.append(
            Mutant(
                cls.name,
                bug_class,
                cls.description,
                cls,
                (example if keep else example.replace(input_version=1)).validate(),
                clean=clean,
                profile=profile,
            )
        )
        return cls

    return wrap


def _other_align(align: str) -> str:
    return "top_left" if align == "bottom_right" else "bottom_right"


# ----------------------------------------------------------------------------- varlen
@mutant("varlen", Problem(batch=2, seqlen_q=(9, 7), seqlen_k=(11, 13), heads_q=2, heads_kv=2))
class VarlenBoundaryBleed(BlockwiseAttention):
    """Varlen key range of each sequence runs one token into the next sequence
    (end offset cu_seqlens_k[b+1] + 1)."""

    name = "varlen-boundary-bleed"

    def sequences(self, p):
        seqs = super().sequences(p)
        if not p.varlen:
            return seqs
        return [(b, q0, sq, k0, min(sk + 1, p.total_k - k0) if sk else 0) for b, q0, sq, k0, sk in seqs]


@mutant("varlen", Problem(batch=3, seqlen_q=(5, 0, 6), seqlen_k=(4, 6, 0), heads_q=2, heads_kv=1))
class EmptySequenceSkipped(BlockwiseAttention):
    """Sequences with zero queries or zero keys are skipped outright, so their dK/dV
    (or O/LSE/dQ) rows are never written."""

    name = "empty-seq-skipped"

    def skip_sequence(self, p, sq, sk):
        return sq == 0 or sk == 0


# ----------------------------------------------------------------------------- GQA
@mutant("gqa", Problem(seqlen_q=12, seqlen_k=12, heads_q=4, heads_kv=2))
class GqaHeadModulo(BlockwiseAttention):
    """Query head h reads key/value head h % heads_kv instead of h // group."""

    name = "gqa-head-modulo"

    def kv_head_index(self, p, device):
        return torch.arange(p.heads_q, device=device) % p.heads_kv


@mutant("gqa", Problem(seqlen_q=12, seqlen_k=12, heads_q=2, heads_kv=1))
class GqaDkDvFirstHead(BlockwiseAttention):
    """dK/dV of a key/value head take the first query head of its group instead of the
    group's sum."""

    name = "gqa-dkdv-first-head"

    def reduce_group(self, grad_h, idx, heads_kv):
        return torch.stack([grad_h[idx == g][0] for g in range(heads_kv)])


@mutant("gqa", Problem(seqlen_q=12, seqlen_k=12, heads_q=8, heads_kv=2))
class GqaDkDvWrongGroup(BlockwiseAttention):
    """dK/dV of key/value head g sum query heads 2g .. 2g + group - 1 (a group base written
    for groups of 2): right for MQA and group 2, wrong from group 3 with >= 2 KV heads."""

    name = "gqa-dkdv-wrong-group"

    def reduce_group(self, grad_h, idx, heads_kv):
        group = grad_h.shape[0] // heads_kv
        return torch.stack([grad_h[min(2 * g, grad_h.shape[0] - group) :][:group].sum(dim=0) for g in range(heads_kv)])


@mutant("gqa", Problem(seqlen_q=12, seqlen_k=12, head_dim_qk=32, head_dim_v=16))
class DqHeadDimV(BlockwiseAttention):
    """The dQ epilogue stores head_dim_v columns: with head_dim_qk > head_dim_v the rest
    of dQ is never written."""

    name = "dq-uses-head-dim-v"

    def dq_columns(self, p):
        return min(p.head_dim_qk, p.head_dim_v)


# ----------------------------------------------------------------------------- causal
@mutant("causal", Problem(seqlen_q=10, seqlen_k=20, causal=True, align="bottom_right"))
class CausalAlignSwappedBwd(BlockwiseAttention):
    """The backward applies the other causal alignment than the forward (top-left vs
    bottom-right) when seqlen_q != seqlen_k."""

    name = "causal-align-swapped-bwd"

    def allowed(self, p, i0, i1, j0, j1, sq, sk, phase):
        if phase == "bwd":
            p = p.replace(align=_other_align(p.align))
        return super().allowed(p, i0, i1, j0, j1, sq, sk, phase)


@mutant("causal", Problem(seqlen_q=20, seqlen_k=10, causal=True, align="bottom_right"))
class MaskedRowNaN(BlockwiseAttention):
    """The backward uses log row sum = -inf of a fully masked row as is, so
    exp(-inf - -inf) gives NaN gradients instead of zeros."""

    name = "masked-row-nan"

    def stats_for_backward(self, m, logl):
        return m, logl


# ----------------------------------------------------------------------------- window
@mutant("window", Problem(seqlen_q=12, seqlen_k=12, window_left=3, window_right=0))
class WindowLeftOffByOne(BlockwiseAttention):
    """The left window edge is exclusive: key i - window_left is dropped (forward and
    backward agree, both wrong)."""

    name = "window-left-off-by-one"

    def allowed(self, p, i0, i1, j0, j1, sq, sk, phase):
        ok = super().allowed(p, i0, i1, j0, j1, sq, sk, phase)
        if p.window_left is not None:
            i = torch.arange(i0, i1).unsqueeze(1) + p.mask_offset(sq, sk)
            ok = ok & (torch.arange(j0, j1).unsqueeze(0) != i - p.window_left)
        return ok


@mutant("window", Problem(seqlen_q=12, seqlen_k=12, window_left=2, window_right=1))
class WindowRightOffByOneBwd(BlockwiseAttention):
    """The backward lets each query see one key past its right window edge."""

    name = "window-right-off-by-one-bwd"

    def allowed(self, p, i0, i1, j0, j1, sq, sk, phase):
        if phase == "bwd" and p.window_right is not None:
            p = p.replace(window_right=p.window_right + 1)
        return super().allowed(p, i0, i1, j0, j1, sq, sk, phase)


# ----------------------------------------------------------------------------- tails
@mutant("tail-blocks", Problem(seqlen_q=8, seqlen_k=20))
class TailKeyTileSkippedBwd(BlockwiseAttention):
    """The backward launches seqlen_k // block_n key tiles (floor): the partial last
    key tile gets no dK/dV and adds nothing to dQ."""

    name = "tail-key-tile-skipped-bwd"

    def key_tiles(self, sk, phase):
        tiles = super().key_tiles(sk, phase)
        return [t for t in tiles if t[1] <= sk] if phase == "bwd" else tiles


@mutant("tail-blocks", Problem(seqlen_q=40, seqlen_k=8))
class TailQueryTileSkippedFwd(BlockwiseAttention):
    """The forward launches seqlen_q // block_m query tiles (floor): O and LSE of the
    partial last tile are never written."""

    name = "tail-query-tile-skipped-fwd"

    def query_tiles(self, sq, phase):
        tiles = super().query_tiles(sq, phase)
        return [t for t in tiles if t[1] <= sq] if phase == "fwd" else tiles


@mutant("head-dim-tail", Problem(seqlen_q=8, seqlen_k=8, head_dim_qk=24, head_dim_v=24))
class HeadDimTailUnwritten(BlockwiseAttention):
    """The dQ epilogue stores whole 16-wide MMA column tiles only: the last
    head_dim_qk % 16 columns are never written."""

    name = "head-dim-tail-unwritten"

    def dq_columns(self, p):
        return p.head_dim_qk // 16 * 16


# ----------------------------------------------------------------------------- sinks
@mutant("sinks", Problem(seqlen_q=8, seqlen_k=8, sinks=True))
class DsinkMissing(BlockwiseAttention):
    """dSink is never accumulated: it comes back as zeros."""

    name = "dsink-missing"

    def dsink_sign(self):
        return 0.0


@mutant("sinks", Problem(seqlen_q=8, seqlen_k=8, sinks=True))
class DsinkWrongSign(BlockwiseAttention):
    """dSink = +sum_i P_sink_i * Delta_i (sign flipped)."""

    name = "dsink-wrong-sign"

    def dsink_sign(self):
        return 1.0


@mutant("sinks", Problem(seqlen_q=40, seqlen_k=8, sinks=True))
class DsinkFirstTileOnly(BlockwiseAttention):
    """dSink reduces over the first query tile of each sequence only, not all queries."""

    name = "dsink-first-tile-only"

    def dsink_rows(self, sq):
        return min(sq, self.block_m)


@mutant("sinks", Problem(seqlen_q=8, seqlen_k=8, heads_q=2, heads_kv=1, sinks=True))
class SinkIndexedByKvHead(BlockwiseAttention):
    """The sink logit of query head h is read at its key/value head h // group instead
    of at h (only GQA/MQA differs)."""

    name = "sink-indexed-by-kv-head"

    def sink_for_heads(self, sink, p):
        return sink[torch.arange(p.heads_q) // p.group]


@mutant("sinks", Problem(seqlen_q=8, seqlen_k=8, heads_q=2, heads_kv=1, sinks=True, sink_center=1.0))
class SinkMissingInForward(BlockwiseAttention):
    """The forward's softmax leaves the sink out of the row sum: O and the saved LSE are
    those of attention without a sink, and the backward (correct) works from them."""

    name = "sink-missing-in-forward"

    def forward_sink(self, sink):
        return None


# ----------------------------------------------------------------------------- padding
@mutant("padding", Problem(seqlen_q=20, seqlen_k=8))
class DeltaPadUninitialised(BlockwiseAttention):
    """Delta of the padded rows of the last query tile is left uninitialised (NaN here):
    0 * NaN poisons dK."""

    name = "delta-pad-uninitialised"

    def delta_pad_value(self):
        return float("nan")


@mutant("padding", Problem(batch=2, seqlen_q=(4, 5), seqlen_k=(0, 6)))
class LseEmptyKeysUnwritten(BlockwiseAttention):
    """LSE rows of a sequence with no keys are never stored (should be -inf, or the sink)."""

    name = "lse-empty-keys-unwritten"

    def store_lse(self, sk):
        return sk > 0


# ----------------------------------------------------------------------------- scale
@mutant("scale", Problem(seqlen_q=8, seqlen_k=8))
class DkMissingScale(BlockwiseAttention):
    """dK is accumulated without the softmax scale."""

    name = "dk-missing-scale"

    def grad_scale(self, p, which):
        return 1.0 if which == "dk" else super().grad_scale(p, which)


@mutant("scale", Problem(seqlen_q=8, seqlen_k=8))
class DqDoubleScale(BlockwiseAttention):
    """The dQ postprocess applies the softmax scale twice."""

    name = "dq-double-scale"

    def dq_postprocess(self, acc, p):
        return super().dq_postprocess(acc, p) * self.grad_scale(p, "dq")


# ----------------------------------------------------------------------------- precision
@mutant("fp16-accum", Problem(seqlen_q=8, seqlen_k=64))
class DqFp16Accumulation(BlockwiseAttention):
    """The dQ accumulator is float16: every key tile's partial dQ is rounded on add."""

    name = "dq-fp16-accumulation"

    def dq_workspace(self, shape, device):
        return torch.zeros(shape, dtype=torch.float16, device=device)


@mutant(
    "fp16-accum",
    Problem(seqlen_q=8, seqlen_k=256, dtype="bfloat16", values="near_constant", value_scale=0.01),
    profile="gpu",
)
class DeltaInputDtypeAccumulation(BlockwiseAttention):
    """Delta = rowsum(P * dP) is accumulated in the input dtype across key tiles: its
    rounding error grows with seqlen_k / block_n and reaches dQ and dK through
    dS = P (dP - Delta)."""

    name = "delta-input-dtype-accumulation"

    def __init__(self, *a, **kw):
        # key tiles of 4: 64 roundings of Delta at seqlen_k 256. At 16 (the clean kernel's block)
        # the 16 bf16 roundings stay inside the design floor, which grants a correct kernel two
        # (results/mutants.md: dQ ratio 0.31 at 16 keys a tile, 1.40 at 4, 1.96 at 1)
        kw.setdefault("block_n", 4)
        super().__init__(*a, **kw)

    def preprocess_delta(self, p, q, k, v, do, o, m, logl, sq, sk):
        low = torch_dtype(p.dtype)
        scale = self.logit_scale(p, "bwd")
        qp, dop, kp, vp, mpad, logl_p = self._padded(q, k, v, do, m, logl, sq, sk)
        delta = torch.zeros(q.shape[0], qp.shape[1], dtype=torch.float32)
        for i0, i1 in self.query_tiles(sq, "bwd"):
            for j0, j1 in self.key_tiles(sk, "bwd"):
                pt, dp, _ = self._p_dp(p, qp, dop, kp, vp, mpad, logl_p, scale, i0, i1, j0, j1, sq, sk)
                delta[:, i0:i1] = (delta[:, i0:i1] + (pt * dp).sum(dim=-1)).to(low).to(torch.float32)
        return delta[:, :sq]


@mutant("nondeterminism", Problem(seqlen_q=8, seqlen_k=160))
class DqRandomOrder(BlockwiseAttention):
    """dQ tile partials are added in a random order each call (atomics), while the
    kernel claims deterministic=True."""

    name = "dq-nondeterministic-order"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._rng = random.Random()  # seeded from OS entropy: differs every process and call

    def reduce_dq(self, acc, parts):
        parts = list(parts)
        self._rng.shuffle(parts)
        super().reduce_dq(acc, parts)


@mutant("large-logits", Problem(seqlen_q=8, seqlen_k=8, values="scaled", value_scale=8.0))
class NoMaxSubtraction(BlockwiseAttention):
    """The online softmax never subtracts the running row max: exp overflows for large
    logits (and underflows for very negative ones)."""

    name = "no-max-subtraction"

    def running_max(self, m, s):
        return torch.zeros_like(m)


# ----------------------------------------------------------------------------- batch / calls / heads
@mutant("batch", Problem(batch=2, seqlen_q=8, seqlen_k=8))
class LseBatchOffsetMissing(BlockwiseAttention):
    """The backward reads the saved softmax statistics (LSE) at the first sequence's rows
    for every sequence (batch offset forgotten)."""

    name = "lse-batch-offset-missing"

    def stats_rows(self, stats, q0, sq, b):
        return stats[0:sq]


@mutant("second-call", Problem(seqlen_q=8, seqlen_k=8))
class DqWorkspaceNotZeroed(BlockwiseAttention):
    """The dQ float32 workspace is cached per shape and not zeroed between calls: the
    second call adds onto the first call's dQ."""

    name = "dq-workspace-not-zeroed"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._workspaces = {}

    def dq_workspace(self, shape, device):
        key = (tuple(shape), str(device))
        if key not in self._workspaces:
            self._workspaces[key] = super().dq_workspace(shape, device)
        return self._workspaces[key]


@mutant("some-heads", Problem(seqlen_q=8, seqlen_k=8, heads_q=3, heads_kv=3))
class OddLastHeadDropped(BlockwiseAttention):
    """The dQ epilogue handles query heads in pairs: with an odd heads_q > 1 the last
    head's dQ is never written."""

    name = "odd-last-head-dropped"

    def dq_heads(self, p):
        h = p.heads_q
        return list(range(h if h == 1 else h - h % 2))


# ----------------------------------------------------------------------------- dtype limits
@mutant(
    "dtype-limits",
    Problem(
        seqlen_q=16,
        seqlen_k=16,
        head_dim_qk=64,
        head_dim_v=64,
        dtype="float16",
        values="mixed_do",
        value_scale=4.4,
        seed=1,
    ),
    profile="gpu",
)
class DqCastBeforeScale(BlockwiseAttention):
    """The dQ postprocess stores the unscaled float32 accumulator in the input dtype and
    applies the softmax scale afterwards: dQ / scale overflows (fp16: inf) while the true
    dQ is still 1/scale below the threshold."""

    name = "dq-cast-before-scale"

    def dq_postprocess(self, acc, p):
        return acc.to(torch_dtype(p.dtype)).to(torch.float32) * self.grad_scale(p, "dq")


# ----------------------------------------------------------------------------- structured values
BFP_BLOCK = 16  # keys that share an exponent
BFP_MANTISSA = 13  # bits kept below the shared exponent


@mutant(
    "structured-values",
    Problem(
        seqlen_q=8,
        seqlen_k=16,
        head_dim_qk=16,
        head_dim_v=16,
        dtype="bfloat16",
        values="massive_keys",
        value_scale=1000.0,
    ),
    profile="gpu",
)
class KeysSharedExponent(BlockwiseAttention):
    """16-bit keys are read from a block-floating-point copy (a compressed K cache): every
    16 consecutive keys share one exponent per channel, the largest one's, with 13 bits of
    mantissa below it. Plenty for keys of similar size (normal, scaled, outlier channels);
    one key 10^3 larger (an attention sink) rounds its block's other keys to 0. Profile
    gpu: the ci profile draws massive_keys in one case of ~20 and mostly float16 ones kill
    it, so ci's 90 s per mutant does not reliably reach it (results/mutants.md)."""

    name = "keys-shared-exponent"

    def load(self, inputs, name, b):
        x = super().load(inputs, name, b)
        if name != "k" or x.dtype == torch.float32 or not x.shape[0]:
            return x
        x = x.to(torch.float32)
        n = x.shape[0]
        pad = -n % BFP_BLOCK
        blocks = torch.cat([x, x.new_zeros(pad, *x.shape[1:])]).view(-1, BFP_BLOCK, *x.shape[1:])
        top = blocks.abs().amax(dim=1, keepdim=True)
        step = torch.exp2(torch.floor(torch.log2(top.clamp_min(1e-30))) - (BFP_MANTISSA - 1))
        return (torch.round(blocks / step) * step).view(-1, *x.shape[1:])[:n]


@mutant(
    "structured-values",
    Problem(
        seqlen_q=16, seqlen_k=64, head_dim_qk=16, head_dim_v=16, dtype="float16", values="tied_keys", value_scale=2.0
    ),
)
class TiedMaxStaleRescale(BlockwiseAttention):
    """The online softmax's rescale factor register is written only where a key tile's max
    is above the running max (exp(m_old - m_new)) or below it (1): a tile whose max equals
    the running max exactly, a copy of the max key, keeps the factor of the last rescale and
    shrinks the row sum and accumulator again. A row's first tile with a visible key is
    peeled and writes no factor, so rows whose keys all tie (near-constant keys rounded to
    16 bits) are right. Rarely, float32 logits that near_constant squeezes into ~1e-4 tie
    too; there the stale factor is ~1 - 1e-5 (LSE ratio ~1.3, results/mutants.md)."""

    name = "tied-max-stale-rescale"

    def rescale_factor(self, m, m_new, s, j0):
        alpha = super().rescale_factor(m, m_new, s, j0)
        if j0 == 0:  # a new query tile: the register starts at 1, no row has seen a key
            self._factor, self._seen = torch.ones_like(m), torch.zeros_like(m, dtype=torch.bool)
        top = s.amax(dim=-1)
        seen = self._seen
        self._factor = torch.where(seen & (top > m), alpha, torch.where(top < m, torch.ones_like(m), self._factor))
        self._seen = seen | (top > float("-inf"))
        return torch.where(seen, self._factor, alpha)


@mutant(
    "structured-values",
    Problem(
        seqlen_q=16, seqlen_k=48, head_dim_qk=16, head_dim_v=16, dtype="float16", values="tied_keys", value_scale=4.0
    ),
)
class MaxEntryDsByValue(BlockwiseAttention):
    """dS of a row's max entry comes from the rest of the row, P_max ((1 - P_max) dP_max -
    sum_{k != max} P_k dP_k), which avoids the cancellation dP_max - Delta where P saturates;
    the backward finds the max entry as the logit equal to the saved row max, so with
    exact ties every copy of the max key counts as 'the max' and leaves the other copies'
    terms out. Without ties this is the clean dS; with ties the copies' dS are shuffled
    among them (row sums and dQ stay right, dK of the tied keys does not), by differences
    of their values: near-constant keys that tie carry near-constant values."""

    name = "max-entry-ds-by-value"

    def preprocess_delta(self, p, q, k, v, do, o, m, logl, sq, sk):
        delta = super().preprocess_delta(p, q, k, v, do, o, m, logl, sq, sk)
        scale = self.logit_scale(p, "bwd")
        qp, dop, kp, vp, mpad, logl_p = self._padded(q, k, v, do, m, logl, sq, sk)
        self._at_max = torch.zeros(q.shape[0], qp.shape[1], kp.shape[1], dtype=torch.bool)
        self._p_at_max = torch.zeros(q.shape[0], qp.shape[1], 1)  # sum of P over the 'max' entries
        self._rest = torch.zeros(q.shape[0], qp.shape[1], 1)  # sum of P dP over the others
        for i0, i1 in self.query_tiles(sq, "bwd"):
            for j0, j1 in self.key_tiles(sk, "bwd"):
                s = self.gemm(qp[:, i0:i1], kp[:, j0:j1].transpose(1, 2)) * scale
                s = self.biased(p, s, i0, i1, j0, j1, sq, sk, "bwd")
                s = s.masked_fill(~self.allowed(p, i0, i1, j0, j1, sq, sk, "bwd"), float("-inf"))
                at = s == mpad[:, i0:i1].unsqueeze(-1)
                pt, dp, _ = self._p_dp(p, qp, dop, kp, vp, mpad, logl_p, scale, i0, i1, j0, j1, sq, sk)
                self._at_max[:, i0:i1, j0:j1] = at
                self._p_at_max[:, i0:i1] += (pt * at).sum(dim=-1, keepdim=True)
                self._rest[:, i0:i1] += (pt * dp * ~at).sum(dim=-1, keepdim=True)
        return delta

    def softmax_grad(self, pt, dp, delta, i0, i1, j0, j1):
        at = self._at_max[:, i0:i1, j0:j1]
        from_rest = pt * (dp * (1.0 - self._p_at_max[:, i0:i1]) - self._rest[:, i0:i1])
        return torch.where(at, from_rest, pt * (dp - delta))


# ----------------------------------------------------------------------------- softcap
# caps near the logits' scale: |S| ~ 2..4 under a cap of 1.5 bends tanh where the logits are
_CAPPED = dict(seqlen_q=8, seqlen_k=12, softcap=1.5, values="scaled", value_scale=2.0)


@mutant("softcap", Problem(**_CAPPED))
class SoftcapIgnoredBwd(BlockwiseAttention):
    """The backward ignores the softcap: P recomputed from the uncapped logits against the
    capped forward's LSE, no 1 - tanh^2 (flash-attn-4 up to 4.0.0b8: "softcap - not yet supported
    in backward", fixed in b9)."""

    name = "softcap-ignored-bwd"

    def cap_logits(self, p, s, scale, phase):
        return (s, None) if phase == "bwd" else super().cap_logits(p, s, scale, phase)


@mutant("softcap", Problem(**_CAPPED))
class SoftcapFa4B8Formula(BlockwiseAttention):
    """FA4 4.0.0b8's softcap as a whole: the forward caps with (s / c) * tanh(s / c) instead of
    c * tanh(s / c), and the backward ignores the cap."""

    name = "softcap-fa4-b8-formula"

    def cap_logits(self, p, s, scale, phase):
        if p.softcap is None or phase == "bwd":
            return s, None
        x = s / (p.softcap * scale / p.scale)
        return x * torch.tanh(x), None


@mutant("softcap", Problem(**_CAPPED))
class SoftcapDerivativeMissing(BlockwiseAttention):
    """P is recomputed with the cap, but dS is not multiplied by the cap's derivative
    1 - tanh^2 (the chain rule through tanh forgotten)."""

    name = "softcap-derivative-missing"

    def softcap_grad(self, ds, dcap):
        return ds


@mutant("softcap", Problem(**_CAPPED))
class SoftcapDerivativeOfRawLogit(BlockwiseAttention):
    """The cap's derivative taken at the raw logit, 1 - tanh(s)^2, instead of at s / c:
    right only for a cap of 1."""

    name = "softcap-derivative-of-raw-logit"

    def cap_logits(self, p, s, scale, phase):
        capped, dcap = super().cap_logits(p, s, scale, phase)
        if dcap is None:
            return capped, dcap
        t = torch.tanh(s * (p.scale / scale))  # the natural-unit raw logit, uncapped
        return capped, 1.0 - t * t


@mutant("softcap", Problem(**{**_CAPPED, "softmax_scale": 0.5}))
class SoftcapBeforeScale(BlockwiseAttention):
    """The cap applied to Q K^T before the softmax scale, scale * c * tanh(Q K^T / c), instead
    of c * tanh(scale * Q K^T / c) (forward and backward agree with each other)."""

    name = "softcap-before-scale"

    def cap_logits(self, p, s, scale, phase):
        if p.softcap is None:
            return s, None
        t = torch.tanh(s / (p.softcap * scale))  # s / scale is Q K^T
        return t * (p.softcap * scale), 1.0 - t * t


# ----------------------------------------------------------------------------- negative windows
@mutant("window", Problem(seqlen_q=8, seqlen_k=12, window_left=-3, window_right=1))
class CrossedWindowAsFull(BlockwiseAttention):
    """Window bounds that cross (left + right < 0, after causal sets right = 0) are read as
    no window at all: full attention (causal kept) where no key is visible (flash-attn-4's
    _resolve_causal_local_window before 4.0.0b30)."""

    name = "crossed-window-as-full"

    def allowed(self, p, i0, i1, j0, j1, sq, sk, phase):
        wl, wr = p.window_left, 0 if p.causal else p.window_right
        if wl is not None and wr is not None and wl + wr < 0:
            p = p.replace(window_left=None, window_right=None)
        return super().allowed(p, i0, i1, j0, j1, sq, sk, phase)


@mutant("window", Problem(seqlen_q=8, seqlen_k=12, window_left=-2, window_right=4))
class NegativeWindowClamped(BlockwiseAttention):
    """A negative window side is clamped to 0 (an unsigned or max(0, w) bound): the window
    never leaves the diagonal."""

    name = "negative-window-clamped"

    def allowed(self, p, i0, i1, j0, j1, sq, sk, phase):
        clamp = {n: max(0, getattr(p, n)) for n in ("window_left", "window_right") if getattr(p, n) is not None}
        return super().allowed(p.replace(**clamp), i0, i1, j0, j1, sq, sk, phase)


# ----------------------------------------------------------------------------- ALiBi
# slopes that bend the softmax where the logits are (|S| ~ 1): a bias of 0.5 per key of distance
_ALIBI = dict(seqlen_q=8, seqlen_k=12, alibi_slopes=(0.5,))


@mutant("alibi", Problem(**_ALIBI))
class AlibiIgnoredBwd(BlockwiseAttention):
    """The backward recomputes P without the ALiBi bias, against the biased forward's
    statistics (a score_mod or bias applied in the forward kernel only)."""

    name = "alibi-ignored-bwd"

    def alibi_bias(self, p, i0, i1, j0, j1, sq, sk, phase):
        return None if phase == "bwd" else super().alibi_bias(p, i0, i1, j0, j1, sq, sk, phase)


@mutant("alibi", Problem(**{**_ALIBI, "heads_q": 4, "heads_kv": 2, "alibi_slopes": (0.5, 0.25, 0.125, 0.0625)}))
class AlibiSlopeOfKvHead(BlockwiseAttention):
    """Each query head takes the slope of its key/value head's index (alibi_slopes[h // group]
    instead of alibi_slopes[h]): right under MHA, the wrong slope for every GQA group's later
    heads (the slopes indexed by the K/V head a GQA kernel iterates over)."""

    name = "alibi-slope-of-kv-head"

    def alibi_slopes(self, p, phase):
        return super().alibi_slopes(p, phase)[torch.arange(p.heads_q) // p.group]


@mutant("alibi", Problem(**_ALIBI))
class AlibiDistanceTopLeft(BlockwiseAttention):
    """The distance |i - j| without the bottom-right offset seqlen_k - seqlen_q: right on
    square problems and under top-left alignment only."""

    name = "alibi-distance-top-left"

    def alibi_distance(self, p, i0, i1, j0, j1, sq, sk):
        return super().alibi_distance(p.replace(align="top_left"), i0, i1, j0, j1, sq, sk)


@mutant("alibi", Problem(**{**_ALIBI, "causal": True}))
class AlibiCausalColumnBias(BlockwiseAttention):
    """Under causal, the bias slope * j on every row, as FlashAttention 2's causal kernel adds
    it (csrc/flash_attn/src/alibi.h: "we add the same bias vector to all rows"): P, O and
    the gradients are the documented bias's (a per-row constant apart), the LSE is off by
    slope * (i + offset)."""

    name = "alibi-causal-column-bias"

    def alibi_distance(self, p, i0, i1, j0, j1, sq, sk):
        if not p.causal:
            return super().alibi_distance(p, i0, i1, j0, j1, sq, sk)
        return -torch.arange(j0, j1, dtype=torch.float32).expand(i1 - i0, j1 - j0)  # -slope * (-j)


# ----------------------------------------------------------------------------- relative-position bias
# an asymmetric table of R = 2 whose entries bend the softmax where the logits are (|S| ~ 1), on
# unequal lengths (the bottom-right offset matters) with keys beyond R on both sides of a diagonal
_REL_ROW = (1.5, -1.0, 0.5, 2.0, -2.5)
_REL = dict(seqlen_q=8, seqlen_k=12, rel_bias=(_REL_ROW,))


@mutant("relpos", Problem(**_REL))
class RelposIgnoredBwd(BlockwiseAttention):
    """The backward recomputes P without the relative-position bias, against the biased
    forward's statistics (a bias applied in the forward kernel only)."""

    name = "relpos-ignored-bwd"

    def rel_bias_tile(self, p, i0, i1, j0, j1, sq, sk, phase):
        return None if phase == "bwd" else super().rel_bias_tile(p, i0, i1, j0, j1, sq, sk, phase)


@mutant(
    "relpos",
    Problem(
        **{
            **_REL,
            "heads_q": 4,
            "heads_kv": 2,
            "rel_bias": tuple(tuple(x * (h + 1) for x in _REL_ROW) for h in range(4)),
        }
    ),
)
class RelposRowOfKvHead(BlockwiseAttention):
    """Each query head reads the table row of its key/value head's index (table[h // group]
    instead of table[h]): right under MHA, the wrong row for every GQA group's later heads."""

    name = "relpos-row-of-kv-head"

    def rel_table(self, p, phase):
        return super().rel_table(p, phase)[torch.arange(p.heads_q) // p.group]


@mutant("relpos", Problem(**_REL))
class RelposDistanceSignFlipped(BlockwiseAttention):
    """The table indexed by (i + offset) - j instead of j - (i + offset): keys right of the
    diagonal read the left entries; right only for a symmetric table."""

    name = "relpos-distance-sign-flipped"

    def rel_index(self, p, i0, i1, j0, j1, sq, sk):
        return 2 * p.rel_distance - super().rel_index(p, i0, i1, j0, j1, sq, sk)


@mutant("relpos", Problem(**_REL))
class RelposDistanceTopLeft(BlockwiseAttention):
    """The distance j - i without the bottom-right offset seqlen_k - seqlen_q: right on square
    problems and under top-left alignment only."""

    name = "relpos-distance-top-left"

    def rel_index(self, p, i0, i1, j0, j1, sq, sk):
        return super().rel_index(p.replace(align="top_left"), i0, i1, j0, j1, sq, sk)


@mutant("relpos", Problem(**_REL))
class RelposClampRightOnly(BlockwiseAttention):
    """Only the far side is clamped (min(d, R) + R): a key more than R left of the diagonal gets
    a negative column, which wraps to the table's right end (Python's and torch's negative
    indexing). Right wherever no key lies more than R left of a query's diagonal."""

    name = "relpos-clamp-right-only"

    def rel_index(self, p, i0, i1, j0, j1, sq, sk):
        r = p.rel_distance
        i = torch.arange(i0, i1).unsqueeze(1) + p.mask_offset(sq, sk)
        return ((torch.arange(j0, j1).unsqueeze(0) - i).clamp(max=r) + r) % (2 * r + 1)


# ----------------------------------------------------------------------------- layouts
def _handed(inputs, name):
    """The whole tensor the kernel was handed for ``name``: dense [B, S, H, D] or packed."""
    return getattr(inputs, name) if inputs.problem.varlen else inputs.bshd(name)


def _sequence(full, inputs, name, b):
    """Sequence ``b``'s rows of ``full`` (a tensor shaped like ``_handed``)."""
    p = inputs.problem
    if not p.varlen:
        return full[b]
    cu = p.cu_seqlens_q if name in ("q", "do") else p.cu_seqlens_k
    return full[cu[b] : cu[b + 1]]


def _contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(1, n)
    return tuple(reversed(strides))


@mutant("layout", Problem(batch=2, seqlen_q=5, seqlen_k=7, heads_q=2, heads_kv=2, layout="bhsd"))
class ContiguousStridesAssumed(BlockwiseAttention):
    """Loads compute addresses as if every input were contiguous (data pointer plus the
    row-major index), ignoring the strides it was given: a head-major, sliced or stride-0
    input is read as garbage (or past its storage)."""

    name = "contiguous-strides-assumed"

    def load(self, inputs, name, b):
        full = _handed(inputs, name)
        flat = torch.as_strided(full, full.shape, _contiguous_strides(full.shape), full.storage_offset())
        return _sequence(flat, inputs, name, b)


@mutant("layout", Problem(seqlen_q=5, seqlen_k=7, heads_q=2, heads_kv=2, layout="offset"))
class StorageOffsetIgnored(BlockwiseAttention):
    """Loads start at the base of the input's storage, not at its data pointer: a view
    with a non-zero storage offset is read from the wrong place."""

    name = "storage-offset-ignored"

    def load(self, inputs, name, b):
        full = _handed(inputs, name)
        return _sequence(torch.as_strided(full, full.shape, full.stride(), 0), inputs, name, b)


@mutant("layout", Problem(seqlen_q=5, seqlen_k=7, heads_q=2, heads_kv=2, layout="misaligned"))
class AlignedBaseAssumed(BlockwiseAttention):
    """Vectorised loads round the data pointer down to 16 bytes: an input whose data
    pointer is not 16-byte aligned is read shifted."""

    name = "aligned-base-assumed"

    def load(self, inputs, name, b):
        full = _handed(inputs, name)
        per = max(1, 16 // full.element_size())
        off = full.storage_offset() - full.storage_offset() % per
        return _sequence(torch.as_strided(full, full.shape, full.stride(), off), inputs, name, b)


@mutant("layout", Problem(seqlen_q=6, seqlen_k=6, heads_q=2, heads_kv=2, layout="do_transposed"))
class StrideBlindKernelCache(BlockwiseAttention):
    """Compiled load kernels are cached by (shape, dtype) only, and each bakes in the
    strides of the tensor it was first compiled for: a later tensor of the same shape
    with other strides (dO transposed where Q was not, or a new layout of a shape seen
    before) is read with the stale strides."""

    name = "stride-blind-kernel-cache"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._compiled = {}

    def load(self, inputs, name, b):
        full = _handed(inputs, name)
        strides = self._compiled.setdefault((tuple(full.shape), full.dtype), full.stride())
        view = torch.as_strided(full, full.shape, strides, full.storage_offset())
        return _sequence(view, inputs, name, b)


# ----------------------------------------------------------------------------- partial tiles
@mutant("partial-tile", Problem(seqlen_q=40, seqlen_k=24, head_dim_qk=16, head_dim_v=16, dtype="float16"))
class DqFirst16RowsPerTile(BlockwiseAttention):
    """Only the first 16 rows (one MMA M-tile) of each query tile's dQ are accumulated; the
    other rows keep the zeroed workspace (such a kernel's dQ was within tolerance on 0.1% of
    its elements)."""

    name = "dq-first-16-rows"

    def reduce_dq(self, acc, parts):
        super().reduce_dq(acc, [(r0, min(r1, r0 + 16), part[:, :16]) for r0, r1, part in parts])


# ----------------------------------------------------------------------------- FP8 scaling
# Deviations of the FP8 emulation (kernels/variants.py, fp8-current-scaling): each one a scale
# factor a careless FP8 kernel gets wrong; the clean kernel is the emulation itself.
_FP8 = dict(dtype="float8_e4m3fn", head_dim_qk=32, head_dim_v=32)


@mutant("fp8-scaling", Problem(seqlen_q=8, seqlen_k=8, **_FP8), clean=Fp8CurrentScaling)
class Fp8DoDescaleForgotten(Fp8CurrentScaling):
    """dO's descale is never applied: the backward reads the stored FP8 dO as if its scale
    were 1, so dQ, dK and dV come out scaled by dO's scale (a power of two, 64 for N(0, 1) dO
    in e4m3)."""

    name = "fp8-do-descale-forgotten"

    def descale_of(self, inputs, name):
        return 1.0 if name == "do" else super().descale_of(inputs, name)


@mutant(
    "fp8-scaling", Problem(seqlen_q=8, seqlen_k=8, values="mixed_do", value_scale=1.0, **_FP8), clean=Fp8CurrentScaling
)
class Fp8DoDescaleTwice(Fp8CurrentScaling):
    """dO's descale is applied twice (once folded into the dP GEMM's epilogue, once more in
    the dV one): the gradients are divided by dO's scale."""

    name = "fp8-do-descale-twice"

    def descale_of(self, inputs, name):
        d = super().descale_of(inputs, name)
        return d * d if name == "do" else d


@mutant(
    "fp8-scaling",
    Problem(seqlen_q=16, seqlen_k=16, values="mixed_do", value_scale=3.0, **_FP8),
    clean=Fp8CurrentScaling,
)
class Fp8DsScaleOfP(Fp8CurrentScaling):
    """dS is stored with P's scale (scale_dP = scale_s, one scale register reused) instead of
    one from dS's own amax: large gradients saturate at the format's largest value and small
    ones flush to zero."""

    name = "fp8-ds-scale-of-p"

    def ds_store_scale(self, amax_ds):
        return fp8.fmt(self.dtype).p_scale


@mutant("fp8-scaling", Problem(seqlen_q=8, seqlen_k=8, **_FP8), clean=Fp8CurrentScaling)
class Fp8DvDescaleOfDk(Fp8CurrentScaling):
    """dV is stored with its own scale but read back with dK's descale (the two outputs'
    scale pointers swapped): dV comes out multiplied by scale_dV / scale_dK, a power of two
    whenever the two amaxes lie in different binades."""

    name = "fp8-dv-descale-of-dk"

    def output_descale(self, name, scale):
        if name == "dv":
            return 1.0 / self.scales["dk"]
        return super().output_descale(name, scale)


# ----------------------------------------------------------------------------- sparse masks
# Faults only a sparse Problem shows (difftest/model/sparsity.py): each deviates from the sparse
# blockwise kernel, and on a dense Problem is that kernel exactly.
@mutant(
    "sparse",
    Problem(seqlen_q=40, seqlen_k=40, heads_q=2, heads_kv=2, sparsity=Sparsity("block", 16, 16, drop=50, seed=1)),
    clean=SparseBlockwiseAttention,
)
class SparseBackwardDense(SparseBlockwiseAttention):
    """The backward ignores the sparse mask (every key block of a query block recomputed, for a
    block mask and a top-k selection alike): the forward exact, dQ/dK/dV silently wrong
    (flash-attention#2623: block-sparse backward, forward exact)."""

    name = "sparse-bwd-ignores-mask"

    def sparse_allowed(self, p, i0, i1, j0, j1, sq, sk, phase):
        if phase == "bwd":
            return torch.ones(i1 - i0, j1 - j0, dtype=torch.bool)
        return super().sparse_allowed(p, i0, i1, j0, j1, sq, sk, phase)


@mutant(
    "sparse",
    Problem(seqlen_q=40, seqlen_k=40, heads_q=2, heads_kv=2, sparsity=Sparsity("block", 8, 24, drop=40, seed=2)),
    clean=SparseBlockwiseAttention,
)
class SparseBackwardTransposed(SparseBlockwiseAttention):
    """The backward walks the block mask transposed (key block kb of query block qb read as
    query block kb's key block qb: Flex's q_indices built from kv_indices the wrong way): right
    only where the pattern is symmetric."""

    name = "sparse-bwd-transposed"

    def sparse_allowed(self, p, i0, i1, j0, j1, sq, sk, phase):
        if phase != "bwd":
            return super().sparse_allowed(p, i0, i1, j0, j1, sq, sk, phase)
        sp = p.sparsity
        sel = selected_blocks(p, sq, sk)
        qb = torch.clamp(torch.arange(i0, i1), max=max(sq - 1, 0)) // sp.block_q
        kb = torch.clamp(torch.arange(j0, j1), max=max(sk - 1, 0)) // sp.block_k
        t = torch.zeros(max(sel.shape[0], sel.shape[1]), max(sel.shape[0], sel.shape[1]), dtype=torch.bool)
        t[: sel.shape[1], : sel.shape[0]] = sel.T
        return t[qb][:, kb]


@mutant(
    "sparse",
    Problem(seqlen_q=24, seqlen_k=24, sparsity=Sparsity("topk", 1, 1, topk=3, empty=3, seed=1)),
    clean=SparseBlockwiseAttention,
)
class SparseEmptyRowNan(SparseBlockwiseAttention):
    """A query row whose top-k selection or block row is empty gets NaN gradients (its dQ
    divided by a zero row sum: cudnn-frontend#676); rows emptied by causal or a window are right."""

    name = "sparse-empty-row-nan"

    def backward(self, inputs, fwd, ctx, out=None):
        res = super().backward(inputs, fwd, ctx, out)
        p = inputs.problem
        if p.sparse:
            sp = p.sparsity
            for b, q0, sq, k0, sk in self.sequences(p):
                if sq and sk:
                    empty = ~selected_blocks(p, sq, sk).any(dim=1)  # per query block
                    rows = empty[torch.arange(sq) // sp.block_q]
                    res.dq[q0 : q0 + sq][rows] = float("nan")
        return res


@mutant(
    "sparse",
    Problem(seqlen_q=24, seqlen_k=24, sparsity=Sparsity("topk", 1, 1, topk=4, dup=50, seed=1)),
    clean=SparseBlockwiseAttention,
)
class SparseTopkDuplicatesTwice(SparseBlockwiseAttention):
    """A key a top-k row selects twice is counted twice (the gathered list softmaxed as is: its
    logit gains log 2), where the kernels' convention counts the selected set once."""

    name = "sparse-topk-dup-twice"

    def selection_weight(self, s, p, i0, i1, j0, j1, sq, sk, phase):
        if not p.sparse or p.sparsity.kind != "topk":
            return s
        sp = p.sparsity
        mult = _multiplicity(sp, sq, sk)
        qb = torch.clamp(torch.arange(i0, i1), max=max(sq - 1, 0)) // sp.block_q
        kb = torch.clamp(torch.arange(j0, j1), max=max(sk - 1, 0)) // sp.block_k
        return s + torch.log(mult[qb][:, kb].clamp_min(1.0))


def _multiplicity(sp, sq, sk) -> torch.Tensor:
    return torch.tensor(sp.multiplicity(sq, sk), dtype=torch.float32).reshape(sp.blocks(sq, sk))


# ----------------------------------------------------------------------------- catalogue
MUTANTS: dict[str, Mutant] = {m.name: m for m in _CATALOGUE}

EXTRA_SOURCES = ("difftest.kernels.tilelang.mutants",)  # modules with a MUTANTS dict of the same shape


def _load_extra() -> tuple[dict, dict]:
    return load_extra(EXTRA_SOURCES, "MUTANTS", MUTANTS)


def all_mutants() -> dict[str, Mutant]:
    """Our blockwise mutants plus those of optional sources (TileLang) that load here."""
    extra, _ = _load_extra()
    return {**MUTANTS, **extra}


def skipped_sources() -> dict[str, str]:
    """Optional mutant sources (or entries) left out here, with the reason."""
    return _load_extra()[1]


class Catalogue:
    """What the engine sees of the catalogue (entry-point group ``difftest.catalogues``,
    prefix ``mutant``): ``difftest.execute.adapter.get("mutant:NAME")`` builds ``entries()[NAME]``."""

    prefix = "mutant"

    def entries(self) -> dict[str, Mutant]:
        return all_mutants()

    def skipped(self) -> dict[str, str]:
        return skipped_sources()


CATALOGUE = Catalogue()


def get(name: str) -> Mutant:
    cat = all_mutants()
    if name not in cat:
        raise KeyError(f"unknown mutant {name!r}: known mutants are {sorted(cat)}")
    return cat[name]
