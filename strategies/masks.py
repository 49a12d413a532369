"""Mask strategies: none, causal (top-left or bottom-right), sliding windows (left only,
right only, both; zero width; wider than the sequence), and causal combined with a window.
Where the capability declares ``negative_window``, a window side may be negative (the
window's edge past the diagonal), and bounds that cross (left + right < 0: rows with no key)
are drawn too.

Fully masked query rows (no visible key) are reachable: bottom-right causal with
seqlen_q > seqlen_k, a right-only window pushed past the keys, crossed window bounds, or an
empty key sequence. Shrinks toward no mask, then toward the narrowest non-negative window.
"""

from hypothesis import strategies as st

from difftest.model.capability import Capability

UNMASKED_ALIGN = "bottom_right"  # Problem's default: what an unmasked Problem carries
WINDOW_SIDES = ("left", "right", "both")


def mask_kinds(capability: Capability) -> tuple[str, ...]:
    """The mask kinds to draw; a causal-only kernel (``causal_required``) gets causal ones only."""
    kinds = ["none"]
    if capability.causal:
        kinds.append("causal")
    if capability.window:
        kinds.append("window")
    if capability.causal and capability.window:
        kinds.append("causal_window")
    if capability.causal_required:
        kinds = [k for k in kinds if k.startswith("causal")]
    return tuple(kinds)


def window_sizes(max_len: int, blocks=(64,)) -> st.SearchStrategy[int]:
    """A window width: 0 first, then any width up to the longest sequence + 1, or an edge
    (1, a tile +-1, exactly the sequence, wider than the sequence)."""
    edges = {0, 1, max_len, max_len + 1, 2 * max_len + 1}
    for b in blocks:
        edges.update((b - 1, b, b + 1))
    return st.one_of(st.integers(0, max_len + 1), st.sampled_from(sorted(e for e in edges if e >= 0)))


def negative_window_sizes(max_len: int, blocks=(64,)) -> st.SearchStrategy[int]:
    """A negative window side: -1 first (the edge one key past the diagonal), then any down to
    -(the longest sequence + 1), or an edge (-2, minus a tile +-1, minus the sequence)."""
    edges = {1, 2, max_len, max_len + 1}
    for b in blocks:
        edges.update((b - 1, b, b + 1))
    return st.one_of(
        st.integers(-(max_len + 1), -1), st.sampled_from(sorted((-e for e in edges if e >= 1), reverse=True))
    )


def window_side(capability: Capability, max_len: int, blocks) -> st.SearchStrategy[int]:
    """One window side: a width >= 0 (shrinks there first), or where the capability declares
    ``negative_window`` a negative one."""
    sizes = window_sizes(max_len, blocks)
    return st.one_of(sizes, negative_window_sizes(max_len, blocks)) if capability.negative_window else sizes


@st.composite
def masks(draw, capability: Capability, max_len: int):
    """A dict of the Problem's mask fields: causal, align, window_left, window_right."""
    kind = draw(st.sampled_from(mask_kinds(capability)))
    out = {
        "causal": kind in ("causal", "causal_window"),
        "align": UNMASKED_ALIGN,
        "window_left": None,
        "window_right": None,
    }
    if kind == "none":
        return out
    # a capability with no alignment masks square problems only, where it cannot matter
    out["align"] = draw(st.sampled_from(capability.aligns or (UNMASKED_ALIGN,)))
    if kind in ("window", "causal_window"):
        blocks = (capability.block_m, capability.block_n)
        side = draw(st.sampled_from(WINDOW_SIDES))
        if side in ("left", "both"):
            out["window_left"] = draw(window_side(capability, max_len, blocks))
        if side in ("right", "both"):
            out["window_right"] = draw(window_side(capability, max_len, blocks))
    return out
