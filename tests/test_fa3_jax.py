"""The flash-attn3-jax adapter (kernels/fa3_jax.py) on CPU: its capability is the package's
contract, it says why it cannot run here, and its pure conversions (the package's LSE
buffers to difftest's packed natural-log LSE, FA3's window and causal arguments) are exact.
The kernels themselves run only on an H200 (scripts/device/one.sh R5)."""

import sys
import tomllib
from pathlib import Path

import pytest
import torch

from difftest import adapter as registry
from difftest.problem import Problem

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
    assert k.name == "fa3-jax"
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
    buf.view(-1)[:H * T] = truth.reshape(-1)
    got = lse_to_thd(buf, p)
    assert got.shape == (T, H) and torch.equal(got, truth.t())
    with pytest.raises(ValueError, match="heads_q\\*total_q"):
        lse_to_thd(buf.view(-1)[:H * T - 1], p)


def test_window_causal_and_scale_are_fa3s_arguments():
    from difftest.kernels.fa3_jax import call_for

    c = call_for(Problem(seqlen_q=8, seqlen_k=12, window_left=3, window_right=None, softmax_scale=0.5, **D).validate())
    assert c.window == (3, -1) and not c.causal and c.longest is None
    assert type(c.scale) is float and c.scale == 0.5  # flash_mha asserts a python float
    c = call_for(Problem(batch=2, seqlen_q=(3, 4), seqlen_k=(5, 2), causal=True, **D).validate())
    assert c.causal and c.window == (-1, -1) and c.longest == (4, 5)
    with pytest.raises(ValueError, match="align"):
        call_for(Problem(seqlen_q=8, seqlen_k=12, causal=True, align="top_left", **D).validate())
