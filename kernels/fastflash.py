"""fastflash-attention (PyPI ``fastflash-attention`` 0.2.0, pure Triton) backward.

Public API (fastflash_attention/__init__.py): ``fast_attention(q, k, v, is_causal=, scale=)``
on [B, H, S, D] bf16 CUDA tensors; with ``requires_grad`` it routes through the autograd
Function ``FastFlashAttn`` (_kernel.py:773), whose backward is the kernel under test: a
deterministic (no atomics) two-kernel dK/dV + dQ split by default. Setting
``UNIFLASH_BWD_FUSED_ATOMIC=1`` (read at backward time, _kernel.py:807) reroutes it through
the fused atomic-dQ kernel (not deterministic): the ``fastflash-atomic`` adapter.
The autograd path keeps the LSE private; ``fastflash_attn(q, k, v, causal, return_lse=True,
scale=)`` (_kernel.py:282, the same forward kernel FastFlashAttn.forward calls at :778)
returns it as the base-2 LSE of the scaled logits ``M = m + log2(l)`` with logits pre-scaled
by ``scale * log2(e)`` (_kernel.py:286-289, 305), [B, H, S] fp32: natural = M * ln 2.

Install without network: ``pip install --no-deps fastflash_attention-0.2.0-py3-none-any.whl``
(torch and triton only).
"""

import os
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .bhsd import bhsd_do, bhsd_leaf, bhsd_to_thd, lse2_to_natural
from .cuda_common import cuda_reason, lse_bhs_to_thd, module_reason, normalize_lse

ATOMIC_ENV = "UNIFLASH_BWD_FUSED_ATOMIC"
WHEEL = "pip install --no-deps fastflash_attention-0.2.0-py3-none-any.whl"

# The contract, fastflash_attention 0.2.0 __init__.py `_reason` (lines 55-80) and
# `_POW2_LE_128` (line 47): bfloat16 only (line 67); q, k, v of one identical [B, H, S, D]
# shape (lines 72-75: no GQA/MQA, seqlen_q == seqlen_k, head_dim_v == head_dim); head_dim a
# power of two <= 128 (lines 76-78; _kernel.py:292 asserts the same); attn_mask None, so
# masks are causal only through is_causal (line 57), which on a square problem is both
# alignments; any scale (line 22, _kernel.py:304). Dims 1..8 are accepted by that
# validation although tl.dot needs K >= 16: kept, since the package claims them (a failure
# there is a contract finding, not an adapter bug). Contiguous only: the function makes
# its own contiguous copies (_kernel.py:294). max_* are campaign bounds (GPU time).
DIMS = (1, 2, 4, 8, 16, 32, 64, 128)


def _capability(deterministic: bool) -> Capability:
    return Capability(
        dtypes=("bfloat16",),
        head_dims_qk=DIMS,
        equal_head_dims=True,
        max_batch=8,
        max_seqlen=4096,
        max_heads=32,
        gqa=False,
        seqlen_q_ne_k=False,
        causal=True,
        aligns=("top_left", "bottom_right"),
        window=False,
        varlen=False,
        empty_seqs=False,
        pad_tail=False,
        sinks=False,
        softmax_scale=True,
        outputs=("o", "lse", "dq", "dk", "dv"),
        deterministic=deterministic,
        device="cuda",
        # the forward autotunes BLOCK_M in {64, 128}, BLOCK_N in {64, 128} (_kernel.py:184-190)
        block_m=64,
        block_n=64,
        compile_key=("head_dim_qk", "causal"),
    )


@dataclass(frozen=True)
class FastflashCall:
    """What fastflash gets for a Problem (testable without a GPU)."""

    is_causal: bool
    scale: float
    atomic_env: str  # the value of UNIFLASH_BWD_FUSED_ATOMIC during the backward

    @staticmethod
    def of(p: Problem, atomic: bool) -> "FastflashCall":
        if p.varlen or p.seqlens_q != p.seqlens_k or p.heads_q != p.heads_kv or p.head_dim_qk != p.head_dim_v:
            raise ValueError(f"fastflash takes dense square MHA problems with equal head dims; got {p.short()}")
        return FastflashCall(is_causal=p.causal, scale=p.scale, atomic_env="1" if atomic else "0")


@contextmanager
def env_set(name: str, value: str):
    """``os.environ[name] = value`` for the block, the old value (or its absence) restored."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


class FastflashAdapter(KernelAdapter):
    def __init__(self, atomic: bool = False):
        self.atomic = atomic
        self.name = "fastflash-atomic" if atomic else "fastflash"
        self.capability = _capability(deterministic=not atomic)
        self.description = "fastflash-attention 0.2.0 Triton backward, " + (
            "fused atomic dQ (UNIFLASH_BWD_FUSED_ATOMIC=1)" if atomic else "deterministic split"
        )

    def available(self) -> str | None:
        return cuda_reason() or module_reason("fastflash_attention", WHEEL)

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        # lazy: fastflash-attention is optional; the adapter loads and says so without it
        from fastflash_attention import fast_attention
        from fastflash_attention._kernel import fastflash_attn

        p = inputs.problem
        call = FastflashCall.of(p, self.atomic)
        q, k, v = (bhsd_leaf(inputs, n) for n in ("q", "k", "v"))
        o = fast_attention(q, k, v, is_causal=call.is_causal, scale=call.scale)  # autograd path
        with torch.no_grad():  # the same forward kernel, asked for the LSE it keeps private
            _, lse2 = fastflash_attn(
                q.detach(), k.detach(), v.detach(), call.is_causal, return_lse=True, scale=call.scale
            )
        lse = normalize_lse(lse_bhs_to_thd(lse2_to_natural(lse2)), p)
        return Outputs(o=bhsd_to_thd(o), lse=lse), (q, k, v, o, call)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        q, k, v, o, call = ctx
        with env_set(ATOMIC_ENV, call.atomic_env):
            dq, dk, dv = torch.autograd.grad(o, (q, k, v), bhsd_do(inputs), retain_graph=True)
        return Outputs(o=fwd.o, lse=fwd.lse, dq=bhsd_to_thd(dq), dk=bhsd_to_thd(dk), dv=bhsd_to_thd(dv))


def deterministic():
    return FastflashAdapter(atomic=False)


def atomic():
    return FastflashAdapter(atomic=True)
