"""FlashAttention 4 (``flash_attn.cute``, CuTe DSL), SM90 backward, through its public API.

Dense problems call ``flash_attn_func`` on [B, S, H, D] views; varlen problems call
``flash_attn_varlen_func`` on the packed tensors with cu_seqlens. Gradients come from
torch autograd through FA4's own ``FlashAttnFunc.backward`` (the kernel under test).
Conventions: causal and windows are bottom-right aligned (FlashAttention's rule), a
window side of None is unbounded; learnable sinks are a float32 [H] tensor whose gradient
is dSink; LSE is returned natural-log, [B, H, S] dense or [H, T] varlen, -inf for an
empty row. ``deterministic=True`` is passed for the ``fa4`` adapter (it then claims
bitwise determinism); ``fa4-fast`` leaves FA4's default (atomics, not deterministic).
"""

from dataclasses import dataclass

import torch

from difftest.adapter import KernelAdapter
from difftest.capability import Capability
from difftest.inputs import Inputs
from difftest.outputs import Outputs
from difftest.problem import Problem

from .cuda_common import cuda_reason, leaf, lse_bhs_to_thd, lse_ht_to_thd, module_reason, normalize_lse, sm_reason, thd

# SM90: head dims 8..256, multiples of 8 (16 bytes of fp16/bf16); qk and v dims may differ.
_DIMS = (32, 64, 96, 128, 192, 256)


def _capability(deterministic: bool) -> Capability:
    return Capability(
        dtypes=("float16", "bfloat16"), head_dims_qk=_DIMS, head_dims_v=_DIMS, equal_head_dims=False, max_batch=8,
        max_seqlen=8192, max_heads=32, gqa=True, causal=True, aligns=("bottom_right",),
        window=True, varlen=True, empty_seqs=True, pad_tail=True, sinks=True,
        outputs=("o", "lse", "dq", "dk", "dv", "dsink"), deterministic=deterministic,
        device="cuda", block_m=64, block_n=128,
        compile_key=("dtype", "head_dim_qk", "head_dim_v", "causal", "sinks", "heads_q", "heads_kv"),
    )


@dataclass(frozen=True)
class Fa4Call:
    """The keyword arguments FA4 gets for a Problem (testable without a GPU)."""

    causal: bool
    window_size: tuple  # (left, right), None = unbounded
    softmax_scale: float
    deterministic: bool

    @staticmethod
    def of(p: Problem, deterministic: bool) -> "Fa4Call":
        if p.masked and p.align != "bottom_right" and p.seqlens_q != p.seqlens_k:
            raise ValueError(f"FA4 masks are bottom-right aligned; Problem.align={p.align!r}")
        return Fa4Call(causal=p.causal, window_size=(p.window_left, p.window_right),
                       softmax_scale=p.scale, deterministic=deterministic)

    def kwargs(self) -> dict:
        return dict(causal=self.causal, window_size=self.window_size,
                    softmax_scale=self.softmax_scale, deterministic=self.deterministic)


class Fa4Adapter(KernelAdapter):
    def __init__(self, deterministic: bool = True):
        self.deterministic = deterministic
        self.name = "fa4" if deterministic else "fa4-fast"
        self.capability = _capability(deterministic)
        self.description = f"flash_attn.cute (FA4) SM90 backward, deterministic={deterministic}"

    def available(self) -> str | None:
        return cuda_reason() or module_reason("flash_attn.cute", "pip install flash-attn-4") or sm_reason(9)

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        from flash_attn.cute import flash_attn_func, flash_attn_varlen_func

        p = inputs.problem
        call = Fa4Call.of(p, self.deterministic)
        sink = leaf(inputs.sink)
        if p.varlen:
            q, k, v = leaf(inputs.q), leaf(inputs.k), leaf(inputs.v)
            o, lse = flash_attn_varlen_func(
                q, k, v, cu_seqlens_q=inputs.cu_seqlens_q, cu_seqlens_k=inputs.cu_seqlens_k,
                max_seqlen_q=p.max_seqlen_q, max_seqlen_k=p.max_seqlen_k, learnable_sink=sink,
                return_lse=True, **call.kwargs())
            o_thd, lse_thd = o.detach(), lse_ht_to_thd(lse.detach(), p.total_q)
        else:
            q, k, v = (inputs.bshd(n).detach().clone().requires_grad_(True) for n in ("q", "k", "v"))
            o, lse = flash_attn_func(q, k, v, learnable_sink=sink, return_lse=True, **call.kwargs())
            o_thd, lse_thd = thd(o.detach()), lse_bhs_to_thd(lse.detach())
        fwd = Outputs(o=o_thd, lse=normalize_lse(lse_thd, p))
        return fwd, (q, k, v, sink, o)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        p = inputs.problem
        q, k, v, sink, o = ctx
        do = inputs.do if p.varlen else inputs.bshd("do")
        wrt = (q, k, v) + ((sink,) if sink is not None else ())
        grads = torch.autograd.grad(o, wrt, do.contiguous(), retain_graph=True, allow_unused=True)
        dq, dk, dv = grads[:3]
        dsink = grads[3].float() if sink is not None and grads[3] is not None else None
        if not p.varlen:
            dq, dk, dv = thd(dq), thd(dk), thd(dv)
        return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv, dsink=dsink)


def deterministic():
    return Fa4Adapter(deterministic=True)


def fast():
    return Fa4Adapter(deterministic=False)
