"""Outputs: what a kernel (or an oracle) hands back for one Problem.

All tensors are packed THD, like Inputs: o [total_q, heads_q, head_dim_v],
lse [total_q, heads_q] (float32, natural log, sink included, -inf for a row that sees
nothing), dq/dk/dv like q/k/v, dsink [heads_q] (None without sinks). An output a kernel
does not produce is None and is reported as not checked.
"""

from dataclasses import dataclass

import torch

from .problem import OUTPUTS, Problem


@dataclass
class Outputs:
    o: torch.Tensor | None = None
    lse: torch.Tensor | None = None
    dq: torch.Tensor | None = None
    dk: torch.Tensor | None = None
    dv: torch.Tensor | None = None
    dsink: torch.Tensor | None = None

    def get(self, name: str) -> torch.Tensor | None:
        return getattr(self, name)

    def items(self):
        for n in OUTPUTS:
            t = getattr(self, n)
            if t is not None:
                yield n, t

    def to(self, device) -> "Outputs":
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
    def poisoned(cls, problem: Problem, dtype: torch.dtype, device="cpu") -> "Outputs":
        """Output buffers filled with NaN, for kernels that write into given buffers:
        any NaN left after the call marks a region the kernel never wrote."""
        out = cls()
        for n, shape in cls.shapes(problem).items():
            dt = torch.float32 if n in ("lse", "dsink") else dtype
            setattr(out, n, torch.full(shape, float("nan"), dtype=dt, device=device))
        return out
