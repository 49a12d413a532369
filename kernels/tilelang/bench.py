"""Backward time of our TileLang kernels on the GPU seed shapes, next to FA3 and FA4.

    python -m difftest.kernels.tilelang.bench --json out.json --markdown out.md [--repeats 20]
        [--dtype float16 --dtype bfloat16] [--determinism 20] [--no-others]

Shapes (difftest.measure.bench.shape_problems): B,H,S,D = 4,32,512,128 and 2,32,2048,128,
causal, fp16 and bf16, each MHA and GQA with 8 kv heads. For ``tilelang`` (atomic dQ)
and ``tilelang-det`` (deterministic dQ): the first call's seconds (compile or cache
load), then ``repeats`` timed calls of ``backward`` with CUDA events around the call
(median and min, microseconds) and the median per stage (pre = Delta [+ dSink];
main = dQ accumulator zero-fill + main kernel; post = dQ cast). ``--determinism N``
reruns each backward N times and reports whether dQ/dK/dV (and dSink) are bitwise equal
to the first run. FA3 (``fa3``) and FA4 (``fa4``, ``fa4-fast``) are timed by
``difftest.measure.bench.time_backward`` when their adapters are available here; otherwise the
row says why.
"""

import argparse
import json
import statistics
import sys
import time

import torch

from difftest.execute import adapter as registry
from difftest.measure.bench import shape_problems, time_backward
from difftest.model.inputs import make_inputs

OURS = ("tilelang", "tilelang-det")
OTHERS = ("fa3", "fa4", "fa4-fast")


def _bits_equal(a, b) -> bool:
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def time_ours(kernel, problem, repeats: int = 20, warmup: int = 3, determinism: int = 0) -> dict:
    why = kernel.capability.excludes(problem) or kernel.available()
    if why:
        return {"status": "skipped", "reason": why}
    x = make_inputs(problem, "cuda")
    t0 = time.perf_counter()
    fwd, ctx = kernel.forward(x)
    first = kernel.backward(x, fwd, ctx)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    for _ in range(warmup):
        kernel.backward(x, fwd, ctx)
    torch.cuda.synchronize()
    totals, stages = [], {}
    for _ in range(repeats):
        kernel.stage_events = []
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        kernel.backward(x, fwd, ctx)
        b.record()
        b.synchronize()
        totals.append(a.elapsed_time(b) * 1000.0)
        ev = kernel.stage_events
        for (_, e0), (name, e1) in zip(ev, ev[1:]):
            stages.setdefault(name, []).append(e0.elapsed_time(e1) * 1000.0)
    kernel.stage_events = None
    row = {
        "status": "ok",
        "median_us": statistics.median(totals),
        "min_us": min(totals),
        "repeats": repeats,
        "first_call_s": round(first_s, 2),
        "stages_median_us": {k: statistics.median(v) for k, v in stages.items()},
        "how": "cuda events around adapter.backward",
    }
    if determinism:
        same = {n: True for n in ("dq", "dk", "dv", "dsink") if first.get(n) is not None}
        for _ in range(determinism):
            again = kernel.backward(x, fwd, ctx)
            for n in same:
                same[n] = same[n] and _bits_equal(first.get(n), again.get(n))
        torch.cuda.synchronize()
        row["determinism_runs"] = determinism
        row["bitwise_equal"] = same
    return row


def run(dtypes=("float16", "bfloat16"), repeats=20, warmup=3, determinism=0, others=True, log=print) -> list:
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark times GPU kernels")
    log(f"# {torch.cuda.get_device_name()} torch {torch.__version__}")
    try:
        import tilelang  # lazy: optional; the benchmark logs when it does not import

        log(f"# tilelang {tilelang.__version__}")
    except Exception as e:
        log(f"# tilelang not importable: {e}")
    problems = shape_problems(dtypes=tuple(dtypes))
    rows = []
    names = list(OURS) + (list(OTHERS) if others else [])
    for name in names:
        try:
            k = registry.get(name)
        except Exception as e:  # FA3/FA4 adapters may not import here
            for p in problems:
                rows.append(
                    {
                        "kernel": name,
                        "problem": p.short(),
                        "status": "unavailable",
                        "reason": f"{type(e).__name__}: {e}",
                    }
                )
            log(f"{name}: not importable here ({type(e).__name__}: {e})")
            continue
        why = k.available()
        if why:
            log(f"{name}: unavailable here ({why})")
            rows += [{"kernel": name, "problem": p.short(), "status": "unavailable", "reason": why} for p in problems]
            continue
        for p in problems:
            t0 = time.perf_counter()
            try:
                if name in OURS:
                    r = time_ours(k, p, repeats, warmup, determinism)
                else:
                    r = time_backward(k, p, repeats, warmup)
            except Exception as e:  # one failing kernel is a row, not the end of the run
                r = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
            r.update(kernel=name, problem=p.short(), seconds=round(time.perf_counter() - t0, 2))
            rows.append(r)
            log(_text(r))
    return rows


def _text(r: dict) -> str:
    if r.get("status") != "ok":
        return f"{r['kernel']:14s} {r['problem']:55s} {r.get('status')}: {r.get('reason', '')[:200]}"
    extra = ""
    if "stages_median_us" in r:
        extra += " stages " + " ".join(f"{k}={v:.0f}" for k, v in r["stages_median_us"].items())
        extra += f" first {r['first_call_s']}s"
    if "bitwise_equal" in r:
        extra += f" bitwise x{r['determinism_runs']} " + ",".join(
            f"{k}={'Y' if v else 'N'}" for k, v in r["bitwise_equal"].items()
        )
    return f"{r['kernel']:14s} {r['problem']:55s} median {r['median_us']:9.1f} us  min {r['min_us']:9.1f} us{extra}"


def markdown(rows: list) -> str:
    probs = list(dict.fromkeys(r["problem"] for r in rows))
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    cell = {(r["kernel"], r["problem"]): r for r in rows}
    out = ["| problem | " + " | ".join(kernels) + " |", "|---" * (len(kernels) + 1) + "|"]
    for p in probs:
        cells = []
        for k in kernels:
            r = cell.get((k, p), {})
            cells.append(f"{r['median_us']:.0f} us" if r.get("status") == "ok" else r.get("status", "-"))
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    out.append("")
    out.append(
        "Backward median of CUDA-event timings around the adapter call (includes the adapters' "
        "buffer allocation and zero-fill); FA3 via dew/JAX is host wall clock incl. dispatch."
    )
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", action="append", help="float16 / bfloat16 (default both)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--determinism", type=int, default=0, help="rerun each backward N times, compare bits")
    ap.add_argument("--no-others", action="store_true", help="only our kernels (skip FA3/FA4)")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    a = ap.parse_args(argv)
    rows = run(a.dtype or ("float16", "bfloat16"), a.repeats, a.warmup, a.determinism, not a.no_others)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(rows) + "\n")
    print(markdown(rows))
    return 0 if all(r.get("status") in ("ok", "unavailable", "skipped") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
