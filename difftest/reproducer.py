"""Reproducers: a failing case written as JSON and as a standalone Python script.

The script needs difftest and the kernel, not Hypothesis: it rebuilds the Problem's
inputs, runs the kernel and the references, prints every gate verdict and exits 1 when
the case still fails. ``difftest repro FILE`` replays either form.
"""

import hashlib
import json
import os
from pathlib import Path

from .problem import Problem

SCRIPT = '''#!/usr/bin/env python
"""difftest reproducer.

kernel:  {kernel}
problem: {short}
failed:  {gates}

Run: python {name}   (exit 1 while the failure reproduces; needs difftest, not Hypothesis)
"""
import json
import sys

KERNEL = {kernel!r}
PROBLEM = json.loads({problem_json!r})
CONFIG = json.loads({config_json!r})


def main():
    from difftest import adapter
    from difftest.problem import Problem
    from difftest.runner import RunConfig, run_case

    problem = Problem.from_dict(PROBLEM)
    result = run_case(adapter.get(KERNEL), problem, RunConfig.from_dict(CONFIG))
    print(result.render(verbose=True))
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def kernel_spec(kernel) -> str:
    return getattr(kernel, "spec", None) or kernel.name


def write_reproducer(kernel, case, config, out_dir) -> dict:
    """Write ``<kernel>-<hash>.json`` and ``.py`` under ``out_dir``; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = kernel_spec(kernel)
    cfg = config.to_dict()
    cfg["isolate"] = False  # the reproducer runs the kernel in its own process already
    digest = hashlib.sha256((spec + case.problem.to_json()).encode()).hexdigest()[:10]
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in spec) + "-" + digest
    record = {"kernel": spec, "problem": case.problem.to_dict(), "config": cfg,
              "status": case.status, "failed_gates": case.failed_gates, "reason": case.reason,
              "verdicts": [v.to_dict() for v in case.verdicts]}
    jpath = out / f"{stem}.json"
    jpath.write_text(json.dumps(record, indent=1, default=str))
    ppath = out / f"{stem}.py"
    gates = ", ".join(case.failed_gates) or (case.reason.splitlines() or ["-"])[0]
    ppath.write_text(SCRIPT.format(kernel=spec, short=case.problem.short(), gates=gates, name=ppath.name, problem_json=case.problem.to_json(),
                                   config_json=json.dumps(cfg)))
    os.chmod(ppath, 0o755)
    return {"json": str(jpath), "py": str(ppath)}


def load(path) -> tuple[str, Problem, dict]:
    """(kernel spec, Problem, config dict) from a reproducer .json or .py."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"reproducer {path} does not exist")
    if path.suffix == ".json":
        d = json.loads(path.read_text())
        if "problem" not in d:  # a bare Problem
            return d.get("kernel", ""), Problem.from_dict(d), {}
        return d["kernel"], Problem.from_dict(d["problem"]), d.get("config", {})
    if path.suffix == ".py":
        ns = {}
        src = path.read_text()
        head = src.split("\ndef main", 1)[0]
        exec(compile(head, str(path), "exec"), ns)  # only the constants block
        return ns["KERNEL"], Problem.from_dict(ns["PROBLEM"]), ns["CONFIG"]
    raise ValueError(f"reproducer {path}: allowed a .json or .py file written by difftest")


def replay(path, kernel: str | None = None):
    """Run a reproducer again; ``kernel`` overrides the recorded one (e.g. a fixed kernel)."""
    from . import adapter
    from .runner import RunConfig, run_case

    spec, problem, cfg = load(path)
    spec = kernel or spec
    if not spec:
        raise ValueError(f"reproducer {path} names no kernel: pass one with --kernel")
    return run_case(adapter.get(spec), problem, RunConfig.from_dict(cfg) if cfg else RunConfig())
