"""torch.nn.functional.scaled_dot_product_attention, one adapter per backend.

Each adapter pins one backend with ``torch.nn.attention.sdpa_kernel`` so a case runs that
backend or fails with its own "no available kernel" error (never a silent fallback).
SDPA takes [B, H, S, D] tensors, dense only. Masks:
- ``is_causal=True`` is SDPA's only built-in mask and it is top-left aligned;
- any other mask (bottom-right causal when seqlen_q != seqlen_k, sliding windows) is
  passed as a boolean ``attn_mask`` built from the Problem's rule, which the flash
  backend refuses (so its capability excludes those problems).
SDPA's public call returns no LSE and has no sinks, so those outputs are not checked.
GQA goes through ``enable_gqa=True`` (the backend's own GQA path, K/V not expanded here).
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from difftest.adapter import KernelAdapter, KernelUnavailable
from difftest.capability import Capability
from difftest.inputs import Inputs
from difftest.outputs import Outputs
from difftest.problem import Problem
from difftest.oracles.reference import allowed_mask

from .cuda_common import cuda_reason

BACKENDS = ("flash", "efficient", "cudnn", "math")

_HALF = ("float16", "bfloat16")
_DIMS = (32, 64, 96, 128, 256)
_DIMS_UNEQUAL = (32, 64, 96, 128, 192, 256)

# What each backend takes, measured on the H200 with torch 2.11.0+cu130 (results/h200/phase1.md:
# a refusal is SDPA's "No available kernel"):
# flash: fp16/bf16, equal head dims <= 256, GQA; no attn_mask; is_causal refused when
#   seqlen_q != seqlen_k (declared as square problems only: the strategies cannot draw
#   "non-square only when unmasked", and aligns=() breaks strategies.edge_problems);
# efficient: fp16/bf16/fp32, bool masks (windows, bottom-right), unequal head dims; no GQA;
# cudnn: fp16/bf16, head dims up to 256 and unequal (192/128), GQA, bool masks; no key/value
#   sequence of length 1 ("cudnn SDPA does not support key/value sequence length 1", torch
#   sdp_utils check_cudnn_tensor_shapes): min_seqlen_k=2;
# math: everything (the reference-style unfused path, on CPU too).
CAPABILITIES = {
    "flash": Capability(
        dtypes=_HALF, head_dims_qk=_DIMS, equal_head_dims=True, max_batch=8, max_seqlen=4096,
        max_heads=32, gqa=True, seqlen_q_ne_k=False, causal=True, aligns=("top_left",), window=False, varlen=False,
        empty_seqs=False, pad_tail=False, sinks=False, outputs=("o", "dq", "dk", "dv"),
        deterministic=False, device="cuda", block_m=128, block_n=128,
    ),
    "efficient": Capability(
        dtypes=("float16", "bfloat16", "float32"), head_dims_qk=_DIMS_UNEQUAL, head_dims_v=_DIMS_UNEQUAL,
        equal_head_dims=False,
        max_batch=8, max_seqlen=4096, max_heads=32, gqa=False, causal=True, aligns=("top_left", "bottom_right"),
        window=True,
        varlen=False, empty_seqs=False, pad_tail=False, sinks=False,
        outputs=("o", "dq", "dk", "dv"), deterministic=False, device="cuda", block_m=64,
        block_n=64,
    ),
    "cudnn": Capability(
        dtypes=_HALF, head_dims_qk=_DIMS_UNEQUAL, head_dims_v=_DIMS_UNEQUAL, max_batch=8,
        equal_head_dims=False,
        max_seqlen=4096, min_seqlen_k=2, max_heads=32, gqa=True, causal=True, aligns=("top_left", "bottom_right"),
        window=True,
        varlen=False, empty_seqs=False, pad_tail=False, sinks=False, outputs=("o", "dq", "dk", "dv"),
        deterministic=False, device="cuda", block_m=128, block_n=128,
    ),
    "math": Capability(
        dtypes=("float16", "bfloat16", "float32"), head_dims_qk=(16,) + _DIMS_UNEQUAL,
        head_dims_v=(16,) + _DIMS_UNEQUAL, equal_head_dims=False, max_batch=4, max_seqlen=2048, max_heads=16,
        gqa=True, causal=True, aligns=("top_left", "bottom_right"), window=True, varlen=False, empty_seqs=False, pad_tail=False,
        sinks=False, outputs=("o", "dq", "dk", "dv"), deterministic=True, device="cuda",
    ),
}


@dataclass(frozen=True)
class SdpaCall:
    """How one Problem is handed to SDPA (the part of the translation that needs no GPU)."""

    is_causal: bool  # SDPA's built-in top-left causal mask
    bool_mask: bool  # pass allowed_mask() as attn_mask instead
    enable_gqa: bool
    scale: float

    @staticmethod
    def of(p: Problem) -> "SdpaCall":
        square = p.seqlens_q == p.seqlens_k
        plain_causal = p.causal and p.window_left is None and p.window_right is None and (
            p.align == "top_left" or square)
        return SdpaCall(
            is_causal=plain_causal,
            bool_mask=p.masked and not plain_causal,
            enable_gqa=p.heads_q != p.heads_kv,
            scale=p.scale,
        )


def _backend_enum(backend: str):
    from torch.nn.attention import SDPBackend

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
            raise ValueError(f"backend={backend!r}: allowed {BACKENDS}")
        self.backend = backend
        self.name = f"sdpa-{backend}"
        self.capability = CAPABILITIES[backend]
        self.description = f"torch SDPA, {backend} backend only (sdpa_kernel)"

    def available(self) -> str | None:
        try:
            from torch.nn.attention import sdpa_kernel  # noqa: F401
        except ImportError as e:
            return f"torch.nn.attention.sdpa_kernel missing: {e}"
        return cuda_reason()

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        p = inputs.problem
        if p.varlen:
            raise KernelUnavailable("SDPA takes dense batches only (no varlen)")
        call = SdpaCall.of(p)
        # [B, S, H, D] -> [B, H, S, D] leaves
        q, k, v = (inputs.bshd(n).transpose(1, 2).detach().clone().requires_grad_(True)
                   for n in ("q", "k", "v"))
        mask = None
        if call.bool_mask:
            mask = allowed_mask(p, p.seqlen_q, p.seqlen_k, q.device)
        from torch.nn.attention import sdpa_kernel

        with sdpa_kernel([_backend_enum(self.backend)]):
            o = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=call.is_causal, scale=call.scale,
                enable_gqa=call.enable_gqa)
        o_thd = o.detach().transpose(1, 2).reshape(p.total_q, p.heads_q, p.head_dim_v)
        return Outputs(o=o_thd), (q, k, v, o)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        p = inputs.problem
        q, k, v, o = ctx
        do = inputs.bshd("do").transpose(1, 2)
        from torch.nn.attention import sdpa_kernel

        with sdpa_kernel([_backend_enum(self.backend)]):
            dq, dk, dv = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)

        def packed(t):  # [B, H, S, D] -> [B*S, H, D]
            return t.transpose(1, 2).reshape(-1, t.shape[1], t.shape[-1])

        return Outputs(o=fwd.o, lse=None, dq=packed(dq), dk=packed(dk), dv=packed(dv))


def flash():
    return SdpaAdapter("flash")


def efficient():
    return SdpaAdapter("efficient")


def cudnn():
    return SdpaAdapter("cudnn")


def math_backend():
    return SdpaAdapter("math")
