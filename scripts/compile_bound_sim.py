"""One campaign of a compile-bound kernel on a simulated clock: where its budget goes.

    PYTHONPATH=$PWD python scripts/compile_bound_sim.py KERNEL KEY BUILD_S CALL_S BUDGET SEED PROFILE

KERNEL: ``corner`` (kernels/corner_faults.py's eight faults), ``reflex`` (flex's capability,
or flex-dynamic's with KEY ``flexdyn``, run as the float32 reference: a correct kernel, K/V
broadcast left out, which the reference takes only with GQA) or ``blockwise``. KEY: the compile
key the kernel is given: ``fa4`` (FA4's: dtype, head dims, causal, sinks, heads), ``flex``
(kernels/flex.py's: every shape and captured constant) or ``flexdyn`` (kernels/flex_dynamic.py's).
Each configuration of the key not built yet costs BUILD_S seconds of the search's clock and each
forward call CALL_S (one call a case, two for blockwise); nothing else moves the clock, so the
numbers do not depend on the machine's load (tests/test_compile_bound.py's harness, the runner's
clock included). Prints one JSON line: cases, compile keys, cases per key, the coverage phase's
row builds, value problems and stage, pairs covered, findings (results/compile-bound.md).
"""

import dataclasses
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from difftest.judge import runner
from difftest.judge.runner import RunConfig
from difftest.kernels import flex, flex_dynamic
from difftest.kernels.blockwise import BlockwiseAttention
from difftest.kernels.corner_faults import CornerFaults
from difftest.model.profiles import get_profile
from difftest.oracles.reference import reference
from difftest.search import campaign, configuration_phase, shrinking, state
from tests.simulated_clock import SimulatedClock

KEYS = {
    "fa4": ("dtype", "head_dim_qk", "head_dim_v", "causal", "sinks", "heads_q", "heads_kv"),
    "flex": flex.COMPILE_KEY,
    "flexdyn": flex_dynamic.COMPILE_KEY,
}


CLOCK = SimulatedClock()
COST = {"build": 0.0, "call": 0.0}


class Simulated:
    built: set = set()

    def forward(self, inputs, out=None):
        k = self.capability.compile_signature(inputs.problem)
        CLOCK.t += COST["call"]
        if k not in self.built:
            self.built.add(k)
            CLOCK.t += COST["build"]
        return super().forward(inputs, out)


def _no_broadcast(cap):
    return dataclasses.replace(cap, device="cpu", layouts=tuple(x for x in cap.layouts if x != "kv_broadcast"))


class RefFlex(CornerFaults):
    """flex's capability, run as the float32 reference: a correct kernel."""

    capability = _no_broadcast(flex.CAPABILITY)

    def forward(self, inputs, out=None):
        return reference(inputs, "float32"), None

    def backward(self, inputs, fwd, ctx, out=None):
        res = fwd.clone()
        for n in ("o", "dq", "dk", "dv"):
            setattr(res, n, getattr(res, n).to(inputs.q.dtype))
        return res


def main(argv) -> dict:
    kernel, key, build, call, budget, seed, profile = argv
    COST["build"], COST["call"] = float(build), float(call)
    for m in (campaign, shrinking, state, configuration_phase, runner):
        m.time = CLOCK  # the simulated clock
    base = {"corner": CornerFaults, "blockwise": BlockwiseAttention, "reflex": RefFlex}[kernel]
    cap = base.capability
    if kernel == "reflex" and key == "flexdyn":
        cap = _no_broadcast(flex_dynamic.DYNAMIC_CAPABILITY)

    class K(Simulated, base):
        name = f"{kernel}-sim"
        capability = dataclasses.replace(cap, compile_key=KEYS[key])

    t0 = time.time()
    r = campaign.run_campaign(
        K(),
        get_profile(profile),
        time_budget=float(budget),
        database=None,
        out_dir=Path(tempfile.mkdtemp()),
        config=RunConfig(isolate=False),
        seed=int(seed),
    )
    keys = Counter(K.capability.compile_signature(c.problem) for c in r.cases)
    pairs = r.coverage.get("pairs", {})
    phase = pairs.get("phase", {})
    new = [f for f in r.findings if not f.known]
    return dict(
        kernel=kernel,
        key=key,
        build=float(build),
        call=float(call),
        budget=float(budget),
        seed=int(seed),
        profile=profile,
        cases=len(r.cases),
        searched=r.settings.get("searched"),
        keys=len(keys),
        cases_per_key=round(len(r.cases) / max(1, len(keys)), 1),
        max_per_key=max(keys.values()),
        row_builds=phase.get("builds"),
        rows=phase.get("rows"),
        value_problems=phase.get("value_problems"),
        stage=phase.get("stage"),
        pairs=f"{pairs.get('covered')}/{pairs.get('claimed')}",
        findings=len(new),
        unexplained=r.unexplained,
        hunts=r.settings.get("hunt_attempts"),
        share=configuration_phase.VALUE_SHARE,
        cap=configuration_phase.VALUES_PER_BUILD,
        elapsed=round(r.elapsed, 1),
        real_s=round(time.time() - t0),
        faults=sorted({f.signature.describe()[:90] for f in new}),
    )


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:8])))
