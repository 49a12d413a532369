"""One mutant's seeded ci campaign with the value kinds narrowed: does it survive the iid
kinds and die on the structured ones? results/mutants.md cites its output.

    python scripts/mutant_by_kinds.py MUTANT KINDS MAX_EXAMPLES TIME_BUDGET SEED

KINDS: "iid" (the seven iid kinds), "structured" (the six structured kinds), "all", or a
comma-separated list of kinds. Prints the outcome and the cases run (shrinking included); for a
kill, the example that first failed (unshrunk) and the shrunk Problem."""

import sys
import tempfile
import time

from difftest.execute.adapter import narrow
from difftest.kernels import mutants
from difftest.model.problem import STRUCTURED_KINDS, VALUE_KINDS
from difftest.search.campaign import run_campaign

IID = tuple(k for k in VALUE_KINDS if k not in STRUCTURED_KINDS)


def main(argv):
    name, which, n, budget, seed = argv[0], argv[1], int(argv[2]), float(argv[3]), int(argv[4])
    kinds = {"iid": IID, "structured": STRUCTURED_KINDS, "all": VALUE_KINDS}.get(which) or tuple(which.split(","))
    kernel = narrow(mutants.MUTANTS[name].make(), values=kinds)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as out:
        r = run_campaign(kernel, "ci", max_examples=n, time_budget=budget, shrink_budget=5, edge_cases=False,
                         database=None, out_dir=out, seed=seed)
    print(name, which, "killed" if r.failed else "survived", f"{len(r.cases)} cases", f"{time.time() - t0:.1f} s")
    if r.failed:
        first = r.first_failure
        print(f"first failure: example {r.examples_to_fail} at {r.seconds_to_fail:.1f} s,",
              first.problem.short(), first.failed_gates)
        print("shrunk:", r.failure.problem.short(), r.failure.failed_gates)


if __name__ == "__main__":
    main(sys.argv[1:])
