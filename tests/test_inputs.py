"""Inputs: same Problem -> same bytes in another process; shapes and dtypes per layout;
each value distribution produces what its name claims."""

import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch

from difftest.model.inputs import TORCH_DTYPES, Inputs, make_inputs
from difftest.model.problem import Problem
from difftest.oracles.reference import reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBLEMS = [
    Problem(batch=2, seqlen_q=5, seqlen_k=7, heads_q=4, heads_kv=2, head_dim_qk=16, head_dim_v=8, dtype="float16"),
    Problem(
        batch=3,
        seqlen_q=(4, 0, 6),
        seqlen_k=(0, 3, 5),
        heads_q=3,
        heads_kv=1,
        head_dim_qk=8,
        head_dim_v=8,
        dtype="bfloat16",
        sinks=True,
        sink_center=-1.0,
        pad_tail=3,
        seed=12345,
    ),
    Problem(seqlen_q=9, seqlen_k=9, values="outlier_channels", value_scale=6.0, head_dim_qk=40, seed=7),
    Problem(values="negative_lse", value_scale=2.0, seed=2**40),
    Problem(values="mixed_do", value_scale=2.0, dtype="float16"),
    Problem(values="near_constant", value_scale=1.0),
    Problem(values="scaled", value_scale=4.0, dtype="bfloat16"),
]


def _fingerprint(inp: Inputs) -> dict:
    """digest() plus an independent sha256 of each tensor's raw bytes."""
    raw = {}
    for n in Inputs.TENSORS:
        t = getattr(inp, n)
        raw[n] = None if t is None else hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
    return {"digest": inp.digest(), "raw": raw}


_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from tests.test_inputs import _fingerprint
print(json.dumps([_fingerprint(make_inputs(Problem.from_json(s))) for s in json.loads(sys.stdin.read())]))
"""


def test_inputs_are_byte_identical_in_another_process():
    here = [_fingerprint(make_inputs(p)) for p in PROBLEMS]
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(root=ROOT)],
        input=json.dumps([p.to_json() for p in PROBLEMS]),
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=120,
    )
    there = json.loads(out.stdout)
    assert there == here
    # and the fingerprint is sensitive: different problems give different digests
    assert len({f["digest"] for f in here}) == len(PROBLEMS)


def test_the_digest_is_of_the_inputs_as_drawn_even_if_they_are_written_before_it_is_read():
    """digest_later copies the bytes at once and hashes them beside the case (runner.run_case):
    a kernel that writes into its inputs must not change the recorded digest."""
    p = PROBLEMS[1]
    x = make_inputs(p)
    want = _fingerprint(x)["digest"]
    pending = x.digest_later()
    x.q.fill_(7.0)
    x.sink.zero_()
    assert pending() == want != x.digest()


def test_same_problem_same_bytes_different_seed_different_bytes():
    p = PROBLEMS[0]
    a, b = make_inputs(p), make_inputs(p)
    for n in ("q", "k", "v", "do"):
        assert torch.equal(getattr(a, n), getattr(b, n))
    c = make_inputs(p.replace(seed=p.seed + 1))
    assert c.digest() != a.digest()
    assert not torch.equal(c.q, a.q)


@pytest.mark.parametrize("p", PROBLEMS[:2], ids=lambda p: p.short())
def test_shapes_and_dtypes_packed(p):
    x = make_inputs(p)
    dt = TORCH_DTYPES[p.dtype]
    assert x.q.shape == (p.total_q, p.heads_q, p.head_dim_qk) and x.q.dtype == dt
    assert x.k.shape == (p.total_k, p.heads_kv, p.head_dim_qk) and x.k.dtype == dt
    assert x.v.shape == (p.total_k, p.heads_kv, p.head_dim_v) and x.v.dtype == dt
    assert x.do.shape == (p.total_q, p.heads_q, p.head_dim_v) and x.do.dtype == dt
    assert x.cu_seqlens_q.dtype == torch.int32 and x.cu_seqlens_q.tolist() == list(p.cu_seqlens_q)
    assert x.cu_seqlens_k.dtype == torch.int32 and x.cu_seqlens_k.tolist() == list(p.cu_seqlens_k)
    if p.sinks:
        assert x.sink.shape == (p.heads_q,) and x.sink.dtype == torch.float32
        assert abs(x.sink.mean().item() - p.sink_center) < 2.5
    else:
        assert x.sink is None
    assert x.device == torch.device("cpu")
    up = x.upcast()
    assert up.q.dtype == torch.float64 and torch.equal(up.q.to(dt), x.q)
    assert up.cu_seqlens_q.dtype == torch.int32


def test_bshd_views_dense_and_refuses_varlen():
    p = PROBLEMS[0]
    x = make_inputs(p)
    assert x.bshd("q").shape == (2, 5, 4, 16)
    assert x.bshd("k").shape == (2, 7, 2, 16)
    assert x.bshd("v").shape == (2, 7, 2, 8)
    assert x.bshd("do").shape == (2, 5, 4, 8)
    assert torch.equal(x.bshd("q")[1, 2], x.q[5 + 2])  # batch 1 starts at token 5
    vx = make_inputs(PROBLEMS[1])
    with pytest.raises(ValueError, match="varlen"):
        vx.bshd("q")


def test_make_inputs_validates():
    from difftest.model.problem import ProblemError

    with pytest.raises(ProblemError) as info:
        make_inputs(Problem(heads_q=3, heads_kv=2))
    assert info.value.field == "heads_kv"


# ------------------------------------------------------------------ value distributions
def _logits(p, x):
    """Scaled q.k for every (query, key) pair of a dense single-sequence problem (f64)."""
    q = x.q.double()
    k = x.k.double().repeat_interleave(p.group, dim=1)
    return torch.einsum("qhd,khd->hqk", q, k) * p.scale


def test_normal_is_standard_normal():
    x = make_inputs(Problem(seqlen_q=64, seqlen_k=64, head_dim_qk=64, head_dim_v=64))
    for n in ("q", "k", "v", "do"):
        t = getattr(x, n).double()
        assert abs(t.mean().item()) < 0.05 and 0.95 < t.std().item() < 1.05


def test_scaled_gives_large_logits():
    base = Problem(seqlen_q=32, seqlen_k=32, head_dim_qk=32)
    p = base.replace(values="scaled", value_scale=4.0)
    xn, xs = make_inputs(base), make_inputs(p)
    assert 3.8 < xs.q.double().std().item() < 4.2 and 3.8 < xs.k.double().std().item() < 4.2
    ln, ls = _logits(base, xn).abs().max().item(), _logits(p, xs).abs().max().item()
    assert ls > 10 * ln and ls > 50
    # peaked softmax: the largest probability of most rows is close to 1
    pmax = torch.softmax(_logits(p, xs), dim=-1).amax(dim=-1)
    assert (pmax > 0.9).float().mean().item() > 0.5


def test_near_constant_keys_and_values_barely_vary_across_tokens():
    x = make_inputs(Problem(seqlen_q=16, seqlen_k=48, values="near_constant", value_scale=1.0))
    for n in ("k", "v"):
        t = getattr(x, n).double()
        spread = t.std(dim=0).max().item()  # across tokens
        assert spread < 5e-3 and t.abs().mean().item() > 0.3
    p = torch.softmax(_logits(x.problem, x), dim=-1)
    assert (p.amax(dim=-1) - p.amin(dim=-1)).max().item() < 0.1 / 48  # flat rows: every P close to 1/48


def test_outlier_channels_are_few_shared_and_large():
    p = Problem(seqlen_q=64, seqlen_k=64, head_dim_qk=64, values="outlier_channels", value_scale=20.0)
    x = make_inputs(p)
    sq = x.q.double().std(dim=(0, 1))
    sk = x.k.double().std(dim=(0, 1))
    big_q, big_k = set((sq > 5).nonzero().flatten().tolist()), set((sk > 5).nonzero().flatten().tolist())
    assert len(big_q) == 64 // 16 and big_q == big_k
    assert sq[sorted(big_q)].min().item() > 15 and sq[sq <= 5].max().item() < 1.5


def test_negative_lse_gives_very_negative_lse():
    p = Problem(seqlen_q=16, seqlen_k=16, head_dim_qk=32, values="negative_lse", value_scale=3.0)
    lse = reference(make_inputs(p)).lse
    assert lse.max().item() < -20
    normal = reference(make_inputs(p.replace(values="normal"))).lse
    assert normal.min().item() > -5


def test_mixed_do_spreads_row_magnitudes():
    p = Problem(seqlen_q=128, seqlen_k=8, heads_q=2, values="mixed_do", value_scale=3.0)
    x = make_inputs(p)
    norms = x.do.double().norm(dim=-1).flatten()
    assert norms.max().item() / norms.min().item() > 1e3
    assert torch.equal(x.q, make_inputs(p.replace(values="normal")).q)  # only dO changes
    base = make_inputs(p.replace(values="normal")).do.double().norm(dim=-1).flatten()
    assert (base.max() / base.min()).item() < 10
