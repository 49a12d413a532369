"""Backward timing of registered kernels: ``difftest bench`` (CUDA events), and of the
float64 truth next to FA3: ``difftest bench --oracle``.

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

``--oracle`` times the float64 truth exactly as the runner calls it
(``chunked_reference(inputs, "float64", magnitudes=True)``, oracles/chunked.py; magnitudes
in chunked.MAGNITUDES_DTYPE unless ``--magnitudes-dtype``) on causal
B,H,S,D shapes, with its peak memory on CUDA (``torch.cuda.max_memory_allocated`` above
what the inputs already held), and, in the same run, the backward of the kernels named
with ``-k`` (default ``fa3``) on the same Problem, so the row's ``x_kernel`` is
truth seconds / kernel backward seconds. The kernel is timed at every listed length even
past its capability's ``max_seqlen`` (FA3 declares 8192 for campaigns; speed is not a
correctness claim): such a row carries a ``note`` saying so, and a kernel that then fails
is a row with its error. Without CUDA (or without FA3) the kernel columns
say why they are missing and the truth is still timed, on the CPU. An out-of-memory truth
is a row with status "oom", not a crash.

``--inputs`` times ``make_inputs`` (the input draw, as the runner calls it: on the campaign's
device, every tensor synchronised) for each value kind on B,H,S,D shapes, min over
``--inputs-repeats`` calls after a warm-up, with the digest of what it drew. ``--before DIR``
times a second difftest checkout's ``make_inputs`` (an older commit, e.g. ``git archive REV |
tar -x -C DIR``) on the same Problems, and each row says whether the two drew the same bytes.
Both run in child processes of the same harness (``_INPUT_TIMER``), the older one with DIR
first on the path; results/input-speed.md holds the numbers.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from difftest.execute import adapter as registry
from difftest.model.inputs import make_inputs
from difftest.model.problem import VALUE_KINDS, Problem
from difftest.oracles.chunked import MAGNITUDES_DTYPE, auto_chunk_elements, chunk_plan, chunked_reference
from difftest.strategies.values import SCALES, clamp_scale

# (B, H, S, D) shapes from the issue; GQA variants use 8 key/value heads.
DEFAULT_SHAPES = ((4, 32, 512, 128), (2, 32, 2048, 128))


def shape_problems(shapes=DEFAULT_SHAPES, dtypes=("float16", "bfloat16"), causal=True, gqa_kv=8):
    """The benchmark Problems: each shape x dtype, MHA and GQA (``gqa_kv`` key heads)."""
    out = []
    for b, h, s, d in shapes:
        for dt in dtypes:
            for hkv in (h, gqa_kv):
                out.append(
                    Problem(
                        batch=b,
                        seqlen_q=s,
                        seqlen_k=s,
                        heads_q=h,
                        heads_kv=hkv,
                        head_dim_qk=d,
                        head_dim_v=d,
                        dtype=dt,
                        causal=causal,
                    ).validate()
                )
    return out


def time_backward(
    kernel, problem: Problem, repeats: int = 20, warmup: int = 3, beyond_max_seqlen: bool = False
) -> dict:
    """Median/min backward microseconds of one kernel on one Problem (GPU).
    ``beyond_max_seqlen`` (the oracle bench): time a Problem longer than the capability's
    ``max_seqlen`` anyway (every other field of the capability still applies); the row says
    so in ``note``. Speed is not a correctness claim: campaigns never draw such a Problem."""
    cap, note = kernel.capability, None
    longest = max(problem.max_seqlen_q, problem.max_seqlen_k)
    if beyond_max_seqlen and longest > cap.max_seqlen:
        note = (
            f"timed beyond the capability's max_seqlen={cap.max_seqlen} (speed only: "
            f"campaigns never draw S={longest} for {kernel.name})"
        )
        cap = replace(cap, max_seqlen=longest)
    why = cap.excludes(problem) or kernel.available()
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
    row = {"status": "ok", "median_us": statistics.median(times), "min_us": min(times), "repeats": repeats, "how": how}
    if not hasattr(kernel, "bench_backward"):
        row.update(dev)
    if note:
        row["note"] = note
    return row


def gpu_activity(events) -> tuple[float, int]:
    """(total microseconds, count) of the GPU activities (kernels, memcpy, memset) among
    profiler events: those whose ``device_type`` is CUDA."""
    total, n = 0.0, 0
    for e in events:
        if getattr(e, "device_type", None) == DeviceType.CUDA:
            total += e.time_range.elapsed_us()
            n += 1
    return total, n


def device_time(call, repeats: int) -> dict:
    """Mean GPU time per ``call()`` (every activity it launches, summed) and the number of
    activities per call, from one profiled run of ``repeats`` calls."""
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
    lines = [
        "| kernel | problem | median us | min us | device us (CUPTI) | GPU activities per call | how |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if r["status"] == "ok":
            dev = (
                f"{r['device_us']:.1f} | {r['kernels']:.0f}"
                if "device_us" in r
                else f"n/a | {r.get('device_error', 'timed in its worker')[:80]}"
            )
            lines.append(
                f"| {r['kernel']} | {r['problem']} | {r['median_us']:.1f} | {r['min_us']:.1f} | {dev} | {r['how']} |"
            )
        else:
            lines.append(f"| {r['kernel']} | {r['problem']} | {r['status']} | | | | {r.get('reason', '')[:120]} |")
    return "\n".join(lines)


# (B, H, S, D) shapes of the issue-12 truth benchmark: B1 H8 D128 causal
ORACLE_SHAPES = tuple((1, 8, s, 128) for s in (4096, 16384, 32768, 65536, 131072))


def time_oracle(
    problem: Problem,
    device: str,
    repeats: int = 1,
    skip_masked: bool = True,
    magnitudes_dtype: str | None = None,
    fused_passes: bool | None = None,
    fused_gemms: bool | None = None,
) -> dict:
    """Seconds (min over ``repeats``) and peak extra memory of the float64 truth;
    ``fused_passes`` as chunked_reference takes it (None: as the runner calls it)."""
    inputs = make_inputs(problem, device)
    cuda = torch.device(device).type == "cuda"
    budget = auto_chunk_elements(device)
    plans = [
        chunk_plan(problem, sq, sk, budget, skip_masked=skip_masked)
        for sq, sk in zip(problem.seqlens_q, problem.seqlens_k)
    ]
    chunks = sum(map(len, plans))
    times, peak, mallocs, fused, gemms = [], None, [], 0, 0
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            before = _allocator_counts()
        t0 = time.perf_counter()
        try:
            out = chunked_reference(
                inputs,
                "float64",
                magnitudes=True,
                skip_masked=skip_masked,
                magnitudes_dtype=magnitudes_dtype,
                fused_passes=fused_passes,
                fused_gemms=fused_gemms,
            )
            if cuda:
                torch.cuda.synchronize()
        except torch.OutOfMemoryError as e:
            return {"status": "oom", "reason": str(e).splitlines()[0][:200], "chunks": chunks}
        times.append(time.perf_counter() - t0)
        if cuda:
            peak = (torch.cuda.max_memory_allocated() - base) / 2**30
            mallocs.append({k: v - before[k] for k, v in _allocator_counts().items()})
        fused, gemms = out.fused_chunks, out.fused_gemm_chunks
        del out
    row = {
        "status": "ok",
        "seconds": min(times),
        "all_seconds": times,
        "repeats": repeats,
        "chunks": chunks,
        "chunk_elements": budget,
        "skip_masked": skip_masked,
        "magnitudes_dtype": magnitudes_dtype or MAGNITUDES_DTYPE.get(torch.device(device).type, "float32"),
        "passes": ("fused+gemms" if gemms else "fused") if fused else "eager",
        "fused_chunks": fused,
        "fused_gemm_chunks": gemms,
    }
    if peak is not None:
        row["peak_gib"] = peak
        row["allocator"] = mallocs  # per repeat: cudaMalloc/cudaFree calls and retries inside the timed call
    return row


def _allocator_counts() -> dict:
    """The CUDA caching allocator's device allocations, frees and retries so far (a timed
    call that maps new memory or frees the cache to retry pays for it in wall time)."""
    st = torch.cuda.memory_stats()
    return {k: int(st.get(k, 0)) for k in ("num_device_alloc", "num_device_free", "num_alloc_retries")}


def run_oracle_bench(
    shapes,
    kernels=("fa3",),
    dtype="bfloat16",
    device=None,
    repeats=1,
    kernel_repeats=10,
    unskipped=False,
    log=print,
    magnitudes_dtype=None,
    eager=False,
    passes_only=False,
    float32_magnitudes=False,
) -> list[dict]:
    """One row per shape: the truth next to each kernel's backward on the same Problem, and
    the truth's VARIANTS asked for, timed right after it: ``unskipped`` (the walk without
    block skipping), ``eager`` (elementwise passes unfused), ``passes_only`` (passes fused, the
    Q K^T and dO V^T GEMMs not), ``float32_magnitudes`` (TF32 magnitude GEMMs)."""
    wanted = {
        "truth_unskipped": unskipped,
        "truth_eager": eager,
        "truth_passes_only": passes_only,
        "truth_float32_magnitudes": float32_magnitudes,
    }
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if torch.device(device).type == "cuda":  # cuBLAS/handles and the fused passes' JIT outside the timings
        time_oracle(shape_problems([(1, 8, 4096, 128)], (dtype,), True, 1)[0], device)
    rows = []
    for b, h, s, d in shapes:
        p = Problem(
            batch=b,
            seqlen_q=s,
            seqlen_k=s,
            heads_q=h,
            heads_kv=h,
            head_dim_qk=d,
            head_dim_v=d,
            dtype=dtype,
            causal=True,
        ).validate()
        row = {
            "problem": p.short(),
            "shape": [b, h, s, d],
            "device": device,
            "truth": time_oracle(p, device, repeats, magnitudes_dtype=magnitudes_dtype),
        }
        for key, _, how in VARIANTS:
            if wanted[key]:
                row[key] = time_oracle(p, device, repeats, **{"magnitudes_dtype": magnitudes_dtype, **how})
        row["kernels"] = {}
        for name in kernels:
            if torch.device(device).type != "cuda":
                r = {"status": "skipped", "reason": f"the truth runs on {device}: kernel timings need CUDA"}
            else:
                try:
                    r = time_backward(registry.get(name), p, kernel_repeats, 3, beyond_max_seqlen=True)
                except Exception as e:  # a kernel that fails to run is a column, not a crash
                    r = {"status": "error", "reason": f"{type(e).__name__}: {e}"[:300]}
                    if max(p.max_seqlen_q, p.max_seqlen_k) > registry.get(name).capability.max_seqlen:
                        r["note"] = "beyond the capability's max_seqlen (timing only)"
            t = row["truth"]
            if r["status"] == "ok" and t["status"] == "ok":
                r["truth_over_kernel"] = t["seconds"] / (r["median_us"] * 1e-6)
            row["kernels"][name] = r
        rows.append(row)
        log(_oracle_text(row))
        if torch.device(device).type == "cuda":
            torch.cuda.empty_cache()
    return rows


# the truth's other timings a row may carry: (key, label, time_oracle's arguments)
VARIANTS = (
    ("truth_unskipped", "unskipped", {"skip_masked": False}),
    ("truth_eager", "eager", {"fused_passes": False}),
    ("truth_passes_only", "passes only", {"fused_gemms": False}),
    ("truth_float32_magnitudes", "float32 magnitudes", {"magnitudes_dtype": "float32"}),
)


def _oracle_text(row: dict) -> str:
    def truth(t, label):
        if t["status"] != "ok":
            return f"{label} {t['status']}: {t.get('reason', '')[:80]}"
        mem = f" peak {t['peak_gib']:.2f} GiB" if "peak_gib" in t else ""
        return f"{label} {t['seconds']:8.3f} s ({t['chunks']} chunks, {t['passes']} passes){mem}"

    parts = [f"{row['problem']:<44}", truth(row["truth"], "truth")]
    for key, label, _ in VARIANTS:
        if key in row:
            parts.append(truth(row[key], label))
    for name, r in row["kernels"].items():
        if r["status"] == "ok":
            parts.append(
                f"{name} {r['median_us'] / 1000:8.2f} ms  truth/{name} {r['truth_over_kernel']:6.1f}x"
                if "truth_over_kernel" in r
                else f"{name} {r['median_us'] / 1000:8.2f} ms"
            )
            if "note" in r:
                parts.append("(beyond its max_seqlen: timing only)")
        else:
            parts.append(f"{name} {r['status']}: {r.get('reason', '')[:100]}")
    return "  ".join(parts)


def oracle_markdown(rows: list[dict]) -> str:
    kernels = sorted({k for r in rows for k in r["kernels"]})
    head = ["problem", "device", "truth s", "peak GiB", "chunks", "passes"]
    variants = [(key, label) for key, label, _ in VARIANTS if any(key in r for r in rows)]
    for _, label in variants:
        head += [f"{label} s", f"{label} peak GiB"]
    for k in kernels:
        head += [f"{k} bwd ms", f"truth / {k}"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]

    def t_cells(t):
        if t["status"] != "ok":
            return [t["status"], "", str(t.get("chunks", "")), ""]
        return [
            f"{t['seconds']:.3f}",
            f"{t['peak_gib']:.2f}" if "peak_gib" in t else "n/a",
            str(t["chunks"]),
            t["passes"],
        ]

    for r in rows:
        cells = [r["problem"], r["device"], *t_cells(r["truth"])]
        for key, _ in variants:
            cells += t_cells(r[key])[:2] if key in r else ["", ""]
        for k in kernels:
            kr = r["kernels"].get(k, {"status": "n/a"})
            if kr["status"] == "ok":
                x = kr.get("truth_over_kernel")
                beyond = " (beyond max_seqlen, timing only)" if "note" in kr else ""
                cells += [f"{kr['median_us'] / 1000:.2f}{beyond}", f"{x:.1f}x" if x else ""]
            else:
                cells += [kr["status"], kr.get("reason", "")[:60]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# (B, H, S, D) shapes of the input-draw benchmark: realistic campaign sizes
INPUT_SHAPES = ((1, 8, 1024, 128), (1, 8, 4096, 128))


def input_problems(
    shapes=INPUT_SHAPES, dtypes=("float16", "bfloat16"), kinds=None, causal=True, gqa_kv=8
) -> list[Problem]:
    """One Problem per value kind x shape x dtype: ``gqa_kv`` key heads (where it divides H,
    else H), each kind at the middle of its ladder of named scales (strategies/values.py),
    clamped to what the dtype allows."""
    out = []
    for kind in kinds or VALUE_KINDS:
        ladder = SCALES[kind][0]
        for b, h, s, d in shapes:
            for dt in dtypes:
                hkv = gqa_kv if gqa_kv <= h and h % gqa_kv == 0 else h
                out.append(
                    Problem(
                        batch=b,
                        seqlen_q=s,
                        seqlen_k=s,
                        heads_q=h,
                        heads_kv=hkv,
                        head_dim_qk=d,
                        head_dim_v=d,
                        dtype=dt,
                        causal=causal,
                        values=kind,
                        value_scale=clamp_scale(kind, ladder[len(ladder) // 2], dt),
                        seed=20261202,
                    ).validate()
                )
    return out


# The timing loop, run in a child process whose ``difftest`` is the checkout being timed; it
# needs nothing but make_inputs and Problem.from_json, so an older checkout runs it unchanged.
_INPUT_TIMER = """
import json, sys, time
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
a = json.loads(sys.stdin.read())
cuda = torch.device(a["device"]).type == "cuda"
SYNCS = ("_local_scalar_dense", "nonzero", "item")
class Count(TorchDispatchMode):
    ops = syncs = 0
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        Count.ops += 1
        Count.syncs += func.__name__.split(".")[0] in SYNCS
        return func(*args, **(kwargs or {}))
def sync():
    if cuda:
        torch.cuda.synchronize()
make_inputs(Problem.from_json(a["problems"][0]).replace(seqlen_q=8, seqlen_k=8), a["device"])  # warm
for s in a["problems"]:
    p = Problem.from_json(s)
    best = cpu = None
    for _ in range(a["repeats"]):
        sync()
        t0, c0 = time.perf_counter(), time.process_time()
        x = make_inputs(p, a["device"])
        sync()
        t, c = time.perf_counter() - t0, time.process_time() - c0
        best, cpu = (t, c) if best is None else (min(best, t), min(cpu, c))
    row = {"seconds": best, "cpu_seconds": cpu, "digest": x.digest()}
    del x
    if a["count_ops"]:
        Count.ops = Count.syncs = 0
        with Count():
            make_inputs(p, a["device"])
        row.update(ops=Count.ops, host_syncs=Count.syncs)
    print(json.dumps(row), flush=True)
    if cuda:
        torch.cuda.empty_cache()
"""


def time_inputs(problems, device: str, repeats: int = 3, checkout=None, log=print, count_ops=False) -> list[dict]:
    """Per Problem: wall and CPU seconds of ``make_inputs`` (each the min over ``repeats``) and
    its digest, timed in a child process whose ``difftest`` is ``checkout`` (a folder; None:
    this one). ``count_ops``: one more, untimed draw counts the ATen operations it dispatches
    (on a GPU, about one kernel launch each) and those that wait for the device
    (``.item()``/``bool()``, ``nonzero``): what a draw costs a GPU beyond its arithmetic."""
    root = Path(checkout).resolve() if checkout else Path(__file__).resolve().parents[2]
    path = [str(root)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    proc = subprocess.Popen(
        [sys.executable, "-c", _INPUT_TIMER],
        cwd=str(root),
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(path)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    proc.stdin.write(
        json.dumps(
            {"device": device, "repeats": repeats, "count_ops": count_ops, "problems": [p.to_json() for p in problems]}
        )
    )
    proc.stdin.close()
    rows = []
    for p, line in zip(problems, proc.stdout):
        r = json.loads(line)
        rows.append(r)
        ops = f"  {r['ops']:8d} ops, {r['host_syncs']} syncs" if "ops" in r else ""
        log(
            f"{'before' if checkout else 'after':>6}  {p.values:<17} {p.short():<60} {r['seconds']:9.3f} s "
            f"(cpu {r['cpu_seconds']:.3f} s){ops}"
        )
    if proc.wait() != 0 or len(rows) != len(problems):
        raise RuntimeError(f"the input timer in {root} failed (exit code {proc.returncode})")
    return rows


def run_inputs_bench(
    problems, device: str, repeats: int = 3, before=None, log=print, count_ops: bool = False
) -> list[dict]:
    """Rows: kind, problem, device, seconds (wall, CPU) and digest of this checkout's draw,
    and with ``before`` (another checkout's folder) its seconds, the speedup and whether the
    bytes match; ``count_ops``: the operations and host syncs of each (``time_inputs``)."""
    after = time_inputs(problems, device, repeats, log=log, count_ops=count_ops)
    old = time_inputs(problems, device, repeats, before, log=log, count_ops=count_ops) if before else None
    rows = []
    for i, p in enumerate(problems):
        row = {
            "kind": p.values,
            "problem": p.short(),
            "device": device,
            **{k: after[i][k] for k in ("seconds", "cpu_seconds", "digest", "ops", "host_syncs") if k in after[i]},
        }
        if old:
            row.update(
                {f"before_{k}": old[i][k] for k in ("seconds", "cpu_seconds", "ops", "host_syncs") if k in old[i]}
            )
            row.update(
                speedup=old[i]["seconds"] / after[i]["seconds"], same_bytes=old[i]["digest"] == after[i]["digest"]
            )
        rows.append(row)
    return rows


def inputs_markdown(rows: list[dict]) -> str:
    before = any("before_seconds" in r for r in rows)
    ops = any("ops" in r for r in rows)
    head = ["kind", "problem", "device"]
    if before:
        head += ["before s", "after s", "speedup", "before CPU s", "after CPU s", "same bytes"]
        head += ["ops before", "ops after", "host syncs before", "after"] if ops else []
    else:
        head += ["s", "CPU s"] + (["ops", "host syncs"] if ops else [])
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cells = [r["kind"], r["problem"], r["device"]]
        if before:
            cells += [
                f"{r['before_seconds']:.3f}",
                f"{r['seconds']:.3f}",
                f"{r['speedup']:.1f}x",
                f"{r['before_cpu_seconds']:.3f}",
                f"{r['cpu_seconds']:.3f}",
                "yes" if r["same_bytes"] else "NO",
            ]
            if ops:
                cells += [
                    str(r.get("before_ops", "")),
                    str(r.get("ops", "")),
                    str(r.get("before_host_syncs", "")),
                    str(r.get("host_syncs", "")),
                ]
        else:
            cells += [f"{r['seconds']:.3f}", f"{r['cpu_seconds']:.3f}"]
            cells += [str(r.get("ops", "")), str(r.get("host_syncs", ""))] if ops else []
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
