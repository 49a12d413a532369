"""Calibration: measure how much error correct kernels really make, so the error
budget's k is set from data rather than guessed.

``difftest calibrate -k KERNEL ...`` runs campaigns with the budget gate opened wide
(k = 1e9: nothing fails on error size) and reports, per dtype and output, the
distribution of ``k_needed`` (the smallest k that would have passed each case).

``difftest calibrate --from-variant-logs JSONL... --from-reports REPORT...`` derives the k
defaults from what was measured before, the correct-variant catalogue's case logs
(``difftest variants --out-dir``) and real kernels' campaign reports together (passing cases
only: a failure there is a false alarm or a bug, never a calibration sample), by the rule the
shipped defaults follow (``derive_k``), and prints each against ``DEFAULT_K_BY_DTYPE``.
"""

import json
import math
from collections import defaultdict
from pathlib import Path

from difftest.errors import InputError
from difftest.execute.adapter import get
from difftest.judge.gates import DEFAULT_K_BY_DTYPE, GateConfig
from difftest.judge.runner import RunConfig, run_case
from difftest.model.problem import OUTPUTS, Problem
from difftest.oracles import TENSOR_CORE_NOTE
from difftest.safeio import parse_json, read_json, read_lines
from difftest.search.campaign import run_campaign
from difftest.vocab import Status

MAX_LOG_LINE = 16 * 2**20  # a variant case line is ~1 kB
MAX_LOG_BYTES = 4 * 2**30  # streamed; a 6,281-case log is a few MB
MAX_REPORT_BYTES = 64 * 2**20  # as report.read's (an .xz is refused once it expands past it)

OPEN_K = 1e9


def collect(kernels, profile="ci", max_examples=200, time_budget=None, seed=None, detail: list | None = None) -> dict:
    """{(dtype, output): [k_needed, ...]} over campaigns of (assumed correct) kernels.
    ``detail``: a list that gets one record per budget verdict (kernel, dtype, output,
    k_needed, err, ref_err, floor, problem), to see which kernel and Problem set a maximum."""
    data = defaultdict(list)
    cfg = RunConfig(gates=GateConfig(k={n: OPEN_K for n in OUTPUTS}))
    for k in kernels:
        res = run_campaign(
            k, profile, max_examples=max_examples, time_budget=time_budget, config=cfg, database=None, seed=seed
        )
        for c in res.cases:
            for v in c.verdicts:
                if v.gate == "budget":
                    data[(c.problem.dtype, v.output)].append(v.numbers["k_needed"])
                    if detail is not None:
                        detail.append(
                            {
                                "kernel": res.kernel,
                                "dtype": c.problem.dtype,
                                "output": v.output,
                                **{n: v.numbers.get(n) for n in ("k_needed", "err", "ref_err", "floor")},
                                "problem": c.problem.short(),
                                "problem_json": c.problem.to_json(),
                            }
                        )
    return data


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    i = min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))
    return xs[i]


def table(data) -> str:
    lines = [f"{'dtype':9} {'output':6} {'cases':>5} {'median':>8} {'p90':>8} {'p99':>8} {'max':>8}"]
    for dt, out in sorted(data):
        xs = data[(dt, out)]
        lines.append(
            f"{dt:9} {out:6} {len(xs):5d} {quantile(xs, 0.5):8.3g} {quantile(xs, 0.9):8.3g} "
            f"{quantile(xs, 0.99):8.3g} {max(xs):8.3g}"
        )
    return "\n".join(lines)


# The rule the shipped defaults follow (results/calibration.md): twice the largest k_needed a
# correct kernel measured, never below 1 (a kernel may always err as much as the same-dtype
# yardstick), rounded up to a multiple of 0.5.
K_MARGIN = 2.0
K_STEP = 0.5


def derive_k(k_needed_max: float, margin: float = K_MARGIN) -> float:
    """The default k that ``k_needed_max`` (the largest k_needed of correct kernels) gives."""
    if not k_needed_max >= 0:  # NaN or negative: not a measurement
        raise InputError(f"k_needed_max={k_needed_max!r}: allowed a float >= 0")
    return max(1.0, math.ceil(margin * k_needed_max / K_STEP - 1e-9) * K_STEP)


def _hostile(path, what: str):
    return InputError(f"{path}: {what}")


def samples_from_variant_logs(paths) -> dict:
    """{(dtype, output): [(k_needed, who, Problem JSON), ...]} from variant case logs
    (NAME.jsonl), every output (a variant is correct by construction: a failing case is a false
    alarm whose k_needed the derivation must cover); ``who`` is the variant's registry name."""
    data = defaultdict(list)
    for path in paths:  # regular files only, streamed, every line bounded and parsed strictly (safeio)
        for i, text in read_lines(path, InputError, "variant case log (NAME.jsonl)", MAX_LOG_LINE, MAX_LOG_BYTES):
            if not text.strip():
                continue
            line = parse_json(text, f"{path}:{i}", InputError)  # depth, huge integers, surrogates: one line
            try:
                items = [(line["dtype"], out, float(k), bool(ok)) for out, (_, k, ok) in line["budget"].items()]
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise _hostile(path, f"line {i} is not a variant case record ({type(e).__name__})") from None
            for dtype, out, k, _ in items:  # a correct variant's failing case is evidence too
                if k >= 0:
                    data[(dtype, out)].append((k, f"variant:{Path(path).stem}", line["problem"]))
    return data


def samples_from_reports(paths) -> dict:
    """{(dtype, output): [(k_needed, who, Problem JSON), ...]} from campaign reports (report.json,
    or .xz), the passing cases' budget verdicts; ``who`` names the kernel and the report. Each
    report is read as ``gate`` reads one: a regular file, its size capped (an ``.xz`` as a
    stream), its nesting and text checked before a field is used."""
    data = defaultdict(list)
    for path in paths:
        rep = read_json(path, InputError, "report.json (or .json.xz)", MAX_REPORT_BYTES)
        try:
            for camp in rep.get("campaigns", []):
                for c in camp.get("cases", []):
                    if c["status"] != Status.PASSED.value:
                        continue
                    for v in c["verdicts"]:
                        if v["gate"] == "budget":
                            k = float(v["numbers"]["k_needed"])
                            if k >= 0:
                                data[(c["problem"]["dtype"], v["output"])].append(
                                    (k, f"{c['kernel']} ({Path(path).name})", json.dumps(c["problem"]))
                                )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise _hostile(path, f"not a difftest report ({type(e).__name__})") from None
    return data


def effective_k_needed(kernel, problem, output: str) -> float | None:
    """The smallest k that passes ``output`` of ``problem`` under the shipped verdicts: against
    the float64 truth, or (``judge/attribution.py``) against the backward from the kernel's own
    O and LSE when those pass, and against the larger error of the yardsticks the verdict builds
    (an FP8 output that fails the float32-accumulator yardstick is judged with the tensor-core
    one too: oracles/__init__.py). Replays the case with that output's k at 1e-9, so it fails and
    is attributed; None when neither applies (the replay's k_needed is the truth's)."""
    case = run_case(kernel, problem, RunConfig(gates=GateConfig(k={output: 1e-9})))
    fwd_ok = all(v.passed for v in case.verdicts if v.output in ("o", "lse"))
    for v in case.verdicts:
        if v.output == output and v.gate == "budget":
            n = v.numbers
            if v.passed and "truth_k_needed" not in n:  # within the floor: no k needed at all
                return 0.0
            own = n.get("own_stats_err")
            if own is None or not fwd_ok:
                # k_needed against the tensor-core yardstick's error where the verdict built it
                return float(n["k_needed"]) if TENSOR_CORE_NOTE in case.notes and "k_needed" in n else None
            truth_k = n.get("truth_k_needed", n.get("k_needed", 0.0))
            own_k = max(0.0, own - n.get("floor", 0.0)) / n["ref_err"] if n.get("ref_err", 0) > 0 else 0.0
            return min(truth_k, own_k)
    return None


def replay_high(data: dict, margin: float = K_MARGIN, limit: int = 20, log=None) -> int:
    """Replace the variant samples that would raise a shipped k (k_needed * margin above it)
    by their ``effective_k_needed`` (a correct FA-convention design is judged against its own
    statistics by the shipped verdicts, so its truth k_needed overstates what k must cover).
    At most ``limit`` replays, largest first; returns how many ran."""
    todo = {}  # (variant, problem, output) -> its samples' places: a case the edge corpus repeats replays once
    for (dt, out), xs in data.items():
        shipped = DEFAULT_K_BY_DTYPE.get(dt, {}).get(out, 1.0)
        for i, (k, who, pjson) in enumerate(xs):
            if derive_k(k, margin) > shipped and who.startswith("variant:"):
                todo.setdefault((who, pjson, out), []).append((k, dt, i))
    ran = 0
    for (name, pjson, out), places in sorted(todo.items(), key=lambda kv: -max(t[0] for t in kv[1]))[:limit]:
        eff = effective_k_needed(get(name), Problem.from_json(pjson), out)
        ran += 1
        for k, dt, i in places:
            if eff is not None:
                data[(dt, out)][i] = (eff, f"{name} (own O/LSE; truth k_needed {k:.3g})", pjson)
        if log:
            log(
                f"replayed {name} {out}/{places[0][1]}: truth k_needed {places[0][0]:.3g}, effective {eff} "
                f"({len(places)} samples)"
            )
    return ran


def derivation_table(data: dict) -> tuple[str, dict]:
    """Markdown rows of (dtype, output): samples, largest k_needed and where, derived k,
    shipped k; and {(dtype, output): derived k}."""
    derived = {}
    lines = [
        "| dtype | output | samples | max k_needed | set by | derived k | shipped k |",
        "|---|---|---|---|---|---|---|",
    ]
    for dt, out in sorted(data):
        k_max, who, pjson = max(data[(dt, out)], key=lambda t: t[0])
        src = f"{who} `{Problem.from_json(pjson).short()}`" if k_max > 0 else "-"
        derived[(dt, out)] = derive_k(k_max)
        shipped = DEFAULT_K_BY_DTYPE.get(dt, {}).get(out)
        lines.append(
            f"| {dt} | {out} | {len(data[(dt, out)])} | {k_max:.3g} | {src} | {derived[(dt, out)]:g} | "
            f"{'-' if shipped is None else f'{shipped:g}'} |"
        )
    return "\n".join(lines), derived
