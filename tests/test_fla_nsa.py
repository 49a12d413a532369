"""The fla-nsa adapter (kernels/fla_nsa.py, fla-core 0.6.0's parallel_nsa, selection branch): its
capability and refusals, the translation of difftest's sparsity into ``block_indices`` checked
against the model's mask, all without fla; then small problems through run_case, on CUDA when there
is one, else on the CPU under Triton's interpreter (TRITON_INTERPRET=1, in a child process, as
tests/test_fla_attn.py does: fla's kernels are decorated interpreted only when fla is imported with it).

One finding is asserted as found: a row whose slots name no visible key (every slot -1, or only
blocks after the query) gets O = 0/0 = NaN (parallel.py:286) where difftest's model says O = 0; its
gradients are right."""

import sys

import pytest
import torch

from difftest.model.problem import Problem
from difftest.model.sparsity import Sparsity
from difftest.oracles.reference import allowed_mask
from tests.kernels_for_tests import run_problems_in_child

from difftest.kernels.fla_nsa import (  # isort: skip
    DENSE_BLOCK,
    FlaNsaAdapter,
    NsaCall,
    _capability,
    refusal,
)

CUDA = torch.cuda.is_available()


def _p(**kw):
    base = dict(causal=True, heads_q=16, heads_kv=1, head_dim_qk=16, head_dim_v=16, dtype="float16")
    return Problem(**{**base, **kw})


def _nsa_mask(call: NsaCall, p: Problem, seq: int, sq: int, sk: int) -> torch.Tensor:
    """[sq, sk] what parallel_nsa attends for one sequence of ``call``, restated from its forward
    (parallel.py:260-274): query t sees key j iff j <= t and some slot s of row t has
    0 <= s and s * block_size <= t, and j // block_size == s."""
    if call.varlen:
        rows = call.indices[0][sum(p.seqlens_q[:seq]) : sum(p.seqlens_q[: seq + 1])]
    else:
        rows = call.indices[seq]
    bs = call.block_size
    out = torch.zeros(sq, sk, dtype=torch.bool)
    for t, row in enumerate(rows):
        for s in row:
            if 0 <= s and s * bs <= t:
                out[t, s * bs : min(sk, t + 1, s * bs + bs)] = True
    return out


TRANSLATED = {
    "dense": _p(seqlen_q=150, seqlen_k=150),
    "topk_tokens_invalid": _p(seqlen_q=70, seqlen_k=70, sparsity=Sparsity("topk", 1, 16, topk=3, invalid=40, seed=3)),
    "topk_blocks_expanded": _p(seqlen_q=130, seqlen_k=130, sparsity=Sparsity("topk", 64, 64, topk=2, seed=5)),
    "topk_empty_rows": _p(seqlen_q=50, seqlen_k=50, sparsity=Sparsity("topk", 16, 16, topk=1, empty=2, seed=1)),
    "block_mask": _p(seqlen_q=90, seqlen_k=90, sparsity=Sparsity("block", 16, 16, drop=40, seed=7)),
    "block_mask_tokens": _p(seqlen_q=70, seqlen_k=70, sparsity=Sparsity("block", 1, 32, drop=50, seed=2)),
    "varlen_topk": _p(
        batch=3, seqlen_q=(20, 47, 33), seqlen_k=(20, 47, 33), sparsity=Sparsity("topk", 1, 16, topk=2, invalid=30)
    ),
}


@pytest.mark.parametrize("name", sorted(TRANSLATED))
def test_block_indices_select_the_models_mask(name):
    """The keys NSA attends under the translated block_indices are the model's visible keys
    (oracles/reference.py allowed_mask: causal AND the selected blocks), row by row."""
    p = TRANSLATED[name]
    call = NsaCall.of(p)
    assert call.slots & (call.slots - 1) == 0  # a power of two (csr.py:42)
    assert call.block_size == (DENSE_BLOCK if p.sparsity is None else p.sparsity.block_k)
    t = call.block_indices(p.heads_kv, "cpu")
    assert t.dtype == torch.int32 and t.shape == (1 if p.varlen else p.batch, p.total_q, p.heads_kv, call.slots)
    for seq, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        assert torch.equal(_nsa_mask(call, p, seq, sq, sk), allowed_mask(p, sq, sk)), (name, seq)


def test_topk_slots_reach_the_kernel_as_drawn():
    """Invalid slots (-1 and past-the-end) are handed over, not cleaned: the kernel's skip is tested."""
    p = TRANSLATED["topk_tokens_invalid"]
    call = NsaCall.of(p)
    slots = p.sparsity.topk_slots(70, 70)
    assert any(s == -1 for r in slots for s in r) and any(s >= 5 for r in slots for s in r)
    assert [r[:3] for r in call.indices[0]] == [list(slots[i]) for i in range(70)]
    assert all(r[3:] == [-1] for r in call.indices[0])  # padded from 3 to 4 slots


def test_call_refuses_what_nsa_cannot_take():
    with pytest.raises(ValueError, match="always causal"):
        NsaCall.of(_p(seqlen_q=8, seqlen_k=8, causal=False))
    with pytest.raises(ValueError, match="one T"):
        NsaCall.of(_p(seqlen_q=8, seqlen_k=9))


def test_capability_states_the_contract():
    for device in ("cpu", "cuda"):
        c = _capability(device)
        assert c.causal and c.causal_required and not c.seqlen_q_ne_k and c.gqa and c.varlen
        assert not (c.window or c.sinks or c.softcap or c.pad_tail or c.deterministic)
        assert c.empty_seqs  # accepted by parallel_nsa, and wrong there: declared so a hunt meets it
        assert c.outputs == ("o", "dq", "dk", "dv")  # no lse: it stays in the autograd context
        assert "kv_broadcast" not in c.layouts  # an MHA call: group 1
        assert all(bk & (bk - 1) == 0 and bk >= 16 for _, bk in c.topk_sparse + c.block_sparse)
        assert max(c.head_dims_qk) == 128
    assert _capability("cpu").dtypes == ("float16", "float32")
    assert _capability("cuda").dtypes == ("float16", "bfloat16")
    assert min(_capability("cuda").head_dims_qk) == 16  # tl.dot's 16 on a GPU


@pytest.mark.parametrize(
    "heads, refused",
    [((16, 1), False), ((32, 2), False), ((32, 1), False), ((8, 1), True), ((1, 1), True), ((24, 1), True)],
)
def test_group_size_refused_unless_a_power_of_two_from_16(heads, refused):
    p = _p(seqlen_q=8, seqlen_k=8, heads_q=heads[0], heads_kv=heads[1])
    why = _capability("cpu").excludes(p)
    assert (why is not None) == refused, why
    if refused:
        assert "parallel.py:904" in why


def test_duplicate_topk_slots_refused():
    dup = _p(seqlen_q=40, seqlen_k=40, sparsity=Sparsity("topk", 1, 16, topk=4, dup=60, seed=1))
    assert "duplicate" in refusal(dup)
    more_slots_than_blocks = _p(seqlen_q=20, seqlen_k=20, sparsity=Sparsity("topk", 1, 16, topk=3))
    assert "duplicate" in refusal(more_slots_than_blocks)
    assert refusal(TRANSLATED["topk_tokens_invalid"]) is None
    c = _capability("cpu")
    assert c.excludes(_p(batch=2, seqlen_q=(0, 9), seqlen_k=(0, 9))) is None  # empty_seqs
    assert c.excludes(_p(batch=2, seqlen_q=(4, 9), seqlen_k=(4, 9), pad_tail=2)) is not None


def test_unavailable_says_why(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setitem(sys.modules, "fla", None)
    assert "fla-core" in FlaNsaAdapter("cpu").available()


def test_entry_point_declared():
    """pyproject.toml names the adapter (the registry sees it after `pip install -e .`)."""
    import tomllib
    from pathlib import Path

    from difftest.execute import adapter

    eps = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["entry-points"]
    assert eps["difftest.kernels"]["fla-nsa"] == "difftest.kernels.fla_nsa:adapter"
    assert isinstance(adapter.get("difftest.kernels.fla_nsa:adapter"), FlaNsaAdapter)


# ------------------------------------------------------------------ the kernel, in a child process

_RUN = r"""
import json, sys
from difftest.judge.runner import run_case
from difftest.kernels.fla_nsa import FlaNsaAdapter
from difftest.model.problem import Problem
a = FlaNsaAdapter(sys.argv[1])
why = a.available()
out = {"unavailable": why}
for name, d in ({} if why else json.loads(sys.argv[2])).items():
    r = run_case(a, Problem.from_dict(d))
    out[name] = {"status": str(r.status), "reason": r.reason,
                 "failed": [[v.output, str(v.gate), v.message[:300]] for v in r.verdicts if not v.passed]}
print("RESULT" + json.dumps(out))
"""

PASSING = {
    "dense": _p(seqlen_q=70, seqlen_k=70),
    # slots per 16-query block ((-1, -1, 0), (1, 2, -1), (2, 0, 3)): -1, past-the-end 3, a later block
    # (2 for queries 16-31), and every row sees a key
    "topk_invalid_slots": _p(
        seqlen_q=40, seqlen_k=40, sparsity=Sparsity("topk", 16, 16, topk=3, invalid=30, seed=0), dtype="float32"
    ),
    "block_mask_gqa_unequal_dims": _p(
        seqlen_q=50,
        seqlen_k=50,
        heads_q=32,
        heads_kv=2,
        head_dim_qk=32,
        head_dim_v=8,
        sparsity=Sparsity("block", 16, 16, drop=30, seed=2),
    ),  # fmt: skip
    "varlen": _p(batch=2, seqlen_q=(30, 41), seqlen_k=(30, 41), head_dim_qk=20, head_dim_v=3),
}
# query 0's only slot names block 1 (after it): a row that sees nothing
EMPTY_ROW = _p(seqlen_q=20, seqlen_k=20, sparsity=Sparsity("topk", 1, 16, topk=1, seed=0))


@pytest.fixture(scope="module")
def results():
    pytest.importorskip("triton")
    pytest.importorskip("einops")
    pytest.importorskip("fla")
    return run_problems_in_child(_RUN, {**PASSING, "empty_row": EMPTY_ROW}, CUDA)


def test_the_problems_are_what_they_say():
    """EMPTY_ROW is covered and query 0 sees no key in the model; every PASSING row sees one."""
    assert _capability("cpu").excludes(EMPTY_ROW) is None
    assert not allowed_mask(EMPTY_ROW, 20, 20)[0].any()
    assert EMPTY_ROW.sparsity.topk_slots(20, 20)[0] == (1,)
    for name, p in PASSING.items():
        assert _capability("cpu").excludes(p) is None, name
        assert all(allowed_mask(p, s, s).any(dim=1).all() for s in p.seqlens_q), name
    assert PASSING["topk_invalid_slots"].sparsity.topk_slots(40, 40) == ((-1, -1, 0), (1, 2, -1), (2, 0, 3))


@pytest.mark.slow  # the module fixture runs every problem in a child process: ~25 s on the interpreter
@pytest.mark.parametrize("name", sorted(PASSING))
def test_small_problems_pass(results, name):
    r = results[name]
    assert r["status"] == "passed", r


@pytest.mark.slow
def test_a_row_that_sees_nothing_gets_nan(results):
    """The finding: O is NaN on the empty row (0/0, parallel.py:286), every gradient is right."""
    r = results["empty_row"]
    assert r["status"] == "failed", r
    assert {(o, g) for o, g, _ in r["failed"]} == {("o", "nonfinite")}, r
