"""Which keys a query may see, for adapters that hand a kernel an explicit mask.

``visible_keys`` writes problem.py's rule (query i of a sequence sees key j iff
lo_i <= j < hi_i, from the causal alignment and the window) as half-open ranges, on
purpose independently of the oracle's ``allowed_mask``: if the two shared code, a bug
in that code would put the same wrong mask in the kernel's call and in the truth, and
the gates could not see it. tests/test_sdpa_cpu.py checks that the two agree.
"""

import torch

from difftest.model.problem import Problem


def visible_keys(problem: Problem, sq: int, sk: int, device="cpu") -> torch.Tensor:
    """[sq, sk] bool: query i may attend key j, for one sequence of ``sq`` queries and ``sk`` keys."""
    off = problem.mask_offset(sq, sk)
    i = torch.arange(sq, device=device).unsqueeze(1) + off
    hi = torch.full_like(i, sk)
    lo = torch.zeros_like(i)
    if problem.causal:
        hi = torch.minimum(hi, i + 1)
    if problem.window_right is not None:
        hi = torch.minimum(hi, i + problem.window_right + 1)
    if problem.window_left is not None:
        lo = torch.maximum(lo, i - problem.window_left)
    j = torch.arange(sk, device=device).unsqueeze(0)
    return (j >= lo) & (j < hi)
