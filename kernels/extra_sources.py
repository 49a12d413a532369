"""Optional catalogue sources: entries that other modules (our TileLang kernels) add to a
catalogue where they import, and the reason each one that does not load is left out.

The mutant and variant catalogues (``kernels/mutants.py``, ``kernels/variants.py``) read
their optional sources through ``load_extra``, so a missing or broken optional package
never hides the catalogue's own entries.
"""

import importlib


def load_extra(sources, attr: str, own: dict) -> tuple[dict, dict]:
    """The entries of dict ``attr`` in each module of ``sources`` whose names ``own`` does not
    hold, and {module or module:name: why it is left out}."""
    extra, skipped = {}, {}
    for mod in sources:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            skipped[mod] = f"not importable here ({e.name} missing)"
            continue
        except Exception as e:  # a broken optional source never hides the catalogue's own entries
            skipped[mod] = f"{type(e).__name__}: {e}"
            continue
        for name, entry in getattr(m, attr, {}).items():
            if name in own or name in extra:
                skipped[f"{mod}:{name}"] = "name already in the catalogue"
                continue
            extra[name] = entry
    return extra, skipped
