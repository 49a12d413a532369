"""torch scaled_dot_product_attention on the CPU, forward and backward through autograd.

Two adapters, one per CPU backend:

- ``sdpa-cpu-math``: ``F.scaled_dot_product_attention`` under
  ``sdpa_kernel(SDPBackend.MATH)`` (the composite reference implementation). Any boolean
  mask, GQA through ``enable_gqa``, head_dim_v != head_dim_qk. It does not return the
  log-sum-exp, so its capability leaves "lse" out of ``outputs`` (not checked) rather
  than having the adapter compute one itself.
- ``sdpa-cpu-flash``: the CPU flash-attention kernel
  (``aten::_scaled_dot_product_flash_attention_for_cpu``, the op that
  ``F.scaled_dot_product_attention`` dispatches to under
  ``SDPBackend.FLASH_ATTENTION``; tests/test_sdpa_cpu.py checks the two agree bitwise).
  It is called directly because only the op returns the kernel's own LSE. Found on
  torch 2.13 CPU: it takes GQA natively, additive float masks in the query dtype (a
  boolean mask is refused by the op; F.sdpa converts it the same way), any head dim,
  but needs head_dim_v == head_dim_qk. Its query/key tiles are 32 (64 from 192 query
  rows, 256 from 768) x 512.

Shared translation:
- Masks: top-left causal without a window (or seqlen_q == seqlen_k) uses the kernel's
  own ``is_causal``; bottom-right causal with seqlen_q != seqlen_k and every window go in
  as an explicit mask from problem.py's rule (``masking.visible_keys``, not the oracle's code).
- ALiBi: the bias (``masking.alibi_bias``, float32, per query head) is SDPA's float
  ``attn_mask`` [1, Hq, sq, sk] (the CPU flash op takes 2-D and 4-D masks only), -inf where
  the mask hides a key, in the query dtype (SDPA adds a float mask to the scaled logits; it
  takes no ``is_causal`` beside a mask). In float16 and bfloat16 the bias is rounded to that
  dtype: the kernel's own rounding, which the naive same-dtype yardstick shares. A
  relative-position table (``masking.rel_position_bias``) joins the same float mask.
- Varlen: one dense call per sequence, zero-length sequences included (the empty
  tensors go through F.sdpa, which answers them without the backend kernel; the raw
  CPU flash op crashes the process with SIGFPE on them). Tail tokens past the last sequence are never given to
  the kernel; their outputs are zero, as for any row nothing attends.
- Fully masked rows: both backends return O = 0 and zero gradients on torch 2.13 CPU
  (measured). The flash kernel reports LSE = 0 for such a row; difftest's convention is
  -inf, so the adapter maps LSE to -inf exactly for rows whose mask row is empty.
- No sinks: SDPA has no sink logit (capability sinks=False).
- Memory layouts: every kind of difftest/model/layouts.py. ``F.scaled_dot_product_attention``
  documents no stride or alignment requirement and takes any strided tensor (torch 2.13
  CPU, torch/nn/functional.py scaled_dot_product_attention; the CPU flash op is what it
  dispatches to). The adapter hands the kernel the laid-out memory itself (autograd
  leaves made with ``detach()``, which keeps strides, storage offset and stride-0 heads;
  dense problems through their [B, S, H, D] views, dO included); a ``kv_broadcast`` K/V
  is an MHA call whose per-head dK/dV the adapter sums to the one stored head.
"""

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from difftest.execute.adapter import KernelAdapter
from difftest.model.capability import Capability
from difftest.model.inputs import Inputs
from difftest.model.layouts import LAYOUTS
from difftest.model.outputs import Outputs
from difftest.model.problem import DTYPES, Problem

from .masking import alibi_bias, rel_position_bias, visible_keys

# Head dims drawn for these kernels (both take any size; this list keeps CPU cases
# cheap while covering tails: 1, odd sizes and non-multiples of 8/16).
HEAD_DIMS = (1, 8, 16, 24, 32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 256)

_FLASH_OP = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def _use_is_causal(p: Problem, sq: int, sk: int) -> bool:
    """SDPA's is_causal is top-left; it means our mask only without a window and when
    the alignment does not matter (top-left, or equal lengths)."""
    no_window = p.window_left is None and p.window_right is None
    return p.causal and no_window and (p.align == "top_left" or sq == sk)


class SdpaCpu(KernelAdapter):
    """Common translation; subclasses call one backend on [B, H, S, D] tensors."""

    backend = ""

    def _attend(self, q, k, v, p: Problem, is_causal: bool, mask):
        """q [B,Hq,sq,D], k/v [B,Hkv,sk,*] -> (o [B,Hq,sq,Dv], lse [B,Hq,sq] float32 or None)."""
        raise NotImplementedError(f"{type(self).__name__}._attend")

    def forward(self, inputs: Inputs, out: Outputs | None = None):
        p = inputs.problem
        reason = self.capability.excludes(p)
        if reason is not None:
            raise ValueError(f"{self.name} does not support {p.short()}: {reason}")
        # Leaves are the tensors difftest handed over, in their memory layout (detach()
        # keeps strides, storage offset and stride-0 heads; clone() would not).
        if p.varlen:
            q, k, v = (leaf(inputs.q), leaf(inputs.k), leaf(inputs.v))
        else:  # one [B, S, H, D] view per tensor: a head-major layout has no packed view
            q, k, v = (leaf(inputs.bshd(n)) for n in ("q", "k", "v"))
        want_lse = "lse" in self.capability.outputs
        lse = torch.full((p.total_q, p.heads_q), float("-inf"), dtype=torch.float32)
        pieces = []  # packed O, in order, with zero filler for the unused tail
        if p.varlen:
            segments = [
                (q[q0 : q0 + sq].unsqueeze(0), k[k0 : k0 + sk].unsqueeze(0), v[k0 : k0 + sk].unsqueeze(0), q0, sq, sk)
                for q0, k0, sq, sk in zip(p.cu_seqlens_q, p.cu_seqlens_k, p.seqlens_q, p.seqlens_k)
            ]
        else:
            segments = [(q, k, v, 0, p.seqlen_q, p.seqlen_k)]
        for qs, ks, vs, q0, sq, sk in segments:
            nb = qs.shape[0]
            causal = _use_is_causal(p, sq, sk) and not p.biased
            allowed = visible_keys(p, sq, sk) if (p.masked and not causal) else None
            mask = allowed
            if p.biased:  # the bias as a float mask, -inf where the mask hides a key
                if p.alibi:
                    bias = alibi_bias(p, sq, sk)
                    if p.rel:
                        bias = bias + rel_position_bias(p, sq, sk)
                else:
                    bias = rel_position_bias(p, sq, sk)
                mask = (bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))).to(qs.dtype)[None]
            o_s, lse_s = self._attend(qs.transpose(1, 2), ks.transpose(1, 2), vs.transpose(1, 2), p, causal, mask)
            pieces.append(o_s.transpose(1, 2))  # [nb, sq, Hq, Dv]
            if want_lse and lse_s is not None:
                lse_s = lse_s.float()
                if allowed is not None:  # kernel convention (0) -> ours (-inf) for empty rows
                    lse_s = lse_s.masked_fill(~allowed.any(dim=1), float("-inf"))
                if sk == 0:
                    lse_s = torch.full_like(lse_s, float("-inf"))
                lse[q0 : q0 + nb * sq] = lse_s.transpose(1, 2).reshape(nb * sq, p.heads_q)
        if p.varlen:
            used = sum(p.seqlens_q)
            tail = [torch.zeros(p.total_q - used, p.heads_q, p.head_dim_v, dtype=q.dtype)] if p.total_q > used else []
            o = torch.cat([x[0] for x in pieces] + tail, dim=0)  # packed [T, Hq, Dv]
            o_thd = o.detach()
        else:
            o = pieces[0]  # [B, S, Hq, Dv]: the backward gets dO in this shape, laid out
            o_thd = o.detach().reshape(p.total_q, p.heads_q, p.head_dim_v)
        fwd = Outputs(o=o_thd, lse=lse if want_lse else None)
        return fwd, (q, k, v, o)

    def backward(self, inputs: Inputs, fwd: Outputs, ctx, out: Outputs | None = None) -> Outputs:
        p = inputs.problem
        q, k, v, o = ctx
        do = inputs.do if p.varlen else inputs.bshd("do")  # the laid-out dO, as the kernel's backward reads it
        grads = torch.autograd.grad(o, (q, k, v), do, allow_unused=True) if o.requires_grad else (None,) * 3
        dq, dk, dv = (torch.zeros_like(t) if g is None else g for g, t in zip(grads, (q, k, v)))
        dq, dk, dv = (g.reshape(-1, *g.shape[-2:]) for g in (dq, dk, dv))
        if dk.shape[1] != p.heads_kv:  # kv_broadcast: the expanded heads' gradients go to the one stored head
            dk, dv = dk.sum(dim=1, keepdim=True), dv.sum(dim=1, keepdim=True)
        return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv)


def leaf(t: torch.Tensor) -> torch.Tensor:
    """``t`` as an autograd leaf, same memory (strides, offset, stride-0 heads kept)."""
    return t.detach().requires_grad_(True)


class SdpaCpuMath(SdpaCpu):
    name = "sdpa-cpu-math"
    backend = "math"
    description = "torch SDPA, math backend on CPU (autograd); no LSE output"
    capability = Capability(
        dtypes=DTYPES,
        head_dims_qk=HEAD_DIMS,
        head_dims_v=HEAD_DIMS,
        equal_head_dims=False,
        max_batch=8,
        max_seqlen=1024,
        max_heads=16,
        gqa=True,
        seqlen_q_ne_k=True,
        causal=True,
        aligns=("top_left", "bottom_right"),
        window=True,
        negative_window=True,
        varlen=True,
        empty_seqs=True,
        pad_tail=True,
        sinks=False,
        softmax_scale=True,
        alibi=True,
        rel_bias=True,
        outputs=("o", "dq", "dk", "dv"),
        deterministic=True,
        poison=False,
        device="cpu",
        block_m=64,
        block_n=64,
        layouts=LAYOUTS,
    )

    def _attend(self, q, k, v, p, is_causal, mask):
        with sdpa_kernel(SDPBackend.MATH):
            o = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=is_causal, scale=p.scale, enable_gqa=q.shape[1] != k.shape[1]
            )
        return o, None


class SdpaCpuFlash(SdpaCpu):
    name = "sdpa-cpu-flash"
    backend = "flash"
    description = "torch SDPA CPU flash-attention kernel (aten op, autograd); kernel's own LSE"
    capability = Capability(
        dtypes=DTYPES,
        head_dims_qk=HEAD_DIMS,
        head_dims_v=None,
        equal_head_dims=True,
        max_batch=8,
        max_seqlen=1024,
        max_heads=16,
        gqa=True,
        seqlen_q_ne_k=True,
        causal=True,
        aligns=("top_left", "bottom_right"),
        window=True,
        negative_window=True,
        varlen=True,
        empty_seqs=True,
        pad_tail=True,
        sinks=False,
        softmax_scale=True,
        alibi=True,
        rel_bias=True,
        outputs=("o", "lse", "dq", "dk", "dv"),
        deterministic=True,
        poison=False,
        device="cpu",
        block_m=32,
        block_n=512,
        layouts=LAYOUTS,
        # cpu_flash_attention_backward adds each query block's dK/dV product into grad_k/grad_v
        # with beta = 1 GEMMs on the output tensors (FlashAttentionKernel.cpp): the sum is rounded
        # in fp16/bf16 per (query head, query block); qSplitSize is 32 up to 192 rows, 64 below
        # 768, 256 above: block_m = 32, the most roundings, bounds the three
        designs=("input-dtype-running-sum",),
    )

    def available(self) -> str | None:
        if _FLASH_OP is None:
            return f"torch {torch.__version__} has no aten::_scaled_dot_product_flash_attention_for_cpu"
        return None

    def _attend(self, q, k, v, p, is_causal, mask):
        if q.shape[2] == 0 or k.shape[2] == 0:
            # The raw op dies of SIGFPE (integer division by zero, the whole process) on
            # a zero-length query or key sequence (torch 2.13 CPU). F.sdpa never sends
            # empty tensors to it: it answers them itself, so go through F.sdpa here.
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                o = F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, is_causal=is_causal, scale=p.scale, enable_gqa=q.shape[1] != k.shape[1]
                )
            return o, None
        additive = mask
        if mask is not None and mask.dtype == torch.bool:  # the op takes an additive mask in the query dtype
            additive = torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, float("-inf"))
        o, lse = _FLASH_OP(q, k, v, 0.0, is_causal, attn_mask=additive, scale=p.scale)
        return o, lse
