"""Determinism gate: the same inputs, N calls, bitwise-equal outputs."""

import torch

from .gates import Verdict, used_rows
from .problem import OUTPUTS


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Integer view (NaN-safe bitwise comparison)."""
    t = t.detach().cpu().contiguous()
    itype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(itype)


def determinism_verdicts(problem, runs: list) -> list[Verdict]:
    """``runs``: Outputs of repeated calls on identical inputs. One verdict per output:
    how many elements differ from the first run in any later run, and by how much."""
    verdicts = []
    first = runs[0]
    for name in OUTPUTS:
        t0 = first.get(name)
        if t0 is None:
            continue
        n_rows = used_rows(problem, name)
        base = t0 if name == "dsink" else t0[:n_rows]
        b0 = _bits(base)
        differ = torch.zeros(b0.shape, dtype=torch.bool)
        max_diff = 0.0
        for other in runs[1:]:
            t = other.get(name)
            t = t if name == "dsink" else t[:n_rows]
            d = _bits(t) != b0
            differ |= d
            if d.any():
                a, b = t.detach().cpu().double()[d], base.detach().cpu().double()[d]
                max_diff = max(max_diff, float(torch.nan_to_num((a - b).abs(), nan=float("inf")).max()))
        n = int(differ.sum())
        passed = n == 0
        msg = (f"{name}: determinism {'ok' if passed else 'FAILED'}: {n} of {differ.numel()} elements differ "
               f"across {len(runs)} runs (max |diff| {max_diff:.3g})")
        verdicts.append(Verdict(name, "determinism", passed,
                                {"runs": len(runs), "differing": n, "elements": differ.numel(), "max_diff": max_diff},
                                None, msg, "first run"))
    return verdicts
