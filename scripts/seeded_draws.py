"""Do two seeded campaigns draw the same Problems? (results/seeded_search.md)

Runs torch-blockwise's ``ci`` campaign (seed 0, no time limit) twice and prints the cases, the
Problems shared and the first case where the two differ:
- ``candidate``: the second run's dQ times (1 + 2^-20), a change that passes like the first;
- ``noisy``: both runs' dQ times (1 +- 2^-20) at random per call, as atomics vary;
- ``literals``: the same kernel, a local module with new literals imported between the runs.
``python3 scripts/seeded_draws.py candidate|noisy|literals [--examples 300]``"""

import argparse
import random
import sys
import tempfile
from pathlib import Path

from difftest.kernels.blockwise import BlockwiseAttention
from difftest.search.campaign import run_campaign


class Nudged(BlockwiseAttention):
    def run(self, inputs, out=None):
        o = super().run(inputs, out)
        o.dq = o.dq * (1 + 2**-20)
        return o


class Noisy(BlockwiseAttention):
    def run(self, inputs, out=None):
        o = super().run(inputs, out)
        o.dq = o.dq * (1 + random.choice((-1, 1)) * 2**-20)
        return o


def drawn(kernel, examples: int) -> list[str]:
    res = run_campaign(kernel, "ci", max_examples=examples, time_budget=1e6, seed=0, database=None)
    return [c.problem.to_json() for c in res.cases]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("candidate", "noisy", "literals"))
    ap.add_argument("--examples", type=int, default=300)
    a = ap.parse_args()
    if a.what == "noisy":
        first, second = drawn(Noisy(), a.examples), drawn(Noisy(), a.examples)
    else:
        first = drawn(BlockwiseAttention(), a.examples)
        if a.what == "literals":
            folder = tempfile.mkdtemp()
            Path(folder, "kernel_v2_literals.py").write_text(
                "BLOCK_M, BLOCK_N, STAGES, WARPS = 96, 48, 3, 5\n"
                "TILES = (17, 33, 65, 129, 7, 11, 13, 2.5, 0.125, 1e-3, -7, 255, 1023)\nNAME = 'tail_kernel_v2'\n")
            sys.path.insert(0, folder)
            __import__("kernel_v2_literals")
        second = drawn(BlockwiseAttention() if a.what == "literals" else Nudged(), a.examples)
    diff = next((i for i, (x, y) in enumerate(zip(first, second)) if x != y), None)
    print(f"{a.what}: {len(first)} and {len(second)} cases, {len(set(first) & set(second))} Problems shared, "
          f"first difference at case {diff if diff is not None else 'none'}")


if __name__ == "__main__":
    main()
