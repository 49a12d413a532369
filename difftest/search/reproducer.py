"""Reproducers: a failing case written as JSON and as a standalone Python script.

The script needs difftest and the kernel, not Hypothesis: it rebuilds the Problem's
inputs, runs the kernel and the references, prints every gate verdict and exits 1 when
the case still fails. ``difftest repro FILE.json`` replays the JSON form only: a
reproducer is data, and difftest never executes a ``.py`` nor imports a module a file
names (a ``module:attr`` kernel in a file needs ``--allow-import``), so a reproducer
from a CI artifact cannot run code on the machine that replays it. Both files are
written atomically (temp file + os.replace).
"""

import dataclasses
import hashlib
import json
import math
import types
import typing
from pathlib import Path

from difftest.argcheck import MAX_CHUNK_THRESHOLD, MAX_DETERMINISM, MAX_SECONDS
from difftest.errors import FileFormatError
from difftest.execute import adapter
from difftest.execute.adapter import is_import_spec
from difftest.model.problem import Problem, ProblemError
from difftest.safeio import atomic_write_text, ensure_dir, open_regular, parse_json, read_capped
from difftest.search.limits import check_problem_size

SCRIPT = '''#!/usr/bin/env python
"""difftest reproducer: rebuilds one failing case's inputs, runs the kernel and the
references, prints every gate verdict, and exits 1 while the failure reproduces (needs
difftest, not Hypothesis). What was recorded is data below, never code."""
import json
import sys

RECORD = json.loads({record!r})
KERNEL = RECORD["kernel"]
PROBLEM = RECORD["problem"]
CONFIG = RECORD["config"]


def main():
    from difftest import Problem, RunConfig, get_kernel, run_case

    print("kernel: ", KERNEL)
    print("problem:", RECORD["short"])
    print("failed: ", RECORD["failed"])
    kernel, config = get_kernel(KERNEL), RunConfig.from_dict(CONFIG)
    for earlier in RECORD["before"]:  # the failure shows only after these ran in the same process
        print("first:  ", run_case(kernel, Problem.from_dict(earlier), config).problem.short())
    problem = Problem.from_dict(PROBLEM)
    result = run_case(kernel, problem, config)
    print(result.render(verbose=True))
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def kernel_spec(kernel) -> str:
    return getattr(kernel, "spec", None) or kernel.name


def write_reproducer(kernel, case, config, out_dir, stem: str | None = None, before=()) -> dict:
    """Write ``<kernel>-<hash>.json`` and ``.py`` under ``out_dir`` (or ``<stem>.json`` and
    ``.py``: a campaign rewrites one pair at each shrink step); return their paths. ``before``:
    Problems both forms run first, in the same process (a failure that shows only after them:
    ``Signature.history``; the case passes alone). The folder
    is made following no link (``out_dir`` itself included: a planted ``repro -> ~/bin``
    is refused with an OSError), and each file replaces whatever is at its path."""
    out = Path(out_dir)
    ensure_dir(out, root=out.parent)
    spec = kernel_spec(kernel)
    cfg = config.to_dict()
    cfg["isolate"] = False  # the reproducer runs the kernel in its own process already
    digest = hashlib.sha256((spec + case.problem.to_json()).encode()).hexdigest()[:10]
    stem = stem or "".join(c if c.isalnum() or c in "-_" else "_" for c in spec) + "-" + digest
    record = {
        "kernel": spec,
        "problem": case.problem.to_dict(),
        "config": cfg,
        "status": case.status,
        "failed_gates": case.failed_gates,
        "reason": case.reason,
        "verdicts": [v.to_dict() for v in case.verdicts],
        **({"before": [p.to_dict() for p in before]} if before else {}),
    }
    jpath = out / f"{stem}.json"
    atomic_write_text(jpath, json.dumps(record, indent=1, default=str), root=out.parent)
    ppath = out / f"{stem}.py"
    gates = ", ".join(case.failed_gates) or (case.reason.splitlines() or ["-"])[0]
    # every recorded text (the kernel's error message included) enters the script as one
    # Python string literal (repr of JSON text): no recorded text can become code
    data = json.dumps(
        {
            "kernel": spec,
            "problem": case.problem.to_dict(),
            "config": cfg,
            "short": case.problem.short(),
            "failed": gates,
            "before": [p.to_dict() for p in before],
        },
        default=str,
        ensure_ascii=True,
    )
    atomic_write_text(ppath, SCRIPT.format(record=data), mode=0o755, root=out.parent)
    return {"json": str(jpath), "py": str(ppath)}


class ReproducerError(FileFormatError):
    """A reproducer file that cannot be replayed; the message is one line naming the file,
    what is wrong and what is allowed."""


MAX_BYTES = 16 * 2**20  # a reproducer is a few kB; anything this large is not one


def reject(path, msg):
    raise ReproducerError(f"reproducer {str(path)!r}: {msg}")


def read_json(path) -> dict:
    """The record of a ``.json`` reproducer, checked: present, not empty, complete JSON, an
    object. Never executes anything from the file."""
    path = Path(path)
    if path.suffix == ".py":
        reject(
            path,
            f"difftest replays only the .json reproducer (the .py is a standalone script for "
            f"people: run it with python); pass {str(path.with_suffix('.json'))!r}",
        )
    if path.suffix != ".json":
        reject(path, "allowed a .json reproducer written by difftest")
    if not path.exists():
        reject(path, "no such file")
    if not path.is_file():
        reject(path, "not a regular file: allowed a .json reproducer")
    size = path.stat().st_size
    if size == 0:
        reject(path, "the file is empty: allowed a JSON reproducer written by difftest")
    if size > MAX_BYTES:
        reject(path, f"{size} bytes: allowed at most {MAX_BYTES} (a reproducer is a few kB)")

    def error(msg):  # safeio's messages start with the path; ours name the reproducer first
        return ReproducerError(f"reproducer {msg}")

    d = parse_json(read_capped(path, MAX_BYTES, error, "JSON reproducer"), repr(str(path)), error)
    if not isinstance(d, dict):
        reject(path, f"top level is a JSON {type(d).__name__}: allowed an object with 'kernel' and 'problem'")
    return d


def _config_types() -> dict:
    """RunConfig's fields and the JSON types each accepts, from its annotations (so a new
    field is accepted, and type-checked, without an edit here)."""
    # lazy: keeps torch off --help
    from difftest.judge.runner import RunConfig

    hints = typing.get_type_hints(RunConfig)
    out = {}
    for f in dataclasses.fields(RunConfig):
        t = hints[f.name]
        parts = typing.get_args(t) if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union else (t,)
        allowed = []
        for p in parts:
            if p is type(None) or p in (bool, int, str):
                allowed.append(p)
            elif p is float:
                allowed += [float, int]
            else:  # a nested config (GateConfig): a JSON object
                allowed.append(dict)
        out[f.name] = tuple(dict.fromkeys(allowed))
    return out


def _check_config(path, cfg) -> dict:
    if not isinstance(cfg, dict):
        reject(path, f"field 'config' is a {type(cfg).__name__}: allowed an object")
    known = _config_types()
    for key, val in cfg.items():
        if key not in known:
            reject(path, f"config field {key!r} is unknown: allowed {sorted(known)}")
        types = known[key]
        if not isinstance(val, types) or (isinstance(val, bool) and bool not in types):
            allowed = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            reject(path, f"config field {key!r} = {val!r}: allowed {allowed}")
    if cfg.get("device") not in (None, "cpu", "cuda"):
        reject(path, f"config field 'device' = {cfg['device']!r}: allowed 'cpu', 'cuda' or null")

    for key in ("timeout_s", "compile_timeout_s"):
        t = cfg.get(key, 1.0)
        if not (math.isfinite(t) and 0 < t <= MAX_SECONDS):
            reject(path, f"config field {key!r} = {t!r}: allowed a finite number in (0, {MAX_SECONDS:g}]")
    for key, least, most in (("determinism_runs", 1, MAX_DETERMINISM), ("chunk_threshold", 0, MAX_CHUNK_THRESHOLD)):
        v = cfg.get(key)
        if v is not None and not least <= v <= most:
            reject(path, f"config field {key!r} = {v!r}: allowed null or an int in [{least}, {most}]")
    # lazy: keeps torch off --help
    from difftest.judge import runner
    from difftest.judge.runner import RunConfig

    truths = getattr(runner, "TRUTHS", None)
    if truths and "truth" in cfg and cfg["truth"] not in truths:
        reject(path, f"config field 'truth' = {cfg['truth']!r}: allowed one of {truths}")
    try:
        RunConfig.from_dict(cfg)
    except (TypeError, ValueError) as e:
        reject(path, f"config field 'gates': {e}")
    return cfg


def load(path) -> tuple[str, Problem, dict]:
    """(kernel spec, Problem, config dict) from a ``.json`` reproducer, every field checked;
    raises ReproducerError (one line). Reads data only: a ``.py`` reproducer is refused,
    never executed, and nothing the file names is imported here."""
    d = read_json(path)
    if "problem" not in d:  # a bare Problem
        d = {"kernel": d.pop("kernel", ""), "problem": d}
    kernel = d.get("kernel", "")
    if not isinstance(kernel, str):
        reject(path, f"field 'kernel' = {kernel!r}: allowed a kernel name (string)")
    if not isinstance(d["problem"], dict):
        reject(path, f"field 'problem' is a {type(d['problem']).__name__}: allowed an object of Problem fields")
    return kernel, _problem(path, d["problem"], "problem"), _check_config(path, d.get("config", {}))


def _problem(path, fields: dict, name: str) -> Problem:
    """The Problem of a reproducer's field ``name``, every field checked (one line)."""
    missing = [f for f in REQUIRED_PROBLEM_FIELDS if f not in fields]
    if missing:  # {"problem": {}} would replay Problem()'s defaults, a case nobody recorded
        reject(
            path,
            f"field {name!r} lacks {', '.join(missing)}: allowed a Problem as difftest writes it, with "
            f"{', '.join(REQUIRED_PROBLEM_FIELDS)}",
        )
    try:
        problem = Problem.from_dict(fields)
    except ProblemError as e:
        reject(path, str(e))
    except TypeError as e:  # e.g. a field given the wrong kind of value
        reject(path, f"field {name!r}: {e}")
    check_capture(path, problem)
    return problem


MAX_BEFORE = 8  # Problems a reproducer runs first (a hunt names one)


def load_before(path) -> tuple[Problem, ...]:
    """The Problems a reproducer runs before its own, in the same process (field ``before``,
    written for a failure that shows only after them); each checked as ``problem`` is."""
    before = read_json(path).get("before", [])
    if not isinstance(before, list) or len(before) > MAX_BEFORE or not all(isinstance(b, dict) for b in before):
        reject(path, f"field 'before': allowed a list of at most {MAX_BEFORE} Problems (objects)")
    return tuple(_problem(path, b, f"before[{i}]") for i, b in enumerate(before))


# what every reproducer difftest ever wrote records (tests/data/reproducer-33ddc2c.json too)
REQUIRED_PROBLEM_FIELDS = ("batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv", "head_dim_qk", "head_dim_v", "dtype")


def check_capture(path, problem) -> None:
    """A captured Problem whose window is not embedded reads its capture file at replay: the
    file it names must be a regular file (not a FIFO, which would hang the replay, nor a
    directory or device) inside the reproducer's folder or the working directory (the
    folders the user chose by replaying it there), never ``/etc/passwd`` a file names."""
    cap = problem.capture
    if cap is None or not cap.needs_file(problem):
        return
    f = Path(cap.file)
    roots = [Path(path).resolve().parent, Path.cwd().resolve()]
    try:
        real = f.resolve()
    except (OSError, RuntimeError) as e:
        reject(path, f"capture file {cap.file!r} cannot be resolved ({e}): allowed a capture inside {str(roots[0])!r}")
    if not any(real.is_relative_to(r) for r in roots):
        reject(
            path,
            f"capture file {cap.file!r} lies outside the reproducer's folder and the working directory: "
            f"allowed a capture file inside {str(roots[0])!r} or {str(roots[1])!r}",
        )
    try:
        with open_regular(real, ReproducerError, "capture file (safetensors)"):
            pass
    except ReproducerError as e:
        reject(path, f"capture {e}")


def check_spec(path, field_name: str, spec: str, allow_import: bool) -> None:
    """Refuse a ``module:attr`` spec read from a file unless the user allowed imports: a
    name in a file resolves only through the registry, entry points and catalogues."""
    if spec and not allow_import and is_import_spec(spec):
        reject(
            path,
            f"{field_name} {spec!r} would import a module named by the file: allowed a registered kernel "
            f"name (see `difftest list`); pass --allow-import to trust this file, or --kernel NAME",
        )


CPU_PROFILE, GPU_PROFILE = "nightly", "gpu"  # the largest profile meant for each device


def device_profile(kernel, cfg: dict) -> str:
    """The size limits of the device the case will actually run on: the largest CPU
    profile's unless it runs on CUDA (the config's device, else the kernel's own) and CUDA
    is available here. A GPU-sized Problem replayed on the CPU would take minutes and
    gigabytes (the float64 truth is computed where the kernel runs)."""
    device = str(cfg.get("device") or getattr(kernel.capability, "device", "cpu") or "cpu")
    if device.startswith("cuda"):
        # lazy: keeps torch off --help
        import torch

        if torch.cuda.is_available():
            return GPU_PROFILE
    return CPU_PROFILE


def check_device_here(path, kernel, cfg: dict) -> None:
    """Refuse (one line, exit 2) a case that would run on CUDA (its recorded device, else its
    kernel's) where no CUDA device is: the replay died in a traceback, and its exit code 1
    read as "still fails". ``repro --device cpu`` replays it on the CPU. A kernel that cannot
    run here at all (``available()`` says why: a CUDA-only kernel on a CPU host) is left to
    the replay, which skips it with that reason (exit 3), as before."""
    if kernel.available() is not None:
        return
    device = str(cfg.get("device") or getattr(kernel.capability, "device", "cpu") or "cpu")
    if device.startswith("cuda"):
        # lazy: keeps torch off --help
        import torch

        if not torch.cuda.is_available():
            why = "recorded on CUDA" if cfg.get("device") else f"kernel {kernel.name!r} runs on CUDA"
            reject(
                path,
                f"{why} and no CUDA device is available here (torch.cuda.is_available() is False): "
                "allowed --device cpu to replay it on the CPU, or a host with CUDA",
            )


def replay(
    path,
    kernel: str | None = None,
    *,
    allow_import: bool = False,
    profile: str | None = None,
    device: str | None = None,
):
    """Run a reproducer again; ``kernel`` (the user's own choice, so it may be a
    ``module:attr`` spec) overrides the recorded one. Names from the file resolve only
    through the registry unless ``allow_import``. ``profile``: the size limits the
    Problem must fit (default: the device's, ``device_profile``). ``device``: where to
    replay (default: the recorded device; CUDA absent here: ``check_device_here``)."""
    # lazy: keeps torch off --help
    from difftest.judge.runner import RunConfig, run_case

    spec, problem, cfg = load(path)
    if kernel is None:
        check_spec(path, "kernel", spec, allow_import)
    check_spec(path, "config.second_reference", cfg.get("second_reference") or "", allow_import)
    spec = kernel or spec
    if not spec:
        reject(path, "names no kernel: pass one with --kernel")
    try:
        k = adapter.get(spec)
        if cfg.get("second_reference"):
            adapter.get(cfg["second_reference"])
    except adapter.KernelSpecError as e:
        reject(path, str(e))
    if device is not None:
        cfg = {**cfg, "device": device}
    check_device_here(path, k, cfg)
    before = load_before(path)
    limits = profile if profile is not None else device_profile(k, cfg)
    for p in (*before, problem):
        why = check_problem_size(p, limits)
        if why:
            reject(path, why + " (-p/--profile chooses other limits)")
    config = RunConfig.from_dict(cfg) if cfg else RunConfig()
    for p in before:  # the recorded failure shows only after these, in one process: their verdicts are not its
        run_case(k, p, config)
    r = run_case(k, problem, config)
    if before:
        ran = "; ".join(p.short() for p in before)
        r.notes.append(f"replayed after {ran} in the same process (the record's 'before')")
    return r
