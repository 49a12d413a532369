"""FlashAttention 4 (``flash_attn.cute``, CuTe DSL), SM90 backward, through its public API.

Dense problems call ``flash_attn_func`` on [B, S, H, D] views; varlen problems call
``flash_attn_varlen_func`` on the packed tensors with cu_seqlens; either way the tensors
are the laid-out memory of the Problem's layout (difftest/model/layouts.py), dO included, and a
``kv_broadcast`` K/V reaches FA4 as an MHA call whose per-head dK/dV are summed here. Gradients come from
torch autograd through FA4's own ``FlashAttnFunc.backward`` (the kernel under test).
Conventions: causal and windows are bottom-right aligned (FlashAttention's rule), a
window side of None is unbounded, a negative one is passed as is (both negative, or negative
right under causal, restated: ``Fa4Call.of``); ``softcap`` is FA4's own (0 off); learnable
sinks are a float32 [H] tensor whose gradient is dSink; LSE is returned natural-log,
[B, H, S] dense or [H, T] varlen, -inf for an empty row. ``deterministic=True`` is passed
for the ``fa4`` adapter (it then claims bitwise determinism); ``fa4-fast`` leaves FA4's
default (atomics, not deterministic).
"""

from dataclasses import dataclass

from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.layouts import LAYOUTS
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .cuda_common import (
    autograd_backward,
    cuda_reason,
    laid_out,
    laid_out_leaf,
    leaf,
    lse_bhs_to_thd,
    lse_ht_to_thd,
    module_reason,
    normalize_lse,
    sm_reason,
    thd,
)

# The contract, as flash-attn-4 4.0.0b36's own code states it (paths under flash_attn/cute/
# of the wheel; read for this capability, not inferred from runs):
# - head dims: SM90 takes head_dim and head_dim_v each in 8..256 and divisible by
#   16 / element_size = 8 for fp16/bf16, independently of each other (interface.py:121-133,
#   `is_sm90_range` line 128; the alignment 16 // element_size at 847 and 2568).
# - dtypes fp16/bf16 for the backward (interface.py:2547-2554); GQA/MQA any ratio
#   num_head % num_head_kv == 0 (interface.py:846, 2567); masks bottom-right aligned
#   (mask.py:1037); learnable_sink with dsink on SM90 (interface.py:2296-2298);
#   varlen with empty sequences (interface.py:897-906, 2299-2310).
# - not excluded, although the kernel refuses it late: the SM90 backward asserts "GQA
#   backward requires head_dim == head_dim_v" (flash_bwd_sm90.py:115-117) while the
#   interface accepts the call, so GQA with head_dim_qk != head_dim_v is a contract
#   violation for a campaign to report (step around it with --narrow equal_head_dims=true).
# - memory layouts: every q/k/v/dO goes through maybe_contiguous (interface.py:742, 2466;
#   cute_dsl_utils.py:87-99): a contiguous tensor or a strided one with a 16-byte aligned
#   pointer and strides is used as is (stride 0 included: `stride == 0 or ...` at
#   cute_dsl_utils.py:84, kept static per interface.py:1382), anything else FA4 copies
#   itself. So the interface takes every layout of difftest/model/layouts.py; the adapter hands
#   over the laid-out memory and FA4 decides what to copy.
# - softcap: flash_attn_func / flash_attn_varlen_func take ``softcap: float = 0.0`` (interface.py:4155,
#   4232); the backward turns it into a score_mod pair (interface.py:2579-2584), the forward into
#   ``softcap * tanh(acc_S / softcap)`` applied after the softmax scale (utils.py:189-209,
#   create_softcap_scoremod / _bwd with 1 - tanh^2; compute_softmax_scale_log2 keeps the scale apart
#   "so it can be applied before the score_mod", utils.py compute_softmax_scale_log2): problem.py's
#   formula. Refused only on SM100 at head dim 256 (interface.py:2958), not on SM90. The cap is a
#   compile-time constant (the score_mod's hash), so it is in the compile key. Its tanh is
#   ``fastmath=True`` (tanh.approx): about 2^-11 relative; the adapter declares that design, so a
#   failing budget gate is judged again with its yardstick (oracles/approx_tanh.py).
# - windows: ``window_size=(left, right)`` with None unbounded; negative sides are taken, and
#   _resolve_causal_local_window (interface.py:438-459) first reads BOTH sides negative as no
#   window (FlashAttention 2's (-1, -1)), then sets right = 0 under causal. Before 4.0.0b30 it
#   read every left + right < 0 as no window (the fixed bug, results/bugs/ has none: it is
#   upstream's own fix). ``Fa4Call.of`` states each Problem as a window FA4 keeps (module docstring).
# - max_seqlen / max_heads / max_batch below are campaign bounds (GPU time), not FA4's.
_DIMS = tuple(range(8, 257, 8))


def _capability(deterministic: bool) -> Capability:
    return Capability(
        dtypes=("float16", "bfloat16"),
        head_dims_qk=_DIMS,
        head_dims_v=_DIMS,
        equal_head_dims=False,
        max_batch=8,
        max_seqlen=8192,
        max_heads=32,
        gqa=True,
        causal=True,
        aligns=("bottom_right",),
        window=True,
        negative_window=True,
        varlen=True,
        empty_seqs=True,
        pad_tail=True,
        sinks=True,
        softcap=True,
        outputs=("o", "lse", "dq", "dk", "dv", "dsink"),
        deterministic=deterministic,
        device="cuda",
        block_m=64,
        block_n=128,
        layouts=LAYOUTS,
        compile_key=("dtype", "head_dim_qk", "head_dim_v", "causal", "sinks", "heads_q", "heads_kv", "softcap"),
        designs=("approximate-tanh-softcap",),
    )


@dataclass(frozen=True)
class Fa4Call:
    """The keyword arguments FA4 gets for a Problem (testable without a GPU)."""

    causal: bool
    window_size: tuple  # (left, right), None = unbounded
    softmax_scale: float
    deterministic: bool
    softcap: float = 0.0  # FA4's "off"

    @staticmethod
    def of(p: Problem, deterministic: bool) -> "Fa4Call":
        """The call for ``p``. Windows FA4 would read otherwise (its _resolve_causal_local_window)
        are stated as the window that keeps ``p``'s keys: a negative right side under causal
        (which FA4 would overwrite with 0) as the window alone, causal off; both sides negative
        (FA4: no window) as (left, -left - 1), the same empty row set with right >= 0."""
        if p.masked and p.align != "bottom_right" and p.seqlens_q != p.seqlens_k:
            raise ValueError(f"FA4 masks are bottom-right aligned; Problem.align={p.align!r}")
        causal, left, right = p.causal, p.window_left, p.window_right
        if causal and right is not None and right < 0:  # right < 0 is inside causal's right = 0
            causal = False
        if left is not None and right is not None and left < 0 and right < 0:  # no key: keep it empty
            right = -left - 1
        return Fa4Call(
            causal=causal,
            window_size=(left, right),
            softmax_scale=p.scale,
            deterministic=deterministic,
            softcap=p.softcap or 0.0,
        )

    def kwargs(self) -> dict:
        return dict(
            causal=self.causal,
            window_size=self.window_size,
            softmax_scale=self.softmax_scale,
            deterministic=self.deterministic,
            softcap=self.softcap,
        )


class Fa4Adapter(KernelAdapter):
    def __init__(self, deterministic: bool = True):
        self.deterministic = deterministic
        self.name = "fa4" if deterministic else "fa4-fast"
        self.capability = _capability(deterministic)
        self.description = f"flash_attn.cute (FA4) SM90 backward, deterministic={deterministic}"

    def available(self) -> str | None:
        return cuda_reason() or module_reason("flash_attn.cute", "pip install flash-attn-4") or sm_reason(9)

    def call_extras(self, inputs: Inputs) -> dict:
        """More keyword arguments for FA4's call (none here; the block-sparse adapter,
        kernels/fa4_sparse.py, adds its block-sparse tensors)."""
        return {}

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        # lazy: flash-attn-4 is optional; the adapter loads and says so without it
        from flash_attn.cute import flash_attn_func, flash_attn_varlen_func

        p = inputs.problem
        call = Fa4Call.of(p, self.deterministic)
        extras = self.call_extras(inputs)
        sink = leaf(inputs.sink)
        q, k, v = (laid_out_leaf(laid_out(inputs, n)) for n in ("q", "k", "v"))  # the laid-out memory
        if p.varlen:
            o, lse = flash_attn_varlen_func(
                q,
                k,
                v,
                cu_seqlens_q=inputs.cu_seqlens_q,
                cu_seqlens_k=inputs.cu_seqlens_k,
                max_seqlen_q=p.max_seqlen_q,
                max_seqlen_k=p.max_seqlen_k,
                learnable_sink=sink,
                return_lse=True,
                **call.kwargs(),
                **extras,
            )
            o_thd, lse_thd = o.detach(), lse_ht_to_thd(lse.detach(), p.total_q)
        else:
            o, lse = flash_attn_func(q, k, v, learnable_sink=sink, return_lse=True, **call.kwargs(), **extras)
            o_thd, lse_thd = thd(o.detach()), lse_bhs_to_thd(lse.detach())
        fwd = Outputs(o=o_thd, lse=normalize_lse(lse_thd, p))
        return fwd, (q, k, v, sink, o)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        return autograd_backward(inputs, fwd, ctx)


def deterministic():
    return Fa4Adapter(deterministic=True)


def fast():
    return Fa4Adapter(deterministic=False)
