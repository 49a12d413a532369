"""The float64 truth of this tree next to another tree's, side by side in one process (issue 12.3):
B1 H8 D128 causal bf16 at each ``--seqlen``, the two truths called alternately (one untimed call
each first), CUDA events around each call; prints the best and the median of each. The other
tree's oracles (its chunked.py, fused_passes.py, reference.py and an empty __init__.py) are
loaded as the package ``other_oracles`` from ``--other``. One JSON line per length.
``python3 scripts/device/truth_versions.py --other DIR [--seqlen N ...] [--repeats R]``"""

import argparse
import importlib
import importlib.util
import json
import statistics
import sys

import torch
from cuda_events import seconds  # scripts/device/, the script's own folder

from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.chunked import chunked_reference


def load_other(path: str):
    spec = importlib.util.spec_from_file_location("other_oracles", f"{path}/__init__.py",
                                                  submodule_search_locations=[path])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["other_oracles"] = pkg
    spec.loader.exec_module(pkg)
    return importlib.import_module("other_oracles.chunked").chunked_reference


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", required=True)
    ap.add_argument("--seqlen", type=int, action="append")
    ap.add_argument("--repeats", type=int, default=4)
    a = ap.parse_args()
    other = load_other(a.other)
    for s in a.seqlen or (16384, 32768, 65536, 131072):
        p = Problem(seqlen_q=s, seqlen_k=s, heads_q=8, heads_kv=8, head_dim_qk=128, head_dim_v=128,
                    dtype="bfloat16", causal=True).validate()
        x = make_inputs(p, "cuda")
        calls = {"this": lambda: chunked_reference(x, "float64", magnitudes=True),
                 "other": lambda: other(x, "float64", magnitudes=True)}
        times = {n: [] for n in calls}
        for fn in calls.values():  # compiles
            fn()
        torch.cuda.synchronize()
        for _ in range(a.repeats):
            for n, fn in calls.items():
                times[n].append(seconds(fn))
        print(json.dumps({"seqlen": s, **{f"{n}_best_s": min(t) for n, t in times.items()},
                          **{f"{n}_median_s": statistics.median(t) for n, t in times.items()}, "times": times}),
              flush=True)
        x = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
