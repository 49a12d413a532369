"""Build the CUDA side of our TileLang kernels on a machine without a GPU.

Lowers every kernel of source.py for ``sm_90`` (the H200) and, when ``nvcc`` is on the
PATH, compiles the generated CUDA to a cubin: the same source that CI runs on the CPU is
checked for CUDA-side lowering and compile errors before the H200 ever sees it.

    python -m difftest.kernels.tilelang.cuda_check                # the GPU seed configurations
    python -m difftest.kernels.tilelang.cuda_check --no-nvcc      # lowering only
    python -m difftest.kernels.tilelang.cuda_check --save DIR     # also write the .cu sources
"""

import argparse
import faulthandler
import json
import shutil
import sys
import time
from pathlib import Path

from . import cache  # noqa: F401  (sets TILELANG_CACHE_DIR before tilelang is used)
from .warm import configs

ARCH = "sm_90"


def gpu_configs(dtypes=("float16", "bfloat16"), dims=((64, 64), (128, 128), (192, 128))):
    """(kind, params) for every kernel a GPU campaign or benchmark builds at these dims."""
    return configs("cuda", tuple(dtypes), list(dims))


def check(kind: str, params: dict, nvcc: bool = True, save: Path | None = None) -> dict:
    """Lower one kernel for sm_90 (and nvcc-compile it); a dict saying what happened."""
    # lazy: tilelang is optional, and tvm imports only once tilelang has put its bundled copy on sys.path
    import tilelang
    import tvm

    from . import source

    row = {"kind": kind, **params, "lowered": False, "nvcc": None}
    t0 = time.perf_counter()
    try:
        func = source.KERNELS[kind]("cuda", **params)
        target = tvm.target.Target({"kind": "cuda", "arch": ARCH})
        with tvm.transform.PassContext(opt_level=3, config=source.style("cuda").pass_configs()), target:
            art = tilelang.lower(func, target=target, enable_device_compile=nvcc)
        row["lowered"] = True
        row["nvcc"] = bool(nvcc) or None
        src = art.kernel_source or ""
        row["source_chars"] = len(src)
        if save is not None:
            save.mkdir(parents=True, exist_ok=True)
            name = f"{kind}-" + "-".join(f"{k}{v}" for k, v in sorted(params.items())) + ".cu"
            (save / name).write_text(src)
    except Exception as e:  # report, never stop the sweep
        row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else ''}"
        if row["lowered"]:
            row["nvcc"] = False
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-nvcc", action="store_true", help="lower only, do not run nvcc")
    ap.add_argument("--dtype", action="append", help="float16 and/or bfloat16 (default both)")
    ap.add_argument("--save", type=Path, help="write the generated .cu files here")
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    ap.add_argument("--stall", type=float, default=180.0, help="print a traceback if one build takes longer")
    a = ap.parse_args(argv)
    use_nvcc = not a.no_nvcc and shutil.which("nvcc") is not None
    if not a.no_nvcc and not use_nvcc:
        print("nvcc not on PATH: lowering only")
    rows = []
    for kind, params in gpu_configs(tuple(a.dtype) if a.dtype else ("float16", "bfloat16")):
        faulthandler.dump_traceback_later(a.stall, exit=False)  # a stuck build shows where it is
        r = check(kind, params, nvcc=use_nvcc, save=a.save)
        faulthandler.cancel_dump_traceback_later()
        rows.append(r)
        brief = " ".join(f"{k}={v}" for k, v in params.items())
        status = "ok" if "error" not in r else "FAIL " + r["error"]
        print(
            f"{kind:5s} {brief:90s} lowered={r['lowered']} nvcc={r['nvcc']} {r['seconds']:6.1f}s {status}", flush=True
        )
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if "error" in r]
    print(f"{len(rows) - len(bad)}/{len(rows)} kernels built for {ARCH}" + (" (nvcc)" if use_nvcc else " (lowered)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
