"""Fault-injected variants of our TileLang kernels (real TileLang code, compiled like the
clean kernels). Each fault is a compile argument of source.py (``mutant=...``), so the
mutant differs from the clean build in exactly one place. ``kernels/mutants.py`` merges
this ``MUTANTS`` dict into the catalogue (entries are its ``Mutant`` type); importing this
module registers each as ``mutant:<name>``.
"""

from difftest.execute.adapter import register
from difftest.kernels.mutants import Mutant
from difftest.model.problem import Problem

from .adapter import TileLangAttention


def _factory(mutant: str, name: str):
    def make():
        a = TileLangAttention("atomic", mutant=mutant, name=f"mutant:{name}")
        a.spec = f"mutant:{name}"  # the registry key reproducers and isolated workers use
        return a

    make.__name__ = f"make_{mutant}"
    return make


def _clean():
    return TileLangAttention("atomic")


_SPECS = (
    (
        "tl-causal-off-by-one",
        "causal",
        "mask_off_by_one",
        "backward mask lets query i see key i + offset + 1 (forward is right): P recomputed on one extra key",
        Problem(
            batch=1, seqlen_q=40, seqlen_k=40, heads_q=1, heads_kv=1, head_dim_qk=16, head_dim_v=16, causal=True, seed=1
        ),
    ),
    (
        "tl-dsink-sign",
        "sinks",
        "dsink_sign",
        "per-row dSink term computed with the wrong sign (+exp(sink - LSE) * Delta)",
        Problem(
            batch=1, seqlen_q=24, seqlen_k=24, heads_q=2, heads_kv=2, head_dim_qk=16, head_dim_v=16, sinks=True, seed=2
        ),
    ),
    (
        "tl-tail-block-skipped",
        "tail-blocks",
        "tail_block_skipped",
        "backward skips a partial last key block: its dK/dV stay zero and dQ misses its keys",
        Problem(batch=1, seqlen_q=40, seqlen_k=40, heads_q=1, heads_kv=1, head_dim_qk=16, head_dim_v=16, seed=3),
    ),
    (
        "tl-gqa-head-map",
        "gqa",
        "gqa_head_map",
        "backward maps query head g of kv head h to g * heads_kv + h (strided) instead of h * group + g",
        Problem(batch=1, seqlen_q=24, seqlen_k=24, heads_q=4, heads_kv=2, head_dim_qk=16, head_dim_v=16, seed=4),
    ),
)

MUTANTS: dict[str, Mutant] = {
    name: Mutant(
        name=name,
        bug_class=bug,
        description=desc,
        factory=_factory(fault, name),
        example=example,
        source="tilelang",
        clean=_clean,
    )
    for name, bug, fault, desc, example in _SPECS
}

for _name, _m in MUTANTS.items():  # registered as mutant:<name>, like the blockwise catalogue
    register(f"mutant:{_name}", _m.factory)
