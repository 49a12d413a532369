"""Which keys a query may see, for adapters that hand a kernel an explicit mask.

``visible_keys`` writes problem.py's rule (query i of a sequence sees key j iff
lo_i <= j < hi_i, from the causal alignment and the window) as half-open ranges, on
purpose independently of the oracle's ``allowed_mask``: if the two shared code, a bug
in that code would put the same wrong mask in the kernel's call and in the truth, and
the gates could not see it. tests/test_sdpa_cpu.py checks that the two agree.

``alibi_bias`` writes the ALiBi rule (-slope_h * |i + offset - j|, problem.py) for an adapter
that hands a kernel a float bias, again apart from the oracle's ``score_bias``; ``rel_position_bias``
the relative-position table's rule (table[h][clamp(j - (i + offset), -R, R) + R]) the same way.

``selected_blocks`` does the same for a sparse Problem (difftest/model/sparsity.py): the
[query block, key block] selection built from the pattern a kernel is handed (the kept
blocks, or the top-k slots scattered, so a duplicate lands on the same block once and an
invalid slot, -1 or past the last block, lands nowhere), apart from ``Sparsity.selected``;
``visible_keys`` ANDs it in. tests/test_sparsity.py checks that the two agree.
"""

import functools

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
    ok = (j >= lo) & (j < hi)
    if problem.sparsity is not None:
        sp = problem.sparsity
        sel = selected_blocks(problem, sq, sk, device)
        ok = ok & sel[torch.arange(sq, device=device) // sp.block_q][:, torch.arange(sk, device=device) // sp.block_k]
    return ok


def alibi_bias(problem: Problem, sq: int, sk: int, device="cpu") -> torch.Tensor:
    """[heads_q, sq, sk] float32: the ALiBi bias of one sequence, the float32 slopes times the
    distance from the query's diagonal (the mask's offset), as a kernel forms it."""
    slopes = torch.tensor(problem.alibi_slopes, dtype=torch.float32, device=device)
    diagonal = torch.arange(sq, device=device).unsqueeze(1) + problem.mask_offset(sq, sk)
    distance = (torch.arange(sk, device=device).unsqueeze(0) - diagonal).abs().float()
    return -(slopes.view(-1, 1, 1) * distance)


def rel_position_bias(problem: Problem, sq: int, sk: int, device="cpu") -> torch.Tensor:
    """[heads_q, sq, sk] float32: the relative-position bias of one sequence, each query head's
    float32 table row gathered at the signed distance from the query's diagonal, clamped to +-R."""
    r = (len(problem.rel_bias[0]) - 1) // 2
    table = torch.tensor(problem.rel_bias, dtype=torch.float32, device=device)
    diagonal = torch.arange(sq, device=device).unsqueeze(1) + problem.mask_offset(sq, sk)
    column = torch.clamp(torch.arange(sk, device=device).unsqueeze(0) - diagonal, min=-r, max=r) + r
    return torch.stack([row[column] for row in table])


def selected_blocks(problem: Problem, sq: int, sk: int, device="cpu") -> torch.Tensor:
    """[query blocks, key blocks] bool of a sparse Problem's (sq, sk) sequence: the kept
    blocks of a block mask, or the blocks a top-k row's valid slots name."""
    return _selected(problem.sparsity, sq, sk).to(device)


@functools.lru_cache(maxsize=64)
def _selected(sp, sq: int, sk: int) -> torch.Tensor:
    nq, nk = -(-sq // sp.block_q), -(-sk // sp.block_k)
    if sp.kind == "block":
        return torch.tensor(sp.block_pattern(sq, sk), dtype=torch.bool).reshape(nq, nk)
    slots = torch.tensor(sp.topk_slots(sq, sk), dtype=torch.long).reshape(nq, sp.topk)
    valid = (slots >= 0) & (slots < nk)
    sel = torch.zeros(nq, nk + 1, dtype=torch.bool)  # column nk: where invalid slots land
    sel.scatter_(1, torch.where(valid, slots, nk), True)
    return sel[:, :nk]
