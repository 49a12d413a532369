"""The float64 truth of this tree next to another tree's on drawn problems (a campaign's
truth time per case): ``--count`` problems drawn for tilelang-det's capability on ``--device``
under ``--profile`` (those of at most 2^26 score x head-dim elements, so the CPU can run them),
each truth called alternately, best of ``--repeats`` per problem. Prints one JSON line: both
totals, and both over the problems whose batch repeats a (seqlen_q, seqlen_k) pair. The other
tree's oracles are loaded from its own folder, under another package name.
``PYTHONPATH=. python3 scripts/truth_drawn.py --other DIR [--profile gpu] [--device cpu]``"""

import argparse
import importlib
import importlib.util
import json
import sys
import time
import warnings

from hypothesis import HealthCheck, Phase, given, settings

from difftest.model.inputs import make_inputs
from difftest.oracles import score_elements
from difftest.oracles.chunked import chunked_reference
from kernels.tilelang.adapter import TileLangAttention
from strategies.problems import problems


def load_other(path: str):
    """The chunked truth of the tree at ``path`` (its oracles folder with an ``__init__.py``),
    imported as the package ``other_oracles`` beside this tree's."""
    spec = importlib.util.spec_from_file_location("other_oracles", f"{path}/__init__.py",
                                                  submodule_search_locations=[path])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules["other_oracles"] = pkg
    spec.loader.exec_module(pkg)
    return importlib.import_module("other_oracles.chunked").chunked_reference


def drawn(profile: str, capability_device: str, count: int) -> list:
    cap = TileLangAttention("deterministic", device=capability_device).capability
    out = []

    @settings(max_examples=4 * count, suppress_health_check=list(HealthCheck), phases=[Phase.generate],
              database=None, deadline=None)
    @given(problems(cap, profile))
    def draw(p):
        if score_elements(p) * p.head_dim_qk <= 2**26:
            out.append(p)

    draw()
    return out[:count]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", required=True)
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--capability", default="cuda", help="whose capability draws: tilelang-det on cuda or cpu")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--count", type=int, default=120)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    calls = {"this": chunked_reference, "other": load_other(a.other)}
    probs = drawn(a.profile, a.capability, a.count)
    xs = [make_inputs(p, a.device) for p in probs]
    best = {n: [float("inf")] * len(xs) for n in calls}
    for rep in range(a.repeats):
        for i, x in enumerate(xs):
            order = list(calls.items()) if (i + rep) % 2 else list(calls.items())[::-1]
            for n, f in order:
                t0 = time.perf_counter()
                f(x, "float64", magnitudes=True)
                if a.device == "cuda":
                    import torch
                    torch.cuda.synchronize()
                best[n][i] = min(best[n][i], time.perf_counter() - t0)
    rep = [i for i, p in enumerate(probs) if len(set(zip(p.seqlens_q, p.seqlens_k))) < p.batch]
    print(json.dumps({"profile": a.profile, "device": a.device, "problems": len(xs), "repeated_lengths": len(rep),
                      **{f"{n}_s": round(sum(t), 4) for n, t in best.items()},
                      **{f"{n}_repeated_s": round(sum(t[i] for i in rep), 4) for n, t in best.items()}}))


if __name__ == "__main__":
    main()
