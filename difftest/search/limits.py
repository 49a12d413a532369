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
        return (f"problem has {tokens} packed tokens (pad_tail {p.pad_tail} included): allowed at most "
                f"{prof.max_tokens} under profile {prof.name!r}")
    n = score_elements(p)
    if n > prof.max_score_elements:
        return (f"problem has {n} score elements (sum seqlen_q*seqlen_k x heads_q): allowed at most "
                f"{prof.max_score_elements} under profile {prof.name!r}")
    return None
