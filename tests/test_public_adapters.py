"""Adapters of public PyPI attention packages (fastflash-attention, jvp-flash-attention,
flash-attention-triton): their argument and convention translation on CPU.

Each package is replaced by a fake module with the package's own call signature and
conventions (BHSD tensors, base-2 LSE where the package returns one, top-left causal,
a boolean mask, an environment switch read at backward time), computed exactly in
float64 with torch. The adapter's outputs must then match difftest's reference, and a
translation that drops a convention (the ln 2 factor, the window mask, the causal flag,
the atomic switch) is shown to be caught. The real kernels run only on a GPU.
"""

import math
import os
import sys
import types

import pytest
import torch

from difftest.execute import adapter as registry
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.reference import reference
from difftest.strategies import edge_problems

LOG2E = 1.0 / math.log(2.0)


def exact(q, k, v, causal, scale, mask=None):
    """[B, H, S, D] attention in float64 (top-left causal, bool mask True = attend);
    returns (o in q's dtype, natural LSE [B, H, S] float32), differentiable."""
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    sq, sk = s.shape[-2:]
    allow = torch.ones(sq, sk, dtype=torch.bool)
    if causal:
        allow = torch.ones(sq, sk, dtype=torch.bool).tril()
    if mask is not None:
        allow = allow & mask
    s = s.masked_fill(~allow, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return (p @ v.double()).to(q.dtype), lse.float()


def install(monkeypatch, name, **attrs):
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    monkeypatch.setitem(sys.modules, name, mod)
    parent, _, child = name.rpartition(".")
    if parent:
        monkeypatch.setattr(sys.modules[parent], child, mod, raising=False)
    return mod


def close(a, b, tol=2e-2):
    return torch.allclose(a.double(), b.double(), atol=tol, rtol=tol)


def check_against_reference(kernel, p, lse=True):
    inputs = make_inputs(p)
    got = kernel.run(inputs)
    ref = reference(inputs, "float64")
    names = ["o", "dq", "dk", "dv"] + (["lse"] if lse else [])
    bad = [n for n in names if not close(getattr(got, n), getattr(ref, n))]
    return bad, got


# ---------------------------------------------------------------- fastflash-attention
@pytest.fixture
def fake_fastflash(monkeypatch):
    calls = []

    class UnsupportedConfig(ValueError):
        pass

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, scale):
            ctx.save_for_backward(q, k, v)
            ctx.causal, ctx.scale = causal, scale
            return exact(q, k, v, causal, scale)[0]

        @staticmethod
        def backward(ctx, do):
            calls.append(("bwd", os.environ.get("UNIFLASH_BWD_FUSED_ATOMIC", "0")))
            q, k, v = (t.detach().requires_grad_(True) for t in ctx.saved_tensors)
            with torch.enable_grad():
                o = exact(q, k, v, ctx.causal, ctx.scale)[0]
                return (*torch.autograd.grad(o, (q, k, v), do), None, None)

    def fast_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        assert (
            q.dtype == torch.bfloat16 and q.shape == k.shape == v.shape and q.shape[-1] in (1, 2, 4, 8, 16, 32, 64, 128)
        )
        calls.append(("fwd", is_causal, scale))
        return Fn.apply(q, k, v, is_causal, scale)

    def fastflash_attn(q, k, v, causal, return_lse=False, scale=None):
        o, lse = exact(q, k, v, causal, scale)
        return (o, lse * LOG2E) if return_lse else o  # base 2, as _kernel.py:286-289 documents

    pkg = install(
        monkeypatch, "fastflash_attention", fast_attention=fast_attention, UnsupportedConfig=UnsupportedConfig
    )
    pkg.__path__ = []
    install(monkeypatch, "fastflash_attention._kernel", fastflash_attn=fastflash_attn)
    return calls


FF = dict(dtype="bfloat16", head_dim_qk=16, head_dim_v=16, heads_q=2, heads_kv=2, batch=2)


@pytest.mark.parametrize(
    "p",
    [
        Problem(seqlen_q=37, seqlen_k=37, **FF),
        Problem(seqlen_q=70, seqlen_k=70, causal=True, align="top_left", **FF),
        Problem(seqlen_q=9, seqlen_k=9, softmax_scale=0.3, values="scaled", value_scale=3.0, **FF),
    ],
    ids=["plain", "causal", "scale"],
)
def test_fastflash_translation_matches_the_reference(fake_fastflash, p):
    from difftest.kernels.fastflash import deterministic

    bad, _ = check_against_reference(deterministic(), p.validate())
    assert bad == []
    fwd = [c for c in fake_fastflash if c[0] == "fwd"][0]
    assert fwd == ("fwd", p.causal, p.scale)


def test_fastflash_lse_is_converted_from_base_2_and_the_atomic_switch_is_scoped(fake_fastflash, monkeypatch):
    from difftest.kernels import bhsd, fastflash

    p = Problem(seqlen_q=20, seqlen_k=20, causal=True, **FF).validate()
    monkeypatch.delenv(fastflash.ATOMIC_ENV, raising=False)
    bad, _ = check_against_reference(fastflash.atomic(), p)
    assert bad == [] and ("bwd", "1") in fake_fastflash
    assert fastflash.ATOMIC_ENV not in os.environ  # restored to its absence
    bad, _ = check_against_reference(fastflash.deterministic(), p)
    assert ("bwd", "0") in fake_fastflash
    monkeypatch.setattr(bhsd, "LN2", 1.0)  # a translation that forgot base 2 -> natural
    bad, _ = check_against_reference(fastflash.deterministic(), p)
    assert bad == ["lse"]


def test_fastflash_capability_is_the_package_contract():
    from difftest.kernels.fastflash import FastflashCall, atomic, deterministic

    c = deterministic().capability
    assert c.deterministic and not atomic().capability.deterministic
    assert c.dtypes == ("bfloat16",) and c.head_dims_qk == (1, 2, 4, 8, 16, 32, 64, 128)
    assert not c.gqa and not c.seqlen_q_ne_k and not c.window and not c.varlen
    for bad in (
        Problem(dtype="float16", head_dim_qk=16, head_dim_v=16),
        Problem(head_dim_qk=48, head_dim_v=48, dtype="bfloat16"),
        Problem(seqlen_q=3, seqlen_k=4, dtype="bfloat16", head_dim_qk=16, head_dim_v=16),
        Problem(heads_q=2, heads_kv=1, dtype="bfloat16", head_dim_qk=16, head_dim_v=16),
    ):
        assert c.excludes(bad.validate())
    with pytest.raises(ValueError, match="square MHA"):
        FastflashCall.of(Problem(seqlen_q=3, seqlen_k=4).validate(), False)


# ---------------------------------------------------------------- jvp-flash-attention
@pytest.fixture
def fake_jvp(monkeypatch):
    calls = []

    class JVPAttn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, q_t, k_t, v_t, attn_mask, dropout_p, causal, sm_scale, ws, tma, verify):
            z, h, n, d = q.shape
            assert k.shape == v.shape == q.shape and d in (16, 32, 64, 128, 256) and n % 2 == 0 and n >= 32
            assert not (causal and attn_mask is not None)  # jvp_attention.py:2574
            assert attn_mask is None or (attn_mask.dtype == torch.bool and attn_mask.shape == (z, h, n, n))
            calls.append((causal, attn_mask is not None, sm_scale))
            ctx.save_for_backward(q, k, v)
            ctx.args = (causal, sm_scale, attn_mask)
            o, lse = exact(q, k, v, causal, sm_scale, attn_mask)
            return o, (None, lse * LOG2E)

        @staticmethod
        def backward(ctx, do, *_):
            assert do.is_contiguous() and ctx.saved_tensors[0].stride() == do.stride()  # jvp_attention.py:3121
            assert do.shape[2] % 32 == 0  # jvp_attention.py:3142
            q, k, v = (t.detach().requires_grad_(True) for t in ctx.saved_tensors)
            with torch.enable_grad():
                o = exact(q, k, v, *ctx.args)[0]
                return (*torch.autograd.grad(o, (q, k, v), do),) + (None,) * 10

    pkg = install(monkeypatch, "jvp_flash_attention")
    pkg.__path__ = []
    install(monkeypatch, "jvp_flash_attention.jvp_attention", JVPAttn=JVPAttn)
    return calls


JV = dict(dtype="float32", head_dim_qk=16, head_dim_v=16, heads_q=2, heads_kv=2, batch=1)


@pytest.mark.parametrize(
    "p",
    [
        Problem(seqlen_q=64, seqlen_k=64, **JV),
        Problem(seqlen_q=32, seqlen_k=32, causal=True, **JV),
        Problem(seqlen_q=64, seqlen_k=64, window_left=5, window_right=0, **JV),
        Problem(seqlen_q=64, seqlen_k=64, window_left=3, causal=True, align="top_left", **JV),
    ],
    ids=["plain", "causal", "window", "causal_window"],
)
def test_jvp_translation_matches_the_reference(fake_jvp, p):
    from difftest.kernels.jvp_flash import masked

    bad, _ = check_against_reference(masked(), p.validate())
    assert bad == []
    causal, has_mask, scale = fake_jvp[-1]
    windowed = p.window_left is not None or p.window_right is not None
    assert has_mask == windowed and causal == (p.causal and not windowed) and scale == p.scale


def test_jvp_window_mask_is_needed_and_plain_adapter_refuses_windows(fake_jvp, monkeypatch):
    from difftest.kernels import jvp_flash

    p = Problem(seqlen_q=64, seqlen_k=64, window_left=5, window_right=0, **JV).validate()
    assert "sliding window" in jvp_flash.plain().capability.excludes(p)
    with pytest.raises(ValueError, match="jvp-flash-mask"):
        jvp_flash.JvpCall.of(p, windows=False)
    real = jvp_flash.JvpCall.of

    def no_mask(p, windows, device="cpu"):  # a translation that dropped the window
        return jvp_flash.JvpCall(causal=p.causal, mask=None, sm_scale=p.scale)

    monkeypatch.setattr(jvp_flash.JvpCall, "of", staticmethod(no_mask))
    bad, _ = check_against_reference(jvp_flash.masked(), p)
    assert "o" in bad
    monkeypatch.setattr(jvp_flash.JvpCall, "of", staticmethod(real))


def test_jvp_capability_draws_only_multiples_of_32():
    from difftest.kernels.jvp_flash import plain

    c = plain().capability
    assert c.seqlen_multiple == 32 and c.head_dims_qk == (16, 32, 64, 128, 256)
    corpus = edge_problems(c, "gpu")
    assert corpus and all(n % 32 == 0 and n >= 32 for p in corpus for n in p.seqlens_q + p.seqlens_k)
    assert "multiple" in c.excludes(Problem(seqlen_q=48, seqlen_k=48, head_dim_qk=16, head_dim_v=16).validate())


# ---------------------------------------------------------------- flash-attention-triton
@pytest.fixture
def fake_fat(monkeypatch):
    calls = []

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, scale):
            ctx.save_for_backward(q, k, v)
            ctx.scale = scale
            return exact(q, k, v, True, scale)[0]  # always causal, top-left

        @staticmethod
        def backward(ctx, do):
            q, k, v = (t.detach().requires_grad_(True) for t in ctx.saved_tensors)
            with torch.enable_grad():
                o = exact(q, k, v, True, ctx.scale)[0]
                return (*torch.autograd.grad(o, (q, k, v), do), None)

    def flash_attention_v2(q, k, v, softmax_scale=None, deterministic=False):
        assert k.shape[:2] == q.shape[:2] and q.shape[-1] <= 128
        calls.append((softmax_scale, deterministic))
        return Fn.apply(q, k, v, softmax_scale or 1.0 / math.sqrt(q.shape[-1]))

    install(monkeypatch, "flash_attention_triton", flash_attention_v2=flash_attention_v2)
    return calls


FT = dict(dtype="float16", head_dim_qk=20, head_dim_v=20, heads_q=2, heads_kv=2, batch=2, causal=True, align="top_left")


@pytest.mark.parametrize(
    "p",
    [
        Problem(seqlen_q=33, seqlen_k=33, **FT),
        Problem(seqlen_q=40, seqlen_k=17, **FT),
        Problem(seqlen_q=9, seqlen_k=70, softmax_scale=0.2, **FT),
    ],
    ids=["square", "sq>sk", "sq<sk"],
)
def test_flash_attention_triton_translation_matches_the_reference(fake_fat, p):
    from difftest.kernels.flash_attention_triton import deterministic, fast

    bad, got = check_against_reference(deterministic(), p.validate(), lse=False)
    assert bad == [] and got.lse is None and fake_fat[-1] == (p.scale, True)
    assert check_against_reference(fast(), p, lse=False)[0] == []
    assert fake_fat[-1] == (p.scale, False)


def test_flash_attention_triton_is_causal_only_by_construction():
    from difftest.kernels.flash_attention_triton import FatCall, deterministic

    c = deterministic().capability
    assert c.causal_required and c.aligns == ("top_left",) and c.dtypes == ("float16",)
    corpus = edge_problems(c, "gpu")
    assert corpus and all(p.causal and (p.align == "top_left" or p.seqlen_q == p.seqlen_k) for p in corpus)
    unmasked = Problem(dtype="float16", head_dim_qk=16, head_dim_v=16).validate()
    assert "causal" in c.excludes(unmasked)
    with pytest.raises(ValueError, match="always causal"):
        FatCall.of(unmasked, True)
    with pytest.raises(ValueError, match="top-left"):
        FatCall.of(Problem(seqlen_q=3, seqlen_k=5, causal=True, align="bottom_right").validate(), True)


# ---------------------------------------------------------------- registry
NEW = [
    "fastflash",
    "fastflash-atomic",
    "jvp-flash",
    "jvp-flash-mask",
    "flash-attention-triton",
    "flash-attention-triton-fast",
]


@pytest.mark.parametrize("name", NEW)
def test_registered_in_pyproject_and_unavailable_without_the_package(name, monkeypatch):
    import tomllib
    from pathlib import Path

    eps = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["entry-points"]
    path = eps["difftest.kernels"][name]
    registry.register(name, path)
    k = registry.get(name)
    assert k.name == name and k.capability.device == "cuda"
    reason = k.available()
    assert reason and ("CUDA" in reason or "not installed" in reason)
    from difftest.kernels import cuda_common

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda_common.importlib.util, "find_spec", lambda m: None)
    assert "pip install --no-deps" in k.available()
