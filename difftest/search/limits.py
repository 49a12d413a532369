"""Size limits on a Problem from outside the search (the failure store, a reproducer
file, an edge corpus): the profile's ``max_tokens`` (packed rows incl. pad_tail) and
``max_score_elements`` (sum(seqlen_q * seqlen_k) * heads_q). A Problem is otherwise
only bounded by a kernel's capability, and a 16-token Problem with pad_tail 10^7 once
allocated 5.3 GB; refusing it up front with one line is the fix."""

from difftest.model.problem import Problem
from difftest.model.profiles import PROFILES, get_profile


def score_elements(p: Problem) -> int:
    return sum(a * b for a, b in zip(p.seqlens_q, p.seqlens_k)) * p.heads_q


def check_problem_size(p: Problem, profile=None) -> str | None:
    """None when ``p`` fits ``profile`` (a name or Profile; None: the largest, 'gpu'),
    else one line naming the measured size and the limit."""
    prof = get_profile(profile) if profile is not None else max(PROFILES.values(), key=lambda q: q.max_tokens)
    tokens = max(p.total_q, p.total_k)
    if tokens > prof.max_tokens:
        return (
            f"problem has {tokens} packed tokens (pad_tail {p.pad_tail} included): allowed at most "
            f"{prof.max_tokens} under profile {prof.name!r}"
        )
    n = score_elements(p)
    if n > prof.max_score_elements:
        return (
            f"problem has {n} score elements (sum seqlen_q*seqlen_k x heads_q): allowed at most "
            f"{prof.max_score_elements} under profile {prof.name!r}"
        )
    cells = pattern_cells(p)
    if cells > MAX_PATTERN_CELLS:
        return (
            f"problem's sparse pattern has {cells} cells (query blocks x key blocks, or x top-k slots), "
            f"drawn in Python: allowed at most {MAX_PATTERN_CELLS}"
        )
    return None


# A sparse pattern is drawn in Python, one draw per cell (difftest/model/sparsity.py): 2**25 cells are
# tens of seconds. What the strategies draw stays far below (the gpu profile's 8192 tokens with 64
# top-k slots each: 2**19).
MAX_PATTERN_CELLS = 2**25


def pattern_cells(p: Problem) -> int:
    """What deriving a sparse Problem's pattern costs: 0 without one."""
    sp = p.sparsity
    if sp is None:
        return 0
    per = (lambda a, b: sp.blocks(a, b)[1]) if sp.kind == "block" else (lambda a, b: sp.topk)
    return sum(sp.blocks(a, b)[0] * per(a, b) for a, b in zip(p.seqlens_q, p.seqlens_k))
