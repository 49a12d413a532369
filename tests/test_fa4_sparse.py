"""The FA4 block-sparse adapter (kernels/fa4_sparse.py) without FA4: its capability and
refusals, and its block-sparse tensors read back by an interpreter of what FA4 4.0.0b40's SM90
kernels do with them, checked against the Problem's own mask over drawn problems. The kernels'
reading, as the interpreter models it (file:line in kernels/fa4_sparse.py's contract comment):
forward, query row i reads the lists of sparse query block (i // tile_m) // (block_q // tile_m),
walks each list last entry first, applies FA4's causal/local rule to every listed block and the
seqlen_k bound only to the first block walked of each list; backward, key block n reads its
lists of sparse query blocks, runs query tiles e * factor + s below ceil(seqlen_q / tile_m),
with the causal/local rule and the seqlen bound on every block. A pair reached twice would be
counted twice (softmax weight, dK/dV/dQ sums): the interpreter counts and refuses it."""

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from difftest.errors import InputError
from difftest.execute import adapter as registry
from difftest.judge.runner import run_case
from difftest.kernels.fa4 import Fa4Adapter, Fa4Call
from difftest.kernels.fa4_sparse import (
    CAPABILITY,
    DENSE_SIZE,
    SPARSE_SIZES,
    BlockLists,
    Fa4BlockSparse,
    Fa4SparseAdapter,
    api_reason,
)
from difftest.model.problem import Problem
from difftest.model.sparsity import Sparsity
from difftest.oracles.reference import allowed_mask
from difftest.strategies.edges import edge_problems
from difftest.strategies.problems import problems

H = dict(dtype="float16", head_dim_qk=64, head_dim_v=64)


# ----------------------------------------------------------------------------- the interpreter
def fa4_rule(call: Fa4Call, sq: int, sk: int, cols: int) -> torch.Tensor:
    """[sq, cols] bool: FA4's causal/local rule for the call (no seqlen bound), bottom-right,
    after its _resolve_causal_local_window (interface.py:279-300, no mask_mod)."""
    wl, wr = call.window_size
    causal = call.causal
    if wl is not None and wr is not None and wl < 0 and wr < 0:
        wl = wr = None
    if causal:
        wr = 0
    i = torch.arange(sq).unsqueeze(1) + sk - sq
    j = torch.arange(cols).unsqueeze(0)
    ok = torch.ones(sq, cols, dtype=torch.bool)
    if wr is not None:
        ok &= j <= i + wr
    if wl is not None:
        ok &= j >= i - wl
    return ok


def _lists(t: BlockLists, rows: int, cols: int) -> list[tuple[list[int], list[int]]]:
    """Per row (mask entries, full entries), after the checks FA4's normalisation makes and
    the ones it assumes (block_sparsity.py: int32, shapes; entries in range, no repeats)."""
    assert t.mask_cnt.dtype == t.mask_idx.dtype == t.full_cnt.dtype == t.full_idx.dtype == torch.int32
    assert tuple(t.mask_cnt.shape) == tuple(t.full_cnt.shape) == (1, 1, rows)
    assert t.mask_idx.shape[:3] == t.full_idx.shape[:3] == (1, 1, rows) and t.mask_idx.shape[3] <= cols
    for x in (t.mask_cnt, t.mask_idx, t.full_cnt, t.full_idx):  # FA4 binds the last dim as stride 1
        assert x.is_contiguous(), f"strides {x.stride()} for shape {tuple(x.shape)}: FA4 refuses them"
    out = []
    for r in range(rows):
        row = []
        for cnt, idx in ((t.mask_cnt, t.mask_idx), (t.full_cnt, t.full_idx)):
            n = int(cnt[0, 0, r])
            assert 0 <= n <= idx.shape[3], f"row {r}: count {n}"
            entries = idx[0, 0, r, :n].tolist()
            assert all(0 <= e < cols for e in entries), f"row {r}: entries {entries} outside 0..{cols - 1}"
            row.append(entries)
        out.append((row[0], row[1]))
    return out


def forward_reads(t: BlockLists, call: Fa4Call, sq: int, sk: int, tile_m: int) -> torch.Tensor:
    """[sq, sk] int: how many times FA4's SM90 forward counts each (query, key) pair."""
    bq, bk = t.block_size
    assert bq % tile_m == 0
    nq, nk = -(-sq // bq), -(-sk // bk)
    rule = fa4_rule(call, sq, sk, nk * bk)
    seen = torch.zeros(sq, nk * bk, dtype=torch.uint8)
    lists = _lists(t, nq, nk)
    for m_block in range(-(-sq // tile_m)):
        r0, r1 = m_block * tile_m, min(sq, (m_block + 1) * tile_m)
        for entries in lists[m_block // (bq // tile_m)]:
            for walked, n in enumerate(reversed(entries)):  # last entry first
                cols = slice(n * bk, (n + 1) * bk)
                ok = rule[r0:r1, cols].clone()
                if walked == 0:  # mask_seqlen=True on the first block walked of each list only
                    ok &= torch.arange(n * bk, (n + 1) * bk) < sk
                seen[r0:r1, cols] += ok
    assert not seen[:, sk:].any(), "the forward reads keys past seqlen_k"
    return seen[:, :sk]


def backward_reads(t: BlockLists, call: Fa4Call, sq: int, sk: int, tile_m: int) -> torch.Tensor:
    """[sq, sk] int: how many times FA4's SM90 backward counts each (query, key) pair."""
    bq, bk = t.block_size
    assert bq % tile_m == 0
    factor, nq, nk = bq // tile_m, -(-sq // bq), -(-sk // bk)
    m_block_max = -(-sq // tile_m)
    rule = fa4_rule(call, sq, sk, sk)
    seen = torch.zeros(sq, sk, dtype=torch.uint8)
    for n, entries in enumerate(_lists(t, nk, nq)):
        cols = slice(n * bk, min(sk, (n + 1) * bk))
        for e in entries[0] + entries[1]:
            for m_block in range(e * factor, (e + 1) * factor):
                if m_block < m_block_max:
                    rows = slice(m_block * tile_m, min(sq, (m_block + 1) * tile_m))
                    seen[rows, cols] += rule[rows, cols]
    return seen


def check(p: Problem, tiles=(64, 128)):
    """FA4's reading of the adapter's tensors is the Problem's mask, forward and backward,
    at each tile_m FA4 may pick; full blocks are whole (no mask_mod needed there)."""
    t = Fa4BlockSparse.of(p)
    call = Fa4Call.of(p, False)
    (sq,), (sk,) = set(p.seqlens_q), set(p.seqlens_k)
    want = allowed_mask(p, sq, sk).to(torch.uint8)
    for tile_m in tiles:
        for what, got in (
            ("forward", forward_reads(t.fwd, call, sq, sk, tile_m)),
            ("backward", backward_reads(t.bwd, call, sq, sk, tile_m)),
        ):
            assert got.numel() == 0 or got.max() <= 1, f"{what}: a pair counted twice ({p.short()})"
            assert torch.equal(got, want), f"{what}, tile_m={tile_m}: {int((got != want).sum())} pairs differ"
    bq, bk = t.fwd.block_size
    pad = torch.ones(-(-sq // bq) * bq, -(-sk // bk) * bk, dtype=torch.bool)
    pad[:sq, :sk] = want.bool()
    for qb, (_, full) in enumerate(_lists(t.fwd, -(-sq // bq), -(-sk // bk))):
        for n in full:
            assert pad[qb * bq : (qb + 1) * bq, n * bk : (n + 1) * bk].all(), f"full block ({qb}, {n}) is partial"


# ----------------------------------------------------------------------------- drawn problems
@settings(max_examples=60, database=None, derandomize=True, suppress_health_check=list(HealthCheck), deadline=None)
@given(problems(CAPABILITY, "gpu", max_seqlen=600, new_compile_p=1.0), st.sampled_from(SPARSE_SIZES))
def test_fa4_reads_the_problems_mask_forward_and_backward(p, size):
    check(p)
    if p.sparsity is not None:  # the same selection at the other block size, top-k included
        check(p.replace(sparsity=replace(p.sparsity, block_q=size[0], block_k=size[1])))


CASES = [
    Problem(seqlen_q=300, seqlen_k=400, causal=True, sparsity=Sparsity("block", 128, 128, drop=40, seed=2), **H),
    Problem(seqlen_q=517, seqlen_k=300, window_left=70, window_right=5, sparsity=Sparsity("block", 256, 128), **H),
    Problem(seqlen_q=260, seqlen_k=390, sparsity=Sparsity("topk", 128, 128, topk=5, invalid=30, dup=40, seed=1), **H),
    Problem(seqlen_q=200, seqlen_k=200, window_left=-3, window_right=-2, **H),  # crossed: nothing visible
    Problem(seqlen_q=129, seqlen_k=257, window_left=3, window_right=-1, causal=True, **H),
    Problem(seqlen_q=390, seqlen_k=391, sparsity=Sparsity("block", 256, 128, drop=50, empty=1, seed=9), **H),
]


@pytest.mark.parametrize("p", CASES, ids=lambda p: p.short())
def test_fa4_reads_the_problems_mask_on_named_cases(p):
    assert CAPABILITY.covers(p.validate())
    check(p)


def test_fa4_reads_the_problems_mask_on_the_gpu_edge_corpus():
    corpus = edge_problems(CAPABILITY, "gpu")
    assert sum(p.sparse for p in corpus) >= 10
    for p in corpus:
        check(p, tiles=(64,) if p.head_dim_qk > 64 else (128,))  # the backward's tile_m (config.py:2994-3011)


def test_draws_reach_block_masks_topk_and_every_declared_size():
    seen = set()

    @settings(max_examples=150, database=None, derandomize=True, suppress_health_check=list(HealthCheck), deadline=None)
    @given(problems(CAPABILITY, "gpu", max_seqlen=700, new_compile_p=1.0))
    def draw(p):
        assert CAPABILITY.covers(p)
        if p.sparsity is not None:
            seen.add((p.sparsity.kind, p.sparsity.block_q, p.sparsity.block_k))

    draw()
    assert {(k, *s) for k in ("block", "topk") for s in SPARSE_SIZES} <= seen


# ----------------------------------------------------------------------------- it can fail
def _noncausal_tail():
    # no causal bound to hide keys past seqlen_k: only the seqlen mask on the tail block does
    return Problem(seqlen_q=130, seqlen_k=300, sparsity=Sparsity("block", 128, 128), **H)


def _reorder(t: BlockLists, descending: bool) -> BlockLists:
    idx = t.mask_idx.clone()
    for r in range(idx.shape[2]):
        n = int(t.mask_cnt[0, 0, r])
        idx[0, 0, r, :n] = idx[0, 0, r, :n].sort(descending=descending).values
    return replace(t, mask_idx=idx)


def test_the_interpreter_refuses_a_tail_block_listed_first():
    """FA4 bounds the keys by seqlen_k on the first block it walks of a list only: listed in
    descending order, the tail block is walked last and its keys past the end are read."""
    p = _noncausal_tail()
    t, call = Fa4BlockSparse.of(p), Fa4Call.of(p, False)
    assert int(t.fwd.mask_cnt[0, 0, 0]) + int(t.fwd.full_cnt[0, 0, 0]) == 3
    merged = replace(  # every block in the mask list, as a translation without full blocks would
        t.fwd,
        mask_cnt=t.fwd.mask_cnt + t.fwd.full_cnt,
        mask_idx=torch.arange(3, dtype=torch.int32).expand(1, 1, 2, 3).contiguous(),
        full_cnt=torch.zeros_like(t.fwd.full_cnt),
    )
    assert torch.equal(forward_reads(merged, call, 130, 300, 128), allowed_mask(p, 130, 300).to(torch.uint8))
    with pytest.raises(AssertionError, match="past seqlen_k"):
        forward_reads(_reorder(merged, descending=True), call, 130, 300, 128)


def test_the_interpreter_sees_untransposed_backward_lists_and_lost_full_blocks():
    p = Problem(seqlen_q=260, seqlen_k=520, sparsity=Sparsity("block", 128, 128, drop=50, seed=4), **H)
    t, call = Fa4BlockSparse.of(p), Fa4Call.of(p, False)
    want = allowed_mask(p, 260, 520).to(torch.uint8)
    untransposed = replace(t.fwd)  # the forward's lists handed to the backward
    with pytest.raises(AssertionError):
        assert torch.equal(backward_reads(untransposed, call, 260, 520, 64), want)
    no_full = replace(t.fwd, full_cnt=torch.zeros_like(t.fwd.full_cnt))
    assert t.fwd.full_cnt.sum() > 0
    assert not torch.equal(forward_reads(no_full, call, 260, 520, 128), want)


def test_the_interpreter_counts_a_block_listed_twice():
    p = Problem(seqlen_q=128, seqlen_k=256, sparsity=Sparsity("block", 128, 128), **H)
    t, call = Fa4BlockSparse.of(p), Fa4Call.of(p, False)
    twice = replace(t.fwd, mask_cnt=torch.ones_like(t.fwd.mask_cnt), mask_idx=torch.zeros_like(t.fwd.mask_idx))
    # block 0 both partial and full: the list gives it twice
    twice = replace(twice, full_cnt=torch.full_like(t.fwd.full_cnt, 2))
    assert forward_reads(twice, call, 128, 256, 128).max() == 2


# the shrunk problems of the H100 campaigns of 2026-12-07 (FA4 4.0.0b40 and 4.0.0b25): FA4 refused
# the backward lists, a transposed view's argsort with stride ceil(seqlen_k / 128) on the last dim
REFUSED = [
    Problem(
        dtype="float16",
        seqlen_q=129,
        seqlen_k=164,
        heads_q=6,
        heads_kv=1,
        head_dim_qk=24,
        head_dim_v=16,
        causal=True,
        window_left=1,
        sparsity=Sparsity("block", 128, 128, drop=50, empty=1, seed=24028),
    ),
    Problem(
        dtype="float16",
        seqlen_q=185,
        seqlen_k=481,
        heads_q=16,
        heads_kv=1,
        head_dim_qk=80,
        head_dim_v=80,
        window_left=-2,
        window_right=0,
        sparsity=Sparsity("block", 128, 128, drop=50, seed=48441),
    ),
    Problem(
        dtype="float16",
        seqlen_q=216,
        seqlen_k=331,
        heads_q=16,
        heads_kv=1,
        head_dim_qk=96,
        head_dim_v=96,
        window_right=0,
        sparsity=Sparsity("topk", 128, 128, topk=3, invalid=30, dup=30, seed=16867),
    ),
]


@pytest.mark.parametrize("p", REFUSED, ids=lambda p: p.short())
def test_fa4_gets_row_major_block_lists(p, monkeypatch):
    """FA4 binds every count/index tensor with its last dim as a static stride 1
    (block_sparsity.py:663-671, to_cute_tensor(leading_dim=-1)); the backward lists, built from
    the transposed forward pattern, once kept the transpose's strides and FA4 refused them."""
    import sys
    import types
    from typing import NamedTuple

    class BlockSparseTensorsTorch(NamedTuple):  # FA4's, as block_sparsity.py declares it
        mask_block_cnt: torch.Tensor
        mask_block_idx: torch.Tensor
        full_block_cnt: torch.Tensor | None = None
        full_block_idx: torch.Tensor | None = None
        block_size: tuple[int, int] | None = None

    stub = types.ModuleType("flash_attn.cute.block_sparsity")
    stub.BlockSparseTensorsTorch = BlockSparseTensorsTorch
    for name in ("flash_attn", "flash_attn.cute"):
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name) or types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "flash_attn.cute.block_sparsity", stub)
    p = p.validate()
    assert CAPABILITY.covers(p) and -(-p.seqlen_q // 128) >= 2 and -(-p.seqlen_k // 128) >= 2
    for what, t in Fa4BlockSparse.of(p).kwargs("cpu").items():
        for name in ("mask_block_cnt", "mask_block_idx", "full_block_cnt", "full_block_idx"):
            x = getattr(t, name)
            assert x.stride(-1) == 1 and x.is_contiguous(), f"{what}.{name}: strides {x.stride()}"
    check(p)


def test_topk_duplicates_and_invalid_slots_never_reach_fa4():
    sp = Sparsity("topk", 128, 128, topk=6, invalid=30, dup=50, seed=3)
    p = Problem(seqlen_q=384, seqlen_k=640, sparsity=sp, **H)
    slots = sp.topk_slots(384, 640)
    assert any(len(set(r)) < len(r) for r in slots) and any(s < 0 or s >= 5 for r in slots for s in r)
    t = Fa4BlockSparse.of(p)
    for entries in _lists(t.fwd, 3, 5):
        listed = entries[0] + entries[1]
        assert len(listed) == len(set(listed))
    check(p)


# ----------------------------------------------------------------------------- capability, refusals
def test_capability_is_the_sm90_block_sparse_contract():
    c = CAPABILITY
    ok = Problem(seqlen_q=300, seqlen_k=300, causal=True, sparsity=Sparsity("block", 128, 128), **H).validate()
    assert c.covers(ok) and c.covers(ok.replace(sparsity=Sparsity("topk", 256, 128, topk=2)))
    assert c.covers(ok.replace(sparsity=None))
    assert not c.deterministic and c.aligns == ("bottom_right",) and c.gqa and c.sinks and c.softcap
    for bad, why in (
        (ok.replace(sparsity=Sparsity("block", 64, 64)), "block-sparse mask of 64x64"),
        (ok.replace(sparsity=Sparsity("block", 128, 96)), "block-sparse mask of 128x96"),
        (ok.replace(sparsity=Sparsity("topk", 1, 1, topk=3)), "top-k selection of 1x1"),
        (ok.replace(head_dim_qk=192, head_dim_v=192), "head_dim_qk 192"),
        (ok.replace(head_dim_v=136), "head_dim_v 136"),
        (ok.replace(batch=2, seqlen_q=(100, 50), seqlen_k=(100, 60)), "varlen"),
        (ok.replace(dtype="float32"), "dtype"),
        (ok.replace(seqlen_q=100, seqlen_k=300, align="top_left"), "alignment"),
    ):
        assert why in (c.excludes(bad.validate()) or ""), (bad.short(), c.excludes(bad))


def test_refusals_outside_the_capability_are_input_errors():
    v = Problem(batch=2, seqlen_q=(100, 50), seqlen_k=(100, 60), sparsity=Sparsity("block", 128, 128), **H)
    with pytest.raises(InputError, match="dense batches only"):
        Fa4BlockSparse.of(v.validate())
    with pytest.raises(InputError, match="64x64 blocks"):
        Fa4BlockSparse.of(Problem(seqlen_q=64, seqlen_k=64, sparsity=Sparsity("block", 64, 64), **H).validate())


def test_a_release_without_the_backward_tensors_is_unavailable():
    def b9(q, k, v, softmax_scale=None, causal=False, mask_mod=None, full_block_cnt=None, block_size=None):
        """4.0.0b9's shape: forward block-sparse arguments only."""

    def b40(q, k, v, causal=False, block_sparse_tensors=None, block_sparse_tensors_bwd=None):
        """4.0.0b11 and later."""

    assert "block_sparse_tensors_bwd" in api_reason(b9) and api_reason(b40) is None


def test_dense_problems_run_the_block_sparse_path_with_every_block_listed():
    p = Problem(seqlen_q=300, seqlen_k=200, **H).validate()
    t = Fa4BlockSparse.of(p)
    assert t.fwd.block_size == DENSE_SIZE
    assert int(t.fwd.full_cnt.sum() + t.fwd.mask_cnt.sum()) == 3 * 2 and int(t.fwd.mask_cnt.sum()) == 0
    assert Fa4Adapter().call_extras(None) == {}  # the fa4 / fa4-fast adapters hand FA4 nothing more


def test_registered_in_pyproject_and_unavailable_here():
    eps = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["entry-points"]
    registry.register("fa4-sparse", eps["difftest.kernels"]["fa4-sparse"])
    k = registry.get("fa4-sparse")
    assert isinstance(k, Fa4SparseAdapter) and k.name == "fa4-sparse" and k.capability == CAPABILITY
    if not torch.cuda.is_available():
        assert "CUDA" in k.available()


# ----------------------------------------------------------------------------- on the H100
@pytest.mark.gpu
@pytest.mark.parametrize("p", CASES, ids=lambda p: p.short())
def test_fa4_sparse_passes_the_gates_on_the_named_cases(p):
    k = Fa4SparseAdapter()
    if k.available():
        pytest.skip(k.available())
    case = run_case(k, p.replace(heads_q=4, heads_kv=2).validate())
    assert case.status == "passed", case.render()
