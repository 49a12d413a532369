"""Framework time per case on small problems: the campaign's time split
(difftest/execute/timing.py) and, with ``--profile``, where the framework's share goes
(cProfile of the same campaign in this process, the kernel's own calls left out).

    python scripts/overhead_profile.py -k torch-blockwise --examples 30 [--isolate] [--profile]

Small problems: the quick profile's strategy (S <= 80, B <= 2, H <= 4), no edge corpus,
no database, seed 0; a first campaign warms caches (JIT builds, Triton, imports) and is
not counted. Prints per-case milliseconds for the wall, the kernel's calls and the rest.
"""

import argparse
import cProfile
import io
import pstats
import sys
import time


def campaign(kernel: str, examples: int, isolate: bool, seed: int):
    from difftest.judge.runner import RunConfig
    from difftest.search.campaign import run_campaign

    return run_campaign(kernel, "quick", max_examples=examples, time_budget=1e6, edge_cases=False, database=None,
                        seed=seed, config=RunConfig(isolate=isolate), hunt=False)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-k", "--kernel", default="torch-blockwise")
    p.add_argument("--examples", type=int, default=30)
    p.add_argument("--isolate", action="store_true", help="kernel in a worker process (the CLI's default)")
    p.add_argument("--profile", action="store_true", help="cProfile the measured campaign (in-process only)")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args(argv)
    campaign(a.kernel, 5, a.isolate, seed=1)  # warm: builds, caches, imports, the worker
    # CPU seconds of this process, not wall: on a shared, loaded host the wall clock mostly measures the others
    prof = cProfile.Profile(time.process_time) if a.profile and not a.isolate else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    r = campaign(a.kernel, a.examples, a.isolate, seed=0)
    if prof:
        prof.disable()
    wall = time.perf_counter() - t0
    n = max(1, len(r.cases))
    split = r.timing
    print(f"{a.kernel}: {len(r.cases)} cases, {wall:.2f} s ({'isolated' if a.isolate else 'in-process'})")
    print(f"per case: wall {1000 * wall / n:.1f} ms, kernel's calls {1000 * split['kernel_s'] / n:.1f} ms, "
          f"framework {1000 * split['overhead_s'] / n:.1f} ms")
    for name, s in sorted(split["phases_s"].items(), key=lambda kv: -kv[1]):
        if s > 0:
            print(f"  {name:<13} {1000 * s / n:7.1f} ms/case  {100 * split['share'][name]:5.1f}%")
    if prof:
        st = pstats.Stats(prof)
        total = sum(v[2] for v in st.stats.values())  # tottime over every function: the profiled CPU seconds

        def cum(path: str, func: str) -> float:  # cumulative CPU seconds of one function (outermost calls)
            return sum(v[3] for k, v in st.stats.items() if k[0].endswith(path) and k[2] == func)

        parts = {"the whole campaign (Campaign.run)": cum("search/campaign.py", "run"),
                 "run_case (inputs, kernel, truth, yardsticks, gates)": cum("judge/runner.py", "run_case"),
                 "  float64 truth (chunked_reference)": cum("oracles/chunked.py", "chunked_reference"),
                 "hypothesis: drawing Problems (ConjectureData.draw)": cum("conjecture/data.py", "draw"),
                 "case log lines (CaseLog.write)": cum("report/write.py", "write"),
                 "coverage features (_coverage)": cum("search/campaign.py", "_coverage"),
                 "compile reuse (compile_reuse)": cum("strategies/compile.py", "compile_reuse")}
        print(f"cProfile, CPU seconds of this process: {total:.2f} s profiled")
        for name, s in parts.items():
            print(f"  {name:<55} {s:7.2f} s  {1000 * s / n:7.1f} ms/case")
        out = io.StringIO()
        st.stream = out
        st.sort_stats("tottime").print_stats(a.top)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
