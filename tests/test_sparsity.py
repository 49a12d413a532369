"""Block-sparse masks and top-k selections (difftest/model/sparsity.py): the Problem
field, its semantics in the truth and the yardsticks, the kernel-side rule kept apart, the
strategies' edges, coverage, the edge corpus, shrinking, and the mutants only it kills."""

import json
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from difftest.judge.runner import run_case
from difftest.kernels.blockwise import CAPABILITY, SPARSE_CAPABILITY, SparseBlockwiseAttention
from difftest.kernels.masking import visible_keys
from difftest.kernels.mutants import MUTANTS
from difftest.kernels.variants import VARIANTS
from difftest.model.capability import Capability
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem, ProblemError
from difftest.model.sparsity import Sparsity
from difftest.oracles import chunked_reference, flash_style_reference, reference
from difftest.oracles.reference import allowed_mask
from difftest.search.shrinking import complexity, simplify
from difftest.strategies.configurations import dimensions, realise, values_of
from difftest.strategies.coverage import expected_features, features
from difftest.strategies.edges import edge_problems
from difftest.strategies.problems import problems
from difftest.strategies.sparsity import sparsity_class

BLOCK = Sparsity("block", 4, 8, drop=50, empty=1, seed=3)
TOPK = Sparsity("topk", 1, 4, topk=3, invalid=30, dup=30, empty=2, seed=5)
SPARSE_NAMES = sorted(n for n in MUTANTS if n.startswith("sparse"))


# ----------------------------------------------------------------------------- the model
def test_json_round_trip_and_json_without_it_reads_as_before():
    p = Problem(seqlen_q=19, seqlen_k=23, causal=True, sparsity=TOPK).validate()
    d = json.loads(p.to_json())
    assert d["sparsity"]["kind"] == "topk" and Problem.from_json(p.to_json()) == p
    assert "sparsity" not in Problem().to_dict()
    assert Problem.from_dict({**Problem().to_dict()}).sparsity is None
    assert "sparse:topk1x4-k3-inv30-dup30-empty2@5" in p.short()


@pytest.mark.parametrize(
    "bad,field",
    [
        (dict(kind="diagonal"), "kind"),
        (dict(block_q=0), "block_q"),
        (dict(drop=101), "drop"),
        (dict(kind="topk", topk=0), "topk"),
        (dict(kind="topk", topk=2, invalid=60, dup=50), "dup"),
        (dict(kind="block", topk=3), "topk"),
        (dict(kind="topk", topk=1, drop=5), "drop"),
    ],
)
def test_each_bad_sparsity_field_is_named(bad, field):
    with pytest.raises(ProblemError) as info:
        Problem(sparsity=bad).validate()
    assert info.value.field == "sparsity" and field in str(info.value)


def test_the_pattern_is_pinned_and_the_same_from_json():
    """The pattern is derived, not stored: the same bits on any machine (a SHA-512 seeded stream),
    pinned here so that a change of the derivation is seen (old reproducers would change mask)."""
    assert BLOCK.block_pattern(13, 17) == (
        (False, True, True),
        (True, True, True),
        (False, False, True),
        (False, False, False),
    )  # empty=1: the last query block
    assert TOPK.topk_slots(6, 9)[:3] == ((3, -1, 3), (0, 1, -1), (0, 2, 1))
    again = Problem.from_json(Problem(sparsity=TOPK).to_json()).sparsity
    assert again.topk_slots(19, 23) == TOPK.topk_slots(19, 23)


def test_topk_reaches_invalid_duplicate_and_empty_slots_and_counts_a_duplicate_once():
    sp = Sparsity("topk", 1, 1, topk=6, invalid=40, dup=40, empty=3, seed=9)
    slots = sp.topk_slots(40, 10)
    flat = [x for r in slots for x in r]
    assert -1 in flat and 10 in flat  # both invalid forms: -1 and one past the last block
    assert sum(all(x < 0 or x >= 10 for x in r) for r in slots) >= 3  # empty rows
    assert any(len({x for x in r if 0 <= x < 10}) < sum(0 <= x < 10 for x in r) for r in slots)  # duplicates
    for row, sel, mult in zip(slots, sp.selected(40, 10), sp.multiplicity(40, 10)):
        assert [j for j in range(10) if sel[j]] == sorted({x for x in row if 0 <= x < 10})
        assert max(mult) == max([row.count(x) for x in row if 0 <= x < 10], default=0)


def test_block_edges_drop_everything_or_nothing():
    assert all(map(all, Sparsity("block", 4, 4, drop=0).block_pattern(9, 9)))
    assert not any(map(any, Sparsity("block", 4, 4, drop=100).block_pattern(9, 9)))
    empty = Sparsity("block", 4, 4, empty=2, seed=1).block_pattern(12, 12)
    assert sum(not any(r) for r in empty) == 2


# ----------------------------------------------------------------------------- semantics
CASES = [
    Problem(seqlen_q=19, seqlen_k=23, heads_q=2, causal=True, sparsity=TOPK),
    Problem(batch=2, seqlen_q=(13, 0), seqlen_k=(17, 5), heads_q=2, sinks=True, sparsity=BLOCK),
    Problem(seqlen_q=21, seqlen_k=14, heads_q=4, heads_kv=2, window_left=5, sparsity=BLOCK),
    Problem(seqlen_q=10, seqlen_k=31, sparsity=Sparsity("topk", 3, 5, topk=9, dup=80, seed=2)),
]


@pytest.mark.parametrize("p", CASES, ids=lambda p: p.short())
def test_oracle_mask_and_kernel_mask_agree_written_apart(p):
    for sq, sk in zip(p.seqlens_q, p.seqlens_k):
        assert torch.equal(allowed_mask(p, sq, sk), visible_keys(p, sq, sk))


def _brute(p: Problem) -> torch.Tensor:
    """[sq, sk] visible, one sequence, from the definition: causal/window AND the block's selection."""
    (sq,), (sk,) = p.seqlens_q[:1], p.seqlens_k[:1]
    sel = p.sparsity.selected(sq, sk)
    dense = allowed_mask(p.replace(sparsity=None), sq, sk)
    return torch.tensor(
        [
            [bool(dense[i, j]) and sel[i // p.sparsity.block_q][j // p.sparsity.block_k] for j in range(sk)]
            for i in range(sq)
        ]
    )


@pytest.mark.parametrize("p", [CASES[0], CASES[2], CASES[3]], ids=lambda p: p.short())
def test_the_mask_is_the_definition(p):
    assert torch.equal(allowed_mask(p, p.seqlens_q[0], p.seqlens_k[0]), _brute(p))


@pytest.mark.parametrize("p", CASES, ids=lambda p: p.short())
def test_truth_in_chunks_equals_autograd_and_the_yardstick_is_close(p):
    x = make_inputs(p)
    a, b, f = reference(x, "float64"), chunked_reference(x, "float64", chunk=3), flash_style_reference(x)
    for n in ("o", "lse", "dq", "dk", "dv") + (("dsink",) if p.sinks else ()):
        ta, tb = getattr(a, n), getattr(b, n)
        assert torch.equal(torch.isinf(ta), torch.isinf(tb)), n
        assert (ta - tb).nan_to_num().abs().max() < 1e-12, n
        assert (ta - getattr(f, n).double()).nan_to_num().abs().max() < 1e-4, n


def test_rows_with_no_selected_block_follow_the_empty_row_convention():
    p = Problem(seqlen_q=12, seqlen_k=12, heads_q=2, sparsity=Sparsity("topk", 1, 1, topk=2, empty=4, seed=1))
    empty = ~allowed_mask(p, 12, 12).any(dim=1)
    assert empty.sum() == 4
    t = chunked_reference(make_inputs(p), "float64")
    assert torch.isneginf(t.lse[empty]).all() and (t.o[empty] == 0).all() and (t.dq[empty] == 0).all()
    ts = chunked_reference(make_inputs(p.replace(sinks=True, sink_center=1.5)), "float64")
    sink = make_inputs(p.replace(sinks=True, sink_center=1.5)).sink.double()
    assert torch.allclose(ts.lse[empty].double(), sink.expand(12, 2)[empty].double())


def test_a_duplicate_counts_once_in_the_truth():
    """Top-k rows with duplicate slots give the truth of the same selection without them."""
    dup = Sparsity("topk", 1, 1, topk=5, dup=60, seed=4)
    p = Problem(seqlen_q=9, seqlen_k=9, sparsity=dup)
    mask = allowed_mask(p, 9, 9)
    assert any(max(m) > 1 for m in dup.multiplicity(9, 9))
    t = reference(make_inputs(p), "float64")
    x = make_inputs(p)
    s = (x.q.double()[:, 0] @ x.k.double()[:, 0].T) * p.scale
    pr = torch.softmax(s.masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0)
    assert torch.allclose(t.o[:, 0].double(), pr @ x.v.double()[:, 0], atol=1e-12)


# ----------------------------------------------------------------------------- capability
def test_capability_covers_only_declared_block_sizes():
    p = Problem(seqlen_q=8, seqlen_k=8, head_dim_qk=16, head_dim_v=16, sparsity=Sparsity("block", 16, 16))
    assert "block-sparse mask of 16x16 blocks not in none" in Capability().excludes(p)
    assert Capability(block_sparse=((16, 16),)).covers(p)
    assert "top-k" in Capability(block_sparse=((16, 16),)).excludes(
        p.replace(sparsity=Sparsity("topk", 16, 16, topk=1))
    )
    with pytest.raises(ValueError, match="block_sparse"):
        Capability(block_sparse=(16, 16))


# ----------------------------------------------------------------------------- strategies
_SETTINGS = settings(
    max_examples=250, database=None, derandomize=True, suppress_health_check=list(HealthCheck), deadline=None
)


@pytest.mark.slow
def test_draws_reach_every_sparse_edge_and_stay_inside_the_capability():
    seen = []

    @_SETTINGS
    @given(problems(SPARSE_CAPABILITY, "ci"))
    def draw(p):
        assert SPARSE_CAPABILITY.covers(p)
        seen.append(p)

    draw()
    got = set().union(*(features(p, SPARSE_CAPABILITY) for p in seen))
    want = {f for f in expected_features(SPARSE_CAPABILITY) if f.startswith("sparse:")}
    assert len(want) == 8 and want <= got, want - got


def test_a_kernel_without_sparse_sizes_is_never_drawn_one():
    @settings(max_examples=60, database=None, derandomize=True, suppress_health_check=list(HealthCheck), deadline=None)
    @given(problems(CAPABILITY, "ci"))
    def draw(p):
        assert p.sparsity is None

    draw()
    assert not any(p.sparse for p in edge_problems(CAPABILITY))
    assert "sparsity" not in [d.name for d in dimensions(CAPABILITY)]


def test_edge_corpus_and_configurations_hold_the_sparse_edges():
    corners = [p for p in edge_problems(SPARSE_CAPABILITY) if p.sparse]
    got = set().union(*(features(p, SPARSE_CAPABILITY) for p in corners))
    assert {f for f in expected_features(SPARSE_CAPABILITY) if f.startswith("sparse:")} <= got
    dim = next(d for d in dimensions(SPARSE_CAPABILITY) if d.name == "sparsity")
    for v in dim.values:
        p = realise({"sparsity": v}, SPARSE_CAPABILITY)
        assert p is not None and sparsity_class(p) == v and values_of(p, SPARSE_CAPABILITY, [dim])["sparsity"] == {v}


def test_shrinking_drops_the_mask_or_walks_it_to_the_smallest_that_fails():
    big = Problem(
        seqlen_q=40,
        seqlen_k=40,
        heads_q=2,
        heads_kv=2,
        sparsity=Sparsity("topk", 1, 16, topk=5, invalid=20, dup=30, empty=3, seed=77),
    )
    got, _ = simplify(big, lambda p: True, SPARSE_CAPABILITY)
    assert got.sparsity is None

    def needs_empty_row(p):
        return p.sparse and any(not r.any() for r in allowed_mask(p, p.seqlens_q[0], p.seqlens_k[0]))

    got, _ = simplify(big, needs_empty_row, SPARSE_CAPABILITY)
    assert got.sparsity is not None and got.sparsity.invalid == 0 and got.sparsity.dup == 0
    assert got.sparsity.topk == 1 and got.sparsity.seed == 0
    assert complexity(got) < complexity(big)


# ----------------------------------------------------------------------------- kernels
@pytest.mark.parametrize(
    "p", CASES + [e for e in edge_problems(SPARSE_CAPABILITY) if e.sparse][::7], ids=lambda p: p.short()
)
def test_the_sparse_blockwise_kernel_and_its_variant_pass(p):
    for k in (SparseBlockwiseAttention(), VARIANTS["sparse-tiles-reversed"].factory()):
        sp = p.sparsity  # the blockwise kernel serves any block size: the CASES' ones declared too
        size = ((sp.block_q, sp.block_k),)
        k.capability = replace(
            SPARSE_CAPABILITY,
            block_sparse=SPARSE_CAPABILITY.block_sparse + size,
            topk_sparse=SPARSE_CAPABILITY.topk_sparse + size,
        )
        case = run_case(k, p)
        assert case.status == "passed", case.render()


@pytest.mark.parametrize("name", SPARSE_NAMES)
def test_each_sparse_mutant_fails_the_gates_on_its_own_example(name):
    """The faults the sparse dimension claims to catch: each mutant's sparse example fails a gate
    (or errors, the empty-row NaN) where the clean sparse kernel passes it."""
    m = MUTANTS[name]
    assert run_case(SparseBlockwiseAttention(), m.example).status == "passed"
    bad = run_case(m.make(), m.example)
    assert bad.status in ("failed", "error"), bad.render()
    assert bad.status == "error" or bad.failed_gates, bad.render()


@pytest.mark.parametrize("name", SPARSE_NAMES)
def test_sparse_mutants_hide_on_every_dense_problem(name):
    """Only the new dimension kills them: without a sparse mask each is the clean kernel."""
    p = MUTANTS[name].example.replace(sparsity=None)
    for q in (p, p.replace(causal=True, seqlen_q=30, seqlen_k=12)):
        assert run_case(MUTANTS[name].make(), q).status == "passed"


def test_sparse_mutants_exist_and_the_catalogue_names_their_class():
    assert SPARSE_NAMES == [
        "sparse-bwd-ignores-mask",
        "sparse-bwd-transposed",
        "sparse-empty-row-nan",
        "sparse-topk-dup-twice",
    ]
    assert all(MUTANTS[n].bug_class == "sparse" for n in SPARSE_NAMES)


# ----------------------------------------------------------------------------- FlexAttention
FLEX_CASES = [
    Problem(
        seqlen_q=300, seqlen_k=270, head_dim_qk=16, head_dim_v=16, sparsity=Sparsity("block", 128, 128, drop=50, seed=1)
    ),
    Problem(
        batch=2,
        seqlen_q=300,
        seqlen_k=270,
        head_dim_qk=16,
        head_dim_v=16,
        causal=True,
        sparsity=Sparsity("block", 128, 128, drop=30, empty=1, seed=2),
    ),
    Problem(
        batch=2,
        seqlen_q=40,
        seqlen_k=50,
        head_dim_qk=16,
        head_dim_v=16,
        sparsity=Sparsity("topk", 1, 1, topk=5, invalid=30, dup=30, empty=2, seed=3),
    ),
    Problem(
        batch=2,
        seqlen_q=(40, 0),
        seqlen_k=(50, 9),
        head_dim_qk=16,
        head_dim_v=16,
        sinks=True,
        sparsity=Sparsity("topk", 1, 64, topk=2, invalid=30, seed=3),
    ),
    Problem(
        batch=2,
        seqlen_q=(140, 20),
        seqlen_k=(150, 9),
        head_dim_qk=16,
        head_dim_v=16,
        window_left=30,
        sparsity=Sparsity("block", 128, 128, drop=30, seed=3),
    ),
]


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("p", FLEX_CASES, ids=lambda p: p.short())
def test_flex_sparse_forward_translation_matches_the_truth_on_cpu(p):
    """Flex has no backward on the CPU (torch 2.13): the translation (BlockMask, mask_mod,
    layouts) is checked through the eager forward; the gradients need the GPU."""
    from difftest.kernels.flex import FlexAdapter
    from difftest.model.inputs import lay_out

    k = FlexAdapter(sparse=True)
    assert k.capability.covers(p.validate())
    got, _ = k.translate(lay_out(make_inputs(p)), grad=False)
    t = chunked_reference(make_inputs(p), "float64")
    seen = torch.isfinite(t.lse)
    assert torch.equal(torch.isinf(got.lse), torch.isinf(t.lse))
    assert (got.o.double() - t.o).abs().max() < 1e-5
    assert (got.lse.double() - t.lse.double())[seen].abs().max() < 1e-5


def test_flex_block_mask_lists_the_selected_blocks_and_full_ones_only_where_whole():
    from difftest.kernels.flex import make_mask_mod, sparse_block_mask
    from difftest.kernels.masking import selected_blocks

    p = FLEX_CASES[1]
    mask_mod, n_keys = make_mask_mod(p)
    bm = sparse_block_mask(p, mask_mod, n_keys, 2, 300, 270)
    sel = selected_blocks(p, 300, 270)
    assert torch.equal(bm.to_dense()[0, 0].bool(), sel)
    full = torch.zeros_like(sel)
    for qb in range(sel.shape[0]):
        for j in bm.full_kv_indices[0, 0, qb, : int(bm.full_kv_num_blocks[0, 0, qb])].tolist():
            full[qb, j] = True
    assert torch.equal(full & ~sel, torch.zeros_like(sel)) and not full[:, -1].any()  # a 14-key tail block is partial


def test_a_finding_on_a_sparse_problem_says_it_needs_the_sparse_mask():
    """The signature's variations switch the sparse mask off: a sparse mutant's finding names
    ``sparse`` as a need, and a Problem without the mask escapes it."""
    from difftest.judge.runner import RunConfig
    from difftest.search.signature import derive, escapes

    m = MUTANTS["sparse-empty-row-nan"]
    k = m.make()
    cfg = RunConfig(determinism_runs=1)
    case = run_case(k, m.example, cfg)
    assert case.status == "failed"
    sig = derive(case, lambda q: run_case(k, q, cfg), SPARSE_CAPABILITY)
    assert ("sparse", True) in sig.needs
    assert any(not q.sparse for q in escapes(sig, m.example, SPARSE_CAPABILITY))


def test_a_file_cannot_ask_for_a_pattern_far_larger_than_its_scores():
    """The pattern is drawn in Python, one draw per cell: a reproducer's top-k of 4096 slots per
    token over a short key sequence is refused in one line, as an oversized Problem is."""
    from difftest.search.limits import check_problem_size

    small = Problem(seqlen_q=64, seqlen_k=64, sparsity=Sparsity("topk", 1, 1, topk=8))
    assert check_problem_size(small, "ci") is None
    huge = Problem(seqlen_q=16384, seqlen_k=2, sparsity=Sparsity("topk", 1, 1, topk=4096))
    assert "sparse pattern has 67108864 cells" in check_problem_size(huge, "gpu")


def test_the_selection_follows_the_runs_default_device():
    """Under --device cuda the blockwise kernels make their tiles on CUDA (the default device):
    the host-side selection indexed with device indices failed 45 of 1,301 sparse-tiles-reversed
    cases on the H100. Any non-CPU default device shows it here (meta)."""
    p = Problem(
        batch=1,
        seqlen_q=9,
        seqlen_k=7,
        heads_q=1,
        heads_kv=1,
        head_dim_qk=8,
        head_dim_v=8,
        dtype="float32",
        sparsity=dict(kind="topk", block_q=1, block_k=1, topk=2, seed=3),
    ).validate()
    k = SparseBlockwiseAttention()
    k.sparse_allowed(p, 0, 4, 0, 5, 9, 7, "bwd")  # the selection computed (and cached) on the host first,
    p.sparsity.allowed(9, 7)  # as the references do before the kernel runs
    with torch.device("meta"):
        tile = k.sparse_allowed(p, 0, 4, 0, 5, 9, 7, "bwd")
        rows = p.sparsity.allowed(9, 7, device="meta", rows=(2, 6))
    assert tile.device.type == "meta" and tile.shape == (4, 5)
    assert rows.device.type == "meta" and rows.shape == (4, 7)
