"""``difftest probe``: an adapter called across every capability dimension
(difftest/investigate/probe.py): a draft Capability and its contract violations."""

import json
import sys

from difftest.argcheck import check_device, positive_float, positive_int
from difftest.execute import adapter as registry
from difftest.execute.isolation import close_all
from difftest.investigate.probe import (
    DEFAULT_MAX_SEQLEN,
    DEFAULT_TIMEOUT_S,
    DIMENSIONS,
    ProbeError,
    direction,
    draft,
    jsonable,
    not_served,
    points,
    probe,
    render,
    render_draft,
    undeclared_served,
    violations,
    writable,
)
from difftest.model.problem import MAX_HEAD_DIM
from difftest.safeio import atomic_write_text

HELP = "call a kernel across its capability's dimensions: served, refused, or accepted then wrong"


# ---------------------------------------------------------------- command line
def add_arguments(p) -> None:
    p.add_argument("--kernel", "-k", required=True, help="the kernel to probe (see `difftest list`)")
    p.add_argument("--dimensions", metavar="DIM,DIM", help=f"probe only these (default all): {','.join(DIMENSIONS)}")
    p.add_argument("--head-dim-step", type=positive_int, default=8, help="head-dim grid step (default 8)")
    p.add_argument(
        "--max-head-dim",
        type=positive_int,
        default=MAX_HEAD_DIM,
        help=f"largest head dim probed (default {MAX_HEAD_DIM})",
    )
    p.add_argument(
        "--max-seqlen",
        type=positive_int,
        default=DEFAULT_MAX_SEQLEN,
        help=f"longest sequence probed (default {DEFAULT_MAX_SEQLEN})",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds per point's kernel call before it counts as hung (default {DEFAULT_TIMEOUT_S:g})",
    )
    p.add_argument("--device", choices=("cpu", "cuda"), help="device (default: the kernel's own)")
    p.add_argument("--json", metavar="FILE", help="also write every point, the draft and the violations as JSON")
    p.add_argument(
        "--past-adapter-checks",
        action="store_true",
        help="open the adapter's own capability too, so an adapter that refuses what it does not declare "
        "lets the call reach the kernel (what the kernel serves, not what the adapter admits; a "
        "feature the adapter cannot pass on then shows as failed)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no line per point")


def _dimensions(text):
    if not text:
        return DIMENSIONS
    dims = tuple(d.strip() for d in text.split(",") if d.strip())
    bad = [d for d in dims if d not in DIMENSIONS]
    if bad or not dims:
        raise ProbeError(f"--dimensions {text!r}: allowed a comma-separated subset of {','.join(DIMENSIONS)}")
    return dims


def command(a) -> int:
    # lazy: keeps torch off --help
    from difftest.judge.runner import RunConfig

    dims = _dimensions(a.dimensions)
    if a.max_head_dim > MAX_HEAD_DIM:
        raise ProbeError(f"--max-head-dim {a.max_head_dim}: allowed at most {MAX_HEAD_DIM}")
    if a.json and not writable(a.json):
        raise ProbeError(f"--json {a.json!r}: not a writable file path")
    check_device(a.device)
    kernel = registry.get(a.kernel)
    why = kernel.available()
    if why:
        raise ProbeError(f"-k {a.kernel}: cannot run here: {why}")
    cap = kernel.capability
    pts = points(cap, dims, head_dim_step=a.head_dim_step, max_head_dim=a.max_head_dim, max_seqlen=a.max_seqlen)
    config = RunConfig(isolate=True, timeout_s=a.timeout, determinism_runs=1, device=a.device)

    def progress(i, n, pt):
        if not a.quiet:
            print(
                f"  [{i + 1}/{n}] {pt.dimension} {pt.label}: {pt.outcome} ({pt.seconds:.1f} s)"
                + (f": {pt.detail}" if pt.detail else ""),
                file=sys.stderr,
                flush=True,
            )

    try:
        probe(kernel, pts, config, progress, past_adapter_checks=a.past_adapter_checks)
    finally:
        close_all()
    print(render(a.kernel, cap, pts))
    print(render_draft(cap, pts, a.past_adapter_checks))
    _, diffs = draft(cap, pts)
    bad = violations(pts, a.past_adapter_checks)
    if a.json:
        atomic_write_text(
            a.json,
            json.dumps(
                {
                    "kernel": a.kernel,
                    "points": [p.to_dict() for p in pts],
                    "differences": {k: [jsonable(o), jsonable(n), direction(k, o, n)] for k, (o, n) in diffs.items()},
                    "past_adapter_checks": a.past_adapter_checks,
                    "violations": bad,
                    "served_not_declared": undeclared_served(pts),
                    "not_served_not_declared": not_served(pts),
                },
                indent=1,
            )
            + "\n",
        )
    return 1 if diffs or bad else 0
