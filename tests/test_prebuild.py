"""Prebuilding JIT kernels before a campaign: the TileLang adapter's
``kernel_set`` is exactly what a call builds, a prebuild skips what is built (one stat per
kernel, no process started) and builds the rest in worker processes into TileLang's disk
cache, and ``difftest run`` joins a kernel's builds before its campaign."""

import pytest

pytest.importorskip("tilelang", reason="tilelang is not installed: our TileLang kernels cannot build")

from difftest.kernels.tilelang import cache  # noqa: E402
from difftest.kernels.tilelang.adapter import TileLangAttention  # noqa: E402
from difftest.kernels.tilelang.warm import prebuild  # noqa: E402
from difftest.model.inputs import make_inputs  # noqa: E402
from difftest.model.problem import Problem  # noqa: E402
from difftest.run import prebuild as warmup  # noqa: E402

BASE = Problem(batch=1, seqlen_q=24, seqlen_k=24, heads_q=2, heads_kv=1, head_dim_qk=16, head_dim_v=16)


@pytest.mark.parametrize("mode", ["atomic", "deterministic"])
@pytest.mark.parametrize("sinks", [False, True])
def test_kernel_set_is_what_a_call_builds(mode, sinks):
    k = TileLangAttention(mode, device="cpu")
    p = BASE.replace(sinks=sinks)
    cache.clear()
    k.run(make_inputs(p))
    built = set(cache.stats().keys)
    assert built == {cache.cache_key(kind, "c", **params) for kind, params in k.kernel_set(p)}
    assert all(cache.is_built(kind, "c", **params) for kind, params in k.kernel_set(p))


def test_prebuild_skips_built_kernels_without_starting_a_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    k = TileLangAttention("deterministic", device="cpu")
    requests = k.kernel_set(BASE.replace(sinks=True))
    for kind, params in requests:
        assert not cache.is_built(kind, "c", **params)
        cache.mark_built(kind, "c", **params)
    job = prebuild("c", requests, wait=False)
    assert job.ex is None and not job.futures  # nothing to build: no pool
    assert job.wait() == {
        "requested": len(requests),
        "cached": len(requests),
        "built": 0,
        "failed": 0,
        "seconds": 0.0,
        "jobs": 0,
    }


@pytest.mark.slow
def test_prebuild_builds_into_the_disk_cache_and_marks_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    # two of the cheapest kernels, ones no other test here builds in this process (a forked
    # build worker would find a kernel the parent built in TileLang's in-memory cache)
    req = [("post", dict(dtype="float16", dim_qk=32)), ("post", dict(dtype="float16", dim_qk=64))]
    first = prebuild("c", req, jobs=2)
    assert first["built"] == 2 and first["failed"] == 0 and first["jobs"] == 2
    assert all(cache.is_built(kind, "c", **params) for kind, params in req)
    assert [p for p in tmp_path.iterdir() if p.name != "difftest-built"]  # TileLang cached the kernels
    assert prebuild("c", req)["cached"] == 2


def test_a_changed_kernel_source_invalidates_the_markers(monkeypatch):
    before = cache.built_marker("post", "c", dtype="float32", dim_qk=16)
    monkeypatch.setattr(cache, "_SOURCE_DIGEST", ["another-source"])
    assert cache.built_marker("post", "c", dtype="float32", dim_qk=16) != before


class _Fake:
    name = "fake"
    capability = TileLangAttention("deterministic", device="cpu").capability

    def __init__(self):
        self.asked = None

    def available(self):
        return None

    def prepare(self, problems, log=None, wait=True):
        self.asked = list(problems)
        return type("Job", (), {"wait": lambda self: {"built": 3}})()


def test_warmup_prepares_with_the_campaigns_first_problems_and_skips_other_kernels():
    fake, plain = _Fake(), type("Plain", (), {"name": "plain", "available": lambda self: None})()
    prep = warmup.start([fake, plain], "ci", database=None)
    assert fake.asked and all(fake.capability.covers(p) for p in fake.asked)
    res = prep.wait(fake)
    assert res["built"] == 3 and "waited_s" in res
    assert prep.wait(plain) is None
