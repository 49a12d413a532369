"""The flash-attn3-jax adapter (kernels/fa3_jax.py) on CPU: its capability is the package's
contract, it says why it cannot run here, and its pure conversions (the package's LSE
buffers to difftest's packed natural-log LSE, FA3's window and causal arguments) are exact.
With the package (and jax.jit / jax.eval_shape) faked by exact float64 torch in the package's
conventions, the adapter's whole forward+backward matches difftest's reference, and a
translation that loses the window is caught. The kernels themselves run only on a Hopper GPU."""

import sys
import tomllib
import types
from pathlib import Path

import pytest
import torch

from difftest.execute import adapter as registry
from difftest.kernels.fa3_jax import Fa3JaxAdapter
from difftest.model.problem import Problem

D = dict(heads_q=2, heads_kv=2, head_dim_qk=128, head_dim_v=128, dtype="bfloat16")


def test_capability_is_the_package_contract():
    from difftest.kernels.fa3_jax import CLAIMED_DIMS, adapter

    c = adapter().capability
    assert c.device == "cuda" and c.dtypes == ("float16", "bfloat16")
    # every width the interface pads and the one built kernel (128) serves; README names 128
    assert set(CLAIMED_DIMS) <= set(c.head_dims_qk) and c.head_dims_qk == tuple(range(1, 129))
    base = Problem(seqlen_q=100, seqlen_k=130, causal=True, **D).validate()
    assert c.excludes(base) is None
    assert c.excludes(base.replace(head_dim_qk=8, head_dim_v=8)) is None
    assert "head_dim_qk" in c.excludes(base.replace(head_dim_qk=136, head_dim_v=136))  # C++ refuses > 128
    assert c.excludes(base.replace(head_dim_v=64))  # K and V one shape
    assert "float32" in c.excludes(base.replace(dtype="float32"))
    assert c.excludes(base.replace(heads_q=4, heads_kv=1)) is None  # MQA/GQA
    assert c.excludes(base.replace(causal=False, window_left=5, window_right=0)) is None
    assert "align" in c.excludes(base.replace(align="top_left"))  # FA3 is bottom-right
    varlen = Problem(batch=2, seqlen_q=(3, 70), seqlen_k=(90, 5), **D).validate()
    assert c.excludes(varlen) is None
    assert c.excludes(varlen.replace(pad_tail=3))  # not claimed by the package
    assert c.excludes(Problem(batch=2, seqlen_q=(0, 4), seqlen_k=(3, 4), **D).validate())  # empty seq
    assert not (c.sinks or c.deterministic) and c.layouts == ("contiguous",)
    assert c.outputs == ("o", "lse", "dq", "dk", "dv")
    assert (c.block_m, c.block_n) == (80, 128)


def test_registered_and_says_why_it_cannot_run(monkeypatch):
    eps = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["entry-points"]
    registry.register("fa3-jax", eps["difftest.kernels"]["fa3-jax"])
    k = registry.get("fa3-jax")
    assert k.name == "fa3-jax" and k.path == "public"
    registry.register("fa3-jax-rules", eps["difftest.kernels"]["fa3-jax-rules"])
    assert registry.get("fa3-jax-rules").name == "fa3-jax-rules"
    with pytest.raises(ValueError, match="allowed 'public'"):
        Fa3JaxAdapter("vjp")
    from difftest.kernels import cuda_common

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "CUDA" in k.available()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    real_find = cuda_common.importlib.util.find_spec
    monkeypatch.setattr(cuda_common.importlib.util, "find_spec", lambda m: None)
    reason = k.available()
    assert "flash_attn3_jax" in reason and "--target /tmp/site" in reason
    # installed (find_spec answers) but on an sm80 GPU
    monkeypatch.setattr(cuda_common.importlib.util, "find_spec", lambda m: real_find("torch"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    assert "sm9x" in k.available()
    # an SM90 GPU, but the package does not import (e.g. a JAX it does not support)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setitem(sys.modules, "flash_attn3_jax", None)
    assert k.available().startswith("import flash_attn3_jax failed: ModuleNotFoundError")


def test_dense_lse_is_bhs_natural_log_and_only_empty_rows_lose_their_inf():
    from difftest.kernels.fa3_jax import lse_to_thd

    # bottom-right causal, 5 queries over 3 keys: queries 0 and 1 see no key
    p = Problem(batch=2, seqlen_q=5, seqlen_k=3, causal=True, **D).validate()
    raw = torch.arange(2 * 2 * 5, dtype=torch.float32).view(2, 2, 5)  # [B, H, S]
    raw[:, :, :2] = float("inf")
    raw[1, 0, 4] = float("inf")  # a row that sees keys: reported as returned
    got = lse_to_thd(raw, p)
    assert got.shape == (10, 2) and got.dtype == torch.float32
    assert got[7, 1] == raw[1, 1, 2] and got[3, 0] == raw[0, 0, 3]  # token b*S+s, head h
    assert torch.isneginf(got[[0, 1, 5, 6]]).all()
    assert torch.isposinf(got[9, 0]) and got[9, 1] == raw[1, 1, 4]


def test_varlen_lse_is_read_as_heads_by_tokens_from_the_buffer_start():
    from difftest.kernels.fa3_jax import lse_to_thd

    p = Problem(batch=3, seqlen_q=(2, 4, 1), seqlen_k=(3, 4, 2), **D).validate()
    T, H, B, M = p.total_q, p.heads_q, p.batch, p.max_seqlen_q
    truth = torch.arange(T * H, dtype=torch.float32).view(H, T) / 7  # FA3's [H, total_q]
    buf = torch.full((B, H, M), float("nan"))  # the package's [B, H, max_seqlen_q] buffer
    buf.view(-1)[: H * T] = truth.reshape(-1)
    got = lse_to_thd(buf, p)
    assert got.shape == (T, H) and torch.equal(got, truth.t())
    with pytest.raises(ValueError, match="heads_q\\*total_q"):
        lse_to_thd(buf.view(-1)[: H * T - 1], p)


def test_window_causal_and_scale_are_fa3s_arguments():
    from difftest.kernels.fa3_jax import call_for

    c = call_for(Problem(seqlen_q=8, seqlen_k=12, window_left=3, window_right=None, softmax_scale=0.5, **D).validate())
    assert c.window == (3, -1) and not c.causal and c.longest is None
    assert type(c.scale) is float and c.scale == 0.5  # flash_mha asserts a python float
    c = call_for(Problem(batch=2, seqlen_q=(3, 4), seqlen_k=(5, 2), causal=True, **D).validate())
    assert c.causal and c.window == (-1, -1) and c.longest == (4, 5)
    with pytest.raises(ValueError, match="align"):
        call_for(Problem(seqlen_q=8, seqlen_k=12, causal=True, align="top_left", **D).validate())


# ---------------------------------------------------------------- the whole translation, faked
# flash_attn3_jax (and the two jax calls the adapter makes) replaced by exact float64 torch with
# the package's conventions: BSHD / packed THD arrays, FA3's bottom-right causal and (left,
# right) windows with -1 unbounded, natural-log LSE with +inf for a row that sees no key,
# dense [B, H, S], varlen written as [H, total_q] from the start of a [B, H, max_seqlen_q]
# buffer whose rest is NaN. The adapter's outputs must match difftest's reference.
def _attend(q, k, v, scale, causal, window):
    """One sequence, [S, H, D] -> o [Sq, Hq, D], lse [Hq, Sq] (+inf where no key), FA3 masks."""
    hq, hk = q.shape[1], k.shape[1]
    qd, kd, vd = (x.double().transpose(0, 1) for x in (q, k, v))
    kd, vd = kd.repeat_interleave(hq // hk, 0), vd.repeat_interleave(hq // hk, 0)
    s = qd @ kd.transpose(-1, -2) * scale
    sq, sk = s.shape[-2:]
    i, j = torch.arange(sq)[:, None] + (sk - sq), torch.arange(sk)[None, :]
    left, right = window
    allow = torch.ones(sq, sk, dtype=torch.bool)
    if left >= 0:
        allow &= j >= i - left
    if right >= 0:
        allow &= j <= i + right
    if causal:
        allow &= j <= i
    s = s.masked_fill(~allow, float("-inf"))
    lse = torch.logsumexp(s, -1)
    o = (torch.exp(s - lse[..., None]).nan_to_num(0.0) @ vd).transpose(0, 1)
    return o, torch.where(torch.isneginf(lse), torch.full_like(lse, float("inf")), lse)


def _packed(q, k, v, cu_q, cu_k, scale, causal, window):
    outs, lses = [], []
    for b in range(len(cu_q) - 1):
        o, lse = _attend(
            q[cu_q[b] : cu_q[b + 1]], k[cu_k[b] : cu_k[b + 1]], v[cu_k[b] : cu_k[b + 1]], scale, causal, window
        )
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses, dim=1)  # [T, H, D], [H, T]


def _grads(fn, q, k, v, do):
    leaves = [x.detach().double().requires_grad_(True) for x in (q, k, v)]
    o = fn(*leaves)
    return [g.to(q.dtype) for g in torch.autograd.grad(o, leaves, do.double())]


@pytest.fixture
def fake_package(monkeypatch):
    from difftest.kernels import fa3_jax

    calls = []

    def dense(q, k, v, scale, causal, window):
        b = q.shape[0]
        o, lse = zip(*(_attend(q[i], k[i], v[i], scale, causal, window) for i in range(b)))
        return torch.stack(o), torch.stack(lse).float()

    def _flash_mha_fwd(q, k, v, softmax_scale, is_causal, window_size):
        calls.append(("dense", is_causal, window_size, softmax_scale))
        o, lse = dense(q, k, v, softmax_scale, is_causal, window_size)
        return o.to(q.dtype), lse

    def _flash_mha_bwd(dout, q, k, v, out, lse, softmax_scale, is_causal, window_size):
        return _grads(lambda a, b, c: dense(a, b, c, softmax_scale, is_causal, window_size)[0], q, k, v, dout)

    def flash_mha(q, k, v, softmax_scale=None, is_causal=False, window_size=(-1, -1)):
        assert q.dim() == 4 and type(softmax_scale) is float  # flash.py:252-258
        calls.append(("public dense", is_causal, window_size, softmax_scale))
        return dense(q, k, v, softmax_scale, is_causal, window_size)[0].to(q.dtype)

    def cfg_args(c):
        return c["softmax_scale"], c["is_causal"], c["window_size"]

    def vjp_fwd(q, k, v, cu_q, cu_k, seqused_k, config):
        calls.append(
            ("varlen", config["is_causal"], config["window_size"], config["max_seqlen_q"], config["max_seqlen_k"])
        )
        cq, ck = cu_q.tolist(), cu_k.tolist()
        o, lse = _packed(q, k, v, cq, ck, *cfg_args(config))
        buf = torch.full((len(cq) - 1, q.shape[1], config["max_seqlen_q"]), float("nan"))
        buf.view(-1)[: lse.numel()] = lse.float().reshape(-1)
        o = o.to(q.dtype)
        return o, (q, k, v, cu_q, cu_k, seqused_k, o, buf)

    def vjp_bwd(config, pack, dout):
        q, k, v, cu_q, cu_k = pack[:5]
        cq, ck = cu_q.tolist(), cu_k.tolist()
        grads = _grads(lambda a, b, c: _packed(a, b, c, cq, ck, *cfg_args(config))[0], q, k, v, dout)
        return (*grads, None, None, None)

    def flash_mha_varlen(
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k=None,
        seqused_k=None,
        max_seqlen_q=-1,
        max_seqlen_k=-1,
        softmax_scale=None,
        is_causal=False,
        window_size=(-1, -1),
    ):
        assert q.dim() == 3 and cu_seqlens_q.shape == cu_seqlens_k.shape
        calls.append(("public varlen", is_causal, window_size, max_seqlen_q, max_seqlen_k))
        return _packed(q, k, v, cu_seqlens_q.tolist(), cu_seqlens_k.tolist(), softmax_scale, is_causal, window_size)[
            0
        ].to(q.dtype)

    def vjp(f, *primals):  # jax.vjp through torch autograd, in float64
        leaves = [x.detach().double().requires_grad_(True) for x in primals]
        out = f(*leaves)
        return out, lambda ct: tuple(g.to(primals[0].dtype) for g in torch.autograd.grad(out, leaves, ct.double()))

    pkg = types.ModuleType("flash_attn3_jax")
    pkg.flash = types.SimpleNamespace(_flash_mha_fwd=_flash_mha_fwd, _flash_mha_bwd=_flash_mha_bwd)
    pkg.varlen = types.SimpleNamespace(_flash_mha_varlen_vjp_fwd=vjp_fwd, _flash_mha_varlen_vjp_bwd=vjp_bwd)
    pkg.flash_mha, pkg.flash_mha_varlen = flash_mha, flash_mha_varlen
    jax = types.ModuleType("jax")
    jax.jit = lambda f, static_argnums=(): f
    jax.eval_shape = lambda f, *args: f(*args)
    jax.vjp = vjp
    monkeypatch.setitem(sys.modules, "flash_attn3_jax", pkg)
    monkeypatch.setitem(sys.modules, "jax", jax)
    monkeypatch.setattr(fa3_jax, "_JITTED", {})
    monkeypatch.setattr(fa3_jax, "to_jax", lambda t: None if t is None else t.detach().contiguous())
    monkeypatch.setattr(fa3_jax, "to_torch", lambda a: a)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    return calls


def _close(a, b):
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=2e-2, rtol=2e-2)


TRANSLATED = [
    # GQA, bottom-right causal with more queries than keys: the first rows see no key
    Problem(
        batch=2,
        seqlen_q=7,
        seqlen_k=4,
        heads_q=4,
        heads_kv=2,
        head_dim_qk=16,
        head_dim_v=16,
        causal=True,
        dtype="bfloat16",
        softmax_scale=0.3,
    ),
    Problem(
        batch=1,
        seqlen_q=9,
        seqlen_k=12,
        heads_q=2,
        heads_kv=1,
        head_dim_qk=24,
        head_dim_v=24,
        window_left=3,
        window_right=1,
        dtype="float16",
    ),
    Problem(
        batch=3,
        seqlen_q=(3, 8, 1),
        seqlen_k=(5, 4, 6),
        heads_q=4,
        heads_kv=1,
        head_dim_qk=8,
        head_dim_v=8,
        causal=True,
        window_left=2,
        dtype="bfloat16",
    ),
]


@pytest.mark.parametrize("path", ["public", "rules"])
@pytest.mark.parametrize("p", TRANSLATED, ids=lambda p: p.short())
def test_translation_matches_the_reference(fake_package, p, path):
    from difftest.kernels.fa3_jax import Fa3JaxAdapter
    from difftest.model.inputs import make_inputs
    from difftest.oracles.reference import reference

    p = p.validate()
    adapter = lambda: Fa3JaxAdapter(path)  # noqa: E731
    assert adapter().capability.excludes(p) is None
    inputs = make_inputs(p)
    got = adapter().run(inputs)
    # both paths trace the public function once (its checks); the public path's gradients come
    # from a second call, under jax.vjp (a user's call)
    kind = "varlen" if p.varlen else "dense"
    assert [c[0] for c in fake_package].count("public " + kind) == (2 if path == "public" else 1)
    rule_calls = [c for c in fake_package if not c[0].startswith("public")]
    ref = reference(inputs, "float64")
    bad = [n for n in ("o", "lse", "dq", "dk", "dv") if not _close(getattr(got, n), getattr(ref, n))]
    assert bad == []
    assert rule_calls[0][0] == kind
    if p.varlen:
        assert rule_calls[0][3:] == (p.max_seqlen_q, p.max_seqlen_k)
    empty = torch.isneginf(ref.lse)
    assert torch.equal(torch.isneginf(got.lse), empty) and not torch.isposinf(got.lse).any()


def test_a_dropped_window_is_caught(fake_package, monkeypatch):
    """The gate of the test above: an adapter that loses the window fails it."""
    from difftest.kernels import fa3_jax
    from difftest.kernels.fa3 import Fa3Call
    from difftest.model.inputs import make_inputs
    from difftest.oracles.reference import reference

    p = TRANSLATED[1].validate()
    monkeypatch.setattr(
        fa3_jax, "call_for", lambda q: Fa3Call(causal=False, window=(-1, -1), scale=q.scale, longest=None)
    )
    inputs = make_inputs(p)
    got, ref = fa3_jax.adapter().run(inputs), reference(inputs, "float64")
    assert not _close(got.o, ref.o)
