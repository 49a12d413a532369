"""Every built-in kernel's resolved capability, and the coverage features it expects per
profile, as plain data. ``tests/data/capabilities.json.xz`` holds this as recorded before
the Capability defaults changed to claim the basics only, so
tests/test_capability_defaults.py proves built-in behaviour did not move:
``python3 tests/capability_snapshot.py | xz -9e > tests/data/capabilities.json.xz`` re-records it."""

import dataclasses
import inspect
import json
import sys


def _cap(c) -> dict:
    d = dataclasses.asdict(c)
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def resolved() -> dict:
    from difftest.execute import adapter as registry
    from difftest.kernels.tilelang.adapter import capability_for
    from difftest.model.capability import Capability
    from difftest.strategies.coverage import expected_features
    from tests import kernels_for_tests

    caps = {}
    for name in registry.names():
        try:
            caps[name] = registry.get(name).capability
        except Exception as e:  # noqa: BLE001 -- recorded so a change shows
            caps[name] = f"{type(e).__name__}"
    for name, entry in registry.catalogue("mutant").entries().items():
        caps[f"mutant:{name}"] = entry.factory().capability
    for dev in ("cpu", "cuda"):
        for det in (False, True):
            caps[f"tilelang.capability_for({dev},{det})"] = capability_for(dev, det)
    for name, obj in sorted(vars(kernels_for_tests).items()):
        if (
            inspect.isclass(obj)
            and obj.__module__ == kernels_for_tests.__name__
            and isinstance(getattr(obj, "capability", None), Capability)
        ):
            caps[f"tests.kernels_for_tests:{name}"] = obj.capability
    out = {}
    for name, c in sorted(caps.items()):
        if isinstance(c, str):
            out[name] = c
            continue
        out[name] = {
            "capability": _cap(c),
            "expected_features": {p: sorted(expected_features(c, p)) for p in ("quick", "ci", "gpu")},
        }
    return out


def write(snapshot: dict, f) -> None:
    """One line per kernel (a changed capability is one changed line; indented, the file was
    474 KB of the 64 MiB a device call carries)."""
    names = sorted(snapshot)
    f.write("{\n")
    for i, name in enumerate(names):
        line = json.dumps(snapshot[name], sort_keys=True, separators=(",", ":"))
        f.write(f" {json.dumps(name)}: {line}{',' if i < len(names) - 1 else ''}\n")
    f.write("}\n")


if __name__ == "__main__":
    sys.path.insert(0, ".")
    write(resolved(), sys.stdout)
