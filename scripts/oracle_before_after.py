"""Time the float64 truth of another revision next to this checkout's, in one process.

``python3 scripts/oracle_before_after.py --rev 1b4920a --shape 1,2,2048,64 [--device cuda]``
loads ``oracles/chunked.py`` as it was at ``--rev`` (``git show``), or ``--file PATH`` (a
committed copy: the device machine's checkout has no git history; default
``scripts/oracle_chunked_759dd0c.py``, the oracle before the float32 magnitudes) beside the
current one,
runs both on the same inputs (alternating, ``--repeats`` rounds, best time kept), and
prints seconds, peak CUDA memory and the largest relative difference per output, so a
speed change is measured side by side on one machine under one load.
"""

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.chunked import chunked_reference

ROOT = Path(__file__).resolve().parents[1]


DEFAULT_BEFORE = ROOT / "scripts" / "oracle_chunked_759dd0c.py"


def load_old(rev: str | None, file: str | None = None):
    if rev:
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:oracles/chunked.py"], check=True,
                             capture_output=True, text=True).stdout
    else:
        src = Path(file or DEFAULT_BEFORE).read_text()
    path = Path(tempfile.mkdtemp()) / "chunked_old.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("difftest.oracles._chunked_before", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.chunked_reference


def timed(fn, inputs, cuda):
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    out = fn(inputs)
    if cuda:
        torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    peak = (torch.cuda.max_memory_allocated() - base) / 2**30 if cuda else None
    return out, sec, peak


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", help="git revision whose oracles/chunked.py is 'before'")
    ap.add_argument("--file", help=f"a copy of the 'before' oracles/chunked.py (default without --rev: "
                                   f"{DEFAULT_BEFORE.relative_to(ROOT)})")
    ap.add_argument("--mag64", action="store_true",
                    help="also time the current oracle with float64 magnitudes (magnitudes_dtype='float64')")
    ap.add_argument("--shape", action="append", required=True, metavar="B,H,S,D", help="causal, MHA")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    before_fn = load_old(a.rev, a.file)
    variants = [("before", lambda x: before_fn(x, "float64", magnitudes=True))]
    if a.mag64:
        variants.append(("after_mag64", lambda x: chunked_reference(x, "float64", magnitudes=True,
                                                                    magnitudes_dtype="float64")))
    variants.append(("after", lambda x: chunked_reference(x, "float64", magnitudes=True)))
    cuda = a.device.startswith("cuda")
    if cuda:  # CUDA context, cuBLAS handles and kernels loaded outside the timings, for every variant
        small = make_inputs(Problem(seqlen_q=256, seqlen_k=256, heads_q=2, heads_kv=2, head_dim_qk=64, head_dim_v=64,
                                    dtype=a.dtype, causal=True).validate(), a.device)
        for _, fn in variants:
            fn(small)
        torch.cuda.synchronize()
    rows = []
    for shape in a.shape:
        b, h, s, d = (int(x) for x in shape.split(","))
        p = Problem(batch=b, seqlen_q=s, seqlen_k=s, heads_q=h, heads_kv=h, head_dim_qk=d, head_dim_v=d,
                    dtype=a.dtype, causal=True).validate()
        x = make_inputs(p, a.device)
        best = {label: (float("inf"), None) for label, _ in variants}
        outs = {}
        for _ in range(a.repeats):
            for label, fn in variants:
                out, sec, peak = timed(fn, x, cuda)
                outs[label] = out
                if sec < best[label][0]:
                    best[label] = (sec, peak)
        diff = {}
        for n, t in outs["before"].items():
            if n == "lse":
                continue
            u = outs["after"].get(n)
            diff[n] = float((t.double() - u.double()).abs().max() / t.double().abs().max().clamp_min(1e-300))
        mag_diff = {n: abs(outs["after"].magnitude[n] - m) / max(abs(m), 1e-300)
                    for n, m in outs["before"].magnitude.items()}
        row = {"problem": p.short(), "device": a.device, "before_s": best["before"][0], "after_s": best["after"][0],
               "before_peak_gib": best["before"][1], "after_peak_gib": best["after"][1],
               "speedup": best["before"][0] / best["after"][0], "max_rel_diff": diff,
               "magnitude_rel_diff": mag_diff,
               "lse_equal": bool(torch.equal(outs["before"].lse, outs["after"].lse))}
        if "after_mag64" in best:
            row.update(after_mag64_s=best["after_mag64"][0], after_mag64_peak_gib=best["after_mag64"][1])
        rows.append(row)
        mem = (f"  peak {row['before_peak_gib']:.2f} -> {row['after_peak_gib']:.2f} GiB" if cuda else "")
        m64 = f"  (float64 magnitudes {row['after_mag64_s']:8.3f} s)" if "after_mag64_s" in row else ""
        print(f"{p.short():<48} before {row['before_s']:8.3f} s  after {row['after_s']:8.3f} s  "
              f"x{row['speedup']:.2f}{m64}{mem}  max rel diff {max(diff.values()):.1e}  "
              f"magnitudes {max(mag_diff.values()):.1e}", flush=True)
        del outs, x
    if a.json:
        before = a.rev or str(a.file or DEFAULT_BEFORE.name)
        Path(a.json).write_text(json.dumps({"rev": before, "torch": torch.__version__, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
