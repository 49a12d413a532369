"""Memory layouts: how a kernel receives q, k, v and dO in memory, as a drawn dimension.

Stride and offset bugs are a leading public class of attention-kernel bugs (FA4's betas
fixed a compiled-kernel cache that ignored stride-0 broadcast K/V and inputs whose views
were misaligned; TransformerEngine had a batch-stride bug), and a campaign that only ever
hands a kernel fresh contiguous tensors never reaches them. A ``Layout`` is part of the
Problem (``Problem.layout``), so reproducers, reports and the failure store record it.

A layout never changes a value. ``make_inputs`` builds the logical, contiguous tensors
exactly as always (the references and the digest use those), and ``inputs.lay_out`` copies the
same values into the requested memory arrangement for the kernel alone. Storage a view
does not cover (the padding of a head-dim slice, the elements before an offset) is
filled with NaN, so a kernel that reads outside the tensor it was given shows.

Kinds, in shrink order (the simplest first; strategies draw toward ``contiguous``):

- ``contiguous``: packed THD [T, H, D], row-major; for a dense problem that memory is
  exactly dense BSHD [B, S, H, D] (``Inputs.bshd`` views it). Today's only layout.
- ``do_transposed``: dO alone is head-major (a transpose's view, as autograd hands a
  kernel the gradient of an output that was read through ``transpose``): dense
  [B, H, S, D] memory viewed as [B, S, H, D]; varlen [H, T, D] viewed as [T, H, D].
- ``bhsd``: q, k, v and dO all head-major like dO above (dense BHSD views).
- ``dim_slice``: each of q, k, v, dO is ``x[..., :d]`` of an allocation ``DIM_PAD``
  elements wider in the head dim (row stride d + DIM_PAD, last stride 1).
- ``offset``: each tensor starts ``ALIGNED_OFFSET`` elements into its storage (a non-zero
  storage offset that keeps the data pointer 16-byte aligned, 256 bytes for 2-byte dtypes).
- ``misaligned``: each tensor starts ``MISALIGNED_OFFSET`` element into its storage, so
  its data pointer is not 16-byte aligned (2 or 4 bytes past an aligned address).
- ``kv_broadcast``: an MQA problem (heads_kv == 1 < heads_q) whose K and V are handed to
  the kernel as ``expand`` of the single head to every query head: [.., heads_q, D] with
  stride 0 in the head dim (an MHA call with broadcast K/V). dK and dV stay [.., 1, D]:
  the adapter (or autograd through the expand) sums the per-head gradients.

Under a dense ``bhsd``/``do_transposed`` layout with batch > 1, the packed [T, H, D] form
of a head-major tensor is no view of its memory; ``Inputs.q`` etc. are then a contiguous
copy, and an adapter that wants the layout reads ``Inputs.bshd(name)`` (dense) or
``Inputs.rows(name, b)`` (one sequence), which are views of the laid-out memory.
"""

from dataclasses import dataclass

from difftest.errors import InputError

LAYOUTS = ("contiguous", "do_transposed", "bhsd", "dim_slice", "offset", "misaligned", "kv_broadcast")
QKVDO = ("q", "k", "v", "do")
DIM_PAD = 16  # extra head-dim elements of a dim_slice's allocation (keeps 16-byte row alignment)
ALIGNED_OFFSET = 128  # elements: non-zero storage offset, data pointer stays 16-byte aligned
MISALIGNED_OFFSET = 1  # element: data pointer 2 (fp16/bf16) or 4 (fp32) bytes off 16-byte alignment

_TENSORS = {
    "contiguous": (),
    "do_transposed": ("do",),
    "bhsd": QKVDO,
    "dim_slice": QKVDO,
    "offset": QKVDO,
    "misaligned": QKVDO,
    "kv_broadcast": ("k", "v"),
}


@dataclass(frozen=True)
class Layout:
    """One memory layout (see the module docstring); JSON form: the kind, a string."""

    kind: str = "contiguous"

    @property
    def tensors(self) -> tuple[str, ...]:
        """Which of q, k, v, do this layout re-materialises (the others stay contiguous)."""
        return _TENSORS.get(self.kind, ())

    def unfit(self, problem) -> str | None:
        """Why this layout cannot describe ``problem``, or None when it can."""
        if self.kind not in LAYOUTS:
            return f"one of {LAYOUTS}"
        if self.kind == "kv_broadcast" and not (problem.heads_kv == 1 and problem.heads_q >= 2):
            return (
                f"'kv_broadcast' only with heads_kv=1 and heads_q >= 2 (got {problem.heads_q}/"
                f"{problem.heads_kv}): one K/V head expanded with stride 0 to every query head"
            )
        return None

    def to_json(self) -> str:
        return self.kind

    @classmethod
    def coerce(cls, value) -> "Layout":
        """A Layout from its kind (str), its dict ({"kind": ...}) or a Layout; an unknown
        kind is kept and reported by ``Problem.validate``."""
        if isinstance(value, Layout):
            return value
        if isinstance(value, dict):
            return cls(**value)
        return cls(value)

    def __str__(self):
        return self.kind


CONTIGUOUS = Layout("contiguous")


def _poison(shape, like):
    """NaN-filled storage around a view. A plain NaN, not the output buffers' marked one
    (outputs.poison_fill): a kernel that reads it and passes it on must fail the nonfinite
    gate, not be mistaken for a kernel that left an output region unwritten."""
    # lazy: keeps torch off --help
    import torch  # here, so a Problem (which holds a Layout) loads without torch

    return torch.full(shape, float("nan"), dtype=like.dtype, device=like.device)


def _head_major(x):
    """(..., N, H, D) -> the same values in (..., H, N, D) memory, viewed as (..., N, H, D)."""
    return x.transpose(-3, -2).contiguous().transpose(-3, -2)


def _dim_slice(x):
    wide = _poison((*x.shape[:-1], x.shape[-1] + DIM_PAD), x)
    view = wide[..., : x.shape[-1]]
    view.copy_(x)
    return view


def _at_offset(x, offset: int):
    flat = _poison((offset + x.numel(),), x)
    view = flat[offset:].view(x.shape)
    view.copy_(x)
    return view


def _broadcast(x, heads: int):
    """(..., 1, D) -> (..., heads, D) with stride 0 in the head dim."""
    return x.contiguous().expand(*x.shape[:-2], heads, x.shape[-1])


def materialise(kind: str, x, heads_q: int):
    """``x`` ((..., N, H, D), contiguous) re-materialised in layout ``kind``: same values."""
    if kind in ("bhsd", "do_transposed"):
        return _head_major(x)
    if kind == "dim_slice":
        return _dim_slice(x)
    if kind == "offset":
        return _at_offset(x, ALIGNED_OFFSET)
    if kind == "misaligned":
        return _at_offset(x, MISALIGNED_OFFSET)
    if kind == "kv_broadcast":
        return _broadcast(x, heads_q)
    if kind == "contiguous":
        return x.contiguous()
    raise InputError(f"layout kind={kind!r}: allowed {LAYOUTS}")
