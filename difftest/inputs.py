"""Deterministic input tensors for a Problem.

Tensors are drawn in float64 on the CPU from a generator seeded by the Problem, then
cast to the Problem's dtype and moved: the same Problem gives the same bytes on every
run and machine (``Inputs.digest()`` proves it in reports). All tensors use the packed
THD layout (tokens of all sequences concatenated); ``bshd()`` views a dense problem as
[batch, seq, heads, dim] and ``rows(name, b)`` gives one sequence's rows.

These are the logical, contiguous tensors. The kernel receives them re-materialised in
the Problem's memory layout (``difftest.layouts.lay_out``: same values, other strides,
offsets or storage); ``bshd()`` and ``rows()`` are then views of the laid-out memory.
"""

import hashlib
from dataclasses import dataclass

import torch

from .problem import Problem

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def torch_dtype(name: str) -> torch.dtype:
    return TORCH_DTYPES[name]


@dataclass
class Inputs:
    problem: Problem
    q: torch.Tensor  # [total_q, heads_q, head_dim_qk], problem dtype
    k: torch.Tensor  # [total_k, heads_kv, head_dim_qk]
    v: torch.Tensor  # [total_k, heads_kv, head_dim_v]
    do: torch.Tensor  # [total_q, heads_q, head_dim_v]
    sink: torch.Tensor | None  # [heads_q] float32 sink logits, None without sinks
    cu_seqlens_q: torch.Tensor  # [batch + 1] int32
    cu_seqlens_k: torch.Tensor
    # dense problems under a layout (difftest/layouts.py): name -> the laid-out
    # [B, S, H, D] view, which the packed field above may only copy (head-major, B > 1)
    dense: dict | None = None

    TENSORS = ("q", "k", "v", "do", "sink", "cu_seqlens_q", "cu_seqlens_k")

    @property
    def device(self) -> torch.device:
        return self.q.device

    def to(self, device) -> "Inputs":
        kw = {n: (None if getattr(self, n) is None else getattr(self, n).to(device)) for n in self.TENSORS}
        return Inputs(problem=self.problem, **kw)

    def upcast(self, dtype=torch.float64) -> "Inputs":
        """The same (already rounded) values in a wider float type, for references."""
        kw = {n: getattr(self, n) for n in self.TENSORS}
        for n in ("q", "k", "v", "do", "sink"):
            if kw[n] is not None:
                kw[n] = kw[n].to(dtype)
        return Inputs(problem=self.problem, **kw)

    def bshd(self, name: str) -> torch.Tensor:
        """A dense problem's tensor as [batch, seq, heads, dim]: a view of the memory the
        kernel receives (the laid-out one under a layout)."""
        p = self.problem
        if p.varlen:
            raise ValueError("bshd() needs a dense problem; varlen problems use the packed layout")
        if self.dense and name in self.dense:
            return self.dense[name]
        t = getattr(self, name)
        s = p.seqlen_q if name in ("q", "do") else p.seqlen_k
        return t.view(p.batch, s, *t.shape[1:])

    def rows(self, name: str, b: int) -> torch.Tensor:
        """Sequence ``b``'s rows of q/do (queries) or k/v (keys), [len, heads, dim]: a view
        of the memory the kernel receives, whatever the layout."""
        p = self.problem
        if not p.varlen:
            return self.bshd(name)[b]
        cu = p.cu_seqlens_q if name in ("q", "do") else p.cu_seqlens_k
        return getattr(self, name)[cu[b]:cu[b + 1]]

    def digest(self) -> str:
        h = hashlib.sha256()
        for n in self.TENSORS:
            t = getattr(self, n)
            if t is not None:
                h.update(n.encode())
                h.update(str(tuple(t.shape)).encode())
                if t.numel():
                    h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        return h.hexdigest()[:16]


def make_inputs(problem: Problem, device="cpu") -> Inputs:
    """Draw the inputs of ``problem`` (validated first)."""
    p = problem.validate()
    g = torch.Generator(device="cpu").manual_seed(p.seed)
    f64 = torch.float64

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=f64)

    Tq, Tk = p.total_q, p.total_k
    q = randn(Tq, p.heads_q, p.head_dim_qk)
    k = randn(Tk, p.heads_kv, p.head_dim_qk)
    v = randn(Tk, p.heads_kv, p.head_dim_v)
    do = randn(Tq, p.heads_q, p.head_dim_v)
    s = p.value_scale
    if p.values == "scaled":
        q, k = q * s, k * s
    elif p.values == "near_constant":
        base_k = randn(1, p.heads_kv, p.head_dim_qk)
        base_v = randn(1, p.heads_kv, p.head_dim_v)
        k = base_k + 1e-3 * s * k
        v = base_v + 1e-3 * s * v
    elif p.values == "outlier_channels":
        n_out = max(1, p.head_dim_qk // 16)
        ch = torch.randperm(p.head_dim_qk, generator=g)[:n_out]
        q[..., ch] *= s
        k[..., ch] *= s
    elif p.values == "negative_lse":
        # q and k aligned against one shared direction: every logit ~ -s^2 * d * scale
        u = randn(1, 1, p.head_dim_qk).sign()
        q = s * u + 0.1 * q
        k = -s * u + 0.1 * k
    elif p.values == "mixed_do":
        mag = torch.pow(10.0, (torch.rand(Tq, p.heads_q, 1, generator=g, dtype=f64) * 2 - 1) * s)
        do = do * mag
    sink = None
    if p.sinks:
        sink = (p.sink_center + randn(p.heads_q)).to(torch.float32)
    dt = torch_dtype(p.dtype)
    return Inputs(
        problem=p,
        q=q.to(dt).to(device), k=k.to(dt).to(device), v=v.to(dt).to(device), do=do.to(dt).to(device),
        sink=None if sink is None else sink.to(device),
        cu_seqlens_q=torch.tensor(p.cu_seqlens_q, dtype=torch.int32, device=device),
        cu_seqlens_k=torch.tensor(p.cu_seqlens_k, dtype=torch.int32, device=device),
    )
