"""TileOPs MHA and backward-only adapters: on CPU, with the TileOPs worker
replaced by a fake that records each request and answers from the float64 reference,
check what reaches GQADenseBwdOp (its own O/LSE convention: O in the Problem dtype, LSE
natural-log float32 [B, H, S]) and that the answer comes back in difftest's layout."""

import pytest
import torch

from difftest.kernels import tileops
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.reference import reference


class FakeWorker:
    """Answers gqa_fwd / gqa_bwd from the float64 reference, recording every request."""

    def __init__(self, problem):
        self.problem, self.requests = problem, []

    def call(self, req):
        self.requests.append(req)
        p = self.problem
        ref = reference(make_inputs(p), "float64")
        b, s = p.batch, p.seqlen_q

        def bshd(t, h):
            return t.view(b, s, h, t.shape[-1]).to(torch.float16 if p.dtype == "float16" else torch.bfloat16)

        if req["op"] == "gqa_fwd":
            return {"o": bshd(ref.o, p.heads_q), "lse": ref.lse.view(b, s, p.heads_q).permute(0, 2, 1).float()}
        assert req["op"] == "gqa_bwd"
        return {"dq": bshd(ref.dq, p.heads_q), "dk": bshd(ref.dk, p.heads_kv), "dv": bshd(ref.dv, p.heads_kv)}


def run(adapter, p, monkeypatch):
    fake = FakeWorker(p)
    monkeypatch.setattr(tileops, "get_worker", lambda: fake)
    inputs = make_inputs(p)
    return adapter.run(inputs), reference(inputs, "float64"), fake


GQA = Problem(
    batch=2,
    seqlen_q=70,
    seqlen_k=70,
    heads_q=4,
    heads_kv=2,
    head_dim_qk=48,
    head_dim_v=48,
    dtype="bfloat16",
    causal=True,
).validate()


def test_gqa_bwd_feeds_the_reference_o_and_natural_lse(monkeypatch):
    out, ref, fake = run(tileops.gqa_bwd(), GQA, monkeypatch)
    assert [r["op"] for r in fake.requests] == ["gqa_bwd"]  # no TileOPs forward at d48
    req = fake.requests[0]
    b, s, h = GQA.batch, GQA.seqlen_q, GQA.heads_q
    assert req["o"].dtype == torch.bfloat16 and req["o"].shape == (b, s, h, 48)
    assert torch.allclose(req["o"].double(), ref.o.view(b, s, h, 48), atol=1e-2, rtol=1e-2)  # rounded to bf16
    assert req["lse"].dtype == torch.float32 and req["lse"].shape == (b, h, s)
    assert torch.allclose(req["lse"].double(), ref.lse.double().view(b, s, h).permute(0, 2, 1), atol=1e-4)
    assert req["causal"] is True and req["scale"] == GQA.scale
    assert out.o is None and out.lse is None  # only the gradients are TileOPs'
    for n in ("dq", "dk", "dv"):
        assert torch.allclose(getattr(out, n).double(), getattr(ref, n), atol=2e-2, rtol=2e-2), n


def test_mha_uses_tileops_forward_and_is_mha_only(monkeypatch):
    p = Problem(
        batch=1, seqlen_q=33, seqlen_k=33, heads_q=2, heads_kv=2, head_dim_qk=128, head_dim_v=128, dtype="float16"
    ).validate()
    out, ref, fake = run(tileops.mha(), p, monkeypatch)
    assert [r["op"] for r in fake.requests] == ["gqa_fwd", "gqa_bwd"]
    assert torch.allclose(out.lse.double(), ref.lse.double(), atol=1e-3) and out.o is not None
    c = tileops.mha().capability
    assert "GQA" in c.excludes(p.replace(heads_kv=1).validate())
    assert c.excludes(p) is None and c.head_dims_qk == tuple(range(16, 289, 16))
    # the forward's GQADenseWSKernel and the backward serve every multiple of 16 (tileops 0.1.0)
    assert c.excludes(p.replace(head_dim_qk=48, head_dim_v=48).validate()) is None
    for d in (40, 304):
        assert "head_dim_qk" in c.excludes(p.replace(head_dim_qk=d, head_dim_v=d).validate())
    assert "min_seqlen_q" in c.excludes(p.replace(seqlen_q=1, seqlen_k=1).validate())


def test_backward_only_capability_is_the_ops_contract():
    c = tileops.gqa_bwd().capability
    assert c.head_dims_qk == tuple(range(16, 289, 16)) and c.outputs == ("dq", "dk", "dv")
    assert c.excludes(GQA) is None and c.gqa and not c.seqlen_q_ne_k
    assert "head_dim_qk" in c.excludes(GQA.replace(head_dim_qk=40, head_dim_v=40).validate())
    assert "window" in c.excludes(GQA.replace(window_left=3).validate())
    with pytest.raises(ValueError, match="allowed"):
        tileops.TileOpsAdapter("mqa")
