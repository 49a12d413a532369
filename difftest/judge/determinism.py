"""Determinism gate: the same inputs, N calls, bitwise-equal outputs.

Only a kernel that claims determinism (``Capability.deterministic``) can fail it; for
any other kernel the same measurement is reported under ``determinism_info`` and passes.

Every run is an answer a user can get, so a rerun that differs from the first is judged
like the first (``rerun_verdicts``): a nondeterministic kernel may differ from run to run,
never be wrong on one of them. (flash-attn3-jax's backward writes past two buffers; 20 runs
of one problem differed by up to +inf on the H200, while only the first run was judged.)
"""

import torch

from difftest.judge.gates import Verdict, used_rows
from difftest.model.problem import OUTPUTS
from difftest.vocab import Gate


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Integer view (NaN-safe bitwise comparison), on t's own device: a host copy of every
    output of every run cost a CUDA case ~50 ms (measured on the H200)."""
    t = t.detach().contiguous()
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
        differ = torch.zeros(b0.shape, dtype=torch.bool, device=b0.device)
        max_diff = 0.0
        for other in runs[1:]:
            t = other.get(name)
            t = (t if name == "dsink" else t[:n_rows]).to(b0.device)
            d = _bits(t) != b0
            differ |= d
            if d.any():  # a host read of one bool; only differing elements are read back
                a, b = t.detach()[d].double(), base.detach()[d].double()
                max_diff = max(max_diff, float(torch.nan_to_num((a - b).abs(), nan=float("inf")).max()))
        n = int(differ.sum())
        msg = (f"{name}: determinism {'FAILED' if n else 'ok'}: {n} of {differ.numel()} elements differ "
               f"across {len(runs)} runs (max |diff| {max_diff:.3g})")
        verdicts.append(Verdict(name, Gate.DETERMINISM if claimed else Gate.DETERMINISM_INFO, n == 0 or not claimed,
                                {"runs": len(runs), "differing": n, "elements": differ.numel(), "max_diff": max_diff},
                                None, msg, "first run"))
    return verdicts


def same_bits(a, b) -> bool:
    """Whether two runs' Outputs are bitwise identical in every output both have."""
    for name in OUTPUTS:
        x, y = a.get(name), b.get(name)
        if x is None or y is None:
            continue
        if x.shape != y.shape or not torch.equal(_bits(x), _bits(y)):
            return False
    return True


def rerun_verdicts(runs: list, judge) -> list[Verdict]:
    """The failing verdicts of the first rerun that differs from run 1 and fails ``judge``
    (a callable: Outputs -> the verdicts the first run got), each message naming the run and
    how many differing reruns failed; [] when every differing rerun passes. Bitwise copies
    of run 1 are not judged again."""
    failing, first = 0, []
    for i, run in enumerate(runs[1:], 2):
        if same_bits(run, runs[0]):
            continue
        bad = [v for v in judge(run) if not v.passed]
        if bad:
            failing += 1
            first = first or [(i, v) for v in bad]
    for i, v in first:
        v.numbers = {**v.numbers, "run": i, "runs": len(runs), "failing_reruns": failing}
        v.message = f"run {i} of {len(runs)} ({failing} failing rerun{'s' if failing != 1 else ''}): {v.message}"
    return [v for _, v in first]

