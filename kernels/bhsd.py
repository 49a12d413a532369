"""Helpers for adapters of kernels with a PyTorch autograd interface on [B, H, S, D]
tensors (fastflash-attention, jvp-flash-attention, flash-attention-triton): difftest's
dense [B, S, H, D] view moved to head-major leaves, gradients taken by autograd through
the package's own ``backward`` (the kernel under test), results packed back to THD.
Nothing here changes a value: only layouts and the base-2 -> natural LSE factor, which
applies to kernels that return ``log2(sum exp2(...))`` of the logits pre-scaled by log2(e).
"""

import math

import torch

from difftest.model.inputs import Inputs

LN2 = math.log(2.0)


def bhsd_leaf(inputs: Inputs, name: str) -> torch.Tensor:
    """A dense problem's ``name`` as a contiguous [B, H, S, D] autograd leaf (a copy)."""
    return inputs.bshd(name).transpose(1, 2).contiguous().detach().requires_grad_(True)


def bhsd_do(inputs: Inputs) -> torch.Tensor:
    """dO as a contiguous [B, H, S, Dv] tensor (kernels asserting equal strides need it)."""
    return inputs.bshd("do").transpose(1, 2).contiguous()


def bhsd_to_thd(t: torch.Tensor) -> torch.Tensor:
    """[B, H, S, D] to packed [B*S, H, D] (contiguous)."""
    b, h, s, d = t.shape
    return t.detach().transpose(1, 2).reshape(b * s, h, d).contiguous()


def lse2_to_natural(lse2: torch.Tensor) -> torch.Tensor:
    """A base-2 LSE of the scaled logits ([B, H, S], M = LSE * log2(e)) to natural log,
    float32 [B, H, S]; infinities stay as they are (ln 2 is positive)."""
    return lse2.detach().float() * LN2
