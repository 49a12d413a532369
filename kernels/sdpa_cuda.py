"""torch.nn.functional.scaled_dot_product_attention, one adapter per backend.

Each adapter pins one backend with ``torch.nn.attention.sdpa_kernel`` so a case runs that
backend or fails with its own "no available kernel" error (never a silent fallback).
SDPA takes [B, H, S, D] tensors, dense only. Masks:
- ``is_causal=True`` is SDPA's only built-in mask and it is top-left aligned;
- any other mask (bottom-right causal when seqlen_q != seqlen_k, sliding windows) is
  passed as a boolean ``attn_mask`` built from the Problem's rule (``masking.visible_keys``,
  independent of the oracle's mask), which the flash
  backend refuses (so its capability excludes those problems).
SDPA's public call returns no LSE and has no sinks, so those outputs are not checked.
GQA goes through ``enable_gqa=True`` (the backend's own GQA path, K/V not expanded here).
The tensors are the laid-out memory of the Problem's layout (difftest/model/layouts.py), dO
included; a ``kv_broadcast`` K/V is an MHA call whose per-head dK/dV are summed here.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from difftest.errors import InputError
from difftest.execute.adapter import KernelAdapter, KernelUnavailable
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.layouts import LAYOUTS
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .cuda_common import cuda_reason, fold_kv_heads, laid_out_leaf
from .masking import visible_keys

BACKENDS = ("flash", "efficient", "cudnn", "math")

_HALF = ("float16", "bfloat16")
_ANY = tuple(range(1, 257))  # every head dim up to 256
_MULT8 = tuple(range(8, 513, 8))  # multiples of 8 up to Problem's 512
_MULT8_128 = tuple(range(8, 129, 8))

# The contract: what torch's SDPA dispatcher accepts per backend, read from
# aten/src/ATen/native/transformers/cuda/sdp_utils.cpp (pytorch main @001f694; the H200 runs
# torch 2.11.0+cu130) and sdp_utils_cpp.h (torch 2.13 include/, check_last_dim_stride_equals_1_dense).
# A refusal there is SDPA's "No available kernel" under a pinned backend; what the
# dispatcher accepts and the kernel then fails is a contract violation a campaign reports.
# Every backend requires stride(-1) == 1 of q/k/v only (check_last_dim_stride_equals_1_dense),
# which every layout of difftest/model/layouts.py has: each backend takes the laid-out memory.
# flash (can_use_flash_attention): fp16/bf16 (check_dtypes_flash_attention), q/k/v head dims
#   equal and <= 256, any size (check_head_dim_size_flash), GQA (supports_gqa=true); no
#   attn_mask (check_for_attn_mask), is_causal refused when seqlen_q != seqlen_k
#   (check_flash_causal_non_square_seqlens: declared as square problems only, since the
#   strategies cannot draw "non-square only when unmasked"; aligns=() breaks edge_problems).
# efficient (can_use_mem_efficient_attention): fp16/bf16/fp32; head dims: q == k, q and v
#   multiples of minimum_gemm_alignment (8 for fp16/bf16 on sm90, 4 for fp32: one list for
#   all dtypes, so multiples of 8), no upper bound in the dispatcher; bool masks; data
#   pointers 16-byte aligned (check_data_ptr_alignment_mem_efficient: storage_offset *
#   element_size % 16) -> the `misaligned` layout is excluded with that evidence. GQA:
#   main's source says supports_gqa=true, but torch 2.11 on the H200 refused it (measured
#   there, 2026-11-29), so gqa=False: a measured upstream limitation of that version.
# cudnn (can_use_cudnn_attention): fp16/bf16; head dims multiples of 8, <= 256 on sm90 for
#   the forward (check_cudnn_tensor_shapes) but the backward only for (<=128, <=128),
#   (192, 128) or (256, 256) (check_cudnn_d256_bprop_head_dim): a Capability holds one
#   list per dim, so the two special pairs are left out and dims are multiples of 8 up to
#   128; no key/value sequence of length 1 (min_seqlen_k=2); bool masks; GQA.
# math: the composite reference path: every dtype, dim and mask.
# max_batch / max_seqlen / max_heads are campaign bounds (GPU time), not SDPA's.
CAPABILITIES = {
    "flash": Capability(
        dtypes=_HALF,
        head_dims_qk=_ANY,
        equal_head_dims=True,
        max_batch=8,
        max_seqlen=4096,
        max_heads=32,
        gqa=True,
        seqlen_q_ne_k=False,
        causal=True,
        aligns=("top_left",),
        window=False,
        varlen=False,
        empty_seqs=False,
        pad_tail=False,
        sinks=False,
        outputs=("o", "dq", "dk", "dv"),
        deterministic=False,
        device="cuda",
        block_m=128,
        block_n=128,
        layouts=LAYOUTS,
    ),
    "efficient": Capability(
        dtypes=("float16", "bfloat16", "float32"),
        head_dims_qk=_MULT8,
        head_dims_v=_MULT8,
        equal_head_dims=False,
        max_batch=8,
        max_seqlen=4096,
        max_heads=32,
        gqa=False,
        causal=True,
        aligns=("top_left", "bottom_right"),
        window=True,
        varlen=False,
        empty_seqs=False,
        pad_tail=False,
        sinks=False,
        outputs=("o", "dq", "dk", "dv"),
        deterministic=False,
        device="cuda",
        block_m=64,
        block_n=64,
        layouts=tuple(k for k in LAYOUTS if k != "misaligned"),
    ),
    "cudnn": Capability(
        dtypes=_HALF,
        head_dims_qk=_MULT8_128,
        head_dims_v=_MULT8_128,
        max_batch=8,
        equal_head_dims=False,
        max_seqlen=4096,
        min_seqlen_k=2,
        max_heads=32,
        gqa=True,
        causal=True,
        aligns=("top_left", "bottom_right"),
        window=True,
        varlen=False,
        empty_seqs=False,
        pad_tail=False,
        sinks=False,
        outputs=("o", "dq", "dk", "dv"),
        deterministic=False,
        device="cuda",
        block_m=128,
        block_n=128,
        layouts=LAYOUTS,
    ),
    "math": Capability(
        dtypes=("float16", "bfloat16", "float32"),
        head_dims_qk=_ANY,
        head_dims_v=_ANY,
        equal_head_dims=False,
        max_batch=4,
        max_seqlen=2048,
        max_heads=16,
        gqa=True,
        causal=True,
        aligns=("top_left", "bottom_right"),
        window=True,
        varlen=False,
        empty_seqs=False,
        pad_tail=False,
        sinks=False,
        outputs=("o", "dq", "dk", "dv"),
        deterministic=True,
        device="cuda",
        layouts=LAYOUTS,
    ),
}


@dataclass(frozen=True)
class SdpaCall:
    """How one Problem is handed to SDPA (the part of the translation that needs no GPU)."""

    is_causal: bool  # SDPA's built-in top-left causal mask
    bool_mask: bool  # pass masking.visible_keys() as attn_mask instead
    enable_gqa: bool
    scale: float

    @staticmethod
    def of(p: Problem) -> "SdpaCall":
        square = p.seqlens_q == p.seqlens_k
        plain_causal = (
            p.causal and p.window_left is None and p.window_right is None and (p.align == "top_left" or square)
        )
        return SdpaCall(
            is_causal=plain_causal,
            bool_mask=p.masked and not plain_causal,
            enable_gqa=p.heads_q != p.heads_kv,
            scale=p.scale,
        )


def _backend_enum(backend: str):
    return {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "math": SDPBackend.MATH,
    }[backend]


class SdpaAdapter(KernelAdapter):
    """SDPA pinned to one backend; runs on the device the Inputs live on."""

    def __init__(self, backend: str):
        if backend not in BACKENDS:
            raise InputError(f"backend={backend!r}: allowed {BACKENDS}")
        self.backend = backend
        self.name = f"sdpa-{backend}"
        self.capability = CAPABILITIES[backend]
        self.description = f"torch SDPA, {backend} backend only (sdpa_kernel)"

    def available(self) -> str | None:
        return cuda_reason()  # sdpa_kernel (imported at the top) is torch >= 2.3's; the floor is 2.4

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        p = inputs.problem
        if p.varlen:
            raise KernelUnavailable("SDPA takes dense batches only (no varlen)")
        call = SdpaCall.of(p)
        # leaves: the laid-out [B, S, H, D] memory itself; SDPA takes [B, H, S, D] views of it
        leaves = tuple(laid_out_leaf(inputs.bshd(n)) for n in ("q", "k", "v"))
        q, k, v = (t.transpose(1, 2) for t in leaves)
        mask = None
        if call.bool_mask:
            mask = visible_keys(p, p.seqlen_q, p.seqlen_k, q.device)
        with sdpa_kernel([_backend_enum(self.backend)]):
            o = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=call.is_causal, scale=call.scale, enable_gqa=q.shape[1] != k.shape[1]
            )  # a kv_broadcast K/V is an MHA call
        o_thd = o.detach().transpose(1, 2).reshape(p.total_q, p.heads_q, p.head_dim_v)
        return Outputs(o=o_thd), (*leaves, o)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        p = inputs.problem
        q, k, v, o = ctx
        do = inputs.bshd("do").transpose(1, 2)
        with sdpa_kernel([_backend_enum(self.backend)]):
            dq, dk, dv = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)

        def packed(t):  # [B, S, H, D] -> [B*S, H, D]
            return t.reshape(-1, t.shape[2], t.shape[3])

        dk, dv = fold_kv_heads(dk, p.heads_kv), fold_kv_heads(dv, p.heads_kv)
        return Outputs(o=fwd.o, lse=None, dq=packed(dq), dk=packed(dk), dv=packed(dv))


def flash():
    return SdpaAdapter("flash")


def efficient():
    return SdpaAdapter("efficient")


def cudnn():
    return SdpaAdapter("cudnn")


def math_backend():
    return SdpaAdapter("math")
