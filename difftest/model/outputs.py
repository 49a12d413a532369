"""Outputs: what a kernel (or an oracle) hands back for one Problem.

All tensors are packed THD, like Inputs: o [total_q, heads_q, head_dim_v],
lse [total_q, heads_q] (float32, natural log, sink included, -inf for a row that sees
nothing), dq/dk/dv like q/k/v, dsink [heads_q] (None without sinks). An output a kernel
does not produce is None and is reported as not checked.
"""

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from difftest.model.problem import OUTPUTS, Problem

# A NaN with a payload that arithmetic never produces (computed NaNs carry the
# canonical payload), so a surviving poison element is told apart from a computed NaN.
_POISON_BITS = {
    torch.float32: (torch.int32, 0x7FC0DEAD),
    torch.float16: (torch.int16, 0x7E5A),
    torch.bfloat16: (torch.int16, 0x7FDA),
    torch.float64: (torch.int64, 0x7FF8DEADBEEFDEAD),
}


def poison_fill(shape: tuple[int, ...], dtype: torch.dtype, device: "torch.device | str" = "cpu") -> torch.Tensor:
    itype, bits = _POISON_BITS[dtype]
    return torch.full(shape, bits, dtype=itype, device=device).view(dtype)


def is_poison(t: torch.Tensor) -> torch.Tensor:
    """Bool mask of the elements that still hold the poison pattern."""
    itype, bits = _POISON_BITS[t.dtype]
    return t.contiguous().view(itype) == bits


@dataclass
class Outputs:
    o: torch.Tensor | None = None
    lse: torch.Tensor | None = None
    dq: torch.Tensor | None = None
    dk: torch.Tensor | None = None
    dv: torch.Tensor | None = None
    dsink: torch.Tensor | None = None

    def get(self, name: str) -> torch.Tensor | None:
        t: torch.Tensor | None = getattr(self, name)
        return t

    def items(self) -> Iterator[tuple[str, torch.Tensor]]:
        for n in OUTPUTS:
            t = getattr(self, n)
            if t is not None:
                yield n, t

    def to(self, device: "torch.device | str") -> "Outputs":
        return Outputs(**{n: (None if t is None else t.to(device)) for n, t in self.as_dict().items()})

    def clone(self) -> "Outputs":
        return Outputs(**{n: (None if t is None else t.detach().clone()) for n, t in self.as_dict().items()})

    def as_dict(self) -> dict:
        return {n: getattr(self, n) for n in OUTPUTS}

    @staticmethod
    def shapes(problem: Problem) -> dict:
        p = problem
        sh = {
            "o": (p.total_q, p.heads_q, p.head_dim_v),
            "lse": (p.total_q, p.heads_q),
            "dq": (p.total_q, p.heads_q, p.head_dim_qk),
            "dk": (p.total_k, p.heads_kv, p.head_dim_qk),
            "dv": (p.total_k, p.heads_kv, p.head_dim_v),
        }
        if p.sinks:
            sh["dsink"] = (p.heads_q,)
        return sh

    @classmethod
    def poisoned(cls, problem: Problem, dtype: torch.dtype, device: "torch.device | str" = "cpu") -> "Outputs":
        """Output buffers filled with a marked NaN (see poison_fill), for kernels that
        write into given buffers: any poison left after the call marks a region the
        kernel never wrote."""
        out = cls()
        for n, shape in cls.shapes(problem).items():
            dt = torch.float32 if n in ("lse", "dsink") else dtype
            setattr(out, n, poison_fill(shape, dt, device))
        return out
