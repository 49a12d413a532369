"""The chunked truth's outputs, pinned: ``chunked_reference`` over a dozen Problems and option
sets (every path of its chunk loop on the CPU: float64 and float32, the magnitudes in each
precision, the softmax shift in the GEMM and the split magnitude terms that CUDA takes (forced
on), flash rounding with its overflow edge, block skipping on and off, fixed chunks and an
element budget), recorded in tests/data/chunked_pins.pt from the code as it was before
``chunked_reference`` was cut into a plan and passes (#45). A restructuring must give the same
bits: every output, the overflow-edge rows, the magnitudes and the pass counts.

Bit equality is asserted where the recording's environment (torch version, CPU capability,
threads) is this one; elsewhere a BLAS may sum a GEMM in another order, so the outputs are
compared within 64 float64 ulps of each output's largest element (the magnitudes, float32 and
bfloat16 sums, within 1e-5). ``python tests/test_chunked_pins.py --record`` records them again
(only when a change of the values is intended)."""

import sys
from pathlib import Path

import pytest
import torch

from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles import chunked_reference
from tests.test_dtype_limits import _edge_inputs

PINS_FILE = Path(__file__).resolve().parent / "data" / "chunked_pins.pt"
S = dict(head_dim_qk=8, head_dim_v=8)

# name -> (Problem, chunked_reference options, CUDA's per-device choices forced on the CPU)
PINS = {
    "varlen_empty_chunk2_magnitudes": (
        Problem(batch=4, seqlen_q=(3, 0, 5, 2), seqlen_k=(4, 3, 0, 6), heads_q=2, heads_kv=1, causal=True, **S),
        dict(chunk=2, magnitudes=True),
        False,
    ),
    "sinks_gqa_float64_magnitudes": (
        Problem(batch=2, seqlen_q=9, seqlen_k=13, heads_q=4, heads_kv=2, sinks=True, sink_center=0.5, **S),
        dict(magnitudes=True, magnitudes_dtype="float64"),
        False,
    ),
    "window_varlen_sinks_budget": (
        Problem(
            batch=3,
            seqlen_q=(0, 70, 90),
            seqlen_k=(40, 0, 85),
            heads_q=2,
            heads_kv=1,
            window_left=9,
            window_right=4,
            sinks=True,
            pad_tail=3,
            **S,
        ),
        dict(magnitudes=True, max_chunk_elements=600),
        False,
    ),
    "rows_past_the_keys_cuda_like_bf16_magnitudes": (
        Problem(
            batch=2,
            seqlen_q=(40, 9),
            seqlen_k=(8, 30),
            heads_q=4,
            heads_kv=1,
            causal=True,
            align="top_left",
            window_left=0,
            sinks=True,
            **S,
        ),
        dict(chunk=7, magnitudes=True, magnitudes_dtype="bfloat16"),
        True,
    ),
    "long_causal_cuda_like": (
        Problem(
            seqlen_q=100,
            seqlen_k=100,
            heads_q=2,
            heads_kv=1,
            causal=True,
            head_dim_qk=16,
            head_dim_v=8,
            dtype="float16",
        ),
        dict(magnitudes=True),
        True,
    ),
    "long_causal_cuda_like_no_magnitudes": (
        Problem(
            seqlen_q=100,
            seqlen_k=100,
            heads_q=2,
            heads_kv=1,
            causal=True,
            head_dim_qk=16,
            head_dim_v=8,
            dtype="float16",
        ),
        dict(chunk=20),
        True,
    ),
    "huge_logits_cuda_like": (
        Problem(
            seqlen_q=40,
            seqlen_k=50,
            heads_q=2,
            heads_kv=1,
            causal=True,
            values="scaled",
            value_scale=40.0,
            sinks=True,
            head_dim_qk=16,
            head_dim_v=8,
        ),
        dict(chunk=7, magnitudes=True),
        True,
    ),
    "window_past_the_keys_full_walk": (
        Problem(seqlen_q=37, seqlen_k=6, heads_q=2, heads_kv=2, align="top_left", window_left=2, window_right=1, **S),
        dict(magnitudes=True, magnitudes_dtype="float64", skip_masked=False),
        True,
    ),
    "scale_large_logits_float64": (
        Problem(seqlen_q=5, seqlen_k=5, softmax_scale=2.0, values="scaled", value_scale=2.0, **S),
        dict(),
        False,
    ),
    "fp16_flash_rounding_edge": (
        Problem(
            batch=2,
            seqlen_q=(17, 9),
            seqlen_k=(12, 20),
            heads_q=4,
            heads_kv=2,
            causal=True,
            sinks=True,
            values="scaled",
            value_scale=60.0,
            dtype="float16",
            **S,
        ),
        dict(precision="float32", flash_rounding=True, chunk=5, magnitudes=True),
        False,
    ),
    "bf16_float32_full_walk_budget": (
        Problem(
            batch=2, seqlen_q=(20, 31), seqlen_k=(25, 18), heads_q=3, heads_kv=1, window_left=4, dtype="bfloat16", **S
        ),
        dict(precision="float32", max_chunk_elements=500, skip_masked=False),
        False,
    ),
    # inputs crafted so that dS sits at fp16's rounding edge (tests/test_dtype_limits.py): edge rows set
    "fp16_ds_at_the_overflow_edge": ("edge", dict(precision="float32", flash_rounding=True, magnitudes=True), False),
    "float32_flash_rounding_fully_masked_sinks": (
        Problem(seqlen_q=6, seqlen_k=3, causal=True, sinks=True, **S),
        dict(precision="float32", flash_rounding=True, chunk=2),
        False,
    ),
}


def environment() -> dict:
    """What a float64 GEMM's order of summation may depend on."""
    return {
        "torch": str(torch.__version__),
        "cpu": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }


def outputs_of(name: str) -> dict:
    """``chunked_reference`` of pin ``name`` as plain tensors (and the magnitudes as a float64 one)."""
    import difftest.oracles.chunked as chunked

    problem, options, cuda_like = PINS[name]
    old = {flag: getattr(chunked, flag)["cpu"] for flag in ("SHIFT_IN_GEMM", "SPLIT_TERMS")}
    try:
        for flag in old:
            getattr(chunked, flag)["cpu"] = cuda_like or old[flag]
        out = chunked_reference(_edge_inputs(1.0) if problem == "edge" else make_inputs(problem), **options)
    finally:
        for flag, value in old.items():
            getattr(chunked, flag)["cpu"] = value
    got = {n: t.clone() for n, t in out.items()}
    for n, t in (out.overflow_edge or {}).items():
        got[f"overflow_edge.{n}"] = t.clone()
    if out.magnitude is not None:
        got["magnitude"] = torch.tensor([out.magnitude[k] for k in sorted(out.magnitude)], dtype=torch.float64)
        got["magnitude_names"] = sorted(out.magnitude)
    got["fused_chunks"] = (out.fused_chunks, out.fused_gemm_chunks)
    return got


def _pins() -> dict:
    if not PINS_FILE.exists():
        pytest.fail(f"{PINS_FILE} missing: record it with `python tests/test_chunked_pins.py --record`")
    return torch.load(PINS_FILE, weights_only=True)


@pytest.mark.parametrize("name", list(PINS))
def test_the_chunked_truth_gives_the_pinned_outputs(name):
    pins = _pins()
    want, got = pins["outputs"][name], outputs_of(name)
    assert sorted(got) == sorted(want), name
    exact = pins["environment"] == environment()
    for key, w in want.items():
        g = got[key]
        if not isinstance(w, torch.Tensor):
            assert g == w, key
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, key
        if exact or w.dtype == torch.bool:
            assert torch.equal(g, w), f"{name} {key}: not the pinned bits"
        else:
            finite = torch.isfinite(w)
            assert torch.equal(finite, torch.isfinite(g)) and torch.equal(g[~finite], w[~finite]), key
            big = w.double()[finite].abs().max().item() if finite.any() else 1.0
            # another thread count sums in another order: 64 units of the output's own precision
            # (a float32 pin's last bits move by float32 ulps, not float64 ones)
            tol = 1e-5 * big if key == "magnitude" else 64 * torch.finfo(w.dtype).eps * max(1.0, big)
            assert (g.double()[finite] - w.double()[finite]).abs().max().item() <= tol if finite.any() else True, key


def test_the_pins_cover_every_option_of_the_chunk_loop():
    """Both precisions, every magnitude dtype, flash rounding, both walks, both chunk rules and
    CUDA's device choices each appear in some pin (the fused Triton passes need Triton and are
    pinned against the eager ones by tests/test_fused_passes.py)."""
    options = [o for _, o, _ in PINS.values()]
    assert {o.get("precision", "float64") for o in options} == {"float64", "float32"}
    assert {o.get("magnitudes_dtype") for o in options if o.get("magnitudes")} >= {None, "float64", "bfloat16"}
    assert any(o.get("flash_rounding") for o in options) and any(o.get("skip_masked") is False for o in options)
    assert any("chunk" in o for o in options) and any("max_chunk_elements" in o for o in options)
    assert {cuda_like for _, _, cuda_like in PINS.values()} == {True, False}


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    torch.save({"environment": environment(), "outputs": {n: outputs_of(n) for n in PINS}}, PINS_FILE)
    print(f"recorded {len(PINS)} pins in {PINS_FILE} ({PINS_FILE.stat().st_size} bytes)")
