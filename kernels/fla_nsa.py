"""flash-linear-attention's Native Sparse Attention, selection branch only (PyPI ``fla-core``
0.6.0, ``fla.ops.nsa.parallel_nsa``; Triton forward and backward) through its public API.

``parallel_nsa(q, k, v, g_cmp=None, g_slc=None, g_swa=None, block_indices, block_counts,
block_size, window_size=0, scale, cu_seqlens)`` with the compression and sliding-window branches
off (no gates, ``window_size`` 0) returns the selection branch's output alone,
``ParallelNSAFunction.apply(...)`` (parallel.py:938-942): for query token t and KV head h, plain
softmax attention over the keys of the key blocks ``block_indices[b, t, h, :]`` names (blocks of
``block_size`` keys), causal by itself, every query head of h's group sharing h's selection. q is
[B, T, HQ, K], k [B, T, H, K], v [B, T, H, V]; no LSE is returned (it stays in the autograd
context, natural log: ``tl.log``/``tl.exp``, fla/ops/utils/op.py:44-49); gradients for q, k, v only.

difftest's sparsity (difftest/model/sparsity.py) becomes ``block_indices`` as ``NsaCall`` builds it:
per query token the slots of its query block (top-k: the slots as drawn, -1 and past-the-end ones
included; a block mask: the kept key blocks), padded with -1 (fla's padding, csr.py:119) to a power
of two; a dense Problem selects every key block (block size ``DENSE_BLOCK``): plain causal attention.

Device: CUDA when a CUDA device is visible; otherwise, with ``TRITON_INTERPRET=1`` in the
environment (set before fla is imported), the CPU under Triton's interpreter, as kernels/fla_attn.py
(whose NumPy and bf16 notes hold here too). NSA's kernels are autotuned (``num_warps``/``num_stages``,
and the dK/dV kernel's ``BQ`` queries per tile); Triton's autotuner times configs on a GPU driver the
CPU lacks, so under the interpreter every NSA autotuner takes a fixed config without timing
(``_untimed_autotune``): the first, and for the dK/dV kernel the largest BQ fla's prune leaves (the
tile whose tail queries are masked, parallel.py:500-504).

Install without network: ``pip install --no-deps fla_core-0.6.0-py3-none-any.whl einops-*.whl``.
"""

from dataclasses import dataclass, field
from typing import Any

import torch

from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.layouts import LAYOUTS
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .cuda_common import autograd_backward, laid_out, laid_out_leaf, thd
from .fla_attn import device_here, fla_reason

WHEEL = "pip install --no-deps fla-core==0.6.0 einops"
VERSION = "0.6.0"

# The contract, as fla-core 0.6.0's own code states it (fla/ops/nsa/parallel.py of the wheel unless
# another file is named; read for this capability, not inferred from runs):
# - what is computed: the forward loops over the NS slots of the token's row (260), skips a slot
#   whose block starts after the query or is negative (262: -1 and past-the-end slots select
#   nothing), masks keys after the query inside a block (274) and softmaxes over everything the
#   loop visited (276-286). The query is at Q_OFFSET + i_t, Q_OFFSET = TK - TQ (229): causal,
#   bottom-right. dq repeats the loop (384-405); dk/dv walk the CSR inverse of the selection
#   (fla/ops/utils/csr.py:48-53 keeps slots with 0 <= index < TC and index * BS <= query) and mask
#   keys after the query (520). causal_required.
# - a block named by two slots is visited twice: its keys enter the softmax twice (forward 260-284,
#   dq 384-405, and twice in the CSR list, csr.py:67-72): a list, not difftest's set. NSA's own
#   top-k (parallel_nsa_kernel_topk, 133-170) never repeats a block, so this is a convention of the
#   interface, not a fault: refused (``refusal``), see results in the module's report.
# - a row whose slots name no visible key divides 0 by 0: O = NaN (286), LSE -inf (287). NSA's own
#   top-k always selects block 0 and the query's own block (147-148), so its rows are never empty;
#   difftest's model says O = 0 there. Not refused: it is drawn and fails as the kernel behaves.
# - one T for queries and keys in the backward: the dq kernel's causal test is `i_s <= i_t` without
#   Q_OFFSET (386) and B, T come from k (673); TQ != TK is "cached inference, where backward is not
#   supported" (805-806): seqlen_q_ne_k=False.
# - GQA: HQ % H == 0 (901-902) and G = HQ / H a power of two >= 16, asserted (904; docstring 857-858:
#   G is a tile dimension of tl.dot, whose operands need 16 rows on a GPU): ``refusal``.
#   kv_broadcast (K/V expanded to every query head, an MHA call) is G = 1: not declared.
# - varlen: cu_seqlens with B = 1 (895-899); one cu_seqlens for q and k (a tuple is inference
#   only, 813-817). A zero-length sequence is accepted (no check; the docstring, 883-886, promises
#   cu_seqlens as FlashAttention takes them) but breaks fla's token -> sequence map (utils/index.py:
#   145-146 counts sequence starts, and an empty sequence has none): a bug (results/bugs/fla/
#   DRAFT-nsa-empty-seq.md), so empty_seqs=True: the hunt must meet it. The forward's grid is
#   the packed T (627) and token_indices covers cu_seqlens[-1] tokens (219, 781): tail rows read
#   past it, pad_tail=False.
# - no window in this branch (window_size > 0 adds flash-attn's sliding window branch, 943-960),
#   no sinks, no softcap; scale any float (248, 368, 509; None -> K ** -0.5 at 893-894).
# - head dims: the forward asserts K <= BK = min(128, next_pow2(K)) off Hopper, 256 on Hopper
#   (617-625; check_shared_mem is False on the CPU): K <= 128 declared; V split in BV blocks
#   forward (619-624), one BV = max(next_pow2(V), 16) block backward (681); loads mask o_d < K and
#   o_v < V, so any K, V up to 128 under the interpreter. On CUDA tl.dot needs 16 along every
#   dimension: K, V >= 9 (BK, BV >= 16) and block_size >= 16; declared 16..128.
# - block_size: tl.arange(0, BS) (263, 475; csr.py BS) needs a power of two; the CSR kernel's
#   tl.arange(0, S) (csr.py:42) needs a power-of-two slot count S: the adapter pads with -1.
# - block_counts: an int is ignored by the forward and dq (NS = S, 239, 355) but bounds the CSR's
#   slots (csr.py:52): the adapter passes S itself, so every path reads the same slots.
# - dtypes: o in v.dtype (628), returned as q.dtype (807); P cast to q's dtype before P.V (284).
#   fp16/bf16 declared on CUDA (fp32 tl.dot is TF32), fp16/fp32 under the interpreter.
# - layouts: `@contiguous` on parallel_nsa (836) copies every tensor argument contiguous.
# - determinism: the CSR is built with atomic cursors, "order within a block is arbitrary"
#   (csr.py:70, 114), and dk/dv sum their queries in that order: not claimed.
# - max_seqlen / max_heads / max_batch are campaign bounds (time), not fla's.
CPU_DIMS = tuple(range(8, 129, 8)) + (1, 3, 20, 100, 127)
CUDA_DIMS = tuple(range(16, 129, 8)) + (20, 100, 127)
DENSE_BLOCK = 64  # block_size of a dense Problem (every block selected): fla's default (846)
MIN_GROUP = 16  # parallel.py:904
TOPK_SIZES = ((1, 16), (1, 32), (1, 64), (16, 16), (64, 64))  # (block_q, block_k = block_size)
BLOCK_SIZES = ((1, 32), (16, 16), (64, 64))


def refusal(p: Problem) -> str | None:
    """Why parallel_nsa's interface refuses ``p`` although the Capability's fields cannot say so."""
    g, rem = divmod(p.heads_q, p.heads_kv)
    if rem or g < MIN_GROUP or g & (g - 1):
        return (
            f"parallel_nsa needs heads_q / heads_kv a power of two >= {MIN_GROUP} "
            f"(fla/ops/nsa/parallel.py:904); got {p.heads_q}/{p.heads_kv}"
        )
    sp = p.sparsity
    if sp is not None and sp.kind == "topk":
        for sq, sk in zip(p.seqlens_q, p.seqlens_k):
            if sq and sk and bool((sp.counts(sq, sk) > 1).any()):
                return (
                    "parallel_nsa attends a block once per slot naming it (fla/ops/nsa/parallel.py:260-284, "
                    "csr.py:67-72); difftest counts a duplicate once: duplicate top-k slots refused"
                )
    return None


@dataclass(frozen=True)
class NsaCapability(Capability):
    """The declared capability plus the interface's refusals of field combinations."""

    def excludes(self, p: Problem) -> str | None:
        return super().excludes(p) or refusal(p)


def _capability(device: str) -> Capability:
    cpu = device == "cpu"
    dims = CPU_DIMS if cpu else CUDA_DIMS
    return NsaCapability(
        dtypes=("float16", "float32") if cpu else ("float16", "bfloat16"),
        head_dims_qk=dims,
        head_dims_v=dims,
        equal_head_dims=False,
        max_batch=4 if cpu else 8,
        max_seqlen=256 if cpu else 4096,
        max_heads=32 if cpu else 64,
        gqa=True,
        seqlen_q_ne_k=False,
        causal=True,
        causal_required=True,
        aligns=("bottom_right", "top_left"),  # square problems only: the same diagonal
        varlen=True,
        empty_seqs=True,
        pad_tail=False,
        softmax_scale=True,
        layouts=tuple(x for x in LAYOUTS if x != "kv_broadcast"),
        outputs=("o", "dq", "dk", "dv"),
        deterministic=False,
        device=device,
        # Q times the scale, rounded to the input dtype, before Q K^T (b_q = (b_q * scale).to(b_q.dtype),
        # parallel.py:91, 248, 368): a correct design the budget judges by its own yardstick
        designs=("prescaled-q",),
        block_m=64,
        block_n=DENSE_BLOCK,
        topk_sparse=TOPK_SIZES,
        block_sparse=BLOCK_SIZES,
        # Triton constexprs (parallel.py:201-211, 321-332, 449-460): H, HQ, G, K, V, S, BS
        compile_key=("dtype", "head_dim_qk", "head_dim_v", "heads_q", "heads_kv"),
    )


def _rows(p: Problem, sq: int, sk: int) -> list[list[int]]:
    """Per query token of one (sq, sk) sequence: the key-block slots NSA gets (unpadded)."""
    sp = p.sparsity
    if sp is None:
        return [list(range(-(-sk // DENSE_BLOCK)))] * sq
    if sp.kind == "topk":
        per_block = [list(r) for r in sp.topk_slots(sq, sk)]
    else:
        per_block = [[j for j, kept in enumerate(r) if kept] for r in sp.block_pattern(sq, sk)]
    return [per_block[i // sp.block_q] for i in range(sq)]


def _pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


@dataclass(frozen=True)
class NsaCall:
    """What parallel_nsa gets for a Problem, besides q, k, v (testable without fla): block_indices
    as nested lists [B (1 when varlen), T, S] (the same for every KV head), padded with -1 to S."""

    scale: float
    block_size: int
    slots: int
    varlen: bool
    indices: list = field(repr=False)

    @staticmethod
    def of(p: Problem) -> "NsaCall":
        if not p.causal:
            raise ValueError(f"parallel_nsa is always causal; got a non-causal problem ({p.short()})")
        if p.seqlens_q != p.seqlens_k:
            raise ValueError(
                f"parallel_nsa's backward takes one T; got seqlens_q {p.seqlens_q} != seqlens_k {p.seqlens_k}"
            )
        per_seq = [_rows(p, sq, sk) for sq, sk in zip(p.seqlens_q, p.seqlens_k)]
        width = _pow2(max([len(r) for rows in per_seq for r in rows], default=1))
        padded = [[r + [-1] * (width - len(r)) for r in rows] for rows in per_seq]
        indices = [sum(padded, [])] if p.varlen else padded
        bs = DENSE_BLOCK if p.sparsity is None else p.sparsity.block_k
        return NsaCall(scale=p.scale, block_size=bs, slots=width, varlen=p.varlen, indices=indices)

    def block_indices(self, heads_kv: int, device) -> torch.Tensor:
        """[B, T, H, S] int32, as parallel_nsa_topk makes them (parallel.py:572)."""
        t = torch.tensor(self.indices, dtype=torch.int32).reshape(len(self.indices), -1, 1, self.slots)
        return t.expand(-1, -1, heads_kv, -1).contiguous().to(device)


class FlaNsaAdapter(KernelAdapter):
    name = "fla-nsa"

    def __init__(self, device: str | None = None):
        self.device = device or device_here()
        self.capability = _capability(self.device)
        where = "CUDA" if self.device == "cuda" else "the CPU under Triton's interpreter (TRITON_INTERPRET=1)"
        self.description = (
            f"fla-core {VERSION} fla.ops.nsa.parallel_nsa, selection branch only (Triton forward/backward, "
            f"top-k and block-sparse key blocks, always causal), on {where}"
        )

    def available(self) -> str | None:
        return fla_reason(self.device, "fla.ops.nsa.parallel:parallel_nsa_fwd_kernel")

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        # lazy: fla-core is optional, and must be imported after TRITON_INTERPRET is set (CPU runs)
        from fla.ops.nsa.parallel import parallel_nsa

        p = inputs.problem
        call = NsaCall.of(p)
        if self.device == "cpu":
            _untimed_autotune()
        q, k, v = (laid_out_leaf(laid_out(inputs, n)) for n in ("q", "k", "v"))  # the laid-out memory
        bi = call.block_indices(p.heads_kv, q.device)
        kw: dict[str, Any] = dict(block_indices=bi, block_counts=call.slots, block_size=call.block_size)
        if call.varlen:  # packed [T, H, D] as one sequence of B = 1, offsets as LongTensor
            cu = inputs.cu_seqlens_q.long()
            o = parallel_nsa(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), scale=call.scale, cu_seqlens=cu, **kw)[0]
            o_thd = o.detach()
        else:
            o = parallel_nsa(q, k, v, scale=call.scale, **kw)
            o_thd = thd(o.detach())
        return Outputs(o=o_thd), (q, k, v, None, o)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        return autograd_backward(inputs, fwd, ctx)


def _autotuners():
    """fla's autotuned kernels on parallel_nsa's path (its kernels and mean pooling, 913)."""
    # lazy: fla-core and Triton are optional; asked only on the interpreter path
    from fla.ops.nsa import parallel
    from fla.ops.utils import pooling
    from triton.runtime.autotuner import Autotuner

    for mod in (parallel, pooling):
        for obj in list(vars(mod).values()):
            while not isinstance(obj, Autotuner) and hasattr(obj, "fn"):
                obj = obj.fn
            if isinstance(obj, Autotuner):
                yield obj


def _untimed_autotune() -> None:
    """Under the interpreter: every config "takes" the same time, so the autotuner keeps its first
    pruned config; the dK/dV kernel's configs are ordered by BQ, largest first."""
    for at in _autotuners():
        if getattr(at, "_difftest_untimed", False):
            continue
        at._do_bench = _same_time
        if "BQ" in at.configs[0].kwargs:
            at.configs = sorted(at.configs, key=lambda c: -c.kwargs["BQ"])
        at._difftest_untimed = True


def _same_time(fn, quantiles=None, **kw) -> list[float]:
    return [1.0, 1.0, 1.0]


def adapter():
    return FlaNsaAdapter()
