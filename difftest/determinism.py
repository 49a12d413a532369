"""Determinism gate: the same inputs, N calls, bitwise-equal outputs.

Only a kernel that claims determinism (``Capability.deterministic``) can fail it; for
any other kernel the same measurement is reported under ``determinism_info`` and passes.
"""

import torch

from .gates import Verdict, used_rows
from .problem import OUTPUTS
from .vocab import Gate


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Integer view (NaN-safe bitwise comparison)."""
    t = t.detach().cpu().contiguous()
    itype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(itype)


def determinism_verdicts(problem, runs: list, claimed: bool = True) -> list[Verdict]:
    """``runs``: Outputs of repeated calls on identical inputs. One verdict per output:
    how many elements differ from the first run in any later run, and by how much.
    ``claimed``: the kernel claims determinism (else the verdicts are informational)."""
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
        msg = (f"{name}: determinism {'FAILED' if n else 'ok'}: {n} of {differ.numel()} elements differ "
               f"across {len(runs)} runs (max |diff| {max_diff:.3g})")
        verdicts.append(Verdict(name, Gate.DETERMINISM if claimed else Gate.DETERMINISM_INFO, n == 0 or not claimed,
                                {"runs": len(runs), "differing": n, "elements": differ.numel(), "max_diff": max_diff},
                                None, msg, "first run"))
    return verdicts
