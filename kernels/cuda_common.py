"""Layout and convention helpers shared by the GPU adapters (SDPA, Flex, FA3, FA4, TileOPs).

difftest's conventions (see difftest/model/problem.py and difftest/model/outputs.py): packed THD
tensors, LSE in natural log with the sink included, -inf for a row that sees nothing.
Production kernels differ: BSHD or BHSD layouts, LSE shaped [B, H, S] or [H, T], +inf for
empty rows (FlashAttention 2/3), log2 in some kernels. These helpers convert, and only
where a convention applies (``normalize_lse`` touches the rows that see
no key, nothing else): every other value reaches the gates as the kernel returned it.
Nothing here compares results.
"""

import importlib.util

import torch

from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .masking import visible_keys


def cuda_reason() -> str | None:
    """None when a CUDA device is usable here, else why not."""
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    return None


def module_reason(module: str, hint: str = "") -> str | None:
    """None when ``module`` can be imported here, else why not (nothing is imported)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return f"python package {module!r} is not installed{': ' + hint if hint else ''}"
    return None


def sm_reason(major: int) -> str | None:
    """None when the current CUDA device has compute capability ``major``.x."""
    cc = torch.cuda.get_device_capability()
    if cc[0] != major:
        return f"needs an sm{major}x GPU, this one is sm{cc[0]}{cc[1]}"
    return None


def rows_without_keys(problem: Problem, device="cpu") -> torch.Tensor:
    """[total_q] bool: packed query rows that see no key (mask, empty key sequence), and
    the unused tail rows past the last ``cu_seqlens_q`` offset."""
    empty = torch.ones(problem.total_q, dtype=torch.bool, device=device)
    for b, (sq, sk) in enumerate(zip(problem.seqlens_q, problem.seqlens_k)):
        q0 = problem.cu_seqlens_q[b]
        if sq and sk:
            empty[q0 : q0 + sq] = ~visible_keys(problem, sq, sk, device).any(dim=1)
    return empty


def normalize_lse(lse: torch.Tensor, problem: Problem, *, sink_included: bool = True) -> torch.Tensor:
    """Float32 natural-log packed LSE [total_q, heads_q] in difftest's convention, changing
    only what the convention covers: FlashAttention writes +inf for a row whose softmax
    is empty, difftest -inf, so +inf becomes -inf on rows that see no key (and have no
    sink in the LSE: ``sink_included`` and ``problem.sinks`` mean no row is empty). Every
    other value passes through unchanged, so a +inf on a row that sees keys is reported
    as the kernel returned it."""
    lse = lse.float()
    if problem.sinks and sink_included:
        return lse
    empty = rows_without_keys(problem, lse.device).view(-1, *([1] * (lse.dim() - 1)))
    return torch.where(empty & torch.isposinf(lse), torch.full_like(lse, float("-inf")), lse)


def lse_bhs_to_thd(lse: torch.Tensor) -> torch.Tensor:
    """[B, H, S] (dense kernels' layout) to packed [B*S, H]."""
    b, h, s = lse.shape
    return lse.permute(0, 2, 1).reshape(b * s, h)


def lse_ht_to_thd(lse: torch.Tensor, total: int) -> torch.Tensor:
    """[H, T'] (varlen kernels' layout, T' >= T possibly padded) to packed [T, H]."""
    return lse[:, :total].transpose(0, 1)


def thd(t: torch.Tensor) -> torch.Tensor:
    """[B, S, H, D] to packed [B*S, H, D] (contiguous)."""
    return t.reshape(t.shape[0] * t.shape[1], *t.shape[2:]).contiguous()


def bshd(inputs: Inputs, name: str) -> torch.Tensor:
    """A dense problem's tensor as a contiguous [B, S, H, D] leaf."""
    return inputs.bshd(name).contiguous()


def leaf(t: torch.Tensor | None) -> torch.Tensor | None:
    """A detached copy of ``t`` that requires grad (None stays None)."""
    if t is None:
        return None
    return t.detach().clone().requires_grad_(True)


def laid_out_leaf(t: torch.Tensor | None) -> torch.Tensor | None:
    """``t`` itself as an autograd leaf: the same memory difftest laid out (strides,
    storage offset, stride-0 heads), never a copy (None stays None). A kernel that needs
    another layout copies inside its own interface, where the copy is its choice."""
    if t is None:
        return None
    return t.detach().requires_grad_(True)


def laid_out(inputs: Inputs, name: str) -> torch.Tensor:
    """The tensor a kernel's interface takes for ``name``: the packed [T, H, D] view for
    a varlen problem, the [B, S, H, D] view for a dense one, in the Problem's layout."""
    return getattr(inputs, name) if inputs.problem.varlen else inputs.bshd(name)


def fold_kv_heads(grad: torch.Tensor, heads_kv: int) -> torch.Tensor:
    """dK/dV of a ``kv_broadcast`` call (K/V expanded with stride 0 to every query head,
    an MHA call to the kernel) summed back to the one stored head; other calls unchanged."""
    if grad is None or grad.shape[-2] == heads_kv:
        return grad
    return grad.sum(dim=-2, keepdim=True)


def autograd_backward(inputs, fwd, ctx):
    """dQ, dK, dV (and dSink) of an adapter whose forward kept ``ctx = (q, k, v, sink, o)``: the
    laid-out leaves and the package's output, by torch autograd through the package's own
    backward; GQA gradients folded to the KV heads, dense results packed to [T, H, D]; O and
    LSE from ``fwd``."""
    p = inputs.problem
    q, k, v, sink, o = ctx
    wrt = (q, k, v) + ((sink,) if sink is not None else ())
    grads = torch.autograd.grad(o, wrt, laid_out(inputs, "do"), retain_graph=True, allow_unused=True)
    dq, dk, dv = grads[0], fold_kv_heads(grads[1], p.heads_kv), fold_kv_heads(grads[2], p.heads_kv)
    dsink = grads[3].float() if sink is not None and grads[3] is not None else None
    if not p.varlen:
        dq, dk, dv = thd(dq), thd(dk), thd(dv)
    return Outputs(o=fwd.o, lse=fwd.lse, dq=dq, dk=dk, dv=dv, dsink=dsink)
