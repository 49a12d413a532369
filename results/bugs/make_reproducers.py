#!/usr/bin/env python
"""Write the reproducer JSON beside every bug report of this folder.

Each report states its minimal problem in prose or as a JSON snippet; this file builds
that Problem with ``difftest.model.problem.Problem`` (a snippet without ``input_version``
goes through ``Problem.from_dict``, so it keeps the input generator the campaign that
found it used, exactly as ``difftest repro`` reads such a file) and writes it in the
format ``difftest.search.reproducer.write_reproducer`` writes: kernel, problem, config,
status, failed_gates, reason, verdicts (``config`` holds only what differs from
RunConfig's defaults, e.g. a worker process and timeout for a hang). ``status`` / ``failed_gates`` / ``reason`` are
the verdict the report documents (the run that found it), ``verdicts`` is empty (no run
of ours made these files), and two fields say where the verdict comes from:
``report`` (the report's file name) and ``seen_with`` (package, versions and device).

    python results/bugs/make_reproducers.py            # (re)write every JSON
    python results/bugs/make_reproducers.py --check    # exit 1 if a JSON differs from what this writes

Replay one: ``difftest repro results/bugs/<package>/<name>.json`` (exit 1 while it
reproduces); across releases: ``difftest bisect``. tests/test_bug_reproducers.py checks
every JSON here and replays the ones whose kernel runs on the CPU.
"""

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from difftest.judge.runner import RunConfig
from difftest.model.problem import Problem

HERE = Path(__file__).resolve().parent

FLA_H200 = "fla-core 0.6.0, Triton 3.6.0, torch 2.11.0+cu130, NVIDIA H200 sm_90, driver 580.159.04, FLA_TILELANG=0"
FA4 = "flash-attn-4 4.0.0b36 (flash_attn.cute), torch 2.11.0+cu130, NVIDIA H200 sm_90, driver 580.159.04"
TILEOPS = "tileops 0.1.0 (tilelang 0.1.12), torch 2.11.0+cu130, NVIDIA H200 sm_90, driver 580.159.04"
CUDNN = ("cuDNN 9.19.0 (torch 2.11.0+cu130's) through nvidia-cudnn-frontend 1.32.0 graphs, NVIDIA H200 sm_90, "
         "driver 580.159.04")
TILELANG_EXAMPLE = ("tilelang 0.1.15, examples/flash_attention/example_gqa_bwd.py as posted in tile-ai/tilelang#917 "
                    "(DIFFTEST_TILELANG_FILE names the file), torch 2.11.0+cu130, NVIDIA H200 sm_90")


@dataclass(frozen=True)
class Entry:
    folder: str  # package folder under results/bugs/
    name: str  # the JSON's stem
    report: str  # REPORT-*.md in the same folder
    kernel: str  # registered kernel name
    problem: Problem
    status: str  # "failed" (a gate) or "error" (raised, crashed or hung)
    failed_gates: tuple[str, ...] = ()
    reason: str = ""  # status "error": what the package raised (first line)
    seen_with: str = ""
    # RunConfig fields that differ from the defaults: only those are written, so a replay
    # judges with the gates of the difftest that replays it
    config: dict = field(default_factory=dict)
    # what the package returned, as the report records it, for tests/test_bug_reports.py to put
    # through difftest's gates on the CPU (a GPU report's numbers against today's gate formula):
    # {"output", "err"} (an absolute error), {"output", "err_rel_max_truth"} (the error over max|truth|),
    # {"output", "err_rel_plain"} (the error over a plain same-dtype attention's), or {"output", "got",
    # "at"} (a value at a packed [row, head(, dim)] index; "at" null: anywhere), with "truth" where the
    # report gives the true value there (checked against the truth computed here)
    witness: tuple = ()

    @property
    def path(self) -> Path:
        return HERE / self.folder / f"{self.name}.json"

    def record(self) -> dict:
        self.problem.validate()
        RunConfig.from_dict(self.config)  # the fields exist and take these values
        return {"kernel": self.kernel, "problem": self.problem.to_dict(), "config": dict(self.config),
                "status": self.status,
                "failed_gates": list(self.failed_gates), "reason": self.reason, "verdicts": [],
                "report": self.report, "seen_with": self.seen_with, "witness": [dict(w) for w in self.witness]}

    def text(self) -> str:
        return json.dumps(self.record(), indent=1) + "\n"


def _legacy(**fields) -> Problem:
    """A report's JSON snippet as written (no input_version: the serial generator of its run)."""
    return Problem.from_dict(fields)


def _w(output, **kw) -> dict:
    return {"output": output, **kw}


NAN, INF = "nan", "inf"

ENTRIES = (
    # ---------------------------------------------------------------- fa3-jax
    Entry("fa3-jax", "bwd-scratch-overflow", "REPORT-bwd-scratch-overflow.md", "fa3-jax",
          _legacy(batch=1, seqlen_q=100, seqlen_k=100, heads_q=2, heads_kv=2, head_dim_qk=128, head_dim_v=128,
                  dtype="bfloat16", causal=False),
          "failed", ("dq:budget", "dk:budget", "dv:budget"),
          seen_with="flash-attn3-jax 0.2.3, jax/jaxlib 0.11.2 (CUDA 13), NVIDIA H200 sm_90, driver 580.159.04",
          # the standalone at this shape: dQ NaN (seed 0), dK wrong by 41x to 1223x its largest true value
          witness=(_w("dq", got=NAN, at=None), _w("dk", err_rel_max_truth=41.0))),
    # ---------------------------------------------------------------- fa4
    # head_dim % 32 in {8, 16}: one root cause (tile_hdim rounded to 16, accumulators to 32)
    Entry("fa4", "sm90-bwd-hdim-mod32.d8", "REPORT-sm90-bwd-hdim-mod32.md", "fa4",
          Problem(batch=1, seqlen_q=65, seqlen_k=65, heads_q=2, heads_kv=1, head_dim_qk=8, head_dim_v=8,
                  dtype="float16"),
          "failed", ("dq:budget", "dk:budget", "dv:budget"), seen_with=FA4,
          # the standalone's ratios to plain fp16 PyTorch at this shape (its own seeded inputs)
          witness=(_w("dq", err_rel_plain=248.0), _w("dk", err_rel_plain=262.0), _w("dv", err_rel_plain=398.0))),
    Entry("fa4", "sm90-bwd-hdim-mod32.d40", "REPORT-sm90-bwd-hdim-mod32.md", "fa4",
          Problem(batch=6, seqlen_q=(2, 2, 0, 3, 3, 7), seqlen_k=(2, 8, 1, 3, 7, 7), heads_q=11, heads_kv=11,
                  head_dim_qk=40, head_dim_v=40, dtype="bfloat16", window_left=1, values="large_do",
                  value_scale=4.666519209277975, seed=1518),
          "failed", ("dq:budget",), seen_with=FA4,
          witness=(_w("dq", err=84153.0, max_abs_truth=84160.0),)),
    Entry("fa4", "sm90-bwd-hdim-mod32.d104", "REPORT-sm90-bwd-hdim-mod32.md", "fa4",
          Problem(batch=1, seqlen_q=3, seqlen_k=129, heads_q=1, heads_kv=1, head_dim_qk=104, head_dim_v=104,
                  dtype="float16"),
          "error", reason="MLIRError: Operation creation failed", seen_with=FA4),
    Entry("fa4", "sm90-bwd-hdim-mod32.d112", "REPORT-sm90-bwd-hdim-mod32.md", "fa4",
          Problem(batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1, head_dim_qk=112, head_dim_v=112,
                  dtype="bfloat16", seed=1490),
          "error", reason="MLIRError: Operation creation failed", seen_with=FA4),
    # an illegal memory access poisons the CUDA context: the kernel runs in a worker process
    Entry("fa4", "bwd-d32-dv120-illegal-access", "REPORT-bwd-d32-dv120-illegal-access.md", "fa4",
          Problem(batch=1, seqlen_q=65, seqlen_k=65, heads_q=2, heads_kv=2, head_dim_qk=32, head_dim_v=120,
                  dtype="float16"),
          "error", reason="CUDA error: an illegal memory access was encountered", seen_with=FA4,
          config={"isolate": True, "timeout_s": 300.0}),
    # the forward alone fails (MHA too); confirmed by repro_insufficient_registers.py on 4.0.0b40, H100
    Entry("fa4", "insufficient-registers", "REPORT-insufficient-registers.md", "fa4",
          Problem(batch=1, seqlen_q=33, seqlen_k=33, heads_q=2, heads_kv=2, head_dim_qk=80, head_dim_v=216,
                  dtype="float16", causal=False),
          "error", reason="CompilerDiagnosticError: PTX assembly failed: (C7602) Insufficient registers (128)",
          seen_with="flash-attn-4 4.0.0b40 (flash_attn.cute), nvidia-cutlass-dsl 4.8.1, torch 2.11.0+cu130, "
                    "NVIDIA H100 80GB HBM3 sm_90, driver 580.159.04",
          config={"isolate": True, "timeout_s": 300.0}),
    Entry("fa4", "sink-lse-inf", "REPORT-sink-lse-inf.md", "fa4",
          _legacy(batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1, head_dim_qk=24, head_dim_v=24,
                  dtype="float16", causal=False, align="bottom_right", window_left=None, window_right=None,
                  sinks=True, sink_center=0.0, softmax_scale=None, values="outlier_channels",
                  value_scale=23.54093019240402, pad_tail=0, seed=3, layout="contiguous"),
          "failed", ("lse:nonfinite",), seen_with=FA4,
          witness=(_w("lse", got=INF, at=[0, 0], truth=0.2075),)),
    Entry("fa4", "sink-lse-inf.d24-sink90", "REPORT-sink-lse-inf.md", "fa4",
          Problem(batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1, head_dim_qk=24, head_dim_v=24,
                  dtype="float16", sinks=True, sink_center=90.0),
          "failed", ("lse:nonfinite",), seen_with=FA4,
          witness=(_w("lse", got=INF, at=[0, 0], truth=92.0368),)),
    # ---------------------------------------------------------------- fastflash
    Entry("fastflash", "small-head-dims", "REPORT-small-head-dims.md", "fastflash",
          _legacy(batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1, head_dim_qk=1, head_dim_v=1,
                  dtype="bfloat16", causal=False),
          "error", reason="CompilationError: Input shapes should have M >= 1, N >= 1 and K >= 16",
          seen_with="fastflash-attention 0.2.0, triton 3.6.0, torch 2.11.0+cu130, NVIDIA H200 sm_90"),
    # ---------------------------------------------------------------- torch SDPA, flash backend
    # every tensor one element into its storage; the forward faults (sticky: a worker process of its own)
    Entry("sdpa-flash", "misaligned-address", "REPORT-misaligned-address.md", "sdpa-flash",
          Problem(batch=1, seqlen_q=63, seqlen_k=63, heads_q=16, heads_kv=2, head_dim_qk=112, head_dim_v=112,
                  dtype="bfloat16", causal=True, layout="misaligned"),
          "error", reason="CUDA error: misaligned address",
          seen_with="torch 2.11.0+cu130 (CUDA 13.0), NVIDIA H100 80GB HBM3 sm_90, driver 580.159.04",
          config={"isolate": True, "timeout_s": 300.0}),
    # ---------------------------------------------------------------- torch SDPA (a design note, not a report)
    # passes since the kernel declares the input-dtype running sum (oracles/running_sum.py): the
    # JSON pins that our gates keep accepting this correct design (it failed dv:budget, ratio 1.59, before)
    Entry("sdpa-cpu-flash", "input-dtype-accumulation", "NOTE-input-dtype-accumulation.md", "sdpa-cpu-flash",
          Problem(batch=1, seqlen_q=512, seqlen_k=145, heads_q=9, heads_kv=1, head_dim_qk=8, head_dim_v=8,
                  dtype="float16", softmax_scale=0.01, values="large_do", value_scale=1.0),
          "passed", (), seen_with="torch 2.13.0+cpu, 2-core x86-64 CPU"),
    # ---------------------------------------------------------------- TileLang's example
    Entry("tilelang-example", "dq-layout-overrun", "REPORT-dq-layout-overrun.md", "tilelang-file",
          _legacy(batch=1, seqlen_q=67, seqlen_k=67, heads_q=1, heads_kv=1, head_dim_qk=16, head_dim_v=16,
                  dtype="float16", causal=True, values="normal", seed=0),
          "failed", ("dq:nonfinite",), seen_with=TILELANG_EXAMPLE,
          # rows 64-66 lie past the end of dQ: NaN from a guard zone behind it, -2.758 (truth 0.502) without one
          witness=(_w("dq", got=NAN, at=[66, 0, 15], truth=0.502), _w("dq", err=3.26))),
    Entry("tilelang-example", "noncausal-tail-keys", "REPORT-noncausal-tail-keys.md", "tilelang-file",
          _legacy(batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1, head_dim_qk=16, head_dim_v=16,
                  dtype="float16", causal=False, softmax_scale=None, values="normal", seed=0, layout="contiguous"),
          "failed", ("o:budget", "lse:budget", "dq:budget", "dk:budget", "dv:budget"), seen_with=TILELANG_EXAMPLE,
          witness=(_w("lse", got=4.14573, at=[0, 0], truth=-1.80899),
                   _w("o", err=1.868), _w("dv", err=3.137))),
    # ---------------------------------------------------------------- TileOPs
    # the call never returns: the worker process is killed after timeout_s
    Entry("tileops", "bwd-hang-seqlen64", "REPORT-bwd-hang-seqlen64.md", "tileops-gqa",
          _legacy(batch=1, seqlen_q=64, seqlen_k=64, heads_q=1, heads_kv=1, head_dim_qk=128, head_dim_v=128,
                  dtype="float16", causal=False, values="normal", seed=0),
          "error", reason="KernelTimeout: the backward never returns", seen_with=TILEOPS,
          config={"isolate": True, "timeout_s": 150.0}),
    Entry("tileops", "fwd-head-dim-160-smem", "REPORT-fwd-head-dim-smem.md", "tileops-gqa",
          _legacy(batch=1, seqlen_q=3, seqlen_k=3, heads_q=1, heads_kv=1, head_dim_qk=160, head_dim_v=160,
                  dtype="float16", causal=False, values="normal", seed=0),
          "error", reason="InternalError: Failed to set the allowed dynamic shared memory size to 245760",
          seen_with=TILEOPS),
    Entry("tileops", "nan-dq-extreme-logits", "REPORT-nan-dq-extreme-logits.md", "tileops-gqa",
          _legacy(batch=1, seqlen_q=3, seqlen_k=3, heads_q=1, heads_kv=1, head_dim_qk=128, head_dim_v=128,
                  dtype="float16", causal=False, softmax_scale=10.0, values="normal", seed=0),
          "failed", ("dq:nonfinite",), seen_with=TILEOPS,
          witness=(_w("dq", got=NAN, at=[2, 0, 0], truth=4.651),)),
    Entry("tileops", "nan-dq-extreme-logits.neglse-fp16", "REPORT-nan-dq-extreme-logits.md", "tileops-gqa",
          _legacy(batch=1, seqlen_q=9, seqlen_k=9, heads_q=1, heads_kv=1, head_dim_qk=128, head_dim_v=128,
                  dtype="float16", causal=False, softmax_scale=None, values="negative_lse", value_scale=16.0,
                  seed=0),
          "failed", ("dq:nonfinite",), seen_with=TILEOPS,
          witness=(_w("dq", got=NAN, at=[0, 0, 0], truth=-0.02997),)),
    Entry("tileops", "nan-dq-extreme-logits.neglse-bf16", "REPORT-nan-dq-extreme-logits.md", "tileops-gqa",
          _legacy(batch=1, seqlen_q=9, seqlen_k=9, heads_q=1, heads_kv=1, head_dim_qk=128, head_dim_v=128,
                  dtype="bfloat16", causal=False, softmax_scale=None, values="negative_lse", value_scale=16.0,
                  seed=0),
          "failed", ("dq:nonfinite",), seen_with=TILEOPS,
          witness=(_w("dq", got=NAN, at=[0, 0, 0], truth=-0.03226),)),
    # ---------------------------------------------------------------- cuDNN
    Entry("cudnn", "thd-gqa-decode-stats", "REPORT-thd-gqa-decode-stats.md", "cudnn",
          Problem(batch=1, seqlen_q=(1,), seqlen_k=(2,), heads_q=22, heads_kv=1, head_dim_qk=8, head_dim_v=8,
                  dtype="float16", values="normal", seed=0),
          "failed", ("lse:nonfinite", "lse:budget", "dq:nonfinite", "dq:budget", "dk:nonfinite", "dv:nonfinite"),
          seen_with=CUDNN,
          # heads 1-7 and 9-21 keep the buffer's -inf; head 0 reads 0.474 where the truth is -0.027
          witness=(_w("lse", got="-inf", at=[0, 1]), _w("lse", err=0.501),
                   _w("dq", got=NAN, at=None))),
    # d_qk > 128 with d_v < d_qk: one family (out-of-bounds writes, columns past 128 unwritten)
    Entry("cudnn", "bwd-dqk-gt128-dv-lt-dqk.thd-d200-v72", "REPORT-bwd-dqk-gt128-dv-lt-dqk.md", "cudnn",
          Problem(batch=1, seqlen_q=(1,), seqlen_k=(2,), heads_q=1, heads_kv=1, head_dim_qk=200, head_dim_v=72,
                  dtype="float16", values="normal", seed=0),
          "failed", ("dk:budget",), seen_with=CUDNN,
          # standalone thd_d200_v72: dK max |err| 1.08 where max |dK| is 1.49 (columns past 128 all 0)
          witness=(_w("dk", err_rel_max_truth=0.72),)),
    Entry("cudnn", "bwd-dqk-gt128-dv-lt-dqk.thd-neglse-d208-v88", "REPORT-bwd-dqk-gt128-dv-lt-dqk.md", "cudnn",
          Problem(batch=1, seqlen_q=(1,), seqlen_k=(182,), heads_q=1, heads_kv=1, head_dim_qk=208, head_dim_v=88,
                  dtype="float16", values="negative_lse", value_scale=14.799644633607514, seed=3),
          "failed", ("dq:nonfinite", "dk:budget", "dv:budget", "dq:determinism"), seen_with=CUDNN,
          witness=(_w("dq", got=NAN, at=None),)),
    Entry("cudnn", "bwd-dqk-gt128-dv-lt-dqk.dense-d136-v72", "REPORT-bwd-dqk-gt128-dv-lt-dqk.md", "cudnn",
          Problem(batch=3, seqlen_q=1, seqlen_k=2, heads_q=1, heads_kv=1, head_dim_qk=136, head_dim_v=72,
                  dtype="float16", values="normal", seed=0),
          "failed", ("dq:budget", "dq:determinism"), seen_with=CUDNN,
          # standalone dense_d136_v72 (b3): dQ max |err| 21.2 where max |dQ| is 1.60, runs 2-20
          witness=(_w("dq", err_rel_max_truth=13.2),)),
    Entry("cudnn", "bwd-dqk-gt128-dv-lt-dqk.dense-d160-v120-lse", "REPORT-bwd-dqk-gt128-dv-lt-dqk.md", "cudnn",
          Problem(batch=3, seqlen_q=1, seqlen_k=463, heads_q=1, heads_kv=1, head_dim_qk=160, head_dim_v=120,
                  dtype="float16", window_right=129, values="mixed_do", seed=0),
          "failed", ("lse:budget", "lse:determinism"), seen_with=CUDNN,
          witness=(_w("lse", err=6.72),)),
    Entry("cudnn", "dsink-nondeterministic", "REPORT-dsink-nondeterministic.md", "cudnn",
          Problem(batch=1, seqlen_q=3, seqlen_k=1, heads_q=3, heads_kv=3, head_dim_qk=8, head_dim_v=104,
                  dtype="float16", sinks=True, sink_center=-4.4398495439060355, values="normal", seed=1),
          "failed", ("dsink:determinism",), seen_with=CUDNN,
          witness=(_w("dsink", runs_differ=2.2e-6),)),
    Entry("cudnn", "fp8-dq-partial-rows", "REPORT-fp8-dq-partial-rows.md", "cudnn-fp8",
          Problem(batch=1, seqlen_q=2, seqlen_k=2, heads_q=1, heads_kv=1, head_dim_qk=128, head_dim_v=128,
                  dtype="float8_e4m3fn", values="normal", seed=0),
          "failed", ("dq:budget",), seen_with=CUDNN,
          # standalone s_q = s_kv = 2: max |dQ - expected| 0.708 where max |expected| is 0.709
          witness=(_w("dq", err_rel_max_truth=0.998),)),
    # ---------------------------------------------------------------- fla-core
    # fla-core 0.6.0 under Triton's CPU interpreter (results/fla.md): the shrunk problem, in
    # float16 (it shrank to float32, which the adapter claims only under the interpreter)
    Entry("fla", "dsink-tail-rows", "REPORT-dsink-tail-rows.md", "fla-attn",
          Problem(batch=1, seqlen_q=(0,), seqlen_k=(0,), heads_q=1, heads_kv=1, head_dim_qk=1, head_dim_v=1,
                  dtype="float16", causal=True, sinks=True, pad_tail=1, seed=0),
          "failed", ("dsink:budget",), seen_with="fla-core 0.6.0, torch 2.13.0+cpu, Triton 3.6.0 interpreter "
                                                    "(TRITON_INTERPRET=1), no GPU",
          witness=(_w("dsink", got=NAN, at=[0]),)),
    Entry("fla", "dsink-tail-rows.gpu", "REPORT-dsink-tail-rows.md", "fla-attn",
          Problem(batch=1, seqlen_q=(3,), seqlen_k=(3,), heads_q=1, heads_kv=1, head_dim_qk=1, head_dim_v=1,
                  dtype="float16", causal=True, sinks=True, pad_tail=253, seed=0),
          "failed", ("dsink:nonfinite",), seen_with=FLA_H200,
          witness=(_w("dsink", got=NAN, at=[0]),)),
    Entry("fla", "hopper-bwd-smem-d136", "REPORT-hopper-bwd-smem.md", "fla-attn",
          Problem(batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1, head_dim_qk=136, head_dim_v=136,
                  dtype="float16", causal=True, seed=0),
          "error", reason="OutOfResources: out of resource: shared memory, Required: 327680, Hardware limit: 232448",
          seen_with=FLA_H200),
)

# Reports withdrawn because difftest's own verdict rules call the documented output correct: each
# keeps its problem and what the package returned, and tests/test_bug_reports.py checks that the gates
# accept it (no JSON is written: `difftest repro` would replay a pass).
WITHDRAWN = (
    # dK = -inf where the summed truth is -63,997: query head 3's share of that element is -70,643 in float64,
    # past fp16's range, and torch's flash backward stores per-head shares in fp16 before the group sum
    # (the per-head-partials rule, gates.py ``_partials_limited``): NOTE-dk-inf-per-head-partials.md
    Entry("sdpa-flash", "dk-inf-below-fp16-max", "NOTE-dk-inf-per-head-partials.md", "sdpa-flash",
          _legacy(batch=1, seqlen_q=28, seqlen_k=28, heads_q=8, heads_kv=1, head_dim_qk=99, head_dim_v=99,
                  dtype="float16", causal=False, align="top_left", window_left=None, window_right=None,
                  sinks=False, sink_center=0.0, softmax_scale=0.5406033965362738, values="mixed_do",
                  value_scale=4.0, pad_tail=0, seed=1311573, layout="contiguous"),
          "failed", ("dk:nonfinite",), seen_with="torch 2.11.0+cu130, NVIDIA H200 sm_90, driver 580.159.04",
          witness=(_w("dk", got="-inf", at=[17, 0, 58], truth=-63996.99),)),
)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    stale = []
    for e in ENTRIES:
        text = e.text()
        if check:
            if not e.path.exists() or e.path.read_text() != text:
                stale.append(str(e.path))
        else:
            e.path.write_text(text)
            print(e.path.relative_to(HERE))
    if stale:
        print(f"stale reproducers (re-run without --check): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
