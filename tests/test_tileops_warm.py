"""TileOPs compile reuse and the parallel warm-up, on CPU: the compile key names
every field TileOPs builds a new kernel for, ``--warm`` requests each edge-corpus compile
configuration once across its workers (workers replaced by a fake that records requests),
and drawn problems then fall in warmed shapes."""

import json
import threading

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from difftest.kernels import tileops
from difftest.model.problem import Problem
from difftest.strategies import edge_problems, problems

P = Problem(
    batch=1, seqlen_q=9, seqlen_k=9, heads_q=2, heads_kv=1, head_dim_qk=128, head_dim_v=128, dtype="float16"
).validate()


def shape(p):
    """What TileOPs 0.1.0 compiles a GQA backward for (GQABwdWGMMAPipelinedKernel.entry_for)."""
    return (p.batch, p.seqlen_q, p.heads_q, p.heads_kv, p.head_dim_qk, p.dtype, p.causal, p.softmax_scale)


@pytest.mark.parametrize("op", ["gqa", "mha", "gqa-bwd"])
def test_compile_key_separates_every_field_tileops_compiles_for(op):
    cap = tileops.OPS[op][0]
    base = P.replace(heads_q=1) if op == "mha" else P
    for change in (
        {"batch": 2},
        {"seqlen_q": 10, "seqlen_k": 10},
        {"softmax_scale": 10.0},
        {"causal": True},
        {"dtype": "bfloat16"},
    ):
        other = base.replace(**change).validate()
        assert cap.compile_signature(other) != cap.compile_signature(base), change
    # the values and the seed are run-time data: same kernel
    assert cap.compile_signature(
        base.replace(values="negative_lse", value_scale=16.0, seed=3)
    ) == cap.compile_signature(base)


def test_warm_problems_are_the_edge_corpus_distinct_compile_keys():
    cap = tileops.OPS["gqa"][0]
    edge = edge_problems(cap, "gpu")
    warm = tileops.warm_problems("gqa", "gpu")
    sigs = [cap.compile_signature(p) for p in warm]
    assert len(sigs) == len(set(sigs)) == len({cap.compile_signature(p) for p in edge})
    assert warm == [
        p for i, p in enumerate(edge) if cap.compile_signature(p) not in {cap.compile_signature(q) for q in edge[:i]}
    ]  # first of each, in corpus order
    det = Problem(
        batch=2, seqlen_q=333, seqlen_k=333, heads_q=8, heads_kv=2, head_dim_qk=128, head_dim_v=128, dtype="bfloat16"
    ).validate()
    d40 = det.replace(head_dim_qk=40, head_dim_v=40).validate()  # outside tileops-gqa (multiples of 16)
    assert tileops.warm_problems("gqa", "gpu", [det, d40]) == warm + [det]
    with pytest.raises(ValueError, match="allowed"):
        tileops.warm_problems("mqa")


class FakeWorker:
    """A TileOPs worker that answers with zeros of the right shapes and records requests."""

    seen: list = []
    started = 0
    closed = 0
    lock = threading.Lock()
    fail_seqlen = None

    def __init__(self, site):
        with FakeWorker.lock:
            FakeWorker.started += 1

    def call(self, req):
        q = req["q"]
        b, s, h, d = q.shape
        with FakeWorker.lock:
            FakeWorker.seen.append((req["op"], b, s, h, req["k"].shape[2], q.dtype, req["causal"], req["scale"]))
        if s == FakeWorker.fail_seqlen:
            raise RuntimeError("TileOPs: does not build")
        if req["op"] == "gqa_fwd":
            return {"o": torch.zeros_like(q), "lse": torch.zeros(b, h, s)}
        return {"dq": torch.zeros_like(q), "dk": torch.zeros_like(req["k"]), "dv": torch.zeros_like(req["v"])}

    def close(self):
        with FakeWorker.lock:
            FakeWorker.closed += 1


def test_warm_runs_each_configuration_once_over_its_workers(monkeypatch):
    monkeypatch.setattr(tileops, "Worker", FakeWorker)
    FakeWorker.seen, FakeWorker.started, FakeWorker.closed, FakeWorker.fail_seqlen = [], 0, 0, 129
    warm = tileops.warm_problems("gqa", "gpu")
    log = []
    errors = tileops.warm("gqa", jobs=4, profile="gpu", log=log.append)
    assert FakeWorker.started == FakeWorker.closed == 4
    fwd = sorted((r[1:] for r in FakeWorker.seen if r[0] == "gqa_fwd"), key=str)
    want = sorted(
        (
            (
                p.batch,
                p.seqlen_q,
                p.heads_q,
                p.heads_kv,
                torch.float16 if p.dtype == "float16" else torch.bfloat16,
                p.causal,
                p.scale,
            )
            for p in warm
        ),
        key=str,
    )
    assert fwd == want  # every configuration once, with its own scale
    # the failing shape (s129) is reported, the others still ran their backward
    assert len(errors) == 1 and "sq129" in errors[0] and "does not build" in errors[0]
    assert len([r for r in FakeWorker.seen if r[0] == "gqa_bwd"]) == len(warm) - 1
    assert get_worker_is_shared_again()


def get_worker_is_shared_again():
    """After warm, this thread has no private worker left over."""
    return getattr(tileops._LOCAL, "worker", None) is None


def test_warm_bwd_only_op_sends_no_forward(monkeypatch):
    monkeypatch.setattr(tileops, "Worker", FakeWorker)
    FakeWorker.seen, FakeWorker.fail_seqlen = [], None
    extra = [P.replace(head_dim_qk=48, head_dim_v=48).validate()]
    assert tileops.warm("gqa-bwd", jobs=2, profile="gpu", extra=extra, log=lambda m: None) == []
    assert {r[0] for r in FakeWorker.seen} == {"gqa_bwd"}
    assert len(FakeWorker.seen) == len(tileops.warm_problems("gqa-bwd", "gpu", extra))


def test_warm_arguments():
    a = tileops.parse_warm_args(["--warm", "mha", "--jobs", "14", "--problem", json.dumps(P.to_dict())])
    assert a.warm == "mha" and a.jobs == 14 and a.profile == "gpu" and len(a.extra) == 1
    assert a.extra[0].seqlen_q == 9
    for bad in (
        ["--warm", "mqa"],
        ["--warm", "gqa", "--jobs", "0"],
        ["--warm", "gqa", "--problem", "{bad"],
        ["--warm", "gqa", "--problem", '{"batch": 0}'],
        [],
    ):
        with pytest.raises(SystemExit) as e:
            tileops.parse_warm_args(bad)
        assert e.value.code == 2, bad


WARM_SHAPES = {shape(p) for p in tileops.warm_problems("gqa", "gpu")}


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(problems(tileops.OPS["gqa"][0], "gpu", new_compile_p=0.0, warm_configs=64))
def test_drawn_problems_fall_in_warmed_shapes(p):
    assert shape(p) in WARM_SHAPES


def test_prepare_builds_each_campaign_configuration_once(monkeypatch):
    """difftest.run.prebuild calls prepare(problems, log=..., wait=False) before `difftest run`'s campaigns."""
    monkeypatch.setattr(tileops, "Worker", FakeWorker)
    FakeWorker.seen, FakeWorker.fail_seqlen = [], None
    k = tileops.gqa()
    same_shape = P.replace(values="negative_lse", value_scale=16.0, seed=5)  # run-time data only: no new build
    d40 = P.replace(head_dim_qk=40, head_dim_v=40).validate()  # outside tileops-gqa (multiples of 16)
    job = k.prepare([P, same_shape, P.replace(seqlen_q=10, seqlen_k=10).validate(), d40], jobs=2, wait=False)
    counts = job.wait()
    assert counts["requested"] == counts["built"] == 2 and counts["failed"] == 0 and counts["jobs"] == 2
    assert sorted(r[2] for r in FakeWorker.seen if r[0] == "gqa_fwd") == [9, 10]


def test_a_worker_that_does_not_start_loses_no_shape(monkeypatch):
    class Flaky(FakeWorker):
        starts = 0

        def __init__(self, site):
            with FakeWorker.lock:
                Flaky.starts += 1
                first = Flaky.starts == 1
            if first:
                raise RuntimeError("no GPU for you")
            super().__init__(site)

    monkeypatch.setattr(tileops, "Worker", Flaky)
    FakeWorker.seen, FakeWorker.fail_seqlen = [], None
    warm = tileops.warm_problems("gqa", "gpu")
    job = tileops.WarmJob(tileops.gqa(), warm, jobs=3)
    c = job.wait()
    assert c["built"] == c["requested"] == len(warm) and c["failed"] == 0  # the two others took every shape
    assert job.errors == ["a worker did not start: RuntimeError: no GPU for you"]

    class Dead(FakeWorker):
        def __init__(self, site):
            raise RuntimeError("no site")

    monkeypatch.setattr(tileops, "Worker", Dead)
    job = tileops.WarmJob(tileops.gqa(), warm, jobs=2)
    c = job.wait()
    assert c["built"] == 0 and c["failed"] == len(warm)
    assert job.errors[-1] == f"{len(warm)} shapes not built: no TileOPs worker started"
