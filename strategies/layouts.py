"""Layout strategy: the memory layout a kernel receives q, k, v and dO in.

Drawn inside ``Capability.layouts`` (difftest/model/layouts.py names the kinds). Half the draws
keep the simplest declared layout (``contiguous``) and half pick one of the others, so a
failure that does not need a layout shrinks to contiguous (the coin shrinks to False) and
one that does shrinks to the earliest kind in ``LAYOUTS`` order that still fails. Only kinds
the drawn Problem can take are offered (``kv_broadcast`` needs heads_kv == 1 < heads_q); a
kernel that takes MHA calls only but declares ``kv_broadcast`` gets its MQA draws
(shapes.head_counts) as that layout, the MHA call it accepts.
"""

from hypothesis import strategies as st

from difftest.model.capability import Capability
from difftest.model.layouts import LAYOUTS, Layout


def declared(capability: Capability) -> list[str]:
    """The capability's layouts in shrink order (``LAYOUTS``), the simplest first."""
    return [k for k in LAYOUTS if k in capability.layouts]


def fits(kind: str, heads_q: int, heads_kv: int) -> bool:
    return kind != "kv_broadcast" or (heads_kv == 1 and heads_q >= 2)


@st.composite
def layouts(draw, capability: Capability, heads_q: int, heads_kv: int):
    """A Layout inside ``capability`` for a Problem with these head counts."""
    if heads_kv != heads_q and not capability.gqa:  # MQA drawn for an MHA-only kernel: broadcast K/V
        return Layout("kv_broadcast")
    kinds = [k for k in declared(capability) if fits(k, heads_q, heads_kv)]
    if len(kinds) == 1 or not draw(st.booleans()):
        return Layout(kinds[0])
    return Layout(kinds[1 + draw(st.integers(0, len(kinds) - 2))])
