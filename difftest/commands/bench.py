"""``difftest bench``: backward timings of kernels (CUDA events), the float64 truth next to FA3
(``--oracle``), the input draw per value kind (``--inputs``) and a campaign's framework time per
case (``--cases``); difftest/measure/bench.py and case_bench.py measure them."""

import json
import os
import sys
from pathlib import Path

from difftest.argcheck import UsageError, nonneg_int, positive_int
from difftest.measure import case_bench
from difftest.model.problem import MAX_BATCH, MAX_HEAD_DIM, MAX_HEADS, MAX_SEQLEN, VALUE_KINDS
from difftest.safeio import atomic_write_text
from difftest.vocab import Status

HELP = "time kernels' backward (CUDA events); --oracle: the float64 truth next to FA3; --inputs: the input draw"


def add_arguments(p) -> None:
    p.add_argument(
        "--kernel",
        "-k",
        action="append",
        dest="kernels",
        metavar="NAME",
        help="kernels to time (required without --oracle; with --oracle default fa3)",
    )
    p.add_argument(
        "--oracle",
        action="store_true",
        help="time the float64 truth (causal B1 H8 D128 S=4k..128k unless --shape) next to the kernels",
    )
    p.add_argument(
        "--cases",
        action="store_true",
        help="framework time per case of the -k kernels' campaigns, per phase, alone and side by side "
        "(difftest/measure/case_bench.py)",
    )
    p.add_argument(
        "--mode",
        choices=case_bench.MODES,
        default="both",
        help="with --cases: the campaigns one after another, all at once, or both (default)",
    )
    p.add_argument("--examples", type=positive_int, default=100, help="with --cases: drawn Problems per campaign")
    p.add_argument("--case-profile", default="gpu", help="with --cases: the campaigns' profile (default gpu)")
    p.add_argument(
        "--case-seed",
        default="0",
        help="with --cases: the search's seed (default 0: the same Problems before and after; 'none')",
    )
    p.add_argument("--case-budget", type=float, default=900.0, help="with --cases: search seconds per campaign")
    p.add_argument(
        "--inputs",
        action="store_true",
        help="time the input draw (make_inputs) of every value kind (B1 H8 D128 S=1k,4k unless --shape)",
    )
    p.add_argument(
        "--kind",
        action="append",
        dest="value_kinds",
        metavar="VALUES",
        help="with --inputs: only this value kind (repeatable)",
    )
    p.add_argument(
        "--before",
        metavar="DIR",
        help="with --inputs: also time the difftest checkout in DIR (another commit) on the same "
        "Problems; rows say whether both drew the same bytes; with --cases: run the same "
        "campaigns with it first",
    )
    p.add_argument(
        "--inputs-repeats", type=positive_int, default=3, help="with --inputs: timed draws per Problem (min kept)"
    )
    p.add_argument(
        "--count-ops",
        action="store_true",
        help="with --inputs: also count each draw's ATen operations (about one GPU kernel launch each) "
        "and host syncs, in one more untimed draw; with --cases: per case and phase, in one more "
        "untimed campaign",
    )
    p.add_argument("--unskipped", action="store_true", help="with --oracle: also time the truth without block skipping")
    p.add_argument(
        "--eager",
        action="store_true",
        help="with --oracle: also time the truth with its elementwise passes unfused (eager PyTorch)",
    )
    p.add_argument(
        "--passes-only",
        action="store_true",
        help="with --oracle: also time the truth with its passes fused but not its Q K^T and dO V^T GEMMs",
    )
    p.add_argument(
        "--float32-magnitudes",
        action="store_true",
        help="with --oracle: also time the truth with float32 (TF32 on CUDA) magnitudes",
    )
    p.add_argument(
        "--magnitudes-dtype",
        choices=("bfloat16", "float32", "float64"),
        help="with --oracle: precision of the truth's error-budget magnitudes (default: the runner's, "
        "chunked.MAGNITUDES_DTYPE: bfloat16 on CUDA, float32 on the CPU)",
    )
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        help="with --oracle or --inputs: where the truth runs or the inputs are drawn (default cuda "
        "if present, else cpu)",
    )
    p.add_argument("--shape", action="append", metavar="B,H,S,D", help="default: 4,32,512,128 and 2,32,2048,128")
    p.add_argument("--dtype", action="append", choices=("float16", "bfloat16"))
    p.add_argument("--no-causal", action="store_true")
    p.add_argument("--gqa-kv", type=positive_int, default=8, help="key/value heads of the GQA variant")
    p.add_argument("--repeats", type=positive_int, default=20)
    p.add_argument("--warmup", type=nonneg_int, default=3)
    p.add_argument(
        "--oracle-repeats", type=positive_int, default=1, help="with --oracle: timed truth calls per shape (min kept)"
    )
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--markdown", help="write a markdown table here")


def _shapes(a, default):
    if not a.shape:
        return default
    try:
        shapes = tuple(tuple(int(x) for x in s.split(",")) for s in a.shape)
    except ValueError:
        raise UsageError(f"--shape {a.shape!r}: allowed B,H,S,D integers, e.g. 4,32,512,128") from None
    if any(len(s) != 4 or min(s) < 1 for s in shapes):
        raise UsageError(f"--shape {a.shape!r}: allowed exactly four integers B,H,S,D, each >= 1")

    limits = (MAX_BATCH, MAX_HEADS, MAX_SEQLEN, MAX_HEAD_DIM)
    if any(x > m for s in shapes for x, m in zip(s, limits)):
        raise UsageError(
            f"--shape {a.shape!r}: allowed B <= {MAX_BATCH}, H <= {MAX_HEADS}, S <= {MAX_SEQLEN}, D <= {MAX_HEAD_DIM}"
        )
    return shapes


def _env(a) -> dict:
    # lazy: keeps torch off --help
    import torch

    env = {"torch": torch.__version__, "argv": sys.argv[1:]}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
    return env


def oracle_command(a) -> int:
    # lazy: keeps torch off --help
    import torch

    from difftest.measure.bench import ORACLE_SHAPES, oracle_markdown, run_oracle_bench

    if a.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--oracle --device cuda: no CUDA device is available here: allowed --device cpu")
    rows = run_oracle_bench(
        _shapes(a, ORACLE_SHAPES),
        tuple(a.kernels or ("fa3",)),
        (a.dtype or ["bfloat16"])[0],
        a.device,
        a.oracle_repeats,
        a.repeats,
        a.unskipped,
        magnitudes_dtype=a.magnitudes_dtype,
        eager=a.eager,
        passes_only=a.passes_only,
        float32_magnitudes=a.float32_magnitudes,
    )
    if a.json:
        atomic_write_text(a.json, json.dumps({"env": _env(a), "rows": rows}, indent=1))
    if a.markdown:
        atomic_write_text(a.markdown, oracle_markdown(rows) + "\n")
    return 0 if all(r["truth"]["status"] == "ok" for r in rows) else 1


def inputs_command(a) -> int:
    # lazy: keeps torch off --help
    import torch

    from difftest.measure.bench import INPUT_SHAPES, input_problems, inputs_markdown, run_inputs_bench

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--inputs --device cuda: no CUDA device is available here: allowed --device cpu")
    bad = [k for k in a.value_kinds or () if k not in VALUE_KINDS]
    if bad:
        raise UsageError(f"--kind {bad[0]!r}: allowed one of {', '.join(VALUE_KINDS)}")
    if a.before and not (Path(a.before) / "difftest" / "model" / "inputs.py").is_file():
        raise UsageError(
            f"--before {a.before!r}: no difftest checkout there (difftest/model/inputs.py): allowed "
            "a folder holding one, e.g. `git archive REV | tar -x -C DIR`"
        )
    problems = input_problems(
        _shapes(a, INPUT_SHAPES), tuple(a.dtype or ("float16", "bfloat16")), a.value_kinds, not a.no_causal, a.gqa_kv
    )
    rows = run_inputs_bench(problems, device, a.inputs_repeats, a.before, count_ops=a.count_ops)
    if a.json:
        atomic_write_text(
            a.json,
            json.dumps(
                {
                    "env": {
                        **_env(a),
                        "device": device,
                        "threads": torch.get_num_threads(),
                        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                    },
                    "rows": rows,
                },
                indent=1,
            ),
        )
    if a.markdown:
        atomic_write_text(a.markdown, inputs_markdown(rows) + "\n")
    return 0 if all(r.get("same_bytes", True) for r in rows) else 1


def command(a) -> int:
    # lazy: keeps torch off --help
    import torch

    from difftest.measure.bench import DEFAULT_SHAPES, markdown, run_bench, shape_problems

    if a.cases:
        return cases_command(a)
    if a.inputs:
        return inputs_command(a)
    if a.oracle:
        return oracle_command(a)
    if not a.kernels:
        raise UsageError("--kernel/-k: required (a registered kernel name), unless --oracle")
    if not torch.cuda.is_available():
        raise UsageError("needs a CUDA device (torch.cuda.is_available() is False): allowed --oracle --device cpu")
    shapes = _shapes(a, DEFAULT_SHAPES)
    problems = shape_problems(shapes, tuple(a.dtype or ("float16", "bfloat16")), not a.no_causal, a.gqa_kv)
    rows = run_bench(a.kernels, problems, a.repeats, a.warmup)
    env = _env(a)
    if a.json:
        atomic_write_text(a.json, json.dumps({"env": env, "rows": rows}, indent=1))
    if a.markdown:
        atomic_write_text(a.markdown, markdown(rows) + "\n")
    return 0 if all(r["status"] != Status.ERROR for r in rows) else 1


def cases_command(a) -> int:
    if not a.kernels:
        raise UsageError("--cases: --kernel/-k required (one or more registered kernel names)")
    if a.before and not (Path(a.before) / "difftest" / "search" / "campaign.py").is_file():
        raise UsageError(
            f"--before {a.before!r}: no difftest checkout there (difftest/search/campaign.py): allowed "
            "a folder holding one, e.g. `git archive REV | tar -x -C DIR`"
        )
    seed = None if str(a.case_seed).lower() == "none" else int(a.case_seed)
    args = {
        "profile": a.case_profile,
        "examples": a.examples,
        "seed": seed,
        "device": a.device,
        "time_budget": a.case_budget,
        "isolate": True,
        "count_ops": a.count_ops,
    }
    rows = case_bench.run_case_bench(a.kernels, a.mode, args, a.before)
    text = case_bench.markdown(rows)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(
                {"argv": sys.argv[1:], "cores": case_bench.usable_cores(), "args": args, "rows": rows}, f, indent=1
            )
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    return 0
