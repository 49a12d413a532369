"""Deterministic input tensors for a Problem: ``Inputs`` (the tensors, their views and
digest), ``make_inputs`` and ``lay_out``.

The same Problem gives the same bytes on every run, machine and device
(``Inputs.digest()``, recorded as ``input_digest`` in reports, proves it). The values are
drawn in float64 (difftest/model/draw.py: which generator, by ``Problem.input_version``, and
each value mode; the structured modes in difftest/model/structured_values.py), then rounded
once to the Problem's dtype. All tensors use the packed THD layout (tokens of all sequences
concatenated); ``bshd()`` views a dense problem as [batch, seq, heads, dim] and
``rows(name, b)`` gives one sequence's rows.

FP8 Problems (``Problem.dtype`` in ``FP8_DTYPES``, difftest/model/fp8.py): the values are drawn
exactly as for the other dtypes and rounded to float32, then each of q, k, v and dO is
quantised with its own power-of-two scale. ``Inputs.q`` etc. then hold the *dequantised*
values in float32 (exact: the scales are powers of two), so every reference, the truth
included, sees what the kernel was handed; ``Inputs.fp8`` holds what an FP8 kernel reads,
the stored bytes and their descales (``Fp8Tensor``). ``loss_do`` takes O from the
dequantised q, k, v. The 16/32-bit dtypes draw the same bytes as before.

These are the logical, contiguous tensors. The kernel receives them re-materialised in
the Problem's memory layout (``lay_out`` below, with difftest/model/layouts.py: same values, other strides,
offsets or storage); ``bshd()`` and ``rows()`` are then views of the laid-out memory.
"""

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import torch

from difftest.errors import InputError
from difftest.model import fp8
from difftest.model.draw import TORCH_DTYPES, draw_v1, draw_v2, torch_dtype
from difftest.model.fp8 import Fp8Tensor
from difftest.model.layouts import materialise
from difftest.model.problem import Problem
from difftest.model.structured_values import loss_do

__all__ = ["TORCH_DTYPES", "Inputs", "lay_out", "make_inputs", "torch_dtype"]  # the dtypes: drawn in draw.py


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
    # dense problems under a layout (difftest/model/layouts.py): name -> the laid-out
    # [B, S, H, D] view, which the packed field above may only copy (head-major, B > 1)
    dense: dict[str, torch.Tensor] | None = None
    # FP8 problems: name ("q", "k", "v", "do") -> fp8.Fp8Tensor, what an FP8 kernel is handed
    # (contiguous packed bytes and descale); q, k, v, do above hold the dequantised values
    fp8: dict[str, Fp8Tensor] | None = None

    TENSORS = ("q", "k", "v", "do", "sink", "cu_seqlens_q", "cu_seqlens_k")

    @property
    def device(self) -> torch.device:
        return self.q.device

    def to(self, device: torch.device | str) -> "Inputs":
        kw: dict[str, Any] = {n: getattr(self, n) for n in self.TENSORS}  # tensors, and a sink that may be None
        kw = {n: None if t is None else t.to(device) for n, t in kw.items()}
        f8 = None if self.fp8 is None else {n: t.to(device) for n, t in self.fp8.items()}
        return Inputs(problem=self.problem, fp8=f8, **kw)

    def upcast(self, dtype: torch.dtype = torch.float64) -> "Inputs":
        """The same (already rounded) values in a wider float type, for references."""
        kw: dict[str, Any] = {n: getattr(self, n) for n in self.TENSORS}
        for n in ("q", "k", "v", "do", "sink"):
            if kw[n] is not None:
                kw[n] = kw[n].to(dtype)
        return Inputs(problem=self.problem, fp8=self.fp8, **kw)

    def bshd(self, name: str) -> torch.Tensor:
        """A dense problem's tensor as [batch, seq, heads, dim]: a view of the memory the
        kernel receives (the laid-out one under a layout)."""
        p = self.problem
        s = p.seqlen_q if name in ("q", "do") else p.seqlen_k
        if isinstance(s, tuple):
            raise InputError("bshd() needs a dense problem; varlen problems use the packed layout")
        if self.dense and name in self.dense:
            return self.dense[name]
        t: torch.Tensor = getattr(self, name)
        return t.view(p.batch, s, *t.shape[1:])

    def rows(self, name: str, b: int) -> torch.Tensor:
        """Sequence ``b``'s rows of q/do (queries) or k/v (keys), [len, heads, dim]: a view
        of the memory the kernel receives, whatever the layout."""
        p = self.problem
        if not p.varlen:
            return self.bshd(name)[b]
        cu = p.cu_seqlens_q if name in ("q", "do") else p.cu_seqlens_k
        t: torch.Tensor = getattr(self, name)
        return t[cu[b] : cu[b + 1]]

    def digest(self) -> str:
        """The first 16 hex digits of the SHA-256 of every tensor's name, shape and bytes."""
        return _sha256(self._bytes(copy=False))  # hashed at once: nothing can write into them meanwhile

    def digest_later(self) -> Callable[[], str]:
        """digest() in two steps: the bytes are copied to the host now, so nothing written
        into these tensors later (a kernel that scribbles on its inputs) changes what is
        hashed; the hash runs on a thread of its own (hashlib releases the GIL), and the
        returned call waits for it. On the H200 hashing in line took ~34 ms of a TileLang
        case's ~200 (a profile of a gpu campaign); a case now overlaps it."""
        parts, result = self._bytes(copy=True), Future[str]()

        def work() -> None:
            try:
                result.set_result(_sha256(parts))
            except BaseException as e:  # re-raised by the waiting call
                result.set_exception(e)

        threading.Thread(target=work, name="difftest-input-digest", daemon=True).start()
        return result.result

    def _bytes(self, copy: bool) -> list:
        """(name, shape, bytes as a flat uint8 host tensor) per tensor; ``copy``: never a view.
        Tensors on a device are packed there and brought to the host in one copy (one
        synchronisation a case, not one per tensor)."""
        named = [(n, getattr(self, n)) for n in self.TENSORS if getattr(self, n) is not None]
        flat = [t.detach().contiguous().reshape(-1).view(torch.uint8) for _, t in named]
        devices = {t.device for _, t in named}
        if len(devices) == 1 and (copy or devices != {torch.device("cpu")}):
            whole = torch.cat(flat).cpu()  # a copy: later writes into the tensors change nothing here
            flat, at = [], 0
            for size in [t.numel() * t.element_size() for _, t in named]:
                flat.append(whole[at : at + size])
                at += size
        elif copy or len(devices) > 1:
            flat = [f.to("cpu", copy=True) for f in flat]
        return [(n, tuple(t.shape), f) for (n, t), f in zip(named, flat)]


def _sha256(parts: list) -> str:
    h = hashlib.sha256()
    for n, shape, b in parts:
        h.update(n.encode())
        h.update(str(shape).encode())
        if b.numel():
            h.update(b.numpy())  # the buffer itself, no bytes copy
    return h.hexdigest()[:16]


def make_inputs(problem: Problem, device: torch.device | str = "cpu") -> Inputs:
    """Draw the inputs of ``problem`` (validated first) on ``device``."""
    p = problem.validate()
    if p.input_version == 1:
        q, k, v, do, sink = draw_v1(p)
    else:
        q, k, v, do, sink = draw_v2(p, torch.device(device))
    dt = torch_dtype(p.dtype)
    if p.input_version == 1:  # rounded on the CPU, as it always was, then moved

        def rnd(t: torch.Tensor) -> torch.Tensor:
            return t.to(dt).to(device)
    else:  # float64 -> float32 -> dtype, each step round-to-nearest-even as IEEE defines it on
        # every device, rather than whatever path torch takes from float64 to a 16-bit type
        def rnd(t: torch.Tensor) -> torch.Tensor:
            return t.to(torch.float32).to(dt)

    q, k, v = rnd(q), rnd(k), rnd(v)
    stored = None
    if fp8.is_fp8(p.dtype):  # quantised per tensor; the references see the dequantised values
        stored = {n: fp8.Fp8Tensor.of(t, p.dtype) for n, t in (("q", q), ("k", k), ("v", v))}
        q, k, v = (stored[n].dequantised() for n in ("q", "k", "v"))
    sink = None if sink is None else sink.to(torch.float32).to(device)
    if p.values == "loss_do":  # dO from the forward of the rounded inputs
        do = loss_do(p, q, k, v, sink)
    do = rnd(do)
    if stored is not None:
        stored["do"] = fp8.Fp8Tensor.of(do, p.dtype)
        do = stored["do"].dequantised()
    return Inputs(
        problem=p,
        q=q,
        k=k,
        v=v,
        do=do,
        sink=sink,
        cu_seqlens_q=torch.tensor(p.cu_seqlens_q, dtype=torch.int32, device=device),
        cu_seqlens_k=torch.tensor(p.cu_seqlens_k, dtype=torch.int32, device=device),
        fp8=stored,
    )


def lay_out(inputs: Inputs) -> Inputs:
    """The Inputs a kernel receives under ``inputs.problem.layout``: the tensors the layout
    names re-materialised (same values, new strides/offsets/storage), the rest as given.
    ``inputs`` are the logical contiguous tensors from ``make_inputs``; keep them for the
    references. Dense problems also carry the [B, S, H, D] views (``Inputs.bshd``)."""
    p = inputs.problem
    layout = p.layout
    if not layout.tensors:
        return inputs
    why = layout.unfit(p)
    if why:
        raise InputError(f"Problem.layout={layout.kind!r} is invalid: allowed {why}")
    kw: dict[str, Any] = {n: getattr(inputs, n) for n in Inputs.TENSORS}
    kw["fp8"] = inputs.fp8  # the stored FP8 bytes stay packed and contiguous
    dense: dict[str, torch.Tensor] | None = None if p.varlen else {}
    for name in layout.tensors:
        if dense is None:
            kw[name] = materialise(layout.kind, getattr(inputs, name), p.heads_q)
        else:
            y = materialise(layout.kind, inputs.bshd(name), p.heads_q)
            dense[name] = y
            kw[name] = y.reshape(-1, *y.shape[2:])  # a view where the memory allows, else a copy
    return Inputs(problem=p, dense=dense, **kw)
