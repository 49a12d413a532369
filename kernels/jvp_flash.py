"""jvp-flash-attention (PyPI ``jvp-flash-attention`` 0.14.0; Triton, the Triton tutorial
FlashAttention-2 kernel extended with forward-mode JVP) backward.

API (jvp_flash_attention/jvp_attention.py): ``JVPAttn.apply(q, k, v, q_t, k_t, v_t,
attn_mask, dropout_p, causal, sm_scale, warp_specialize, USE_TMA, verify_attn_mask)``
(forward at line 2505) returns ``(o, ctx_contrib)`` whose second entry is ``M``, the
forward's LSE (the tuple at 2848-2862); ``attention = JVPAttn.fwd`` (3229) returns o only.
Gradients come from autograd through ``JVPAttn.backward`` (the kernel under test).
M is base-2 of the scaled logits (``qk_scale = sm_scale / ln 2``, ``m_i += log2(l_i)``),
shape [Z, H, N]: natural = M * ln 2.
Masks: ``causal`` is top-left (``offs_m >= start_n + offs_n``, line 266), the same as
bottom-right on the square problems this kernel takes. Windows go through a boolean
``attn_mask`` (True = attend, [Z, H, N, N], line 2528), in the ``jvp-flash-mask`` adapter:
the kernel refuses causal together with a mask (line 2574), so the causal rule is folded
into the mask there. A masked logit gets ``MASK_CONST = -100`` added (line 48, 254 and 267)
rather than -inf; its probability is then zeroed (line 278-280), but the row maximum still
sees it, which is what a campaign with large logits probes.

Install without network: ``pip install --no-deps jvp_flash_attention-0.14.0-py3-none-any.whl``
(its Requires-Dist torchvision is never imported by jvp_attention.py).
"""

from dataclasses import dataclass

import torch

from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .bhsd import bhsd_do, bhsd_leaf, bhsd_to_thd, lse2_to_natural
from .cuda_common import cuda_reason, lse_bhs_to_thd, module_reason, normalize_lse
from .masking import visible_keys

WHEEL = "pip install --no-deps jvp_flash_attention-0.14.0-py3-none-any.whl"

# The contract, jvp_flash_attention 0.14.0 jvp_attention.py:
# - JVPAttn.forward (2550-2584): q, k, v all (Z, H, N_CTX, D) -> no GQA, seqlen_q == seqlen_k;
#   HEAD_DIM_Q == HEAD_DIM_K == HEAD_DIM_V (2561) in {16, 32, 64, 128, 256} (2565);
#   N_CTX even and >= 32 (2569); causal and attn_mask exclusive (2574); a bool mask may not be
#   all False for a whole head (2632-2636).
# - JVPAttn.backward (3105-3147): q, k, v, o contiguous (3107-3115), same strides as dO
#   (3121-3125), N_CTX % BLOCK_MIN == 0 with BLOCK_MIN = MIN_SEQUENCE_LENGTH = 32 (line 51,
#   assert at 3142): seqlen_multiple=32 (which also meets the forward's even and >= 32).
# - dtypes fp16/bf16/fp32 (the MASK_CONST comment, line 48-50; fp8 only for V in inference).
# max_* are campaign bounds (GPU time; the mask adapter allocates a [B, H, N, N] bool mask).
DIMS = (16, 32, 64, 128, 256)
MULTIPLE = 32


def _capability(windows: bool) -> Capability:
    return Capability(
        dtypes=("float16", "bfloat16", "float32"),
        head_dims_qk=DIMS,
        equal_head_dims=True,
        max_batch=8,
        max_seqlen=2048,
        min_seqlen_q=MULTIPLE,
        min_seqlen_k=MULTIPLE,
        seqlen_multiple=MULTIPLE,
        max_heads=32,
        gqa=False,
        seqlen_q_ne_k=False,
        causal=True,
        aligns=("top_left", "bottom_right"),
        window=windows,
        varlen=False,
        empty_seqs=False,
        pad_tail=False,
        sinks=False,
        softmax_scale=True,
        outputs=("o", "lse", "dq", "dk", "dv"),
        deterministic=False,
        device="cuda",
        # backward BLOCK_M1 = N1 = M2 = N2 = 32 (3139-3140); the forward autotunes 32..128
        block_m=MULTIPLE,
        block_n=MULTIPLE,
        compile_key=("dtype", "head_dim_qk", "causal"),
    )


@dataclass(frozen=True)
class JvpCall:
    """What JVPAttn.apply gets for a Problem (testable without a GPU): ``causal`` or a
    boolean mask [Sq, Sk] (True = attend) that the adapter expands to [B, H, Sq, Sk]."""

    causal: bool
    mask: torch.Tensor | None
    sm_scale: float

    @staticmethod
    def of(p: Problem, windows: bool, device="cpu") -> "JvpCall":
        if p.varlen or p.seqlens_q != p.seqlens_k or p.heads_q != p.heads_kv:
            raise ValueError(f"jvp-flash takes dense square MHA problems; got {p.short()}")
        windowed = p.window_left is not None or p.window_right is not None
        if not windowed:
            return JvpCall(causal=p.causal, mask=None, sm_scale=p.scale)
        if not windows:
            raise ValueError("windows go through the jvp-flash-mask adapter (a boolean attn_mask)")
        # causal together with a mask is refused (jvp_attention.py:2574): the mask carries both
        return JvpCall(causal=False, mask=visible_keys(p, p.seqlen_q, p.seqlen_k, device), sm_scale=p.scale)

    def args(self, q, k, v, p: Problem) -> tuple:
        mask = None if self.mask is None else self.mask.expand(p.batch, p.heads_q, *self.mask.shape).contiguous()
        # (q_t, k_t, v_t) None: no JVP; dropout 0; warp_specialize, USE_TMA, verify_attn_mask as the defaults
        return (q, k, v, None, None, None, mask, 0.0, self.causal, self.sm_scale, True, True, True)


class JvpFlashAdapter(KernelAdapter):
    def __init__(self, windows: bool = False):
        self.windows = windows
        self.name = "jvp-flash-mask" if windows else "jvp-flash"
        self.capability = _capability(windows)
        self.description = "jvp-flash-attention 0.14.0 Triton backward" + (
            " (windows as a bool mask)" if windows else ""
        )

    def available(self) -> str | None:
        return cuda_reason() or module_reason("jvp_flash_attention", WHEEL)

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        # lazy: jvp-flash-attention is optional; the adapter loads and says so without it
        from jvp_flash_attention.jvp_attention import JVPAttn

        p = inputs.problem
        call = JvpCall.of(p, self.windows, inputs.device)
        q, k, v = (bhsd_leaf(inputs, n) for n in ("q", "k", "v"))
        o, aux = JVPAttn.apply(*call.args(q, k, v, p))
        lse = normalize_lse(lse_bhs_to_thd(lse2_to_natural(aux[1])), p)  # aux[1] is M
        return Outputs(o=bhsd_to_thd(o), lse=lse), (q, k, v, o)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        q, k, v, o = ctx
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), bhsd_do(inputs), retain_graph=True)
        return Outputs(o=fwd.o, lse=fwd.lse, dq=bhsd_to_thd(dq), dk=bhsd_to_thd(dk), dv=bhsd_to_thd(dv))


def plain():
    return JvpFlashAdapter(windows=False)


def masked():
    return JvpFlashAdapter(windows=True)
