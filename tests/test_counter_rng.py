"""Input generators: version 2 (counter-based) gives the same bytes from either of its
implementations (numpy on the CPU; torch int64, which CUDA runs, here run on the CPU),
in any thread split, and a sane normal distribution; version 1 files written before the
field existed replay the digests recorded on the H200."""

import json
import lzma
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from difftest.model import counter_rng
from difftest.model.inputs import Inputs, make_inputs
from difftest.model.problem import V2_ONLY_KINDS, VALUE_KINDS, Problem, ProblemError

ROOT = Path(__file__).resolve().parent.parent


def test_numpy_and_device_paths_give_identical_bytes():
    # sizes around the CPU chunk (2^15) and the thread threshold (2^18)
    for n in (1, 7, counter_rng.CHUNK - 1, counter_rng.CHUNK + 3, counter_rng.PARALLEL_MIN + 11):
        for kind in (counter_rng.normal, counter_rng.uniform):
            a = kind(123, "q", (n,))
            b = kind(123, "q", (n,), force_torch=True)
            assert a.dtype == b.dtype == torch.float64
            assert torch.equal(a, b), (kind.__name__, n)


def test_counter_past_two_to_the_32_uses_the_high_word():
    start = (1 << 32) - 4  # a range straddling the 2^32 boundary, both implementations
    k0, k1 = counter_rng.stream_keys(5, "k")
    lo = counter_rng._bits_np(start, 1 << 32, k0, k1).tolist()
    hi = counter_rng._bits_np(1 << 32, (1 << 32) + 4, k0, k1).tolist()
    assert lo == counter_rng._bits_t(start, 1 << 32, k0, k1, "cpu").tolist()
    assert hi == counter_rng._bits_t(1 << 32, (1 << 32) + 4, k0, k1, "cpu").tolist()
    first = counter_rng._bits_np(0, 4, k0, k1).tolist()
    assert hi != first  # element 2^32 + i is not element i again
    assert list(counter_rng._chunks((1 << 32) + 5, 1 << 31)) == [
        (0, 1 << 31),
        (1 << 31, 1 << 32),
        (1 << 32, (1 << 32) + 5),
    ]


def test_bytes_do_not_depend_on_threads(monkeypatch):
    n = counter_rng.PARALLEL_MIN * 2 + 5
    monkeypatch.setattr(counter_rng, "_threads", lambda: 1)
    one = counter_rng.normal(9, "v", (n,))
    monkeypatch.setattr(counter_rng, "_threads", lambda: 3)
    three = counter_rng.normal(9, "v", (n,))
    assert torch.equal(one, three)


def test_normal_statistics():
    x = counter_rng.normal(0, "q", (1 << 20,)).numpy()
    assert abs(x.mean()) < 5e-3 and abs(x.std() - 1.0) < 5e-3
    # quantiles of N(0, 1): 0.5, 0.8413 (1 sigma), 0.9772 (2 sigma), 0.99865 (3 sigma)
    for z, p in ((0.0, 0.5), (1.0, 0.8413), (2.0, 0.9772), (3.0, 0.99865)):
        assert abs((x < z).mean() - p) < 3e-3
    assert 4.0 < np.abs(x).max() <= 4.33  # tails reach past 4 sigma, bounded by the table
    # no visible dependence between neighbours or between streams
    y = counter_rng.normal(0, "k", (1 << 20,)).numpy()
    assert abs(np.corrcoef(x[:-1], x[1:])[0, 1]) < 5e-3
    assert abs(np.corrcoef(x, y)[0, 1]) < 5e-3
    u = counter_rng.uniform(0, "u", (1 << 20,)).numpy()
    assert 0.0 < u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 2e-3


def test_streams_and_seeds_differ():
    a = counter_rng.normal(1, "q", (64,))
    assert not torch.equal(a, counter_rng.normal(2, "q", (64,)))
    assert not torch.equal(a, counter_rng.normal(1, "k", (64,)))
    # a prefix is stable: a longer tensor starts with the shorter one's values
    assert torch.equal(counter_rng.normal(1, "q", (200,))[:64], a)


def test_the_quantile_table_is_checked():
    t, d = counter_rng._table()
    assert len(t) == (1 << counter_rng.TABLE_BITS) + 1 and np.array_equal(t, -t[::-1])
    assert np.all(d > 0)  # increasing: the interpolation is monotone in the hash


# ------------------------------------------------------------------ make_inputs, version 2
PROBLEMS = [
    Problem(
        batch=2, seqlen_q=5, seqlen_k=7, heads_q=4, heads_kv=2, head_dim_qk=16, head_dim_v=8, dtype="float16", seed=3
    ),
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
] + [
    Problem(seqlen_q=9, seqlen_k=11, head_dim_qk=32, values=kind, value_scale=3.0, seed=2**40 + 1)
    for kind in VALUE_KINDS
]


@pytest.mark.parametrize("p", PROBLEMS, ids=lambda p: p.short())
def test_version_2_same_problem_same_digest_on_both_paths(p, monkeypatch):
    assert p.input_version == 2
    first, second = make_inputs(p), make_inputs(p)
    assert first.digest() == second.digest()
    # the device path (what CUDA runs) run here on the CPU gives the same bytes
    real = counter_rng._use_numpy
    monkeypatch.setattr(counter_rng, "_use_numpy", lambda device, force: False)
    via_torch = make_inputs(p)
    monkeypatch.setattr(counter_rng, "_use_numpy", real)
    for n in Inputs.TENSORS:
        a, b = getattr(first, n), getattr(via_torch, n)
        assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), n
    assert via_torch.digest() == first.digest()
    # and the version selects the generator (kinds added since exist only under version 2)
    if p.values in V2_ONLY_KINDS:
        with pytest.raises(ProblemError, match="input_version 2"):
            make_inputs(p.replace(input_version=1))
    else:
        assert make_inputs(p.replace(input_version=1)).digest() != first.digest()


def test_version_2_mixed_do_spreads_magnitudes_exactly_as_powers_of_two():
    p = Problem(seqlen_q=256, seqlen_k=8, heads_q=2, values="mixed_do", value_scale=3.0, seed=4)
    x, base = make_inputs(p), make_inputs(p.replace(values="normal"))
    ratio = (x.do.double() / base.do.double()).flatten()
    # per row one magnitude in [10^-3, 10^3] (2^n (1 + f) approximates 10^t within 6%)
    assert ratio.min().item() >= 1e-3 * 0.94 and ratio.max().item() <= 1e3
    assert ratio.max().item() / ratio.min().item() > 1e4
    assert torch.equal(x.q, base.q) and torch.equal(x.k, base.k)


# ------------------------------------------------------------------ version 1 replays
# Reproducer files written on the H200 before input_version existed, with the
# input_digest their campaign's report recorded for that Problem (computed on the GPU).
RECORDED = {
    "fa3-9b3872ddb0.json": "ffc14e0a2a2ae798",
    "fa4-216df212ee.json": "9499a8e20389dc82",
    "fa4-949f9061dd.json": "94a5a60afc644894",
    "tileops-gqa-23b2327f90.json": "2b349964c96feb44",
    "tilelang-det-95a110ee22.json": "c395972a71bc27c0",
    "jvp-flash-68836b0a42.json": "b37b190438076aed",
    "tilelang-file-65d05f3f97.json": "0daed27cb68e87e9",
}
H200_RECORDS = ROOT / "tests" / "data" / "h200"


@pytest.mark.parametrize("path", sorted(RECORDED))
def test_old_reproducer_files_replay_their_recorded_digest(path):
    from difftest.search.reproducer import read_json

    rec = read_json(H200_RECORDS / path)
    p = Problem.from_dict(rec["problem"])
    assert p.input_version == 1  # no field in the file: the generator that drew it
    assert make_inputs(p).digest() == RECORDED[path]


def test_old_case_records_replay_every_value_mode():
    """Every value mode of an H200 case log (flex) replays its recorded digest."""
    f = H200_RECORDS / "flex.cases.jsonl.xz"
    checked = set()
    with lzma.open(f, "rt") as fh:
        for line in fh:
            r = json.loads(line)
            p = Problem.from_dict(r["problem"])
            if not r.get("input_digest") or p.values in checked or p.total_q * p.heads_q * p.head_dim_qk > 50000:
                continue
            assert make_inputs(p).digest() == r["input_digest"], p.short()
            checked.add(p.values)
    assert checked == set(VALUE_KINDS) - set(V2_ONLY_KINDS)  # kinds added since draw only under version 2


def test_every_stored_reproducer_reads_as_version_1():
    files = list(H200_RECORDS.glob("*.json")) + list((ROOT / "results/bugs").glob("**/*.json"))
    assert files
    for f in files:
        rec = json.loads(f.read_text())
        if isinstance(rec, dict) and isinstance(rec.get("problem"), dict) and "input_version" not in rec["problem"]:
            assert Problem.from_dict(rec["problem"]).input_version == 1, os.fspath(f)


# ------------------------------------------------------------------ on a GPU: the guarantee itself
GPU_PROBLEMS = PROBLEMS + [
    Problem(
        batch=2,
        seqlen_q=300,
        seqlen_k=257,
        heads_q=8,
        heads_kv=2,
        head_dim_qk=128,
        head_dim_v=64,
        dtype=dt,
        values=kind,
        value_scale=scale,
        sinks=True,
        sink_center=-30.0,
        seed=2**62 + 5,
    )
    for dt in ("float16", "bfloat16", "float32")
    for kind, scale in (
        ("normal", 1.0),
        ("scaled", 64.0),
        ("near_constant", 0.01),
        ("outlier_channels", 64.0),
        ("negative_lse", 16.0),
        ("mixed_do", 4.0),
        ("large_do", 8.0),
    )
]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_and_cpu_draw_identical_bytes():
    """The same Problem drawn on the GPU (torch int64 path, cast on the GPU) and on the CPU
    (numpy path, cast on the CPU): identical bytes, every dtype and value mode."""
    for p in GPU_PROBLEMS:
        cpu, gpu = make_inputs(p, "cpu"), make_inputs(p, "cuda")
        for n in Inputs.TENSORS:
            a, b = getattr(cpu, n), getattr(gpu, n)
            assert (a is None) == (b is None), (n, p.short())
            if a is not None:
                assert torch.equal(
                    a.view(torch.uint8) if a.dtype.is_floating_point and a.numel() else a,
                    b.cpu().view(torch.uint8) if b.dtype.is_floating_point and b.numel() else b.cpu(),
                ), (n, p.short())
        assert gpu.digest() == cpu.digest(), p.short()


@pytest.mark.slow
def test_device_path_on_the_cpu_matches_for_the_gpu_problems(monkeypatch):
    """The GPU test's Problems, device path (torch int64) run on the CPU against the numpy path."""
    for p in GPU_PROBLEMS[len(PROBLEMS) :]:
        want = make_inputs(p).digest()
        monkeypatch.setattr(counter_rng, "_use_numpy", lambda device, force: False)
        assert make_inputs(p).digest() == want, p.short()
        monkeypatch.undo()


def test_streams_drawn_together_give_each_stream_s_own_bytes(monkeypatch):
    """``normals`` (a case's q, k, v and dO in one pass on a device) equals one ``normal``
    per stream, with an empty stream among them and device chunks that cut across streams."""
    reqs = [("q", (5, 3, 7)), ("k", (0, 2)), ("v", (11, 4)), ("do", (1,))]
    want = [counter_rng.normal(99, s, shape) for s, shape in reqs]
    for chunk in (counter_rng.DEVICE_CHUNK, 7):
        monkeypatch.setattr(counter_rng, "DEVICE_CHUNK", chunk)
        got = counter_rng.normals(99, reqs, force_torch=True)
        assert [g.shape for g in got] == [w.shape for w in want]
        assert all(torch.equal(g, w) for g, w in zip(got, want))
    assert all(torch.equal(g, w) for g, w in zip(counter_rng.normals(99, reqs), want))  # the numpy path


@pytest.fixture
def triton_draw(monkeypatch):
    """counter_rng's Triton kernel (what CUDA runs) on CPU tensors, under Triton's interpreter;
    afterwards decorated again without it, so a GPU test later in the process compiles it."""
    import importlib

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from difftest.model import counter_rng_triton

    mod = importlib.reload(counter_rng_triton)
    monkeypatch.setattr(counter_rng, "_TRITON", {"module": mod})  # and no failure left by another test
    monkeypatch.setitem(counter_rng.TRITON, "cpu", True)
    yield mod
    monkeypatch.delenv("TRITON_INTERPRET")
    importlib.reload(mod)


@pytest.mark.parametrize("p", PROBLEMS, ids=lambda p: p.short())
def test_the_triton_draw_gives_the_numpy_bytes(p, triton_draw, monkeypatch):
    """One kernel for q, k, v and dO (and each other stream): the bytes of the numpy path, for
    every value kind; the kernel really ran (its launches counted)."""
    launches = []
    real, numpy_path = triton_draw.fill_normals, counter_rng._use_numpy
    monkeypatch.setattr(triton_draw, "fill_normals", lambda *a: launches.append(a[1]) or real(*a))
    monkeypatch.setattr(counter_rng, "_use_numpy", lambda device, force: False)
    via_triton = make_inputs(p)
    monkeypatch.setattr(counter_rng, "_use_numpy", numpy_path)
    want = make_inputs(p)
    for n in Inputs.TENSORS:
        a, b = getattr(via_triton, n), getattr(want, n)
        assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), n
    assert launches and len(launches[0]) == 4  # q, k, v and dO in one launch
