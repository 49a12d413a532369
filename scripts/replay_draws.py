"""The Problems a seeded campaign draws, in order, without running a kernel: a seeded search depends on
its seed alone (difftest/search/seeded.py), so a stub with a kernel's name and capability draws what the
kernel's campaign drew on any machine. Used to recover the H200's failing TileLang Problem on the CPU
(a dK:nonfinite failure, scripts/ds_edge_probe.py).
``python3 scripts/replay_draws.py tilelang-det --profile gpu --seed 11 --examples 80 --show 71``:
prints cases 1..71 (the TileLang kernels' CUDA capability)."""

import argparse

import difftest.search.campaign as campaign
from difftest.execute.adapter import KernelAdapter
from difftest.judge.runner import CaseResult
from difftest.kernels.tilelang.adapter import capability_for
from difftest.vocab import Status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel", choices=("tilelang", "tilelang-det"))
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--examples", type=int, default=80)
    ap.add_argument("--show", type=int, default=10, help="cases printed, from the first")
    a = ap.parse_args()

    class Stub(KernelAdapter):
        name = a.kernel
        capability = capability_for("cuda", deterministic=a.kernel == "tilelang-det")

    campaign.run_case = lambda kernel, problem, config: CaseResult(kernel.name, problem, Status.PASSED)
    res = campaign.run_campaign(Stub(), a.profile, max_examples=a.examples, time_budget=1e6, seed=a.seed,
                                database=None)
    for i, c in enumerate(res.cases[:a.show]):
        p = c.problem
        print(i + 1, p.short(), f"input seed {p.seed}, value_scale {p.value_scale!r}, softmax_scale {p.softmax_scale}")


if __name__ == "__main__":
    main()
