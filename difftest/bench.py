"""Backward timing of registered kernels: ``difftest bench`` (CUDA events).

For each kernel and shape: build the Problem's inputs on the GPU, run the kernel's
forward once, then time ``backward`` (the adapter call, so layout conversions the adapter
does are included) with CUDA events around each call: ``warmup`` untimed calls, then
``repeats`` timed ones; the median and min are reported in microseconds. Kernels whose
backward runs in another process or on another stream (TileOPs worker, FA3 through JAX)
say so in ``how``: TileOPs times inside its worker with CUDA events around the op;
FA3/dew is host wall clock of the adapter call including JAX dispatch (its backward
blocks until JAX is done, so the events bracket the whole call).

Host-side overhead (layout copies, Python glue, JAX dispatch) differs between adapters, so
each row also has ``device_us``: the GPU time of every kernel, memcpy and memset the
backward call launched, summed per call, as CUPTI records it through ``torch.profiler``
(process-wide, so FA3's kernels launched by JAX are counted too), with ``kernels``: how many
GPU activities one call launched. That column compares the kernels themselves.
"""

import json
import statistics
import sys
import time

import torch

from . import adapter as registry
from .inputs import make_inputs
from .problem import Problem

# (B, H, S, D) shapes from the issue; GQA variants use 8 key/value heads.
DEFAULT_SHAPES = ((4, 32, 512, 128), (2, 32, 2048, 128))


def shape_problems(shapes=DEFAULT_SHAPES, dtypes=("float16", "bfloat16"), causal=True, gqa_kv=8):
    """The benchmark Problems: each shape x dtype, MHA and GQA (``gqa_kv`` key heads)."""
    out = []
    for (b, h, s, d) in shapes:
        for dt in dtypes:
            for hkv in (h, gqa_kv):
                out.append(Problem(batch=b, seqlen_q=s, seqlen_k=s, heads_q=h, heads_kv=hkv,
                                   head_dim_qk=d, head_dim_v=d, dtype=dt, causal=causal).validate())
    return out


def time_backward(kernel, problem: Problem, repeats: int = 20, warmup: int = 3) -> dict:
    """Median/min backward microseconds of one kernel on one Problem (GPU)."""
    why = kernel.capability.excludes(problem) or kernel.available()
    if why:
        return {"status": "skipped", "reason": why}
    inputs = make_inputs(problem, "cuda")
    fwd, ctx = kernel.forward(inputs)
    how = "cuda events around adapter.backward"
    if hasattr(kernel, "bench_backward"):
        times = kernel.bench_backward(inputs, ctx, repeats=repeats, warmup=warmup)
        how = "cuda events inside the kernel's worker process"
    else:
        for _ in range(warmup):
            kernel.backward(inputs, fwd, ctx)
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            kernel.backward(inputs, fwd, ctx)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1000.0)
        if kernel.name == "fa3":
            how = "cuda events around adapter.backward (JAX stream; call blocks until done: wall clock incl. dispatch)"
        try:
            dev = device_time(lambda: kernel.backward(inputs, fwd, ctx), repeats)
        except Exception as e:  # the profiler is an extra column, never a failed row
            dev = {"device_error": f"{type(e).__name__}: {e}"[:200]}
    row = {"status": "ok", "median_us": statistics.median(times), "min_us": min(times),
           "repeats": repeats, "how": how}
    if not hasattr(kernel, "bench_backward"):
        row.update(dev)
    return row


def gpu_activity(events) -> tuple[float, int]:
    """(total microseconds, count) of the GPU activities (kernels, memcpy, memset) among
    profiler events: those whose ``device_type`` is CUDA."""
    from torch.autograd import DeviceType

    total, n = 0.0, 0
    for e in events:
        if getattr(e, "device_type", None) == DeviceType.CUDA:
            total += e.time_range.elapsed_us()
            n += 1
    return total, n


def device_time(call, repeats: int) -> dict:
    """Mean GPU time per ``call()`` (every activity it launches, summed) and the number of
    activities per call, from one profiled run of ``repeats`` calls."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            call()
        torch.cuda.synchronize()
    total, n = gpu_activity(prof.events())
    return {"device_us": total / repeats, "kernels": n / repeats}


def run_bench(kernel_names, problems, repeats=20, warmup=3, log=print) -> list[dict]:
    rows = []
    for name in kernel_names:
        k = registry.get(name)
        for p in problems:
            t0 = time.perf_counter()
            try:
                r = time_backward(k, p, repeats, warmup)
            except Exception as e:  # a kernel that fails to run is a row, not a crash
                r = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
            r.update(kernel=name, problem=p.short(), seconds=round(time.perf_counter() - t0, 2))
            rows.append(r)
            log(_row_text(r))
    return rows


def _row_text(r: dict) -> str:
    if r["status"] == "ok":
        dev = f"  device {r['device_us']:9.1f} us ({r['kernels']:.0f} kernels)" if "device_us" in r else ""
        return f"{r['kernel']:>12}  {r['problem']:<48} median {r['median_us']:9.1f} us  min {r['min_us']:9.1f} us{dev}"
    return f"{r['kernel']:>12}  {r['problem']:<48} {r['status']}: {r.get('reason', '')[:160]}"


def markdown(rows: list[dict]) -> str:
    lines = ["| kernel | problem | median us | min us | device us (CUPTI) | GPU activities per call | how |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["status"] == "ok":
            dev = (f"{r['device_us']:.1f} | {r['kernels']:.0f}" if "device_us" in r
                   else f"n/a | {r.get('device_error', 'timed in its worker')[:80]}")
            lines.append(f"| {r['kernel']} | {r['problem']} | {r['median_us']:.1f} | {r['min_us']:.1f} | {dev} | {r['how']} |")
        else:
            lines.append(f"| {r['kernel']} | {r['problem']} | {r['status']} | | | | {r.get('reason', '')[:120]} |")
    return "\n".join(lines)


def add_arguments(p) -> None:
    from .argcheck import nonneg_int, positive_int

    p.add_argument("--kernel", "-k", action="append", dest="kernels", required=True, metavar="NAME")
    p.add_argument("--shape", action="append", metavar="B,H,S,D", help="default: 4,32,512,128 and 2,32,2048,128")
    p.add_argument("--dtype", action="append", choices=("float16", "bfloat16"))
    p.add_argument("--no-causal", action="store_true")
    p.add_argument("--gqa-kv", type=positive_int, default=8, help="key/value heads of the GQA variant")
    p.add_argument("--repeats", type=positive_int, default=20)
    p.add_argument("--warmup", type=nonneg_int, default=3)
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--markdown", help="write a markdown table here")


def command(a) -> int:
    from .argcheck import UsageError

    if not torch.cuda.is_available():
        print("difftest bench: needs a CUDA device", file=sys.stderr)
        return 2
    shapes = DEFAULT_SHAPES
    if a.shape:
        try:
            shapes = tuple(tuple(int(x) for x in s.split(",")) for s in a.shape)
        except ValueError:
            raise UsageError("--shape: allowed B,H,S,D integers, e.g. 4,32,512,128") from None
        if any(len(s) != 4 for s in shapes):
            raise UsageError("--shape: allowed exactly four integers B,H,S,D")
    problems = shape_problems(shapes, tuple(a.dtype or ("float16", "bfloat16")), not a.no_causal, a.gqa_kv)
    rows = run_bench(a.kernels, problems, a.repeats, a.warmup)
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "argv": sys.argv[1:]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"env": env, "rows": rows}, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(rows) + "\n")
    return 0 if all(r["status"] != "error" for r in rows) else 1
