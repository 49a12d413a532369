"""Memory-bounded reference for long sequences (float64 or float32, CPU or CUDA).

The dense reference (reference.py) keeps an autograd graph over the whole
[heads, seqlen_q, seqlen_k] score matrix, several copies of it: a 16k x 16k float64
problem with 8 heads needs ~80 GiB. This oracle has the same semantics (every mask,
alignment, window, sink, GQA/MQA, varlen with empty sequences, unused tail tokens) but
walks each sequence in query chunks and writes the backward out explicitly with the
FlashAttention formulas:

    S = scale * Q K^T (+ mask)          LSE_i = log(sum_j exp(S_ij) + exp(sink_h))
    P = exp(S - LSE)                    O = P V
    Delta_i = sum_d dO_id * O_id        dV = P^T dO
    dP = dO V^T                         dS = P * (dP - Delta)
    dQ = scale * dS K                   dK = scale * dS^T Q
    with a softcap c: S = c tanh(scale Q K^T / c) (before the mask) and dS times 1 - tanh^2
    (computed eagerly: the fused passes and the shift bound below are for uncapped logits);
    with ALiBi slopes or a relative-position table: S plus the bias (-slope_h |i + offset - j|,
    plus table[h][clamp(j - (i + offset), -R, R) + R]) after the cap, before the mask
    (eagerly too; dS is unchanged: the bias is a constant)
    dSink_h = -sum_i P_sink_i * Delta_i,   P_sink_i = exp(sink_h - LSE_i)

Each chunk holds complete key rows, so LSE is exact for the chunk's rows and no online
rescaling is needed; dK, dV and dSink accumulate over chunks. Rows that see no key and
have no sink get LSE = -inf, O = 0 and zero gradients.

Speed: a chunk of rows r0..r1 only reads the keys some row of it may see
(``Problem.key_range`` is monotone in the row, so that is one contiguous band
[lo(r0), hi(r1-1)) ): the fully masked blocks of causal and windowed problems are never
computed. A masked key contributes an exact 0 (P = exp(-inf) = 0) to every sum, so
skipping it changes no value; it can change the order in which a GEMM adds the rest, i.e.
the last bit (tests/test_oracles.py: equal to the unskipped walk within 1e-15 relative).
Rows per chunk are chosen so that heads x rows x band width fills an element budget sized
to the device (``auto_chunk_elements``: free CUDA memory from ``torch.cuda.mem_get_info``),
so causal chunks grow as their band narrows. Every head is in one batched GEMM per step
(tensors laid out [heads_kv, rows x group, dim] once per sequence), the softmax and dS are
computed in place, and the term magnitudes stay on the device until the end (no host
synchronisation inside the loop). Per chunk, the score-sized float64 work is the six GEMMs
of the formulas above and as few elementwise passes as eager PyTorch allows: the softmax
scale multiplies the small Q chunk, only the partially masked columns are filled with -inf
(causal: the diagonal block, not the band), P is never normalised in place (1 / rowsum is
applied to the [rows, dim] operands and results), and the error-budget magnitudes (sums of
non-negative terms, which only set the gates' floors) are computed in float32 on the CPU and
in bfloat16 GEMMs on CUDA, scaled up to bound the float64 sums (``MAGNITUDES_DTYPE``), instead
of four more float64 GEMMs (``magnitudes_dtype``). On CUDA the remaining passes of a large
chunk (exp with the row sum; dS with the magnitude terms) are Triton kernels, one pass each,
with the Q K^T and dO V^T GEMMs inside them where the shift is the bound (fused_passes.py,
``FUSED_PASSES``, ``FUSED_GEMMS``).

Shape of the code: ``chunked_reference`` decides once what it runs (a ``PassPlan``: the
precisions, magnitudes or not, flash rounding and its overflow edge, the chunking, fused
and CUDA-form passes), then walks sequences (``_Sequence``: operands laid out per key/value
head) and their chunks (``_Chunk``, from ``chunk_plan``), calling one function per pass:
``_softmax_pass`` (S, mask, shift, exp, row sums, LSE), ``_forward_pass`` (O, Delta, dV),
``_dp_pass``, ``_magnitude_pass``, ``_ds_pass`` and ``_gradient_pass`` (dQ, dK, dSink), which
write into ``_Accumulators``. tests/test_chunked_pins.py pins its outputs bit for bit.
"""

import dataclasses
import math
import warnings
from dataclasses import dataclass

import torch

from difftest.errors import InputError
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .reference import allowed_mask, score_bias

CHUNK_PRECISIONS = ("float64", "float32")
MAGNITUDE_DTYPES = ("float64", "float32", "bfloat16")
# Score elements (heads_q x chunk x band width) one chunk may hold on the CPU: 2**24 float64
# scores are 128 MiB, and a chunk keeps about LIVE_SCORE_TENSORS such tensors alive.
DEFAULT_MAX_CHUNK_ELEMENTS = 2**24
LIVE_SCORE_TENSORS = 4  # P, dP/dS, the magnitudes' |terms|, one elementwise temporary
# On CUDA: at most this share of the free memory, and at most this many elements (the free
# share leaves room for the kernel under test). 2**31: on the H200 the 128k truth took 4.41 s
# in 54 chunks against 4.96 s in 130 at 2**29; the
# long-K GEMMs (P V, dS K) of small chunks ran on small cuBLAS tiles.
CUDA_FREE_SHARE = 0.5
CUDA_MAX_CHUNK_ELEMENTS = 2**31
# A masked problem is cut into at least this many chunks per sequence (a causal walk in n
# chunks computes (n + 1) / 2n of the score square), of at least MIN_SKIP_ROWS rows each
# (smaller GEMMs lose more to overhead than the skipped blocks save) and at most
# MAX_SKIP_ROWS (more rows no longer make the GEMMs faster, and the band keeps following the
# mask: on the H200, 64k causal 1.02 s at 2048 rows per chunk against 1.11 s at 4096).
SKIP_CHUNKS = 16
MIN_SKIP_ROWS = 64
MAX_SKIP_ROWS = 2048


def rows_allowed(problem: Problem, r0: int, r1: int, sq: int, sk: int, device) -> torch.Tensor:
    """[r1 - r0, sk] bool: rows r0..r1-1 of ``allowed_mask(problem, sq, sk)``."""
    return allowed_mask(problem, sq, sk, device, rows=(r0, r1))


def chunk_rows(problem: Problem, sk: int, max_chunk_elements: int = DEFAULT_MAX_CHUNK_ELEMENTS) -> int:
    """Query rows per chunk so that heads_q x rows x sk stays within the budget (>= 1):
    the rows of a chunk that sees every key."""
    if max_chunk_elements < 1:
        raise InputError(f"max_chunk_elements={max_chunk_elements!r}: allowed an int >= 1")
    return max(1, max_chunk_elements // max(1, problem.heads_q * sk))


def auto_chunk_elements(device, dtype=torch.float64) -> int:
    """The element budget of one chunk on ``device``: DEFAULT_MAX_CHUNK_ELEMENTS on the CPU;
    on CUDA, CUDA_FREE_SHARE of the free memory (the device's and the allocator's unused
    cache) over LIVE_SCORE_TENSORS score tensors of ``dtype``, at most CUDA_MAX_CHUNK_ELEMENTS."""
    device = torch.device(device)
    if device.type != "cuda":
        return DEFAULT_MAX_CHUNK_ELEMENTS
    free, _ = torch.cuda.mem_get_info(device)
    # plus what PyTorch's allocator holds unused: after one large truth the cache keeps its chunks,
    # which mem_get_info counts as taken, and the next call would otherwise plan smaller chunks
    # (on the H200: 61 chunks instead of 32 at 64k, 1.20 s instead of 0.92 s)
    free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    size = torch.empty((), dtype=dtype).element_size()
    return max(2**16, min(CUDA_MAX_CHUNK_ELEMENTS, int(free * CUDA_FREE_SHARE) // (size * LIVE_SCORE_TENSORS)))


def key_band(problem: Problem, r0: int, r1: int, sq: int, sk: int) -> tuple[int, int]:
    """[lo, hi): the keys some query row r0..r1-1 of a (sq, sk) sequence may see (every
    key outside is masked for all of them); lo == hi when none sees any."""
    lo = min(sk, problem.key_range(r0, sq, sk)[0])
    hi = max(lo, min(sk, problem.key_range(r1 - 1, sq, sk)[1]))  # a top-left row past the keys starts beyond sk
    return lo, hi


def chunk_plan(
    problem: Problem, sq: int, sk: int, budget: int, rows: int | None = None, skip_masked: bool = True
) -> list[tuple[int, int, int, int]]:
    """(r0, r1, lo, hi) per chunk: query rows [r0, r1) against keys [lo, hi). ``rows``
    fixes the rows per chunk; otherwise each chunk takes the most rows whose
    heads_q x rows x band width stays within ``budget`` (at least one row), and a masked
    problem's chunks at most min(MAX_SKIP_ROWS, max(MIN_SKIP_ROWS, sq / SKIP_CHUNKS)) rows,
    so that its band follows the mask."""
    h = problem.heads_q
    band = (lambda a, b: key_band(problem, a, b, sq, sk)) if skip_masked else (lambda a, b: (0, sk))
    cap = min(MAX_SKIP_ROWS, max(MIN_SKIP_ROWS, -(-sq // SKIP_CHUNKS))) if skip_masked and problem.masked else sq
    plan, r0 = [], 0
    while r0 < sq:
        if rows is not None:
            r1 = min(sq, r0 + rows)
        else:  # the band only widens with more rows: binary search the largest that fits
            lo_n, hi_n = 1, min(cap, sq - r0)
            while lo_n < hi_n:
                mid = (lo_n + hi_n + 1) // 2
                a, b = band(r0, r0 + mid)
                if h * mid * max(1, b - a) <= budget:
                    lo_n = mid
                else:
                    hi_n = mid - 1
            r1 = r0 + lo_n
        plan.append((r0, r1, *band(r0, r1)))
        r0 = r1
    return plan


def _fully_allowed(problem: Problem, r0: int, r1: int, lo: int, hi: int, sq: int, sk: int) -> bool:
    """Every row r0..r1-1 sees every key lo..hi-1 (no mask needed for this block); never
    assumed of a sparse problem (its selected blocks are no band)."""
    if problem.sparse:
        return False
    first, last = problem.key_range(r0, sq, sk), problem.key_range(r1 - 1, sq, sk)
    return last[0] <= lo and first[1] >= hi


@torch.no_grad()
def chunked_reference(
    inputs: Inputs,
    precision: str = "float64",
    *,
    max_chunk_elements: int | None = None,
    chunk: int | None = None,
    magnitudes: bool = False,
    magnitudes_dtype: str | None = None,
    flash_rounding: bool = False,
    skip_masked: bool = True,
    fused_passes: bool | None = None,
    fused_gemms: bool | None = None,
) -> Outputs:
    """O, LSE, dQ, dK, dV (and dSink) for ``inputs`` in ``precision``, computed in query
    chunks. ``chunk`` fixes the rows per chunk (tests use it to force many chunks);
    otherwise they follow ``max_chunk_elements`` (None: ``auto_chunk_elements``).
    ``skip_masked=False`` walks every key of every row (the masked blocks computed and
    discarded), for comparison. ``magnitudes``: also record, per output, the largest sum of
    absolute terms that forms one element (e.g. for dQ, scale * sum_j P_ij (|dP_ij| +
    |Delta_i|) |K_j|): the size of what a kernel rounds while computing it, which can be
    far above the result's own size when terms cancel (see gates.budget_gate); the sums of
    dK, dV and dSink run over every query row, accumulated across chunks.
    ``magnitudes_dtype``: the precision of those sums of non-negative terms (no
    cancellation, so float32 is within ~1e-6 relative of float64, TF32 GEMMs on CUDA within
    ~1e-3: ``MAGNITUDE_TF32``, and "bfloat16" within ~1e-2, scaled up by MAGNITUDE_MARGIN);
    None: ``MAGNITUDES_DTYPE`` for the device type; "float64" computes them like the values
    (twice the float64 GEMMs). They only scale the budget floor, never a value. ``flash_rounding`` (float32
    only): round where a correct flash kernel must (oracles/flash_style.py): P and dS to
    the input dtype before the GEMMs that consume them, O to the input dtype before
    Delta = rowsum(O * dO) (the stored O), and every output to the input dtype; the
    result then also carries ``overflow_edge`` (``_overflow_edge``): the rows of dQ and dK
    where a correct kernel's dS may round to an infinity though this one's does not (None
    where no dS edge is in float32's finite range: bfloat16 and float32 inputs).
    ``fused_passes`` (float64): the score-sized elementwise passes in Triton kernels
    (fused_passes.py) for chunks of at least FUSED_MIN_SCORES scores; None: where
    ``FUSED_PASSES`` says for the device type (CUDA) and Triton imports; False: eager.
    ``fused_gemms`` (None: ``FUSED_GEMMS``): where the passes are fused and the shift is the
    bound, S = Q K^T and dP = dO V^T computed inside them (never stored)."""
    _check_options(precision, magnitudes_dtype, chunk, max_chunk_elements, flash_rounding)
    x = inputs.upcast(getattr(torch, precision))
    plan = PassPlan.of(
        inputs.q.dtype,
        x.q.device,
        precision,
        max_chunk_elements,
        chunk,
        magnitudes,
        magnitudes_dtype,
        flash_rounding,
        skip_masked,
        fused_passes,
        fused_gemms,
    )
    p = inputs.problem
    if p.softcap is not None or p.biased:
        # capped or biased logits: the eager passes only (the fused ones and the shift bound know no tanh, no bias)
        plan = dataclasses.replace(plan, fused=None, shift_in_gemm=False)
    acc = _Accumulators(plan, p, x)
    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        if sq == 0:
            continue
        seq = _Sequence.of(plan, p, x, b)
        chunks = chunk_plan(p, sq, sk, plan.budget, plan.rows, plan.skip_masked)
        shifts = (
            _shift_bounds(p, seq.qh, seq.khn, seq.kh, chunks, sq, sk, p.scale, acc.sink)
            if seq.khn is not None
            else [None] * len(chunks)
        )
        for (r0, r1, lo, hi), m in zip(chunks, shifts):
            ch = _Chunk.of(p, seq, r0, r1, lo, hi, m)
            _softmax_pass(plan, p, seq, ch, acc.sink)
            _forward_pass(plan, seq, ch)
            _dp_pass(plan, ch)
            if acc.mag is not None:
                _magnitude_pass(plan, p, seq, ch, acc)
            _ds_pass(plan, p, seq, ch, acc)
            _gradient_pass(plan, p, seq, ch, acc)
        acc.store_sequence(seq)
    return acc.outputs(plan)


@dataclass(frozen=True)
class PassPlan:
    """What one ``chunked_reference`` call runs, decided once from its options and the device:
    the precision of the values and of the magnitudes (None: no magnitudes pass), whether
    flash rounding and its overflow edge run, how the rows are cut into chunks, and which
    passes may be fused (Triton) or take CUDA's forms (the shift in the GEMM, split terms)."""

    precision: str
    dtype: torch.dtype  # the values'
    low: torch.dtype  # the inputs' (what flash rounding rounds to)
    magnitudes: torch.dtype | None  # the magnitude sums' (None: not recorded)
    acc: torch.dtype  # dK's and dV's magnitude sums across chunks
    flash_rounding: bool
    edge_at: float | None  # the dS overflow edge's magnitude (flash rounding of fp16 inputs), else None
    budget: int  # score elements per chunk
    rows: int | None  # fixed rows per chunk (None: from the budget)
    skip_masked: bool
    fused: object  # oracles/fused_passes.py, or None: eager passes only
    fused_wanted: bool | None  # the fused_passes option: True insists, None falls back to eager
    fused_gemms: bool
    split_terms: bool
    shift_in_gemm: bool

    @classmethod
    def of(
        cls,
        low,
        dev,
        precision,
        max_chunk_elements,
        chunk,
        magnitudes,
        magnitudes_dtype,
        flash_rounding,
        skip_masked,
        fused_passes,
        fused_gemms,
    ) -> "PassPlan":
        dt = getattr(torch, precision)
        # the magnitudes never in a finer precision than the values
        mdt = (
            torch.float32
            if precision == "float32"
            else getattr(torch, magnitudes_dtype or MAGNITUDES_DTYPE.get(dev.type, "float32"))
        )
        return cls(
            precision=precision,
            dtype=dt,
            low=low,
            magnitudes=mdt if magnitudes else None,
            acc=torch.float32 if mdt == torch.bfloat16 else mdt,
            flash_rounding=flash_rounding,
            # the rows of dQ and dK a dS at the input dtype's overflow edge feeds (flash_rounding of fp16 inputs)
            edge_at=_overflow_edge_at(low) if flash_rounding else None,
            budget=max_chunk_elements if max_chunk_elements is not None else auto_chunk_elements(dev, dt),
            rows=chunk,
            skip_masked=skip_masked,
            fused=_fused_module(dev, fused_passes) if precision == "float64" else None,
            fused_wanted=fused_passes,
            fused_gemms=FUSED_GEMMS if fused_gemms is None else fused_gemms,
            split_terms=SPLIT_TERMS.get(dev.type, False),
            shift_in_gemm=precision == "float64" and SHIFT_IN_GEMM.get(dev.type, False),
        )

    def rnd(self, t):
        """What a flash kernel stores or feeds to the MMA in the input dtype."""
        return t.to(self.low).to(self.dtype) if self.flash_rounding else t


def _check_options(precision, magnitudes_dtype, chunk, max_chunk_elements, flash_rounding) -> None:
    if precision not in CHUNK_PRECISIONS:
        raise InputError(f"precision={precision!r}: allowed {CHUNK_PRECISIONS}")
    if magnitudes_dtype is not None and magnitudes_dtype not in MAGNITUDE_DTYPES:
        raise InputError(f"magnitudes_dtype={magnitudes_dtype!r}: allowed None or one of {MAGNITUDE_DTYPES}")
    if chunk is not None and (not isinstance(chunk, int) or chunk < 1):
        raise InputError(f"chunk={chunk!r}: allowed None or an int >= 1")
    if max_chunk_elements is not None and (not isinstance(max_chunk_elements, int) or max_chunk_elements < 1):
        raise InputError(f"max_chunk_elements={max_chunk_elements!r}: allowed None or an int >= 1")
    if flash_rounding and precision != "float32":
        raise InputError(f"flash_rounding with precision={precision!r}: allowed only 'float32'")


class _Accumulators:
    """The outputs being written across sequences and chunks (packed THD), the magnitudes'
    running maxima, the overflow edge's rows and the count of fused chunks."""

    def __init__(self, plan: PassPlan, p: Problem, x: Inputs):
        dt, dev = plan.dtype, x.q.device
        Hq, Hkv, G, D, Dv = p.heads_q, p.heads_kv, p.group, p.head_dim_qk, p.head_dim_v
        self.o = torch.zeros(p.total_q, Hq, Dv, dtype=dt, device=dev)
        self.lse = torch.full((p.total_q, Hq), float("-inf"), dtype=torch.float32, device=dev)
        self.dq = torch.zeros(p.total_q, Hq, D, dtype=dt, device=dev)
        self.dk = torch.zeros(p.total_k, Hkv, D, dtype=dt, device=dev)
        self.dv = torch.zeros(p.total_k, Hkv, Dv, dtype=dt, device=dev)
        self.sink = None if x.sink is None else x.sink.to(dt).view(Hkv, 1, G)  # [Hkv, 1, G]
        self.dsink = None if self.sink is None else torch.zeros(Hkv, G, dtype=dt, device=dev)
        zero = torch.zeros((), dtype=torch.float64, device=dev)
        self.mag = {n: zero for n in ("o", "dq", "dk", "dv", "dsink")} if plan.magnitudes is not None else None
        self.dsink_terms = None if self.sink is None or self.mag is None else torch.zeros(Hkv, G, dtype=dt, device=dev)
        self.edge = (
            None
            if plan.edge_at is None
            else {
                "dq": torch.zeros(p.total_q, Hq, dtype=torch.bool, device=dev),
                "dk": torch.zeros(p.total_k, Hkv, dtype=torch.bool, device=dev),
            }
        )
        self.scale = p.scale
        self.fused_chunks = 0  # chunks whose passes were both fused
        self.gemm_chunks = 0  # of those, chunks whose Q K^T and dO V^T GEMMs were fused with them

    def store_chunk(self, seq: "_Sequence", ch: "_Chunk", dqc: torch.Tensor) -> None:
        """The chunk's rows of O, dQ and LSE, each copied once into its rows (a reshape of the
        permuted chunk would copy it twice)."""
        q0, r0, r1, c, Hkv, G = seq.q0, ch.r0, ch.r1, ch.c, seq.Hkv, seq.G
        oc = ch.oc
        self.o[q0 + r0 : q0 + r1].view(c, Hkv, G, oc.shape[-1]).copy_(oc.view(Hkv, c, G, -1).permute(1, 0, 2, 3))
        self.dq[q0 + r0 : q0 + r1].view(c, Hkv, G, dqc.shape[-1]).copy_(dqc.view(Hkv, c, G, -1).permute(1, 0, 2, 3))
        self.lse[q0 + r0 : q0 + r1].view(c, Hkv, G).copy_(ch.row_lse.permute(1, 0, 2))  # to float32, as .float()

    def store_sequence(self, seq: "_Sequence") -> None:
        k0, sk = seq.k0, seq.sk
        self.dk[k0 : k0 + sk] = seq.dkh.permute(1, 0, 2)
        self.dv[k0 : k0 + sk] = seq.dvh.permute(1, 0, 2)
        if seq.dk_edge is not None:
            self.edge["dk"][k0 : k0 + sk] = seq.dk_edge.permute(1, 0)
        if self.mag is not None:
            self.mag["dk"] = torch.maximum(self.mag["dk"], _top(seq.dk_terms) * self.scale)
            self.mag["dv"] = torch.maximum(self.mag["dv"], _top(seq.dv_terms))

    def outputs(self, plan: PassPlan) -> Outputs:
        mag = self.mag
        if self.dsink_terms is not None:
            mag["dsink"] = _top(self.dsink_terms)
        dsink = None if self.dsink is None else self.dsink.reshape(-1).float()
        o, dq, dk, dv = self.o, self.dq, self.dk, self.dv
        if plan.flash_rounding:  # the kernel's outputs are stored in the input dtype
            o, dq, dk, dv = (t.to(plan.low) for t in (o, dq, dk, dv))
        out = Outputs(o=o, lse=self.lse, dq=dq, dk=dk, dv=dv, dsink=dsink)
        out.overflow_edge = self.edge
        out.fused_chunks = self.fused_chunks  # what the bench reports (its "passes")
        out.fused_gemm_chunks = self.gemm_chunks
        if mag is not None:  # one host read, at the end
            margin = MAGNITUDE_MARGIN.get(plan.magnitudes, 1.0)
            out.magnitude = dict(zip(mag, (torch.stack([t.to(torch.float64) for t in mag.values()]) * margin).tolist()))
        else:
            out.magnitude = None
        return out


@dataclass
class _Sequence:
    """One sequence's operands laid out [Hkv, rows, G, dim] (a chunk of rows is then a
    [Hkv, rows x G, dim] view) and [Hkv, keys, dim], and its dK and dV sums over the chunks."""

    q0: int
    k0: int
    sq: int
    sk: int
    Hkv: int
    G: int
    qh: torch.Tensor
    doh: torch.Tensor
    kh: torch.Tensor
    vh: torch.Tensor
    dkh: torch.Tensor
    dvh: torch.Tensor
    khn: torch.Tensor | None = None  # |k_j| per key, where the softmax shift is the bound (_shift_bound)
    dk_edge: torch.Tensor | None = None  # [Hkv, sk] bool: keys whose dK row a dS at the overflow edge feeds
    absolute: tuple | None = None  # |K|, |V|, |Q|, |dO| in the magnitudes' dtype
    dk_terms: torch.Tensor | None = None
    dv_terms: torch.Tensor | None = None

    @classmethod
    def of(cls, plan: PassPlan, p: Problem, x: Inputs, b: int) -> "_Sequence":
        sq, sk = p.seqlens_q[b], p.seqlens_k[b]
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        Hkv, G, D, Dv = p.heads_kv, p.group, p.head_dim_qk, p.head_dim_v
        qh = x.q[q0 : q0 + sq].view(sq, Hkv, G, D).permute(1, 0, 2, 3).contiguous()
        doh = x.do[q0 : q0 + sq].view(sq, Hkv, G, Dv).permute(1, 0, 2, 3).contiguous()
        kh = x.k[k0 : k0 + sk].permute(1, 0, 2).contiguous()  # [Hkv, sk, D]
        vh = x.v[k0 : k0 + sk].permute(1, 0, 2).contiguous()  # [Hkv, sk, Dv]
        seq = cls(q0, k0, sq, sk, Hkv, G, qh, doh, kh, vh, dkh=torch.zeros_like(kh), dvh=torch.zeros_like(vh))
        if plan.shift_in_gemm and sk:  # see _shift_bound
            seq.khn = kh.norm(dim=-1)  # [Hkv, sk]
        if plan.edge_at is not None:
            seq.dk_edge = torch.zeros(Hkv, sk, dtype=torch.bool, device=kh.device)
        if plan.magnitudes is not None:  # |inputs| are exact in float32 (they come from float16/bfloat16/float32)
            seq.absolute = kabs, vabs, _, _ = tuple(t.abs().to(plan.magnitudes) for t in (kh, vh, qh, doh))
            seq.dk_terms = torch.zeros_like(kabs, dtype=plan.acc)
            seq.dv_terms = torch.zeros_like(vabs, dtype=plan.acc)
        return seq


@dataclass
class _Chunk:
    """Query rows [r0, r1) against keys [lo, hi) of one sequence, and what its passes hand on."""

    r0: int
    r1: int
    lo: int
    hi: int
    m: torch.Tensor | None  # the softmax shift when it is the bound (_shift_bounds), else None
    qc: torch.Tensor  # [Hkv, rows x G, D]
    doc: torch.Tensor  # [Hkv, rows x G, Dv]
    kb: torch.Tensor  # [Hkv, keys, D]
    vb: torch.Tensor  # [Hkv, keys, Dv]
    fused: bool = False  # the score-sized passes run in Triton (fused_passes.py)
    gemm: object = None  # the fused scores_exp's (E, row sums), or FAILED: S was computed by torch
    e: torch.Tensor | None = None  # E = exp(S - m), [Hkv, rows, G, keys]
    e2: torch.Tensor | None = None  # E (P in float32) as [Hkv, rows x G, keys]
    total: torch.Tensor | None = None  # the row sums
    m_safe: torch.Tensor | None = None
    row_lse: torch.Tensor | None = None
    seen: torch.Tensor | None = None  # the rows that see a key or a sink
    inv2: torch.Tensor | None = None  # 1 / row sum per row (float64), None where E is divided in place
    oc: torch.Tensor | None = None
    delta: torch.Tensor | None = None
    dp: torch.Tensor | None = None  # dP, then dS in its place
    terms: object = None  # the fused pass's (P, P (|dP| + |Delta|)), or FAILED
    dcap: torch.Tensor | None = None  # with a softcap: d(capped)/d(raw) = 1 - tanh^2 of S, [Hkv, rows x G, keys]

    @classmethod
    def of(cls, p: Problem, seq: _Sequence, r0: int, r1: int, lo: int, hi: int, m) -> "_Chunk":
        c = r1 - r0
        return cls(
            r0,
            r1,
            lo,
            hi,
            m,
            qc=seq.qh[:, r0:r1].reshape(seq.Hkv, c * seq.G, p.head_dim_qk),
            doc=seq.doh[:, r0:r1].reshape(seq.Hkv, c * seq.G, p.head_dim_v),
            kb=seq.kh[:, lo:hi],
            vb=seq.vh[:, lo:hi],
        )

    @property
    def c(self) -> int:
        return self.r1 - self.r0

    @property
    def w(self) -> int:
        return self.hi - self.lo

    def nrm(self, t):
        """t / total per row (t's rows are the chunk's query rows)."""
        return t if self.inv2 is None else t * self.inv2


def _softmax_pass(plan: PassPlan, p: Problem, seq: _Sequence, ch: _Chunk, sink) -> None:
    """E = exp(S - m) with its row sums and the rows' LSE: S from the fused GEMM (the shift is
    the bound and the chunk is large), from a GEMM with the shift as one more column, or from
    a plain GEMM with the row maximum; exp and the row sum fused where they may be."""
    Hkv, G, c, w, m = seq.Hkv, seq.G, ch.c, ch.w, ch.m
    r0, r1, lo, hi, sq, sk, scale = ch.r0, ch.r1, ch.lo, ch.hi, seq.sq, seq.sk, p.scale
    fz, wanted, dt, dev = plan.fused, plan.fused_wanted, plan.dtype, ch.qc.device
    fused = fz is not None and (wanted or not _FUSED.get("failed")) and w > 0 and Hkv * c * G * w >= FUSED_MIN_SCORES
    gemm = FAILED
    if m is not None and fused and plan.fused_gemms and Hkv * c * G * w >= FUSED_GEMM_MIN_SCORES:  # S never stored
        gemm = _fused_call(fz, wanted, "scores_exp", ch.qc * scale, ch.kb, m, _mask_spec(p, r0, r1, lo, hi, sq, sk, G))
        fused = gemm is not FAILED
    if gemm is not FAILED:
        e, total = gemm
        total = total.view(Hkv, c, G)
        m_safe = m
    elif m is not None:  # S - m straight from the GEMM: [scale q_i, -m_i] . [k_j, 1]
        qa = torch.cat([ch.qc * scale, -m.view(Hkv, c * G, 1), ch.qc.new_zeros(Hkv, c * G, SHIFT_PAD - 1)], -1)
        # [K, 1, 0...] for this band only: a copy of K for the whole sequence stayed alive
        # through every chunk, 1.1 GB at 128k, while the fused GEMMs, which take most chunks, never read it
        kb = ch.kb
        k1 = torch.cat([kb, kb.new_ones(Hkv, w, 1), kb.new_zeros(Hkv, w, SHIFT_PAD - 1)], -1)
        s = torch.bmm(qa, k1.transpose(1, 2)).view(Hkv, c, G, w)
        del qa, k1
        _mask_partial_columns(s, p, r0, r1, lo, hi, sq, sk)
        m_safe = m
        total = _fused_call(fz, wanted, "exp_rowsum_", s) if fused else FAILED
        fused = total is not FAILED
        e = s if fused else s.exp_()
        del s
    else:
        if w:
            # the scale on the small Q chunk, not on the score-sized product (one pass fewer)
            s = torch.bmm(ch.qc * scale, ch.kb.transpose(1, 2)).view(Hkv, c, G, w)
            if p.softcap is not None:  # s = cap tanh(s / cap), in place, before the mask
                s.div_(p.softcap).tanh_()
                ch.dcap = torch.addcmul(torch.ones_like(s), s, s, value=-1.0).view(Hkv, c * G, w)
                s.mul_(p.softcap)
            if p.biased:  # + ALiBi's / the relative-position bias, after the cap, before the mask
                s.add_(_bias_chunk(p, r0, r1, lo, hi, sq, sk, Hkv, G, dt, dev))
            _mask_partial_columns(s, p, r0, r1, lo, hi, sq, sk)
            m = s.amax(dim=-1)  # [Hkv, c, G]
        else:
            s = torch.empty(Hkv, c, G, 0, dtype=dt, device=dev)
            m = torch.full((Hkv, c, G), float("-inf"), dtype=dt, device=dev)
        if sink is not None:
            m = torch.maximum(m, sink)
        m_safe = torch.where(torch.isinf(m), 0.0, m)
        total = _fused_call(fz, wanted, "exp_rowsum_", s, m_safe) if fused else FAILED
        fused = total is not FAILED
        e = s if fused else s.sub_(m_safe.unsqueeze(-1)).exp_()  # E = exp(S - m), in place of S
        del s
    if not fused:
        total = e.sum(dim=-1)
    if sink is not None:
        total = total + torch.exp(sink - m_safe)
    ch.row_lse = m_safe + torch.log(total)  # -inf where the row sees nothing
    ch.seen = seen = ch.row_lse.abs() < math.inf  # isfinite, in two operations instead of four
    ch.fused, ch.gemm, ch.e, ch.total, ch.m_safe = fused, gemm, e, total, m_safe
    # P = E / total. In float64 the division is applied to the small [rows, dim]
    # operands and results instead of the score-sized E (P V = (E V) / t,
    # P^T dO = E^T (dO / t), dS = E (dP - Delta) / t). float32 (the flash-style
    # yardstick) divides E in place: flash_rounding must round P itself, and without
    # it float32 inputs give the same bits as with it.
    ch.e2 = e.view(Hkv, c * G, w)
    if plan.precision == "float64":
        inv = torch.where(seen, 1.0 / torch.where(seen, total, 1.0), 0.0)
        ch.inv2 = inv.view(Hkv, c * G, 1)
    else:
        ch.e2.div_(torch.where(seen, total, 1.0).view(Hkv, c * G, 1))  # P
        ch.inv2 = None


def _forward_pass(plan: PassPlan, seq: _Sequence, ch: _Chunk) -> None:
    """O = P V, Delta = rowsum(O * dO), and dV += P^T dO."""
    p_mma = plan.rnd(ch.e2)  # P (or E) as the PV and dV GEMMs consume it
    ch.oc = plan.rnd(ch.nrm(torch.bmm(p_mma, ch.vb)))  # [Hkv, c*G, Dv]
    ch.delta = (ch.doc * ch.oc).sum(dim=-1)  # [Hkv, c*G]
    seq.dvh[:, ch.lo : ch.hi].baddbmm_(p_mma.transpose(1, 2), ch.nrm(ch.doc))


def _dp_pass(plan: PassPlan, ch: _Chunk) -> None:
    """dP = dO V^T, or (fused) dS in place of E or of dP with the magnitude terms."""
    fz, wanted, mdt = plan.fused, plan.fused_wanted, plan.magnitudes
    ch.terms = FAILED
    if ch.gemm is not FAILED:  # dS in place of E, dP never stored (and P, P (|dP| + |Delta|))
        ch.terms = _fused_call(fz, wanted, "dp_ds_and_terms_", ch.doc, ch.vb, ch.e2, ch.delta, ch.inv2, mdt)
        ch.fused = ch.terms is not FAILED
        ch.dp = ch.e2
    if ch.terms is FAILED:
        ch.dp = torch.bmm(ch.doc, ch.vb.transpose(1, 2))  # [Hkv, c*G, w]
        if ch.fused:  # dS in place of dP (and P, P (|dP| + |Delta|) for the magnitudes) in one pass
            ch.terms = _fused_call(fz, wanted, "ds_and_terms_", ch.dp, ch.e2, ch.delta, ch.inv2, mdt)
            ch.fused = ch.terms is not FAILED


def _magnitude_pass(plan: PassPlan, p: Problem, seq: _Sequence, ch: _Chunk, acc: _Accumulators) -> None:
    """The largest sums of absolute terms behind O and dQ, and this chunk's share of dK's and dV's."""
    mdt, dev, Hkv, G, c = plan.magnitudes, ch.qc.device, seq.Hkv, seq.G, ch.c
    lo, hi, r0, r1 = ch.lo, ch.hi, ch.r0, ch.r1
    kabs, vabs, qabs, doabs = seq.absolute
    mag, e2, inv2, dp, terms = acc.mag, ch.e2, ch.inv2, ch.dp, ch.terms
    ch.terms = None
    with _tf32(dev, mdt):
        if ch.fused:  # P and P (|dP| + |Delta|) from the fused pass
            pm, terms = terms
        else:
            pm = (
                e2.to(mdt) if inv2 is None else torch.mul(e2, inv2, out=torch.empty(e2.shape, dtype=mdt, device=dev))
            )  # P
        mag["o"] = torch.maximum(mag["o"], _top(torch.bmm(pm, vabs[:, lo:hi])))
        _add_product(seq.dv_terms[:, lo:hi], pm.transpose(1, 2), doabs[:, r0:r1].reshape(Hkv, c * G, p.head_dim_v))
        dabs = ch.delta.abs().to(mdt).unsqueeze(-1)  # [Hkv, c*G, 1]
        qa = qabs[:, r0:r1].reshape(Hkv, c * G, p.head_dim_qk)
        kab = kabs[:, lo:hi]
        # dQ's and dK's terms carry the cap's factor (0 < 1 - tanh^2 <= 1)
        pm_g = pm if ch.dcap is None else pm * ch.dcap.to(mdt)
        if plan.split_terms and not ch.fused:
            # sum_j P (|dP| + |Delta|) |K_j| = sum_j (P |dP|) |K_j| + |Delta| sum_j P |K_j|
            # (all terms >= 0): one score-sized pass for P |dP| instead of three,
            # for two more GEMMs (TF32 on CUDA: cheaper than the passes)
            f = torch.mul(dp, pm_g, out=torch.empty(dp.shape, dtype=mdt, device=dev)).abs_()  # P |dP|
            dq_terms = torch.bmm(f, kab).addcmul_(dabs, torch.bmm(pm_g, kab))
            _add_product(seq.dk_terms[:, lo:hi], f.transpose(1, 2), qa)
            del f
            _add_product(seq.dk_terms[:, lo:hi], pm_g.transpose(1, 2), qa * dabs)
        else:  # the CPU (GEMMs cost more than passes), or the terms from the fused pass
            if not ch.fused:
                terms = dp.to(mdt, copy=True).abs_().add_(dabs).mul_(pm_g)  # P (|dP| + |Delta|)
            dq_terms = torch.bmm(terms, kab)
            _add_product(seq.dk_terms[:, lo:hi], terms.transpose(1, 2), qa)
            del terms
        mag["dq"] = torch.maximum(mag["dq"], _top(dq_terms) * p.scale)
        del pm, pm_g, dq_terms


def _ds_pass(plan: PassPlan, p: Problem, seq: _Sequence, ch: _Chunk, acc: _Accumulators) -> None:
    """dS = P (dP - Delta) in place of dP (already there when fused), the overflow edge's rows
    and columns, and dS rounded as a flash kernel stores it."""
    if not ch.fused:
        ch.dp.sub_(ch.delta.unsqueeze(-1)).mul_(ch.e2)  # dS (times total in float64)
        if ch.dcap is not None:  # through the cap: dS_raw = dS (1 - tanh^2), as a kernel stores it
            ch.dp.mul_(ch.dcap)
        if acc.edge is not None:
            Hkv, G, c, q0, r0, r1 = seq.Hkv, seq.G, ch.c, seq.q0, ch.r0, ch.r1
            rows_edge, cols_edge = _overflow_edge(ch.dp, ch.e2, ch.oc, ch.doc, ch.vb, plan.edge_at, plan.low, p.scale)
            acc.edge["dq"][q0 + r0 : q0 + r1] = rows_edge.view(Hkv, c, G).permute(1, 0, 2).reshape(c, p.heads_q)
            seq.dk_edge[:, ch.lo : ch.hi] |= cols_edge
        ch.dp = plan.rnd(ch.dp)
    acc.fused_chunks += ch.fused
    acc.gemm_chunks += ch.fused and ch.gemm is not FAILED
    ch.e = ch.e2 = ch.dcap = None  # E's memory back before the gradient GEMMs


def _gradient_pass(plan: PassPlan, p: Problem, seq: _Sequence, ch: _Chunk, acc: _Accumulators) -> None:
    """dQ = scale dS K (stored with the chunk's O and LSE), dK += scale dS^T Q, and dSink."""
    scale, ds = p.scale, ch.dp
    ch.dp = None
    dqc = torch.bmm(ds, ch.kb).mul_(scale if ch.inv2 is None else ch.inv2 * scale)  # [Hkv, c*G, D]
    seq.dkh[:, ch.lo : ch.hi].baddbmm_(ds.transpose(1, 2), ch.nrm(ch.qc), alpha=scale)
    del ds
    if acc.sink is not None:
        seen, row_lse = ch.seen, ch.row_lse
        lse_safe = torch.where(seen, row_lse, 0.0)
        p_sink = torch.where(seen, torch.exp(acc.sink - lse_safe), 0.0)
        d3 = ch.delta.view(seq.Hkv, ch.c, seq.G)
        acc.dsink -= (p_sink * d3).sum(dim=1)
        if acc.mag is not None:
            acc.dsink_terms += (p_sink * d3.abs()).sum(dim=1)
    acc.store_chunk(seq, ch, dqc)


# Flash rounding of 16-bit inputs: a flash kernel stores dS in the input dtype, so a |dS| at or
# above the dtype's rounding edge (fp16: 65520, halfway past the largest finite 65504) becomes an
# infinity and so does every dQ row and dK row it feeds, while the true gradient can be small (the
# large dS terms cancel). Whether a correct kernel's dS crosses the edge depends on roundings this
# yardstick makes one way: chiefly the stored O behind Delta = rowsum(O * dO). Two correct kernels'
# stored O differ by up to an ulp (2u |O| relative, u the dtype's unit roundoff), so their Delta by up
# to 2u sum_d |O dO|, and their dS by P times that (plus the float32 sums of dP and Delta, Dv 2^-24
# of their terms). On the H200 (a seeded gpu campaign) our TileLang kernel stored an infinity
# where the float64 |dS| was 65524.4, this yardstick's 65506.6 and that band 118.6 wide: a correct kernel's
# result, which the gate called wrong. ``_overflow_edge`` marks the dQ and dK rows where
# |dS| + band reaches the edge; the gate accepts a non-finite value there (gates.dtype_limited).
# Which dS is stored differs by design: FlashAttention stores dS = P (dP - Delta) and applies the
# softmax scale in the dQ/dK epilogue; PyTorch's memory-efficient backward stores scale * dS
# (kernel_backward.h: ``accum = accum * scale`` before ``scalar_t(accum)``). At a scale > 1 the
# second overflows first: on the H200 (2026-12-02) sdpa-efficient stored an infinity, then NaN in
# dQ, where |dS| was 21,099 and |scale dS| 122,381. The edge is reached by either.
def _overflow_edge_at(dtype: torch.dtype) -> float | None:
    """The magnitude from which a float rounds to an infinity in ``dtype`` (its largest finite
    value plus half an ulp), where float32's dS can reach it finitely: fp16. None for bfloat16
    (its edge is float32's own range: a dS there is already non-finite in this yardstick, which
    the gate's rule (a) covers) and wider dtypes, so their yardsticks skip the band's passes."""
    if torch.finfo(dtype).max > torch.finfo(torch.float32).max / 2:
        return None
    fmax = torch.tensor(torch.finfo(dtype).max, dtype=dtype)
    below = torch.nextafter(fmax, torch.zeros((), dtype=dtype))
    return float(fmax) + (float(fmax) - float(below)) / 2


def _overflow_edge(
    ds, p, o, do, v, at: float, dtype: torch.dtype, scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows [heads, rows], cols [heads, keys]): where |dS| plus the band by which a correct
    kernel's dS may differ from this one (see above), stored unscaled or times the softmax
    ``scale`` (see above), reaches ``at`` (``_overflow_edge_at`` of the input ``dtype``),
    reduced over the keys (the dQ rows it feeds) and over the rows (the dK rows). ``ds``,
    ``p`` [heads, rows, keys] float32 (P normalised), ``o`` the stored O and ``do``
    [heads, rows, Dv], ``v`` [heads, keys, Dv]."""
    u = torch.finfo(dtype).eps / 2  # the input dtype's unit roundoff
    acc = do.shape[-1] * 2.0**-24  # float32 sums of Dv terms
    od = (o.abs() * do.abs()).sum(-1, keepdim=True)  # sum_d |O dO|: what Delta sums
    band = p * (od * (2 * u + acc) + acc * do.abs().sum(-1, keepdim=True) * v.abs().amax(-1).unsqueeze(1))
    hit = band.add_(ds.abs()).mul_(max(1.0, scale)) >= at
    return hit.any(-1), hit.any(1)


# float64: the softmax shift m_i enters the QK^T GEMM as one more (padded) column, so S - m
# comes out of the GEMM and neither the row maximum (a read of S) nor the subtraction (a
# read and a write) is a pass over the scores. m_i is then not the row maximum M_i but the
# Cauchy-Schwarz bound U_i = scale |q_i| max_j |k_j| >= M_i, used only where U_i is within
# SHIFT_SPAN of a score the row sees (so exp(M_i - U_i) >= e^-SHIFT_SPAN: no underflow of
# what matters, no overflow since S - U <= 0); otherwise the chunk takes the maximum.
# Per device type: on the CPU the GEMMs dominate and 8 more K columns cost more than the
# two passes save (measured: ~5% slower at D=64), so it is off there (tests force it on).
SHIFT_IN_GEMM = {"cuda": True, "cpu": False}
SHIFT_SPAN = 300.0
SHIFT_PAD = 8  # the extra K columns: [-m, 0 x 7] keeps the GEMM's K a multiple of 8


def _shift_bound(p, qh, khn, kh, r0, r1, lo, hi, sq, sk, scale, sink):
    """(m, gap) for rows r0..r1-1 against keys lo..hi-1: m [Hkv, rows, G] is U_i
    (max(U_i, sink) with sinks), gap a 0-d tensor, the largest amount by which a row's U_i
    exceeds the score of a key every row of the chunk sees; None when no such key exists.
    The shift is used only where gap <= SHIFT_SPAN (read on the host by _shift_bounds)."""
    a0, a1 = _common_columns(p, r0, r1, lo, hi, sq, sk)
    if a1 <= a0:
        return None
    qc = qh[:, r0:r1]  # [Hkv, c, G, D]
    u = qc.norm(dim=-1).mul_(khn[:, lo:hi].amax(dim=-1).view(-1, 1, 1) * scale)
    seen = (qc * kh[:, a0].unsqueeze(1).unsqueeze(1)).sum(dim=-1).mul_(scale)  # S_{i, a0} <= M_i
    return (u if sink is None else torch.maximum(u, sink)), (u - seen).amax()


def _shift_bounds(p, qh, khn, kh, plan, sq, sk, scale, sink) -> list:
    """Per chunk of ``plan``: its shift m (see _shift_bound), or None where it has no common
    key or its gap exceeds SHIFT_SPAN (the chunk then takes the row maximum). Every chunk's
    bound is queued first and the gaps are read in one host sync per sequence, not one per
    chunk (a sync drains the GPU's queue before the chunk's GEMMs can be launched)."""
    bounds = [
        _shift_bound(p, qh, khn, kh, r0, r1, lo, hi, sq, sk, scale, sink) if hi > lo else None
        for r0, r1, lo, hi in plan
    ]
    gaps = [b[1] for b in bounds if b is not None]
    ok = iter((torch.stack(gaps) <= SHIFT_SPAN).tolist() if gaps else [])
    return [None if b is None or not next(ok) else b[0] for b in bounds]


def _common_columns(p: Problem, r0: int, r1: int, lo: int, hi: int, sq: int, sk: int) -> tuple[int, int]:
    """[a0, a1): the keys of [lo, hi) that every row r0..r1-1 sees (a1 <= a0: none). Each
    row sees one contiguous key range whose ends only grow with the row, so it is
    [lo(r1 - 1), hi(r0)). A sparse problem's rows share no assumed key: none (the chunk
    then masks every column and takes the row maximum as its shift)."""
    if p.sparse:
        return lo, lo
    a0 = min(hi, max(lo, p.key_range(r1 - 1, sq, sk)[0]))
    return a0, max(a0, min(hi, p.key_range(r0, sq, sk)[1]))


def _bias_chunk(p: Problem, r0: int, r1: int, lo: int, hi: int, sq: int, sk: int, Hkv: int, G: int, dt, dev):
    """The score bias (ALiBi's, the relative-position table's) of chunk rows r0..r1-1 x keys
    lo..hi-1 as [Hkv, rows, G, keys] (query head h = key head * G + g): reference.score_bias's rule,
    in the chunk's precision."""
    bias = score_bias(p, sq, sk, dev, dt, rows=(r0, r1), cols=(lo, hi))  # [Hq, rows, keys]
    return bias.view(Hkv, G, r1 - r0, hi - lo).transpose(1, 2)


def _mask_partial_columns(s: torch.Tensor, p: Problem, r0: int, r1: int, lo: int, hi: int, sq: int, sk: int) -> None:
    """-inf into the masked scores of s [Hkv, rows r0..r1-1, G, keys lo..hi-1]. Each row
    sees one contiguous key range whose ends only grow with the row, so the columns
    [lo(r1 - 1), hi(r0)) are visible to every row of the chunk: only the columns left and
    right of them are masked (for causal, the chunk's diagonal block instead of its band)."""
    if _fully_allowed(p, r0, r1, lo, hi, sq, sk):
        return
    a0, a1 = _common_columns(p, r0, r1, lo, hi, sq, sk)
    allowed = allowed_mask(p, sq, sk, s.device, rows=(r0, r1))
    c = r1 - r0
    for x0, x1 in ((lo, a0), (a1, hi)) if a1 > a0 else ((lo, hi),):
        if x1 > x0:
            s[..., x0 - lo : x1 - lo].masked_fill_(~allowed[:, x0:x1].view(1, c, 1, x1 - x0), float("-inf"))


def _mask_spec(p: Problem, r0: int, r1: int, lo: int, hi: int, sq: int, sk: int, group: int):
    """The mask of the chunk rows r0..r1-1 x keys lo..hi-1 as fused_passes.scores_exp takes
    it: None where every row sees every key of the band, else (base, group, left, right):
    chunk row r (query r0 + r // group) sees band key j iff -left <= j - (base + r // group)
    < right, Problem.key_bounds shifted to the band (base = r0 + offset - lo)."""
    if _fully_allowed(p, r0, r1, lo, hi, sq, sk):
        return None
    return r0 + p.mask_offset(sq, sk) - lo, group, *p.key_bounds()


# Per device type: the score-sized elementwise passes of a float64 chunk fused into two Triton
# kernels (fused_passes.py: exp and the row sum; dS with the unsplit magnitude terms), for
# chunks of at least FUSED_MIN_SCORES scores. Smaller chunks stay eager: their passes are
# short, and a short campaign never JIT-compiles the kernels. Off on the CPU (no Triton
# there; tests run the kernels under TRITON_INTERPRET=1).
FUSED_PASSES = {"cuda": True, "cpu": False}
FUSED_MIN_SCORES = 2**20
# Where the passes are fused and the softmax shift is the bound (SHIFT_IN_GEMM): the two GEMMs
# whose inner dimension is the head dim (S = Q K^T, dP = dO V^T) run inside those kernels, so
# neither S nor dP is written to memory and read back (fused_passes.scores_exp, dp_ds_and_terms_).
FUSED_GEMMS = True
# ... for chunks of at least this many scores. Those kernels are compiled per "divisible by 16"
# pattern of their sizes and strides (fused_passes.py), and a campaign's varied problems meet many:
# at 2**20, a 40-example fa3 gpu campaign on the H200 spent 20.1 s in the truth against 2.8 s with
# the passes unfused, 10.9 s with Triton's cache warm from it. Over that campaign's 339 problems, 18
# specialisations at 2**20 (3 before the strides were specialised) and 2 at 2**26
# (scripts/fused_gemm_variants.py); the bench's causal 32k..128k truths keep over 99% of their
# scores in the fused GEMMs (16k: 79%). At 2**26 the same campaign's truth took 7.4 s (twice, 352
# cases each), and the bench's truths equal those at 2**20 within 2%, called alternately in one
# process.
FUSED_GEMM_MIN_SCORES = 2**26
_FUSED = {}  # the imported module, or None where Triton does not import


FAILED = object()  # what _fused_call returns when a fused pass could not run


def _fused_call(fz, wanted: bool | None, name: str, *args):
    """fz.<name>(*args), or FAILED when it raises and the fused passes were not insisted on
    (``wanted`` None): they are then off for the rest of the process, with one warning, and
    the chunk takes the eager passes. A Triton that cannot build the kernels for this GPU
    fails at the launch, before either kernel writes, so the eager passes find their inputs
    as they were."""
    try:
        return getattr(fz, name)(*args)
    except Exception as e:
        if wanted:
            raise
        _FUSED["failed"] = True
        warnings.warn(
            f"the float64 truth's fused passes are off for this process, eager from here: {type(e).__name__}: {e}"[
                :400
            ],
            RuntimeWarning,
            stacklevel=2,
        )
        return FAILED


def _fused_module(device, wanted: bool | None):
    """oracles/fused_passes.py if the fused passes are used on ``device`` (``wanted``: None
    follows FUSED_PASSES and quietly falls back to eager without Triton, True insists,
    False: never), else None."""
    if wanted is False or (wanted is None and not FUSED_PASSES.get(torch.device(device).type, False)):
        return None
    if "module" not in _FUSED:
        try:
            # lazy: optional dependency (Triton), loaded on first fused pass
            from . import fused_passes
        except ImportError:
            fused_passes = None
        _FUSED["module"] = fused_passes
    if wanted and _FUSED["module"] is None:
        raise RuntimeError("fused_passes=True: Triton does not import here")
    return _FUSED["module"]


# Per device type: form dQ/dK's magnitude terms P (|dP| + |Delta|) as one tensor (three
# elementwise passes, two GEMMs) or split them into P |dP| and |Delta| P (one pass, four
# GEMMs). Same sums of non-negative terms either way (tests/test_oracles.py checks both).
SPLIT_TERMS = {"cuda": True, "cpu": False}

# Per device type: the precision of the error-budget magnitudes (sums of non-negative terms that
# only scale the gates' budget floor, never a value). On CUDA bfloat16: P, the terms and |inputs|
# rounded to 8 bits (bfloat16 keeps float32's range: no overflow, no underflow that float32 would
# not have), products summed in float32 by the tensor cores at twice TF32's rate, half the bytes
# of the score-sized operands; each sum is then within ~3 x 2^-9 (three roundings) plus the
# float32 accumulation of the float64 one, and MAGNITUDE_MARGIN scales the result up so that it
# stays at or above it (tests/test_oracles.py). The CPU keeps float32 (no fast bfloat16 GEMMs).
MAGNITUDES_DTYPE = {"cuda": "bfloat16", "cpu": "float32"}
MAGNITUDE_MARGIN = {torch.bfloat16: 1 + 2**-6}

# TF32 for the float32 magnitude GEMMs on CUDA: their operands are non-negative, so TF32's
# 10-bit rounding of P and the terms moves each sum by at most ~2^-10 relative (inputs from
# float16/bfloat16 are exact in TF32); 8x the float32 (and float64) GEMM rate on an H100/H200.
MAGNITUDE_TF32 = True


class _tf32:
    """Context: TF32 float32 matmuls on ``device`` when it is CUDA and ``dtype`` float32;
    restores the previous setting (new-style ``fp32_precision`` API, never the legacy flag:
    mixing the two raises in torch >= 2.9). Does nothing where unsupported."""

    def __init__(self, device, dtype):
        self.on = MAGNITUDE_TF32 and dtype == torch.float32 and torch.device(device).type == "cuda"
        self.old = None

    def __enter__(self):
        if self.on:
            try:
                self.old = torch.backends.cuda.matmul.fp32_precision
                torch.backends.cuda.matmul.fp32_precision = "tf32"
            except (AttributeError, RuntimeError):
                self.old = None
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            torch.backends.cuda.matmul.fp32_precision = self.old
        return False


def _add_product(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """acc += a @ b (batched), in place; the product in a's dtype when acc's is wider."""
    if acc.dtype == a.dtype:
        acc.baddbmm_(a, b)
    else:
        acc.add_(torch.bmm(a, b))


def _top(t: torch.Tensor) -> torch.Tensor:
    """max(t) as a 0-d tensor on t's device (0 for an empty t), without a host sync."""
    return t.amax() if t.numel() else torch.zeros((), dtype=t.dtype, device=t.device)
