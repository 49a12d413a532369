"""Sparse-mask strategies (difftest/model/sparsity.py): none, a block-sparse mask, a top-k
selection, inside the block sizes a capability declares (``block_sparse``, ``topk_sparse``).

Drawn in shrink order: no sparsity first, then a block mask before a top-k selection; inside
a kind the smallest block sizes declared first, no empty row, nothing dropped (the dense
pattern), one top-k slot, no invalid or duplicate slot, seed 0. The edges are drawn on
purpose, not by luck: every block dropped (all-masked blocks), rows with no block (``empty``),
blocks as long as the sequence (single-block rows), every slot invalid, duplicates only, more
slots than key blocks.

``sparsity_class`` names what a Problem's sparsity exercises (the ``sparsity`` configuration
dimension and coverage features); ``realise_sparsity`` builds the cheapest Sparsity of a class.
"""

import random

from hypothesis import strategies as st

from difftest.model.capability import Capability
from difftest.model.problem import Problem
from difftest.model.sparsity import Sparsity

# the sparsity configuration values, cheapest first: a kind, and the kind at its edges
# (rows with no block / all blocks dropped; invalid and duplicate top-k slots, an empty row)
SPARSITY_CLASSES = ("none", "block", "block_edge", "topk", "topk_edge")
PERCENT_EDGES = (0, 100, 50, 1, 99)


def sparsity_kinds(c: Capability) -> tuple[str, ...]:
    return tuple(k for k, sizes in (("block", c.block_sparse), ("topk", c.topk_sparse)) if sizes)


def _sizes(c: Capability, kind: str) -> list[tuple[int, int]]:
    return sorted(c.block_sparse if kind == "block" else c.topk_sparse, key=lambda t: (t[0] * t[1], t))


def _percent():
    return st.one_of(st.sampled_from(PERCENT_EDGES), st.integers(0, 100))


@st.composite
def sparsities(draw, c: Capability, max_len: int):
    """None, or a Sparsity inside ``c`` for sequences of at most ``max_len`` tokens. Draws
    nothing (no choice) when the capability declares no sparse block size, so every other
    kernel's draws are what they were."""
    kinds = sparsity_kinds(c)
    if not kinds:
        return None
    kind = draw(st.sampled_from((None,) + kinds))
    if kind is None:
        return None
    bq, bk = draw(st.sampled_from(_sizes(c, kind)))
    nq, nk = -(-max(1, max_len) // bq), -(-max(1, max_len) // bk)
    empty = draw(st.one_of(st.integers(0, nq), st.sampled_from((0, 1, nq))))
    seed = draw(st.integers(0, 2**16))
    if kind == "block":
        return Sparsity("block", bq, bk, drop=draw(_percent()), empty=empty, seed=seed).check()
    topk = draw(st.one_of(st.integers(1, max(1, min(2 * nk + 1, 64))), st.sampled_from((1, nk, nk + 1))))
    invalid = draw(_percent())
    dup = draw(st.integers(0, 100 - invalid))
    return Sparsity("topk", bq, bk, topk=topk, invalid=invalid, dup=dup, empty=empty, seed=seed).check()


def sparsity_class(p: Problem) -> str:
    """The ``SPARSITY_CLASSES`` value ``p`` exercises: its kind, ``_edge`` where it has a row
    with no block, every block dropped, or an invalid or duplicate top-k slot."""
    sp = p.sparsity
    if sp is None:
        return "none"
    edge = sp.empty > 0 or (sp.drop == 100 if sp.kind == "block" else (sp.invalid > 0 or sp.dup > 0))
    return sp.kind + ("_edge" if edge else "")


def realise_sparsity(cls: str, c: Capability, variant: int, rng: random.Random) -> Sparsity | None:
    """The cheapest Sparsity of class ``cls`` inside ``c`` (None for ``none`` or an undeclared kind);
    ``variant`` walks the declared block sizes and the edge's forms."""
    if cls == "none":
        return None
    kind = cls.split("_")[0]
    sizes = _sizes(c, kind) if kind in sparsity_kinds(c) else []
    if not sizes:
        return None
    bq, bk = sizes[variant % len(sizes)]
    seed = rng.randrange(2**16)
    if kind == "block":
        if cls == "block":
            return Sparsity("block", bq, bk, drop=50, seed=seed)
        return Sparsity("block", bq, bk, drop=(50, 100)[variant % 2], empty=1, seed=seed)
    if cls == "topk":
        return Sparsity("topk", bq, bk, topk=2, seed=seed)
    return Sparsity("topk", bq, bk, topk=3 + variant % 3, invalid=30, dup=30, empty=variant % 2, seed=seed)


def features(p: Problem) -> set[str]:
    """Coverage features of ``p``'s sparsity (strategies/coverage.py adds them)."""
    sp = p.sparsity
    if sp is None:
        return set()
    f = {f"sparse:{sp.kind}"}
    for a, b in zip(p.seqlens_q, p.seqlens_k):
        if not (a and b):
            continue
        n = sp.counts(a, b)  # [query blocks, key blocks]
        if (n.sum(dim=1) == 0).any():
            f.add("sparse:row_with_no_block")
        if n.shape[1] == 1:
            f.add("sparse:single_block_rows")
        if sp.kind == "block":
            if not n.any():
                f.add("sparse:all_blocks_masked")
            if n.all():
                f.add("sparse:all_blocks_kept")
        else:
            nk = n.shape[1]
            if any(x < 0 or x >= nk for r in sp.topk_slots(a, b) for x in r):
                f.add("sparse:topk_invalid")
            if (n > 1).any():
                f.add("sparse:topk_duplicate")
    return f


def expected_features(c: Capability) -> set[str]:
    e = set()
    for kind in sparsity_kinds(c):
        e |= {f"sparse:{kind}", "sparse:row_with_no_block", "sparse:single_block_rows"}
        e |= (
            {"sparse:all_blocks_masked", "sparse:all_blocks_kept"}
            if kind == "block"
            else {"sparse:topk_invalid", "sparse:topk_duplicate"}
        )
    return e


def edge_sparsities(c: Capability, S: int) -> list[tuple[dict, Sparsity]]:
    """Sparse corners for the edge corpus (strategies/edges.py): (Problem changes, Sparsity) per
    declared block size, sequences of about three blocks (at most ``S`` tokens): all blocks
    kept, half dropped, every block dropped, a row with no block among kept ones, one block per
    row (blocks as long as the sequence), under causal (blocks cut by the diagonal); top-k with
    one slot, duplicates only, invalid slots only, an empty row among duplicates and invalid
    slots, more slots than key blocks."""
    out = []
    for bq, bk in _sizes(c, "block") if c.block_sparse else []:
        L = max(1, min(S, 3 * max(bq, bk) - 1))
        one = max(1, min(S, max(bq, bk)))
        for changes, sp in (
            ({}, dict(drop=0)),
            ({}, dict(drop=50, seed=1)),
            ({}, dict(drop=100)),
            ({}, dict(drop=0, empty=1, seed=2)),
            ({"causal": True}, dict(drop=30, seed=3)),
            ({"seqlen_q": one, "seqlen_k": one}, dict(drop=0)),
        ):
            out.append(({"seqlen_q": L, "seqlen_k": L, **changes}, Sparsity("block", bq, bk, **sp)))
    for bq, bk in _sizes(c, "topk") if c.topk_sparse else []:
        L = max(1, min(S, 4 * max(bq, bk) + 1))
        nk = -(-L // bk)
        for changes, sp in (
            ({}, dict(topk=1)),
            ({}, dict(topk=3, dup=100)),
            ({}, dict(topk=2, invalid=100)),
            ({}, dict(topk=4, invalid=30, dup=30, empty=1, seed=1)),
            ({}, dict(topk=nk + 1, seed=2)),
            ({"causal": True}, dict(topk=2, dup=40, seed=3)),
        ):
            out.append(({"seqlen_q": L, "seqlen_k": L, **changes}, Sparsity("topk", bq, bk, **sp)))
    return out
