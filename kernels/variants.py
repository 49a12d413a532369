"""The variant catalogue: CORRECT attention kernels that round where real kernels round.

The twin of the mutant catalogue (``kernels/mutants.py``): each variant is a small, named
deviation of the blockwise kernel (``kernels/blockwise.py``) that a correct production
kernel makes: a different place where a value is stored or fed to a GEMM in the input
dtype, a different summation order, a different log base. None of them is a bug, so every
verdict difftest gives one of them must pass; ``difftest variants`` runs each under a
profile and counts false alarms (``difftest/measure/variants.py``), as ``difftest mutants``
counts kills.

``VARIANTS`` maps a name to a ``Variant``: what real kernels do it (``models``), a one-line
description (the class docstring's first paragraph), a factory, and whether its result is
bitwise deterministic (split-K atomics are not, and say so in their capability). Importing
this module does not register anything: the engine reaches the catalogue through the
entry-point group ``difftest.catalogues`` as ``variant:NAME``.

Each variant runs on two devices. ``variant:NAME`` is the CPU kernel, drawn at CPU sizes
(head dims from 8, 256 rows: the blockwise capability). ``variant-cuda:NAME`` is the same
kernel as ``difftest variants --device cuda`` runs it (the blockwise kernel is plain torch and
runs where its inputs live), drawn over what the production GPU kernels accept: every head dim
they declare up to the ``gpu`` profile's (``GPU_HEAD_DIMS``: 1, 2, 3, ... 256, then multiples
of 8 to 512), every dtype, feature and layout of its CPU capability, and as far as the
variant's ``CudaReach`` goes: its tiles there and the longest rows, batch and heads one case
may have. The reach is sized by cost, not by what the kernel can do: a case's tile pairs
(``TILE_PAIRS``) bound the tiled variants, and the whole-row variants (one tile per sequence,
few launches) take the ``gpu`` profile's longest rows at a few heads (their S x S tiles live
in GPU memory). tests/test_variant_reach.py proves the union of the CUDA capabilities covers
every production GPU kernel's claim.
"""

import math
import os
import random
from dataclasses import dataclass, replace
from typing import Callable

import torch

from difftest.execute.adapter import KernelAdapter
from difftest.model import fp8
from difftest.model.capability import Capability
from difftest.model.inputs import torch_dtype
from difftest.model.problem import FP8_DTYPES
from difftest.model.profiles import get_profile
from difftest.oracles.approx_tanh import approx_tanh
from difftest.oracles.tensor_core import mma_matmul

from .blockwise import F32, BlockwiseAttention, SparseBlockwiseAttention
from .extra_sources import load_extra
from .gemm_orders import fast_f32_gemm, sequential_gemm, splitk_gemm

LOG2E = 1.0 / math.log(2.0)
LN2 = math.log(2.0)

GPU = get_profile("gpu")
# every head dim a production GPU kernel declares up to the gpu profile's max_head_dim: each one
# up to 256 (FA3, sdpa-flash and sdpa-math take any), multiples of 8 beyond (sdpa-efficient: 512)
GPU_HEAD_DIMS = tuple(range(1, 257)) + tuple(range(264, GPU.max_head_dim + 1, 8))
# (query tile, key tile) pairs of a CUDA variant's largest case: each pair is ~90 small launches
# (forward, Delta, backward), twice for a deterministic kernel, about 10 s on an H100 at 4096
TILE_PAIRS = 4096


@dataclass(frozen=True)
class CudaReach:
    """How far a variant's CUDA capability reaches: its tiles there (None: whole rows, one tile
    per sequence) and the largest case it may draw (the module docstring says why)."""

    tiles: tuple[int, int] | None
    max_seqlen: int
    max_batch: int
    max_heads: int

    def tile_pairs(self) -> int:
        """(query tile, key tile) pairs of the largest case (a whole-row sequence is one)."""
        if self.tiles is None:
            return self.max_batch
        bm, bn = self.tiles
        return self.max_batch * -(-self.max_seqlen // bm) * -(-self.max_seqlen // bn)

    def capability(self, cpu: Capability) -> Capability:
        """``cpu`` (the variant's CPU capability: dtypes, features, layouts) on CUDA, at this reach
        and every GPU head dim. Whole rows aim drawn lengths at 128-row production tiles."""
        bm, bn = self.tiles or (128, 128)
        return replace(
            cpu,
            device="cuda",
            head_dims_qk=GPU_HEAD_DIMS,
            head_dims_v=None,
            equal_head_dims=False,
            max_seqlen=self.max_seqlen,
            max_batch=self.max_batch,
            max_heads=self.max_heads,
            block_m=bm,
            block_n=bn,
        )


TILED = CudaReach((128, 128), max_seqlen=4096, max_batch=4, max_heads=GPU.max_heads)  # FA2/FA3 forward tiles
WHOLE_ROWS = CudaReach(None, max_seqlen=GPU.max_seqlen, max_batch=4, max_heads=4)  # 4 x 8192^2 float32: 1 GiB
# GEMMs added in Python steps (a sequential FFMA loop, 3xTF32's k-steps of 8, the FP8 tensor core's
# groups of 32) make ~20-30x a plain pair's launches: 128 pairs at most
STEPPED = CudaReach((128, 128), max_seqlen=1024, max_batch=2, max_heads=GPU.max_heads)
# FP8: two backward passes (dS's amax first) and a round trip per stored tensor; cudnn-fp8's 2048 rows
FP8_TILED = CudaReach((128, 128), max_seqlen=2048, max_batch=2, max_heads=16)


@dataclass(frozen=True)
class Variant:
    name: str
    models: str  # which real kernels make this choice
    description: str  # one line: the deviation
    factory: Callable[[], KernelAdapter]
    deterministic: bool = True
    cuda: Callable[[], KernelAdapter] | None = None  # the variant as --device cuda runs it (None: factory's)


_CATALOGUE: list[Variant] = []
CUDA_PREFIX = "variant-cuda"


def _on_cuda(cls, reach: CudaReach) -> Callable[[], KernelAdapter]:
    """A factory of ``cls`` with ``reach``'s tiles and CUDA capability, registered (reproducers,
    workers) as ``variant-cuda:NAME``."""

    def make():
        bm, bn = reach.tiles or (None, None)
        k = cls(block_m=bm, block_n=bn)
        k.capability = reach.capability(cls.capability)
        k.spec = f"{CUDA_PREFIX}:{cls.name}"
        return k

    make.__name__ = f"make_{cls.name.replace('-', '_')}_cuda"
    return make


def variant(models: str, cuda: CudaReach = TILED):
    """Register a BlockwiseAttention subclass as a correct variant named after its ``name``;
    the class docstring's first paragraph is its description. A class whose capability
    says ``deterministic=False`` is registered as non-deterministic. ``cuda``: how far it
    reaches under ``--device cuda``."""

    def wrap(cls):
        doc = (cls.__doc__ or "").strip().splitlines()
        cls.description = " ".join(line.strip() for line in doc[: doc.index("") if "" in doc else len(doc)])
        cls.spec = f"variant:{cls.name}"
        cls.cuda_reach = cuda
        _CATALOGUE.append(
            Variant(cls.name, models, cls.description, cls, cls.capability.deterministic, _on_cuda(cls, cuda))
        )
        return cls

    return wrap


def _round_to(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` rounded to ``dtype`` (round to nearest even) and widened back to float32."""
    return t if dtype == F32 else t.to(dtype).to(F32)


class _InputDtype(BlockwiseAttention):
    """Knows the problem's input dtype during a call (what tensor cores are fed)."""

    low = F32

    def forward(self, inputs, out=None):
        self.low = torch_dtype(inputs.problem.dtype)
        return super().forward(inputs, out)

    def backward(self, inputs, fwd, ctx, out=None):
        self.low = torch_dtype(inputs.problem.dtype)
        return super().backward(inputs, fwd, ctx, out)


# ----------------------------------------------------------------------------- Delta
@variant("FlashAttention 2/3/4, TileLang, Triton tutorials: the backward preprocess")
class DeltaFromStoredO(BlockwiseAttention):
    """Delta = rowsum(dO * O) from the O the forward stored in the input dtype (the FA
    preprocess), not rowsum(P * dP) recomputed in float32."""

    name = "delta-from-stored-o"
    delta_source = "o_do"


# ----------------------------------------------------------------------------- tensor-core operands
@variant("every tensor-core kernel (FA2/3/4, cuDNN, TileLang): MMA operands in the input dtype")
class RoundedMmaOperands(_InputDtype):
    """P rounded to the input dtype before the P V and P^T dO GEMMs, dS rounded before the
    dS K and dS^T Q GEMMs (float32 accumulators)."""

    name = "rounded-mma-operands"

    def operand(self, t, which):
        return _round_to(t, self.low)


@variant("PyTorch's memory-efficient backward (xFormers' cutlass kernel): scale * dS in the input dtype")
class ScaledDsStored(_InputDtype):
    """dS multiplied by the softmax scale before it is rounded to the input dtype for the dS K
    and dS^T Q GEMMs (no scale in their epilogues), P rounded before P^T dO: at a scale > 1 the
    stored scale * dS overflows fp16 where the unscaled dS of a FlashAttention kernel does not."""

    name = "scaled-ds-stored"
    _scale = 1.0

    def backward(self, inputs, fwd, ctx, out=None):
        self._scale = inputs.problem.scale
        return super().backward(inputs, fwd, ctx, out)

    def operand(self, t, which):
        if which == "ds":
            return _round_to(t * self._scale, self.low)
        return _round_to(t, self.low) if which == "p_dv" else t

    def grad_scale(self, p, which):
        return 1.0


# ----------------------------------------------------------------------------- exp2 / log2
@variant("FlashAttention 2/3/4, Triton: exp2 with log2(e) folded into the softmax scale")
class Exp2FoldedScale(BlockwiseAttention):
    """The softmax in base 2: S2 = Q K^T * (scale * log2 e), P = exp2(S2 - m2) / l, the
    LSE kept in log2 units and multiplied by ln 2 on output."""

    name = "exp2-folded-scale"

    def logit_scale(self, p, phase):
        return float(torch.tensor(p.scale * LOG2E, dtype=F32))  # folded once, in float32

    def exp(self, x):
        return torch.exp2(x)

    def log(self, x):
        return torch.log2(x)

    def to_log_units(self, x):
        return x * LOG2E

    def lse_natural(self, lse):
        return lse * LN2


@variant("fla-core's native sparse attention (NSA), Triton's tutorial forward: Q * scale rounded before Q K^T")
class PrescaledQ(BlockwiseAttention):
    """Q multiplied by the softmax scale and rounded to the input dtype before Q K^T (every
    logit Q' K^T with Q' = round(Q * scale)); dK = dS^T Q' takes the scale with Q', dQ = dS K
    times the scale in float32. A correct design that declares itself (``prescaled-q``,
    oracles/prescaled_q.py): its logits carry the input dtype's rounding of Q * scale, far
    beyond a flash kernel's at large logits.

    The rounding is the design's, not a bug: without the declaration the budget gates fail it
    on large logits (tests/test_prescaled_q.py)."""

    name = "prescaled-q"
    capability = replace(BlockwiseAttention.capability, designs=("prescaled-q",))

    def load(self, inputs, name, b):
        t = super().load(inputs, name, b)
        if name != "q":
            return t
        scale = torch.tensor(inputs.problem.scale, dtype=F32)
        return (t.to(F32) * scale).to(t.dtype)

    def logit_scale(self, p, phase):
        return 1.0

    def cap_logits(self, p, s, scale, phase):
        return super().cap_logits(p, s, p.scale, phase)  # s is Q' K^T: already in scaled units

    def grad_scale(self, p, which):
        return p.scale if which == "dq" else 1.0


class _LseOnly(BlockwiseAttention):
    """The backward reads only the stored float32 LSE (m = LSE, log l = 0), as every
    production kernel does, instead of the (row max, log row sum) pair."""

    def stats_from_lse(self, lse: torch.Tensor) -> torch.Tensor:
        return lse.to(F32)

    def stats_rows(self, stats, q0, sq, b):
        lse = self._lse[q0 : q0 + sq]
        m = self.stats_from_lse(lse)
        empty = torch.isneginf(lse)
        return torch.stack(
            [
                torch.where(empty, torch.zeros_like(m), m),
                torch.where(empty, torch.full_like(m, float("-inf")), torch.zeros_like(m)),
            ],
            dim=-1,
        )

    def backward(self, inputs, fwd, ctx, out=None):
        self._lse = fwd.lse
        return super().backward(inputs, fwd, ctx, out)


@variant("FlashAttention 2, TileLang examples, xformers: P = exp(S - LSE) from the stored LSE")
class LseOnlyBackward(_LseOnly):
    """The backward recomputes P = exp(S - LSE) from the stored float32 LSE alone (loses
    |LSE| * eps32 at large logits), not from the forward's (max, log sum) pair."""

    name = "lse-only-backward"


@variant("FlashAttention 3/4: LSE kept in log2 units (softmax_lse_log2) between forward and backward")
class LseLog2Stored(_LseOnly, Exp2FoldedScale):
    """The forward keeps LSE2 = LSE * log2 e in float32 for the backward (P = exp2(S2 -
    LSE2)) and returns LSE2 * ln 2, both rounded in float32."""

    name = "lse-log2-stored"

    def stats_from_lse(self, lse):
        return lse.to(F32) * LOG2E  # the natural LSE the forward returned, back in log2 units


# ----------------------------------------------------------------------------- split-K dQ
@variant("FlashAttention 2/3/4 (non-deterministic mode), TileLang atomic: dQ by atomicAdd")
class DqSplitKAtomics(BlockwiseAttention):
    """dQ accumulated by split-K atomics: the key tiles' float32 partials are added in a
    random order every call (declared non-deterministic)."""

    name = "dq-splitk-atomics"
    capability = replace(BlockwiseAttention.capability, deterministic=False)

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._rng = random.Random()  # OS entropy: a different order every process and call

    def reduce_dq(self, acc, parts):
        # one partial per (key tile, query tile); atomics land in any order per query tile
        parts = list(parts)
        self._rng.shuffle(parts)
        for r0, r1, part in parts:
            acc[:, r0:r1] += part


# ----------------------------------------------------------------------------- GQA partials
@variant("MHA kernels run on expanded or stride-0 K/V (SDPA efficient/flash under GQA), FA2 GQA dK/dV")
class PerHeadPartialsStored(_InputDtype):
    """Per-query-head dK and dV are stored in the input dtype before the GQA/broadcast
    group sum (float32 sum of the rounded partials, then rounded): a partial beyond the
    dtype's range is an infinity even where the group's sum is not."""

    name = "per-head-partials-stored"

    def reduce_group(self, grad_h, idx, heads_kv):
        rounded = grad_h.to(self.low).to(F32) if self.low != F32 else grad_h
        return torch.stack([rounded[idx == g].sum(dim=0) for g in range(heads_kv)])


@variant("torch's CPU flash backward: dK/dV added block by block into the output tensors in fp16/bf16")
class InputDtypeRunningSum(_InputDtype):
    """dK and dV are held in the input dtype: each query tile's product of each query head is
    added into its key/value head's one accumulator in turn, rounded after every addition
    (judged with the design's own yardstick, oracles/running_sum.py)."""

    name = "input-dtype-running-sum"
    capability = replace(BlockwiseAttention.capability, designs=("input-dtype-running-sum",))
    groups: list = []  # the query heads of each key/value head, during a call

    def backward(self, inputs, fwd, ctx, out=None):
        idx = self.kv_head_index(inputs.problem, "cpu").tolist()
        self.groups = [[h for h, g in enumerate(idx) if g == kv] for kv in range(inputs.problem.heads_kv)]
        return super().backward(inputs, fwd, ctx, out)

    def accumulate_kv(self, acc, part):
        # every query head's slot holds its group's one accumulator
        out = acc.clone()
        for heads in self.groups:
            run = acc[heads[0]]
            for h in heads:
                run = _round_to(run + part[h], self.low)
            out[heads] = run
        return out

    def reduce_group(self, grad_h, idx, heads_kv):
        return torch.stack([grad_h[heads[0]] for heads in self.groups])


# ----------------------------------------------------------------------------- tile sizes
@variant(
    "tile shapes of real kernels: 64 x 128 (FA2 fwd on A100), 128 x 64 (FA3 bwd)",
    cuda=CudaReach((64, 128), max_seqlen=4096, max_batch=2, max_heads=GPU.max_heads),
)
class Tiles64x128(BlockwiseAttention):
    """Query tiles of 64 rows, key tiles of 128 keys: other accumulation orders for the
    online softmax, dK/dV (over query tiles) and dQ (over key tiles)."""

    name = "tiles-64x128"

    def __init__(self, *a, **kw):
        kw.setdefault("block_m", 64)
        kw.setdefault("block_n", 128)
        super().__init__(*a, **kw)


@variant(
    "small tiles (sm80 head dim 256, Triton autotune minimums)",
    cuda=CudaReach((16, 8), max_seqlen=512, max_batch=2, max_heads=GPU.max_heads),
)
class Tiles16x8(BlockwiseAttention):
    """Query tiles of 16 rows and key tiles of 8 keys: many short partial sums."""

    name = "tiles-16x8"

    def __init__(self, *a, **kw):
        kw.setdefault("block_m", 16)
        kw.setdefault("block_n", 8)
        super().__init__(*a, **kw)


# ----------------------------------------------------------------------------- GPU GEMM order
@variant("cuBLAS/CUTLASS SGEMM, the sdpa math backend on CUDA: float32 FFMA accumulation", cuda=STEPPED)
class SequentialFp32Gemm(BlockwiseAttention):
    """Every tile GEMM accumulates its K products sequentially, one at a time, in float32
    (a GPU SGEMM thread's order), not in the CPU BLAS's blocked order."""

    name = "sequential-fp32-gemm"

    def gemm(self, a, b):
        return sequential_gemm(a, b)


@variant("sdpa math on CUDA: one long K loop per output element over whole rows", cuda=WHOLE_ROWS)
class SequentialFp32GemmOneTile(SequentialFp32Gemm):
    """The sequential float32 GEMM over whole rows at once (one tile as long as the
    sequence): every sum a single sequential chain of up to 256 products (on CUDA: whole rows
    of up to 8192)."""

    name = "sequential-fp32-gemm-one-tile"

    def __init__(self, *a, **kw):
        kw.setdefault("block_m", 256)
        kw.setdefault("block_n", 256)
        super().__init__(*a, **kw)


# ----------------------------------------------------------------------------- the GPU's own orders
SPLIT_K_SLICES = 4  # cuBLAS/CUTLASS split-K picks a few slices for tall-skinny shapes


class _WholeRows(BlockwiseAttention):
    """One tile as long as each sequence (block None: nothing padded), on every device."""

    def __init__(self, *a, **kw):
        kw.setdefault("block_m", None)
        kw.setdefault("block_n", None)
        super().__init__(*a, **kw)


@variant(
    "the sdpa math backend on CUDA (cuBLAS/cuBLASLt SGEMM), any attention written as torch.matmul", cuda=WHOLE_ROWS
)
class WholeRowDeviceGemm(_WholeRows):
    """Every GEMM one torch.matmul over whole rows on the kernel's device: cuBLAS/cuBLASLt's
    float32 SGEMM on CUDA, in whatever order and K split it picks for the shape (the CPU
    BLAS's on the CPU), with the online softmax over that one tile."""

    name = "whole-row-device-gemm"


@variant(
    "cuBLAS/CUTLASS split-K SGEMM: tall-skinny GEMMs such as dK = dS^T Q at head dim 3 over 1,395 rows", cuda=WHOLE_ROWS
)
class WholeRowSplitKGemm(_WholeRows):
    """Every GEMM over whole rows with K split into 4 slices, each slice's float32 GEMM on the
    device, the slices' partials then added in order (a split-K reduction)."""

    name = "whole-row-splitk-gemm"

    def gemm(self, a, b):
        return splitk_gemm(a, b, SPLIT_K_SLICES)


@variant(
    "PyTorch's sdpa math backend (_scaled_dot_product_attention_math) under autograd; sinks as gpt-oss's "
    "reference sdpa adds them",
    cuda=WHOLE_ROWS,
)
class SdpaMathComposite(_WholeRows):
    """The composite as PyTorch's math backend writes it, in float32: Q and K each times
    sqrt(scale), S = Q K^T over whole rows, the mask added, P = torch.softmax over whole rows
    (0 where a row sees nothing: _safe_softmax; a sink is one more logit, dropped after), O = P V;
    the backward autograd's: dP = dO V^T, dS = P * (dP - rowsum(P * dP)), dV = P^T dO,
    dQ = dS K' sqrt(scale), dK = dS^T Q' sqrt(scale).

    The blockwise kernel's sequence loop, loads, GQA sums and LSE store stay; the forward, Delta
    and backward of one sequence are the composite's (``_forward_sequence``, ``preprocess_delta``,
    ``_backward_sequence``). The LSE (the math backend returns none) is torch.logsumexp of the
    logits, and the backward's saved statistics are (LSE, 0), which only dSink reads."""

    name = "sdpa-math-composite"
    # the math backend has no softcap (its composite's _softmax caps nothing)
    capability = replace(BlockwiseAttention.capability, softcap=False)
    _sink = None
    _pdp = None

    @staticmethod
    def root_scale(p) -> float:
        """sqrt(scale) as the backend multiplies a float32 tensor by it (a float32 scalar)."""
        return float(torch.tensor(math.sqrt(p.scale), dtype=F32))

    def grad_scale(self, p, which):
        return self.root_scale(p)  # dQ = (dS K') sqrt(scale), dK = (dS^T Q') sqrt(scale)

    def _softmax(self, p, q, k, sink, sq, sk, phase):
        """(logits, P, Q', K') of one sequence; a sink is the last column of the logits and P."""
        rs = self.root_scale(p)
        qs, ks = q * rs, k * rs
        s = self.gemm(qs, ks.transpose(1, 2))
        s = self.biased(p, s, 0, sq, 0, sk, sq, sk, phase)  # ALiBi as a float attn_mask: added to the logits
        s = s.masked_fill(~self.allowed(p, 0, sq, 0, sk, sq, sk, phase), float("-inf"))
        if sink is not None:
            s = torch.cat([s, sink.view(-1, 1, 1).expand(-1, sq, 1)], dim=-1)
        pr = torch.softmax(s, dim=-1)
        pr = torch.where(torch.isneginf(s).all(dim=-1, keepdim=True), torch.zeros_like(pr), pr)  # _safe_softmax
        return s, pr, qs, ks

    def _forward_sequence(self, p, q, k, v, sink, sq, sk):
        s, pr, _, _ = self._softmax(p, q, k, sink, sq, sk, "fwd")
        lse = torch.logsumexp(s, dim=-1)
        empty = torch.isneginf(lse)
        m = torch.where(empty, torch.zeros_like(lse), lse)
        logl = torch.where(empty, lse, torch.zeros_like(lse))
        return self.gemm(pr[..., :sk], v), lse, m, logl, torch.ones(sq, dtype=torch.bool)

    def backward(self, inputs, fwd, ctx, out=None):
        p = inputs.problem
        self._sink = self.sink_for_heads(inputs.sink.to(F32), p) if p.sinks else None
        try:
            return super().backward(inputs, fwd, ctx, out)
        finally:
            self._sink = self._pdp = None

    def preprocess_delta(self, p, q, k, v, do, o, m, logl, sq, sk):
        _, pr, qs, ks = self._softmax(p, q, k, self._sink, sq, sk, "bwd")
        dp = self.gemm(do, v.transpose(1, 2))
        if pr.shape[-1] > sk:  # the sink's column: no value, so no gradient flows into it from O
            dp = torch.cat([dp, torch.zeros_like(pr[..., sk:])], dim=-1)
        self._pdp = pr, dp, qs, ks  # this sequence's, for _backward_sequence
        return (pr * dp).sum(dim=-1)  # Delta, for dSink (the softmax backward below sums its own)

    def _backward_sequence(self, p, q, k, v, do, m, logl, delta, ws, sq, sk):
        pr, dp, qs, ks = self._pdp
        ds = torch.ops.aten._softmax_backward_data(dp, pr, -1, F32)[..., :sk]  # autograd's softmax backward
        ws[:, :sq] += self.gemm(ds, ks)  # the postprocess multiplies by grad_scale
        dk = self.gemm(ds.transpose(1, 2), qs) * self.grad_scale(p, "dk")
        return dk, self.gemm(pr[..., :sk].transpose(1, 2), do)


@variant("FlashAttention 2/3 atomic dQ, TileLang atomics on CUDA: atomicAdd arrival order per address")
class DqAtomicsPerElement(BlockwiseAttention):
    """dQ by float32 atomic adds of every key tile's partial, each element's adds arriving in
    its own random order every call (CTAs race per address, not per tile; declared
    non-deterministic)."""

    name = "dq-atomics-per-element"
    capability = replace(BlockwiseAttention.capability, deterministic=False)

    def reduce_dq(self, acc, parts):
        by_rows: dict[tuple[int, int], list] = {}
        for r0, r1, part in parts:
            by_rows.setdefault((r0, r1), []).append(part)
        gen = torch.Generator(device=acc.device)
        gen.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)  # a new order every call
        for (r0, r1), ps in by_rows.items():
            stack = torch.stack(ps)  # [key tiles, H, rows, D]
            order = torch.rand(stack.shape, generator=gen, device=acc.device).argsort(dim=0)
            for part in stack.gather(0, order):
                acc[:, r0:r1] += part


@variant(
    "PyTorch's memory-efficient attention (xFormers' cutlass kernel), float32 on sm80+: 3xTF32 GEMMs", cuda=STEPPED
)
class FastF32Gemm(BlockwiseAttention):
    """Every tile GEMM of a float32 problem as CUTLASS's OpMultiplyAddFastF32 (3xTF32) adds it:
    each operand split into TF32 big and small parts, small*big, big*small and big*big added
    per MMA k-step of 8 in float32 (kernels/gemm_orders.py)."""

    name = "fast-f32-3xtf32"
    capability = replace(BlockwiseAttention.capability, dtypes=("float32",))

    def gemm(self, a, b):
        return fast_f32_gemm(a, b)


# ----------------------------------------------------------------------------- a whole FA2 convention
@variant("FlashAttention 2 as a whole: the hand-written FA2-convention kernel of the field")
class Fa2Convention(_LseOnly, _InputDtype):
    """Everything a FlashAttention-2 kernel does at once: O stored in the input dtype and
    Delta from it, P and dS rounded before their GEMMs, exp2 with the folded scale, P from
    the stored LSE alone, dK/dV per query head stored before the group sum."""

    name = "fa2-convention"
    delta_source = "o_do"

    def logit_scale(self, p, phase):
        return float(torch.tensor(p.scale * LOG2E, dtype=F32))

    def exp(self, x):
        return torch.exp2(x)

    def log(self, x):
        return torch.log2(x)

    def to_log_units(self, x):
        return x * LOG2E

    def lse_natural(self, lse):
        return lse * LN2

    def stats_from_lse(self, lse):
        return lse.to(F32) * LOG2E

    def operand(self, t, which):
        return _round_to(t, self.low)

    def reduce_group(self, grad_h, idx, heads_kv):
        rounded = grad_h.to(self.low).to(F32) if self.low != F32 else grad_h
        return torch.stack([rounded[idx == g].sum(dim=0) for g in range(heads_kv)])


# ----------------------------------------------------------------------------- softcap
@variant(
    "FlashAttention 2/3 (softcap folded into the scale), FA4's softcap score_mod with exp2: "
    "tanh of the raw logits times scale / softcap, then softcap * log2 e"
)
class SoftcapFoldedScale(Exp2FoldedScale):
    """Softcap as FlashAttention 2/3 fold it: S = tanh(Q K^T * (scale / softcap)) with one
    float32 multiplier, the softmax in base 2 with softcap * log2 e as its scale, and dS times
    1 - tanh^2 from the tanh it kept (not from the capped logit); no cap: the exp2 variant."""

    name = "softcap-folded-scale"

    def logit_scale(self, p, phase):
        if p.softcap is None:
            return super().logit_scale(p, phase)
        return float(torch.tensor(p.scale / p.softcap, dtype=F32))  # Q K^T times scale / softcap: tanh's argument

    def cap_logits(self, p, s, scale, phase):
        if p.softcap is None:
            return s, None
        t = torch.tanh(s)
        return t * float(torch.tensor(p.softcap * LOG2E, dtype=F32)), 1.0 - t * t


@variant(
    "FlashAttention 4's softcap (cute.math.tanh with fastmath: tanh.approx.f32), any kernel "
    "capping with the GPU's approximate tanh"
)
class SoftcapApproxTanh(SoftcapFoldedScale):
    """Softcap with the GPU's approximate tanh (relative error up to 2^-11, here at its worst
    at every element, toward zero) in the forward, and dS times 1 - t^2 from the same
    approximate t in the backward: a capped logit near the cap is off by up to cap * 2^-11,
    far more than a bfloat16 P's rounding at a cap of 30."""

    name = "softcap-approx-tanh"
    capability = replace(SoftcapFoldedScale.capability, designs=("approximate-tanh-softcap",))

    def cap_logits(self, p, s, scale, phase):
        if p.softcap is None:
            return s, None
        t = approx_tanh(s)
        return t * float(torch.tensor(p.softcap * LOG2E, dtype=F32)), 1.0 - t * t


# ----------------------------------------------------------------------------- FP8
@variant("cuDNN sdpa_fp8 / sdpa_fp8_backward (Hopper, Blackwell), Transformer Engine FP8 attention", cuda=FP8_TILED)
class Fp8CurrentScaling(BlockwiseAttention):
    """FP8 attention emulated on the CPU: reads the stored FP8 Q, K, V, dO with their
    descales, feeds P (scaled by P_SCALE) and dS (scaled by its own amax, measured in a first
    pass) to the GEMMs in FP8, accumulates in float32, takes Delta from the stored O, and
    stores O, dQ, dK, dV in FP8 with current scaling (difftest/model/fp8.py).

    The tiled blockwise kernel with FP8 storage at each point cuDNN's FP8 kernels store: a
    correct FP8 design (online softmax, P quantised per key tile against the running max in
    the forward, per tile in the backward; the yardstick, oracles/fp8.py, is dense), so every
    verdict on it must pass. ``amax`` and ``scales`` (dicts, set by each call) are what the
    kernel would report. The FP8 mutants of kernels/mutants.py deviate from it by one hook."""

    name = "fp8-current-scaling"
    capability = replace(
        BlockwiseAttention.capability,
        dtypes=FP8_DTYPES,
        layouts=("contiguous",),
        softcap=False,
        alibi=False,
        rel_bias=False,
    )
    delta_source = "o_do"  # FP8 kernels take Delta = rowsum(O * dO) from the stored O and dO

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.dtype = FP8_DTYPES[0]
        self.ds_scale = None  # None: the measuring pass (dS unquantised, its amax recorded)
        self.ds_amax = 0.0
        self.amax, self.scales = {}, {}

    # --- what the kernel reads
    def load(self, inputs, name, b):
        t = inputs.fp8[name]
        p = inputs.problem
        cu = p.cu_seqlens_q if name in ("q", "do") else p.cu_seqlens_k
        return fp8.dequantise(t.data[cu[b] : cu[b + 1]], self.descale_of(inputs, name))

    def descale_of(self, inputs, name: str) -> float:
        """The descale the kernel multiplies a stored input by."""
        return inputs.fp8[name].descale

    # --- where it quantises
    def p_scale(self) -> float:
        return fp8.fmt(self.dtype).p_scale

    def ds_store_scale(self, amax_ds: float) -> float:
        """The scale dS is stored with, from the amax the measuring pass saw."""
        return fp8.pow2_scale(amax_ds, self.dtype)

    def operand(self, t, which):
        if which in ("p_fwd", "p_dv"):
            return fp8.round_trip(t, self.p_scale(), self.dtype)
        if self.ds_scale is None:  # the measuring pass
            self.ds_amax = max(self.ds_amax, fp8.amax(t))
            return t
        return fp8.round_trip(t, self.ds_scale, self.dtype)

    def store(self, name: str, t: torch.Tensor) -> torch.Tensor:
        """An output written in FP8 with current scaling and read back (``amax`` and
        ``scales`` record what was used)."""
        a = fp8.amax(t)
        s = fp8.pow2_scale(a, self.dtype)
        self.amax[name], self.scales[name] = a, s
        return fp8.dequantise(fp8.quantise(t, s, self.dtype), self.output_descale(name, s))

    def output_descale(self, name: str, scale: float) -> float:
        """The descale an output is read back with: its own scale's inverse."""
        return 1.0 / scale

    # --- the calls
    def forward(self, inputs, out=None):
        self.dtype = inputs.problem.dtype
        self.amax, self.scales = {}, {"p": self.p_scale()}
        fwd, ctx = super().forward(inputs, out)
        fwd.o.copy_(self.store("o", fwd.o))
        return fwd, ctx

    def backward(self, inputs, fwd, ctx, out=None):
        self.dtype = inputs.problem.dtype
        self.ds_scale, self.ds_amax = None, 0.0
        super().backward(inputs, fwd, ctx, None)  # pass 1: dS's amax over the whole problem
        self.ds_scale = self.ds_store_scale(self.ds_amax)
        self.amax["ds"], self.scales["ds"] = self.ds_amax, self.ds_scale
        try:
            res = super().backward(inputs, fwd, ctx, out)
        finally:
            self.ds_scale = None
        for name in ("dq", "dk", "dv"):
            t = getattr(res, name)
            t.copy_(self.store(name, t))
        return res


@variant(
    "cuDNN sdpa_fp8 on Hopper: GEMMs added in the FP8 tensor core's own accumulator (H200, results/fp8.md)",
    cuda=replace(STEPPED, max_heads=16),
)
class Fp8TensorCoreAccumulator(Fp8CurrentScaling):
    """The FP8 emulation with every tile GEMM added as Hopper's FP8 MMA adds: per 32 products,
    aligned to the largest and cut to about 13 fraction bits (oracles/tensor_core.py), not in
    float32. On the H200 this accumulator, not a bug, is why cuDNN's FP8 LSE is 2e-4..2e-2
    off the float32 yardstick's (cuBLAS's own FP8 GEMM reproduces cuDNN's LSE to 6e-7)."""

    name = "fp8-tensor-core-accumulator"

    def gemm(self, a, b):  # float32 tiles holding FP8 values (dS of the measuring pass rounds, but
        return mma_matmul(a, b)  # that pass keeps only its amax)


# ----------------------------------------------------------------------------- catalogue
# ----------------------------------------------------------------------------- sparse masks
@variant(
    "block-sparse kernels (FlexAttention, FlashAttention-4 block sparsity) walking their kv_indices "
    "list, FA's backward walking key blocks last first"
)
class SparseTilesReversed(SparseBlockwiseAttention):
    """Key tiles visited last first, in the forward's online softmax and the backward, as a
    block-sparse kernel walks its list of selected blocks in the order it is given: another
    summation order of the same sums (a tile no row selects adds exact zeros, so skipping it,
    as those kernels do, changes no value)."""

    name = "sparse-tiles-reversed"

    def key_tiles(self, sk, phase):
        return list(reversed(super().key_tiles(sk, phase)))


VARIANTS: dict[str, Variant] = {v.name: v for v in _CATALOGUE}


EXTRA_SOURCES = ("difftest.kernels.tilelang.variants",)  # modules with a VARIANTS dict of the same shape


def _load_extra() -> tuple[dict, dict]:
    return load_extra(EXTRA_SOURCES, "VARIANTS", VARIANTS)


class Catalogue:
    """What the engine sees (entry-point group ``difftest.catalogues``, prefix ``variant``, or
    ``variant-cuda`` for the variants as they run on CUDA):
    ``difftest.execute.adapter.get("variant:NAME")`` builds ``entries()[NAME]``; the blockwise
    variants, then those of optional sources (our TileLang kernels) that load here (they pick
    their device themselves: CUDA where it is available)."""

    def __init__(self, device: str = "cpu"):
        self.device = device
        self.prefix = "variant" if device == "cpu" else CUDA_PREFIX

    def entries(self) -> dict[str, Variant]:
        own = VARIANTS if self.device == "cpu" else {n: replace(v, factory=v.cuda) for n, v in VARIANTS.items()}
        return {**own, **_load_extra()[0]}

    def skipped(self) -> dict[str, str]:
        return _load_extra()[1]


CATALOGUE = Catalogue("cpu")
CUDA_CATALOGUE = Catalogue("cuda")


def get(name: str) -> Variant:
    entries = CATALOGUE.entries()
    if name not in entries:
        raise KeyError(f"unknown variant {name!r}: known variants are {sorted(entries)}")
    return entries[name]
