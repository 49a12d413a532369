"""The references of this tree next to another tree's, bit for bit: every output tensor, the
term magnitudes and the overflow-edge masks of the float64 truth (``chunked_reference(...,
"float64", magnitudes=True)``), the flash-style yardstick and the dense same-dtype one, on
drawn Problems (ci and small gpu draws of every CPU kernel's capability and of CUDA kernels'
capabilities), in the CPU configuration and with CUDA's host-side choices forced on the CPU
(the shift inside the Q K^T GEMM, split magnitude terms, bfloat16 magnitudes), with the
chunk plan as it is and cut into 16-row chunks. Prints the count and any difference
(exit 1 when there is one). Also counts the ATen ops each tree dispatches (one launch each
on a GPU, except views).

    PYTHONPATH=. python3 scripts/oracle_pins.py --other DIR [--draws 40]
"""

import argparse
import importlib
import importlib.util
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from difftest.model.inputs import make_inputs
from difftest.oracles import chunked
from difftest.oracles.reference import reference

GPU_LIMIT = 2**23  # score elements x head dim of a gpu-profile draw run here


def load_other(path: str):
    """The other tree's oracles package, imported as ``other_oracles``."""
    spec = importlib.util.spec_from_file_location("other_oracles", f"{path}/__init__.py",
                                                  submodule_search_locations=[path])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["other_oracles"] = pkg
    spec.loader.exec_module(pkg)
    return importlib.import_module("other_oracles.chunked"), importlib.import_module("other_oracles.reference")


def problems(draws: int) -> list:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from difftest.execute import adapter as registry
    from difftest.kernels.sdpa_cuda import CAPABILITIES
    from difftest.strategies.problems import problems as strategy

    caps = [registry.get(n).capability for n in ("torch-blockwise", "sdpa-cpu-math", "sdpa-cpu-flash", "tilelang-det")]
    caps += [CAPABILITIES["efficient"], CAPABILITIES["math"]]
    out = []
    for cap in caps:
        for profile, limit in (("ci", None), ("gpu", GPU_LIMIT)):
            got = []

            @hseed(1)
            @settings(max_examples=draws * (10 if limit else 1), database=None, deadline=None,
                      suppress_health_check=list(HealthCheck), phases=[Phase.generate])
            @given(strategy(cap, profile))
            def draw(p):
                if len(got) < draws and (limit is None or p.size() <= limit):
                    got.append(p)

            draw()
            out += got
    return list(dict.fromkeys(out))


class Ops(TorchDispatchMode):
    n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        Ops.n += 1
        return func(*args, **(kwargs or {}))


def same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
            a.view(torch.uint8) if a.dtype.is_floating_point and a.numel() else a,
            b.view(torch.uint8) if b.dtype.is_floating_point and b.numel() else b)
    return a == b


def outputs_equal(x, y) -> list:
    bad = [n for n in ("o", "lse", "dq", "dk", "dv", "dsink") if not same(getattr(x, n), getattr(y, n))]
    for attr in ("magnitude", "overflow_edge"):
        if not same(getattr(x, attr, None), getattr(y, attr, None)):
            bad.append(attr)
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", required=True, help="the other tree's oracles folder")
    ap.add_argument("--draws", type=int, default=40)
    a = ap.parse_args()
    other_chunked, other_reference = load_other(a.other)
    torch.set_num_threads(1)
    ps = problems(a.draws)
    configs = {"cpu": {}, "cuda-like": {"SHIFT_IN_GEMM": True, "SPLIT_TERMS": True, "MAGNITUDES_DTYPE": "bfloat16"}}
    diffs, n, ops = [], 0, {"this": 0, "other": 0}
    for cname, flags in configs.items():
        for mod in (chunked, other_chunked):
            for k, v in flags.items():
                getattr(mod, k)["cpu"] = v
        for p in ps:
            x = make_inputs(p)
            for chunk in (None, 16):
                calls = [("truth", lambda m: m.chunked_reference(x, "float64", magnitudes=True, chunk=chunk)),
                         ("flash", lambda m: m.chunked_reference(x, "float32", flash_rounding=True, chunk=chunk))]
                for what, call in calls:
                    Ops.n = 0
                    with Ops():
                        mine = call(chunked)
                    ops["this"] += Ops.n
                    Ops.n = 0
                    with Ops():
                        theirs = call(other_chunked)
                    ops["other"] += Ops.n
                    n += 1
                    bad = outputs_equal(mine, theirs)
                    if bad:
                        diffs.append(f"{cname} {what} chunk={chunk} {p.short()}: {bad}")
            if cname == "cpu" and p.size() <= 2**22:
                Ops.n = 0
                with Ops():
                    mine = reference(x, "same")
                ops["this"] += Ops.n
                Ops.n = 0
                with Ops():
                    theirs = other_reference.reference(x, "same")
                ops["other"] += Ops.n
                n += 1
                bad = outputs_equal(mine, theirs)
                if bad:
                    diffs.append(f"same {p.short()}: {bad}")
    print(f"oracle_pins: {len(ps)} problems, {n} reference calls compared, {len(diffs)} differences; ATen ops "
          f"this tree {ops['this']}, other {ops['other']}")
    for d in diffs[:20]:
        print("  " + d)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
