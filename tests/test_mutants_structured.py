"""Mutants that only the structured value kinds expose: every iid kind, at every dtype and
at the top of its scale ladder, passes them; the structured kinds kill them (a corner case
and, marked slow, a seeded campaign each way)."""

import pytest

from difftest.execute.adapter import narrow
from difftest.judge.runner import run_case
from difftest.kernels import mutants as catalogue
from difftest.kernels.blockwise import BlockwiseAttention
from difftest.model.problem import STRUCTURED_KINDS, VALUE_KINDS, Problem
from difftest.strategies.values import MAX_SCALE, SCALES

STRUCTURED_ONLY = sorted(m.name for m in catalogue.MUTANTS.values() if m.bug_class == "structured-values")
IID_KINDS = tuple(k for k in VALUE_KINDS if k not in STRUCTURED_KINDS)


def _tops(kinds, dtype):
    for kind in kinds:
        ladder = SCALES[kind][0]
        top = MAX_SCALE[dtype].get(kind)
        yield kind, max(s for s in ladder if top is None or s <= top)


def test_there_are_structured_only_mutants():
    assert "keys-shared-exponent" in STRUCTURED_ONLY


@pytest.mark.parametrize("name", STRUCTURED_ONLY)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_iid_kinds_at_their_largest_scale_do_not_expose_it(name, dtype):
    m = catalogue.MUTANTS[name]
    for kind, scale in _tops(IID_KINDS, dtype):
        p = Problem(batch=2, seqlen_q=17, seqlen_k=40, heads_q=2, heads_kv=1, head_dim_qk=32, head_dim_v=32,
                    dtype=dtype, values=kind, value_scale=scale, seed=3)
        got = run_case(m.make(), p)
        assert got.status == "passed", (kind, scale, got.render())


@pytest.mark.parametrize("name", STRUCTURED_ONLY)
def test_a_structured_kind_exposes_it_where_the_clean_kernel_passes(name):
    m = catalogue.MUTANTS[name]
    killed = []
    for dtype in ("float16",):
        for kind, scale in _tops(STRUCTURED_KINDS, dtype):
            p = Problem(batch=2, seqlen_q=17, seqlen_k=40, heads_q=2, heads_kv=1, head_dim_qk=32, head_dim_v=32,
                        dtype=dtype, values=kind, value_scale=scale, seed=3)
            assert run_case(BlockwiseAttention(), p).status == "passed", (kind, dtype)
            if run_case(m.make(), p).status == "failed":
                killed.append((kind, dtype))
    # float16: the sink's block rounds the other keys to ~0.1 while the fp16 yardstick stays
    # precise; a bf16 yardstick's own error at logits ~10^3 is as large as the fault
    assert ("massive_keys", "float16") in killed, killed


@pytest.mark.slow
@pytest.mark.parametrize("name", STRUCTURED_ONLY)
def test_campaigns_kill_it_with_structured_kinds_only(name, tmp_path):
    """The same seeded ci campaign: 120 examples of the iid kinds survive, the structured
    kind it is about (massive_keys) kills it within 120 examples."""
    from difftest.search.campaign import run_campaign

    def campaign(kinds, out):
        k = narrow(catalogue.MUTANTS[name].make(), values=kinds)
        return run_campaign(k, "ci", max_examples=120, time_budget=900, shrink_budget=5, edge_cases=False,
                            database=None, out_dir=out, seed=0)

    iid = campaign(IID_KINDS, tmp_path / "iid")
    assert not iid.failed and len(iid.cases) >= 80
    structured = campaign(("massive_keys",), tmp_path / "structured")
    assert structured.failed
    assert structured.failure.problem.values in STRUCTURED_KINDS
