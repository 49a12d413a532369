"""flash-attention-triton (PyPI ``flash-attention-triton`` 0.1.1, Egor Zakharenko; a Triton
FlashAttention-2) backward.

API (flash_attention_2.py:646): ``flash_attention_v2(q, k, v, softmax_scale=None,
deterministic=False)`` on (batch, nheads, seqlen, headdim); the attention is ALWAYS causal,
top-left (key j visible to query i iff j <= i: _triton_kernels_v2.py, the kv loop of a query
block stops at its own end). Backward via autograd only (FlashAttentionV2Function.backward):
``deterministic=False`` runs the sequence-parallel backward with atomic dQ, True disables it.
The LSE (natural log, [B, H, ceil(Sq/128)*128]) stays in the autograd context and is not
returned, so it is not checked. Inputs are cast to fp16 and the output back to the input
dtype (flash_attention_2.py:313-339).

Install without network: ``pip install --no-deps flash_attention_triton-0.1.1-py3-none-any.whl``.
"""

from dataclasses import dataclass

import torch

from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .bhsd import bhsd_do, bhsd_leaf, bhsd_to_thd
from .cuda_common import cuda_reason, module_reason

WHEEL = "pip install --no-deps flash_attention_triton-0.1.1-py3-none-any.whl"

# The contract, flash_attention_triton 0.1.1 flash_attention_2.py `_flash_attention_forward`
# (80-90): k and v shaped (batch, nheads, seqlen_k, headdim) (85-86: no GQA, head_dim_v ==
# head_dim, seqlen_k free); headdim <= max_headdim = 128 (87; padded inside to a power of two
# >= 16 with masks); the kernel itself takes fp16 only (90). The public function casts any
# input to fp16 and back (313-339), so bf16/fp32 problems would be judged at their own
# tolerances after a silent fp16 round trip: declared float16 only. Causal always, top-left
# (causal_required, aligns top_left). softmax_scale: any non-zero value (`softmax_scale or
# 1/sqrt(d)`, line 94). max_* are campaign bounds (GPU time).
DIMS = tuple(range(8, 129, 8)) + (1, 3, 20, 100, 127)


def _capability(deterministic: bool) -> Capability:
    return Capability(
        dtypes=("float16",),
        head_dims_qk=DIMS,
        equal_head_dims=True,
        max_batch=8,
        max_seqlen=4096,
        max_heads=32,
        gqa=False,
        seqlen_q_ne_k=True,
        causal=True,
        causal_required=True,
        aligns=("top_left",),
        window=False,
        varlen=False,
        empty_seqs=False,
        pad_tail=False,
        sinks=False,
        softmax_scale=True,
        outputs=("o", "dq", "dk", "dv"),
        deterministic=deterministic,
        device="cuda",
        block_m=128,
        block_n=128,  # forward 128 x 128 on sm80+ (_configurators_v2.py); backward 64/128
        compile_key=("head_dim_qk",),
    )


@dataclass(frozen=True)
class FatCall:
    """What flash_attention_v2 gets for a Problem (testable without a GPU)."""

    softmax_scale: float
    deterministic: bool

    @staticmethod
    def of(p: Problem, deterministic: bool) -> "FatCall":
        if p.varlen or p.heads_q != p.heads_kv or p.window_left is not None or p.window_right is not None:
            raise ValueError(f"flash-attention-triton takes dense MHA problems without windows; got {p.short()}")
        if not p.causal or (p.align != "top_left" and p.seqlen_q != p.seqlen_k):
            raise ValueError(
                f"flash-attention-triton is always causal, top-left; got causal={p.causal} "
                f"align={p.align} ({p.short()})"
            )
        return FatCall(softmax_scale=p.scale, deterministic=deterministic)


class FlashAttentionTritonAdapter(KernelAdapter):
    def __init__(self, deterministic: bool = True):
        self.deterministic = deterministic
        self.name = "flash-attention-triton" if deterministic else "flash-attention-triton-fast"
        self.capability = _capability(deterministic)
        self.description = f"flash-attention-triton 0.1.1 (causal only), deterministic={deterministic}"

    def available(self) -> str | None:
        return cuda_reason() or module_reason("flash_attention_triton", WHEEL)

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        # lazy: flash-attention-triton is optional; the adapter loads and says so without it
        from flash_attention_triton import flash_attention_v2

        call = FatCall.of(inputs.problem, self.deterministic)
        q, k, v = (bhsd_leaf(inputs, n) for n in ("q", "k", "v"))
        o = flash_attention_v2(q, k, v, softmax_scale=call.softmax_scale, deterministic=call.deterministic)
        return Outputs(o=bhsd_to_thd(o)), (q, k, v, o)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        q, k, v, o = ctx
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), bhsd_do(inputs), retain_graph=True)
        return Outputs(o=fwd.o, dq=bhsd_to_thd(dq), dk=bhsd_to_thd(dk), dv=bhsd_to_thd(dv))


def deterministic():
    return FlashAttentionTritonAdapter(True)


def fast():
    return FlashAttentionTritonAdapter(False)
