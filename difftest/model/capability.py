"""Capability: what a kernel declares it supports.

Strategies draw only inside a capability; the runner skips (with the reason) a Problem
outside it. ``compile_key`` names the Problem fields whose change forces a new JIT
compile, so strategies can reuse compiled configurations.

The defaults claim the basics only: dense batches (every sequence the same length,
seqlen_q may differ from seqlen_k), one key/value head per query head, head_dim_v ==
head_dim_qk, no mask, no sinks, no varlen, any softmax scale. Every feature beyond
(``gqa``, ``causal``/``window`` and their ``aligns``, ``negative_window``,
``varlen``/``empty_seqs``/``pad_tail``, ``sinks``, ``softcap``, ``alibi``, ``rel_bias``, unequal head dims) is
opted in, so a kernel is never tested on something its author did not claim. ``aligns`` defaults to
FlashAttention's bottom-right diagonal; a failure that needs a field left at its default is
reported as a possible declaration problem naming that field (difftest/judge/declaration.py).
docs/adapters.md has the table of every field.
"""

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

from difftest.errors import InputError
from difftest.model.layouts import LAYOUTS
from difftest.model.problem import ALIGNS, ALL_DTYPES, OUTPUTS, VALUE_KINDS, Problem

# "input-dtype-running-sum": dK/dV added block by block into the output tensors in the input
# dtype (torch's CPU flash backward; oracles/running_sum.py)
DESIGNS = ("input-dtype-running-sum", "approximate-tanh-softcap", "prescaled-q")


@dataclass(frozen=True)
class Capability:
    dtypes: tuple[str, ...] = ("float32", "float16")
    head_dims_qk: tuple[int, ...] = (16, 32, 64)  # allowed head_dim_qk values
    head_dims_v: tuple[int, ...] | None = None  # None: same set as head_dims_qk
    equal_head_dims: bool = True  # True: head_dim_v must equal head_dim_qk (False: may differ)
    max_batch: int = 4
    max_seqlen: int = 256
    # the shortest non-empty query / key sequence the kernel serves (a dense Problem's one
    # length, every non-zero varlen length; zero-length varlen sequences are ``empty_seqs``)
    min_seqlen_q: int = 1
    min_seqlen_k: int = 1
    # every non-empty sequence length a multiple of this (a kernel whose tiles have no
    # tail handling, e.g. jvp-flash-attention's backward asserts N_CTX % 32 == 0)
    seqlen_multiple: int = 1
    max_heads: int = 8
    gqa: bool = False  # heads_kv < heads_q allowed (GQA/MQA)
    seqlen_q_ne_k: bool = True  # seqlen_q != seqlen_k allowed
    causal: bool = False  # causal mask
    causal_required: bool = False  # every problem causal (a kernel that is causal-only)
    aligns: tuple[str, ...] = ("bottom_right",)  # mask diagonal(s) when seqlen_q != seqlen_k
    window: bool = False  # sliding window (window_left/window_right)
    # a window side may be negative (the window's edge past the diagonal), bounds that cross
    # included (rows with no key: an empty row set, not full attention); read with ``window``
    negative_window: bool = False
    varlen: bool = False  # per-sequence lengths (cu_seqlens)
    empty_seqs: bool = False  # zero-length sequences in varlen
    pad_tail: bool = False  # packed buffers longer than the last cu_seqlens offset
    sinks: bool = False  # one sink logit per query head (and dsink)
    softmax_scale: bool = True  # accepts a custom softmax scale
    softcap: bool = False  # logits capped by softcap * tanh(s / softcap) (Problem.softcap)
    # a per-query-head ALiBi bias -slope * |i + offset - j| (Problem.alibi_slopes, FA2's
    # alibi_slopes); its diagonal on unequal lengths is one of ``aligns``, masked or not
    alibi: bool = False
    # a per-query-head relative-position bias table (Problem.rel_bias: T5/Swin's learned bias,
    # entry clamp(j - (i + offset), -R, R) + R); its diagonal on unequal lengths is one of ``aligns``
    rel_bias: bool = False
    values: tuple[str, ...] | None = None  # value distributions to draw (None: all)
    # memory layouts of q/k/v/dO the kernel's interface accepts (difftest/model/layouts.py);
    # contiguous only unless the adapter declares more, so no adapter meets a stride it
    # never claimed
    layouts: tuple[str, ...] = ("contiguous",)
    outputs: tuple[str, ...] = OUTPUTS  # outputs the kernel produces
    deterministic: bool = False  # claims bitwise run-to-run determinism
    poison: bool = False  # accepts pre-allocated (NaN-poisoned) output buffers
    device: str = "cpu"  # "cpu" or "cuda"
    block_m: int = 64  # query tile: strategies aim sequence lengths at its edges
    block_n: int = 64  # key tile
    # sparse attention (difftest/model/sparsity.py): the (block_q, block_k) sizes of the block-sparse
    # masks the kernel takes (FlexAttention's BlockMask: (128, 128) by default), and of the top-k
    # selections it takes ((1, 1): per query token, key tokens; (1, 64): 64-key blocks); (): none
    block_sparse: tuple[tuple[int, int], ...] = ()
    topk_sparse: tuple[tuple[int, int], ...] = ()
    compile_key: tuple[str, ...] = ()  # Problem fields that force a new compile
    # correct designs beyond the flash formula that the kernel documents (``DESIGNS``): the judge
    # adds each one's yardstick where a budget gate fails against the usual ones
    designs: tuple[str, ...] = ()

    @property
    def v_dims(self) -> tuple[int, ...]:
        return self.head_dims_v if self.head_dims_v is not None else self.head_dims_qk

    def excludes(self, p: Problem) -> str | None:
        """The reason this capability does not cover ``p``, or None when it does."""
        if p.dtype not in self.dtypes:
            return f"dtype {p.dtype} not in {self.dtypes}"
        if p.head_dim_qk not in self.head_dims_qk:
            return f"head_dim_qk {p.head_dim_qk} not in {self.head_dims_qk}"
        if p.head_dim_v not in self.v_dims:
            return f"head_dim_v {p.head_dim_v} not in {self.v_dims}"
        if self.equal_head_dims and p.head_dim_qk != p.head_dim_v:
            return "head_dim_qk != head_dim_v unsupported"
        if p.batch > self.max_batch:
            return f"batch {p.batch} > {self.max_batch}"
        if max(p.max_seqlen_q, p.max_seqlen_k) > self.max_seqlen:
            return f"sequence longer than {self.max_seqlen}"
        for name, kind, lens in (("min_seqlen_q", "query", p.seqlens_q), ("min_seqlen_k", "key", p.seqlens_k)):
            least = getattr(self, name)
            short = [n for n in lens if 0 < n < least]
            if short:
                return f"{kind} sequence length {min(short)} < {name} {least}"
        if self.seqlen_multiple > 1:
            odd = [n for n in p.seqlens_q + p.seqlens_k if n % self.seqlen_multiple]
            if odd:
                return f"sequence length {odd[0]} not a multiple of seqlen_multiple {self.seqlen_multiple}"
        if p.heads_q > self.max_heads:
            return f"heads_q {p.heads_q} > {self.max_heads}"
        if p.heads_kv != p.heads_q and not self.gqa and p.layout.kind != "kv_broadcast":
            return "GQA/MQA unsupported"  # (kv_broadcast hands the kernel an MHA call)
        if not self.seqlen_q_ne_k and p.seqlens_q != p.seqlens_k:
            return "seqlen_q != seqlen_k unsupported"
        if p.causal and not self.causal:
            return "causal unsupported"
        if self.causal_required and not p.causal:
            return "non-causal unsupported (causal_required)"
        if (p.window_left is not None or p.window_right is not None) and not self.window:
            return "sliding window unsupported"
        if any(w is not None and w < 0 for w in (p.window_left, p.window_right)) and not self.negative_window:
            return "negative window bound unsupported"
        if (p.masked or p.biased) and p.align not in self.aligns and p.seqlens_q != p.seqlens_k:
            what = "mask" if p.masked else "ALiBi" if p.alibi else "relative-position bias"
            return f"{what} alignment {p.align} unsupported"
        if p.varlen and not self.varlen:
            return "varlen unsupported"
        if p.varlen and not self.empty_seqs and (0 in p.seqlens_q or 0 in p.seqlens_k):
            return "zero-length sequences unsupported"
        if p.pad_tail and not self.pad_tail:
            return "unused tail tokens unsupported"
        if p.sinks and not self.sinks:
            return "sinks unsupported"
        if p.softmax_scale is not None and not self.softmax_scale:
            return "custom softmax scale unsupported"
        if p.softcap is not None and not self.softcap:
            return "softcap unsupported"
        if p.alibi and not self.alibi:
            return "ALiBi unsupported"
        if p.rel and not self.rel_bias:
            return "relative-position bias unsupported"
        if self.values is not None and p.values not in self.values:
            return f"value distribution {p.values} not in {self.values}"
        if p.layout.kind not in self.layouts:
            return f"layout {p.layout.kind} not in {self.layouts}"
        if p.sparsity is not None:
            sp = p.sparsity
            sizes = self.block_sparse if sp.kind == "block" else self.topk_sparse
            what = "block-sparse mask" if sp.kind == "block" else "top-k selection"
            if (sp.block_q, sp.block_k) not in sizes:
                return f"{what} of {sp.block_q}x{sp.block_k} blocks not in {sizes or 'none'}"
        return None

    def narrowed(self, **changes: Any) -> "Capability":
        """A copy that covers less, for focusing a campaign or stepping around a known
        failure (``difftest run --narrow head_dims_qk=64,128``). Tuples may only shrink to a
        non-empty subset, bools may only turn a feature off (``deterministic`` is a claim,
        not a feature: it may change either way), ``max_*`` may only go down and ``min_*``
        only up (``max_seqlen`` never below the minimums, nor they above it). Anything that
        would widen the kernel's claim raises ValueError naming the field and what is allowed."""
        out = {}
        max_seqlen = changes.get("max_seqlen", self.max_seqlen)
        least = max(
            self.min_seqlen_q,
            self.min_seqlen_k,
            *(v for n, v in changes.items() if n in ("min_seqlen_q", "min_seqlen_k") and _is_int(v)),
        )
        # max_seqlen first: the minimums are then checked against a valid maximum
        for name, new in sorted(changes.items(), key=lambda kv: kv[0] != "max_seqlen"):
            if name not in NARROWABLE:
                raise InputError(f"narrow {name}: allowed fields {NARROWABLE}")
            old = getattr(self, "v_dims" if name == "head_dims_v" else name)
            if name == "values" and old is None:
                old = VALUE_KINDS
            if isinstance(old, tuple):
                new = tuple(new)
                extra = [x for x in new if x not in old]
                if not new or extra:
                    raise InputError(f"narrow {name}={new}: allowed a non-empty subset of {old}")
            elif name == "seqlen_multiple":
                if not _is_int(new) or new < 1 or new % old:
                    raise InputError(f"narrow {name}={new}: allowed a multiple of {old}")
            elif isinstance(old, bool):
                if name == "causal_required":
                    if old and not new:
                        raise InputError(f"narrow {name}=False: the kernel is causal-only")
                elif name == "equal_head_dims":
                    if old and not new:
                        raise InputError(f"narrow {name}=False: the kernel requires equal head dims")
                elif name != "deterministic" and new and not old:
                    raise InputError(f"narrow {name}=True: allowed False (the kernel does not claim it)")
            elif name in ("min_seqlen_q", "min_seqlen_k"):
                top = min(max_seqlen, self.max_seqlen)
                if not _is_int(new) or not old <= new <= top:
                    raise InputError(
                        f"narrow {name}={new}: allowed {old}..{top} (a minimum may only go up, to at most max_seqlen)"
                    )
            elif isinstance(old, int):
                bottom = max(1, least) if name == "max_seqlen" else 1
                if not _is_int(new) or not bottom <= new <= old:
                    why = f" (not below min_seqlen_q/min_seqlen_k {bottom})" if bottom > 1 else ""
                    raise InputError(f"narrow {name}={new}: allowed {bottom}..{old}{why}")
            out[name] = new
        return replace(self, **out)

    def covers(self, p: Problem) -> bool:
        return self.excludes(p) is None

    def compile_signature(self, p: Problem) -> tuple:
        return compile_signature(p, self.compile_key)

    def __post_init__(self) -> None:
        if not self.dtypes or not self.head_dims_qk or not self.v_dims:
            raise InputError("Capability.dtypes, head_dims_qk and head_dims_v must not be empty")
        bad = [d for d in self.dtypes if d not in ALL_DTYPES]
        if bad:
            raise InputError(f"Capability.dtypes has {bad}: allowed {ALL_DTYPES}")
        if self.equal_head_dims and self.head_dims_v is not None and set(self.head_dims_v) != set(self.head_dims_qk):
            raise InputError(
                f"Capability.head_dims_v={self.head_dims_v} differs from head_dims_qk={self.head_dims_qk} "
                f"while equal_head_dims=True (the default): set equal_head_dims=False to draw "
                f"head_dim_v != head_dim_qk, or leave head_dims_v=None"
            )
        bad = [a for a in self.aligns if a not in ALIGNS]
        if bad:
            raise InputError(f"Capability.aligns has {bad}: allowed {ALIGNS}")
        bad = [d for d in self.designs if d not in DESIGNS]
        if bad:
            raise InputError(f"Capability.designs has {bad}: allowed {DESIGNS}")
        bad = [k for k in self.layouts if k not in LAYOUTS]
        if bad or not self.layouts:
            raise InputError(f"Capability.layouts has {bad or 'nothing'}: allowed a non-empty subset of {LAYOUTS}")
        bad = [o for o in self.outputs if o not in OUTPUTS]
        if bad:
            raise InputError(f"Capability.outputs has {bad}: allowed {OUTPUTS}")
        if self.device not in ("cpu", "cuda"):
            raise InputError(f"Capability.device={self.device!r}: allowed 'cpu' or 'cuda'")
        if not _is_int(self.max_seqlen) or self.max_seqlen < 1:
            raise InputError(f"Capability.max_seqlen={self.max_seqlen!r}: allowed an int >= 1")
        for name in ("min_seqlen_q", "min_seqlen_k"):
            v = getattr(self, name)
            if not _is_int(v) or not 1 <= v <= self.max_seqlen:
                raise InputError(f"Capability.{name}={v!r}: allowed an int in 1..{self.max_seqlen} (1..max_seqlen)")
        m = self.seqlen_multiple
        if not _is_int(m) or m < 1:
            raise InputError(f"Capability.seqlen_multiple={m!r}: allowed an int >= 1")
        if -(-max(self.min_seqlen_q, self.min_seqlen_k) // m) * m > self.max_seqlen:
            raise InputError(
                f"Capability.seqlen_multiple={m}: no multiple of it between the minimum sequence "
                f"length and max_seqlen={self.max_seqlen}"
            )
        if self.causal_required and not self.causal:
            raise InputError("Capability.causal_required=True needs causal=True")
        for name in ("block_sparse", "topk_sparse"):
            v = getattr(self, name)
            if not isinstance(v, tuple) or not all(
                isinstance(t, tuple) and len(t) == 2 and all(_is_int(x) and x >= 1 for x in t) for t in v
            ):
                raise InputError(f"Capability.{name}={v!r}: allowed a tuple of (block_q, block_k) int pairs >= 1")
        bad = [f for f in self.compile_key if f not in Problem.__dataclass_fields__]
        if bad:
            raise InputError(f"Capability.compile_key has {bad}: allowed Problem fields")


def compile_signature(p: Problem, compile_key: tuple[str, ...]) -> tuple:
    """The (field, value) pairs of ``p`` that a kernel with this ``compile_key`` compiles for."""
    return tuple((n, getattr(p, n)) for n in compile_key)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# Fields ``Capability.narrowed`` accepts (device, block sizes, outputs and compile_key
# describe the kernel, not the problems to draw, so they are not narrowable; nor are the
# sparse block sizes, pairs the command line's FIELD=VALUE form does not spell).
NARROWABLE = tuple(
    f.name
    for f in fields(Capability)
    if f.name not in ("device", "block_m", "block_n", "outputs", "compile_key", "poison", "block_sparse", "topk_sparse")
)


def parse_narrowing(items: Iterable[str] | None) -> dict:
    """``["head_dims_qk=64,128", "sinks=false", "max_seqlen=1024"]`` -> field: value
    (types follow the Capability field); a clear error names the field and its form."""
    kinds = {f.name: f.type for f in fields(Capability)}
    out: dict[str, object] = {}
    for it in items or ():
        name, eq, val = it.partition("=")
        name = name.strip()
        if not eq or name not in NARROWABLE:
            raise InputError(f"--narrow {it!r}: allowed FIELD=VALUE with FIELD in {NARROWABLE}")
        kind = str(kinds[name])
        vals = [v.strip() for v in val.split(",") if v.strip()]
        try:
            if "bool" in kind:
                if val.strip().lower() not in ("true", "false", "1", "0"):
                    raise InputError
                out[name] = val.strip().lower() in ("true", "1")
            elif "tuple[int" in kind:
                out[name] = tuple(int(v) for v in vals)
            elif "tuple[str" in kind or name == "values":
                out[name] = tuple(vals)
            else:
                out[name] = int(val)
        except ValueError:
            form = (
                "true|false"
                if "bool" in kind
                else "comma-separated integers"
                if "tuple[int" in kind
                else "comma-separated names"
                if "tuple[str" in kind or name == "values"
                else "an integer"
            )
            raise InputError(f"--narrow {it!r}: {name} takes {form}") from None
    return out
