"""Problem: one frozen, JSON-serialisable description of an attention call.

Everything a case needs is derived from a Problem (inputs, masks, expected shapes),
so a reproducer is just a Problem.

Layout conventions used throughout difftest:
- Sequences are packed (THD): queries of all sequences are concatenated along the
  token axis; ``cu_seqlens_q`` gives the offsets. A dense problem (``seqlen_q`` an int)
  is the special case where every sequence has the same length, so BSHD is a reshape.
- Masks: query i of a sequence (0-based) may attend key j iff
    causal:  j <= i + offset
    window:  i + offset - window_left <= j <= i + offset + window_right  (None = unbounded)
  where offset = seqlen_k - seqlen_q for ``align="bottom_right"`` (FlashAttention's
  convention) and 0 for ``align="top_left"`` (torch SDPA's ``is_causal``).
  A window side may be negative: window_left = -2 starts the window two keys right of the
  diagonal, window_right = -2 ends it two keys left of it. Where the bounds cross
  (window_left + window_right < 0, or window_left < 0 under causal) no key is visible: the
  rows are empty (O = 0, LSE = -inf, zero gradients), never full attention. (FlashAttention's
  "no window" (-1, -1) is None, None here; flash-attn-4 before 4.0.0b30 read every
  left + right < 0 as no window.)
- Softcap: with ``softcap`` = c (None: off) the logits are capped before the mask and the
  softmax, after the softmax scale: s_ij = c * tanh(scale * q_i.k_j / c) (FlashAttention's
  ``softcap`` and FlexAttention's tanh ``score_mod``, Gemma 2's attention logit cap), so
  dS_raw = dS * (1 - tanh^2). The sink logit is not capped.
- ALiBi: with ``alibi_slopes`` = (m_0, ..., m_{heads_q-1}) (None: off) query head h adds the
  bias -m_h * |i + offset - j| to the logit of query i and key j of a sequence, with the
  mask's offset above (``mask_offset``: seqlen_k - seqlen_q for ``align="bottom_right"``, 0 for
  ``"top_left"``; a varlen batch measures the distance inside each sequence). It is
  FlashAttention 2's ``alibi_slopes`` ("a bias of (-alibi_slope * |i + seqlen_k - seqlen_q - j|)
  is added to the attention score of query i and key j", flash_attn_interface.py), one slope per
  *query* head (a GQA group's heads have their own slopes), float32 (FA2 takes an fp32 tensor:
  each slope is rounded to float32 when the Problem is built). The order is FA2's (its
  attention_ref and its kernels: the scale, then the softcap, then the bias with the mask):
  s_ij = cap(scale * q_i.k_j) - m_h |i + offset - j|, masked after; a FlexAttention
  ``score_mod`` receives the scaled score and adds the same bias. The bias is a constant: no
  gradient flows to it (none is compared), dS is unchanged. Any sign: a negative slope favours
  distant keys. The sink logit gets no bias. (FA2's causal kernel adds m_h * j only, the same
  P up to a per-row constant, so its LSE differs from this one by m_h (i + offset).)
- Relative-position bias: with ``rel_bias`` = a table of heads_q rows of 2R + 1 float32 entries
  (None: off; R = ``rel_distance``, at most MAX_REL_DISTANCE) query head h adds
  table[h][clamp(j - (i + offset), -R, R) + R] to the logit of query i and key j of a sequence:
  the learned bias of T5 (bucketed) and Swin (a table per clipped offset), here one bucket per
  signed distance up to R, every farther key sharing the edge entry (index 0 left of the
  diagonal, 2R right of it). The distance is ALiBi's, signed: the same mask offset, counted
  inside each sequence of a varlen batch, one row per *query* head. It is added where ALiBi's
  bias is (after the scale and the softcap, before the mask; both add when both are set); the
  sink logit gets none. The table is a constant input: no gradient w.r.t. it is compared
  (a kernel returning dBias would need one), dS is unchanged. Entries are rounded to float32
  when the Problem is built, of magnitude at most MAX_REL_BIAS.
- Sinks: one logit per query head joins the softmax denominator only (not scaled by
  softmax_scale): P_ij = exp(s_ij - LSE_i), LSE_i = log(sum_j exp(s_ij) + exp(sink_h)).
  dSink_h = -sum_i P_sink_i * Delta_i, the gradient of the loss w.r.t. the sink logit.
- LSE is the natural-log sum-exp of the scaled logits (sink included). A row with no
  visible key and no sink has LSE = -inf, O = 0 and zero gradients.
- ``input_version`` names the generator that draws the inputs (difftest/model/inputs.py):
  2, the counter-based one (difftest/model/counter_rng.py: the same bytes on CPU and GPU,
  drawn on the device), is the default of every Problem built in code; 1, the serial
  float64 CPU ``torch.Generator`` used before 2026-11-30, is what JSON without the field
  means (``from_dict``), so an older reproducer, report or failure-store line replays
  its original bytes. A hand-written JSON Problem gets version 1 unless it says 2.
- ``dtype``: float16, bfloat16, float32, or an FP8 format (``FP8_DTYPES``): then every tensor
  the kernel reads or writes is stored in that format with a per-tensor power-of-two scale
  (difftest/model/fp8.py); the inputs are drawn as for any dtype, quantised, and the truth is
  the attention of the *dequantised* inputs, so input quantisation is never charged to the
  kernel. FP8 needs input version 2 (no FP8 Problem was written before it).
- ``layout`` (a ``difftest.model.layouts.Layout``; JSON: its kind as a string) says how the
  kernel receives q, k, v and dO in memory (contiguous, head-major, strided slices,
  offsets, stride-0 K/V). It never changes a value: the references see the same
  logical tensors whatever the layout (see difftest/model/layouts.py).
"""

import dataclasses
import json
import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from difftest.errors import InputError
from difftest.model.layouts import CONTIGUOUS, Layout
from difftest.model.sparsity import Sparsity, SparsityError

DTYPES = ("float16", "bfloat16", "float32")
# FP8 problems (difftest/model/fp8.py): every tensor the kernel reads or writes stored in the
# format with a per-tensor scale; inputs drawn as for any dtype, then quantised. Kept apart
# from DTYPES so that code enumerating the 16/32-bit dtypes (kernels, probes, grids) never
# meets them: only a capability that lists an FP8 dtype is drawn FP8 problems.
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
ALL_DTYPES = DTYPES + FP8_DTYPES
ALIGNS = ("top_left", "bottom_right")
VALUE_KINDS = (
    "normal",  # q, k, v, dO ~ N(0, 1)
    "scaled",  # q, k ~ N(0, value_scale): large logits, peaked softmax
    "near_constant",  # keys and values almost identical across tokens: flat softmax
    "outlier_channels",  # a few head-dim channels of q and k multiplied by value_scale
    "negative_lse",  # every logit strongly negative: LSE very negative
    "mixed_do",  # dO rows with magnitudes spread over 10^(+-value_scale)
    "large_do",  # dO rows spread over value_scale decades, up to the dtype's largest finite value
    # structured kinds, like activations of a trained model (docs/values.md says why each exists)
    "low_rank",  # q and k of rank 1..4 per head plus small noise, logits ~ value_scale^2
    "qk_correlated",  # queries are copies of keys of the same (repeated) tokens: self-similar text
    "massive_keys",  # a few tokens (each sequence's first) with keys value_scale times larger
    "heavy_tailed",  # q, k, v Student-t with round(8 / value_scale) degrees of freedom
    "tied_keys",  # key rows duplicated, value_scale copies of each on average: exactly equal logits
    "loss_do",  # dO = O - target (O of the float64 forward, a sparse target of size value_scale)
)
# kinds that only input version 2 draws (added after version 1 was frozen): a version-1
# Problem (JSON without input_version) cannot name them
V2_ONLY_KINDS = ("large_do", "low_rank", "qk_correlated", "massive_keys", "heavy_tailed", "tied_keys", "loss_do")
# the structured kinds (a subset of V2_ONLY_KINDS)
STRUCTURED_KINDS = V2_ONLY_KINDS[1:]
# values taken from a capture file (difftest/model/capture.py, ``Problem.capture``): never drawn
# by the value strategies, only by ``difftest run --values-from``
CAPTURED = "captured"
MAX_HEAD_DIM = 512
# unused tail tokens: a few of the largest tiles is all a tail can test; an unbounded one
# only allocates (pad_tail 10^7 on a 16-token problem once took 5.3 GB)
MAX_PAD_TAIL = 4096
# hard bounds on any Problem, far above every profile's (a file's batch of 10^15 once made
# Python build a 10^15-element tuple); a profile's own limits (search/limits.py) are smaller
MAX_BATCH = 65536
MAX_HEADS = 65536
MAX_SEQLEN = 2**24
# far above any model's (1/sqrt(d), a temperature of a few): 1e308 from a capture file once
# overflowed the float32 references ("value cannot be converted to type float") and read as
# a finding of difftest's own
MAX_SOFTMAX_SCALE = 1e4
# softcap: any positive cap up to far above any logit a profile draws (Gemma 2 uses 50 and 30)
MAX_SOFTCAP = 1e4
# ALiBi slopes: any float32 of at most this magnitude (a slope of 1e3 already makes every row
# one-hot on its nearest key; the geometric slopes are 2^-8..2^-1/2)
MAX_ALIBI_SLOPE = 1e3
# relative-position bias table: distances clamped at R <= MAX_REL_DISTANCE (so the table is at
# most heads_q x 33 entries in a reproducer's JSON), entries float32 of at most MAX_REL_BIAS
MAX_REL_DISTANCE = 16
MAX_REL_BIAS = 1e3
OUTPUTS = ("o", "lse", "dq", "dk", "dv", "dsink")
INPUT_VERSIONS = (1, 2)  # 1: serial CPU torch.Generator (JSON without the field); 2: counter-based
LEGACY_INPUT_VERSION = 1


class ProblemError(InputError):
    """A Problem field holds a value outside what is allowed."""

    def __init__(self, field_name: str, value: Any, allowed: str):
        self.field = field_name
        self.value = value
        self.allowed = allowed
        super().__init__(f"Problem.{field_name}={value!r} is invalid: allowed {allowed}")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_real(x: object) -> bool:
    """An int or float, not a bool (True would silently mean 1.0)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _float32(x: float) -> float:
    """``x`` rounded to the nearest float32 (as a Python float)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def standard_alibi_slopes(heads: int) -> tuple[float, ...]:
    """The ALiBi paper's geometric slopes for ``heads`` heads (Press et al., 2022, and its
    reference code ``get_slopes``): 2^(-8 h / n) for h = 1..n when n is a power of two; else
    those of the power of two below, then every other slope of twice that power. float32."""

    def power_of_2(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    if heads & (heads - 1) == 0:
        out = power_of_2(heads)
    else:
        low = 2 ** math.floor(math.log2(heads))
        out = power_of_2(low) + list(standard_alibi_slopes(2 * low))[0::2][: heads - low]
    return tuple(_float32(x) for x in out)


@dataclass(frozen=True)
class Problem:
    """One attention call. ``seqlen_q``/``seqlen_k`` are ints (dense, every sequence the
    same length) or tuples of per-sequence lengths (varlen, zero allowed)."""

    batch: int = 1
    seqlen_q: int | tuple[int, ...] = 16
    seqlen_k: int | tuple[int, ...] = 16
    heads_q: int = 1
    heads_kv: int = 1
    head_dim_qk: int = 32
    head_dim_v: int = 32
    dtype: str = "float32"
    causal: bool = False
    align: str = "bottom_right"
    window_left: int | None = None
    window_right: int | None = None
    sinks: bool = False
    sink_center: float = 0.0
    softmax_scale: float | None = None  # None: 1/sqrt(head_dim_qk); a kernel gets ``scale``, resolved
    values: str = "normal"
    value_scale: float = 1.0
    pad_tail: int = 0
    seed: int = 0
    layout: Layout = CONTIGUOUS
    input_version: int = 2
    # logits capped at +-softcap by c * tanh(s / c) (module docstring); None: off. Absent from the
    # JSON when None, so JSON without it reads as before
    softcap: float | None = None
    # ALiBi: one float32 slope per query head, bias -slope * |i + offset - j| (module docstring);
    # None: off. Absent from the JSON when None, so JSON without it reads as before
    alibi_slopes: tuple[float, ...] | None = None
    # relative-position bias: heads_q rows of 2R + 1 float32 entries, entry
    # clamp(j - (i + offset), -R, R) + R added (module docstring); None: off. Absent from the
    # JSON when None, so JSON without it reads as before
    rel_bias: tuple[tuple[float, ...], ...] | None = None
    # values="captured": the capture file and where the window lies (difftest/model/capture.py);
    # absent from the JSON when None, so JSON without it reads as before
    capture: Any = None
    # a block-sparse mask or top-k selection on top of causal/window (difftest/model/sparsity.py);
    # absent from the JSON when None, so JSON without it reads as before
    sparsity: Any = None

    def __post_init__(self) -> None:
        # Accept lists (JSON) for the varlen lengths but store tuples (frozen, hashable).
        for name in ("seqlen_q", "seqlen_k"):
            v = getattr(self, name)
            if isinstance(v, list):
                object.__setattr__(self, name, tuple(v))
        if isinstance(self.alibi_slopes, (list, tuple)):  # JSON's list; float32, as a kernel takes them
            object.__setattr__(
                self,
                "alibi_slopes",
                tuple(_float32(x) if _is_real(x) and abs(x) <= MAX_ALIBI_SLOPE else x for x in self.alibi_slopes),
            )
        if isinstance(self.rel_bias, (list, tuple)):  # JSON's lists; float32, as a kernel takes them
            object.__setattr__(
                self,
                "rel_bias",
                tuple(
                    tuple(_float32(x) if _is_real(x) and abs(x) <= MAX_REL_BIAS else x for x in row)
                    if isinstance(row, (list, tuple)) and len(row) <= 2 * MAX_REL_DISTANCE + 1
                    else row
                    for row in self.rel_bias
                )
                if len(self.rel_bias) <= MAX_HEADS
                else self.rel_bias,
            )
        # softcap 0 means off (FlashAttention's and FA4's convention): one form, None
        if _is_real(self.softcap) and self.softcap == 0:
            object.__setattr__(self, "softcap", None)
        # Accept a layout's kind (JSON's form) or its dict; store the Layout value.
        if not isinstance(self.layout, Layout):
            object.__setattr__(self, "layout", Layout.coerce(self.layout))
        if self.capture is not None:
            # lazy: keeps torch off --help
            from difftest.model.capture import CaptureSlice, CaptureSliceError

            try:
                object.__setattr__(self, "capture", CaptureSlice.coerce(self.capture))
            except CaptureSliceError as e:
                raise ProblemError("capture", e.value, e.expected) from None
        if self.sparsity is not None:
            try:  # checked here, where the value as given (JSON's dict) can be named
                object.__setattr__(self, "sparsity", Sparsity.coerce(self.sparsity).check())
            except SparsityError as e:
                raise ProblemError("sparsity", self.sparsity, f"{e.field}: {e.expected}") from None
            except TypeError as e:
                raise ProblemError("sparsity", self.sparsity, f"a Sparsity or its JSON object ({e})") from None

    # ---------------------------------------------------------------- validation
    def validate(self) -> "Problem":
        """Raise ProblemError naming the first bad field; return self when valid."""
        if not _is_int(self.batch) or not 1 <= self.batch <= MAX_BATCH:
            raise ProblemError("batch", self.batch, f"an int in 1..{MAX_BATCH}")
        for name, v in (("seqlen_q", self.seqlen_q), ("seqlen_k", self.seqlen_k)):
            if isinstance(v, tuple):
                if len(v) != self.batch:
                    raise ProblemError(name, v, f"a list of exactly batch={self.batch} lengths")
                if not all(_is_int(x) and 0 <= x <= MAX_SEQLEN for x in v):
                    raise ProblemError(name, v, f"per-sequence lengths that are ints in 0..{MAX_SEQLEN}")
            elif not _is_int(v) or not 1 <= v <= MAX_SEQLEN:
                raise ProblemError(
                    name, v, f"an int in 1..{MAX_SEQLEN} (dense) or a list of ints in 0..{MAX_SEQLEN} (varlen)"
                )
        if isinstance(self.seqlen_q, tuple) != isinstance(self.seqlen_k, tuple):
            raise ProblemError(
                "seqlen_k", self.seqlen_k, "the same form as seqlen_q: both ints (dense) or both lists (varlen)"
            )
        for name in ("heads_q", "heads_kv"):
            v = getattr(self, name)
            if not _is_int(v) or not 1 <= v <= MAX_HEADS:
                raise ProblemError(name, v, f"an int in 1..{MAX_HEADS}")
        if self.heads_q % self.heads_kv:
            raise ProblemError("heads_kv", self.heads_kv, f"a divisor of heads_q={self.heads_q} (GQA/MQA groups)")
        for name in ("head_dim_qk", "head_dim_v"):
            v = getattr(self, name)
            if not _is_int(v) or not 1 <= v <= MAX_HEAD_DIM:
                raise ProblemError(name, v, f"an int in 1..{MAX_HEAD_DIM}")
        if self.dtype not in ALL_DTYPES:
            raise ProblemError("dtype", self.dtype, f"one of {ALL_DTYPES}")
        if not isinstance(self.causal, bool):
            raise ProblemError("causal", self.causal, "True or False")
        if self.align not in ALIGNS:
            raise ProblemError("align", self.align, f"one of {ALIGNS}")
        for name in ("window_left", "window_right"):
            v = getattr(self, name)
            if v is not None and (not _is_int(v) or not -MAX_SEQLEN <= v <= MAX_SEQLEN):
                raise ProblemError(
                    name,
                    v,
                    f"None (unbounded) or an int in -{MAX_SEQLEN}..{MAX_SEQLEN} "
                    f"(negative: the window's edge past the diagonal)",
                )
        if not isinstance(self.sinks, bool):
            raise ProblemError("sinks", self.sinks, "True or False")
        if not _is_real(self.sink_center) or not math.isfinite(self.sink_center):
            raise ProblemError("sink_center", self.sink_center, "a finite float")
        if self.softmax_scale is not None and (
            not _is_real(self.softmax_scale)
            or not math.isfinite(self.softmax_scale)
            or self.softmax_scale <= 0
            or self.softmax_scale > MAX_SOFTMAX_SCALE
        ):
            raise ProblemError(
                "softmax_scale",
                self.softmax_scale,
                f"None (1/sqrt(head_dim_qk)) or a finite float > 0, at most {MAX_SOFTMAX_SCALE:g}",
            )
        if self.softcap is not None and (
            not _is_real(self.softcap)
            or not math.isfinite(self.softcap)
            or self.softcap <= 0
            or self.softcap > MAX_SOFTCAP
        ):
            raise ProblemError(
                "softcap", self.softcap, f"None or 0 (off) or a finite float > 0, at most {MAX_SOFTCAP:g}"
            )
        if self.softcap is not None and self.dtype in FP8_DTYPES:
            raise ProblemError(
                "softcap",
                self.softcap,
                f"None with an FP8 dtype ({self.dtype}): the FP8 yardstick (oracles/fp8.py) models no cap",
            )
        if self.alibi_slopes is not None:
            slopes = self.alibi_slopes
            if (
                not isinstance(slopes, tuple)
                or len(slopes) != self.heads_q
                or not all(_is_real(x) and math.isfinite(x) and abs(x) <= MAX_ALIBI_SLOPE for x in slopes)
            ):
                raise ProblemError(
                    "alibi_slopes",
                    slopes,
                    f"None (off) or a list of heads_q={self.heads_q} finite floats of magnitude at most "
                    f"{MAX_ALIBI_SLOPE:g} (one per query head)",
                )
            if self.dtype in FP8_DTYPES:
                raise ProblemError(
                    "alibi_slopes",
                    slopes,
                    f"None with an FP8 dtype ({self.dtype}): the FP8 yardstick (oracles/fp8.py) models no bias",
                )
        if self.rel_bias is not None:
            table = self.rel_bias
            width = len(table[0]) if isinstance(table, tuple) and table and isinstance(table[0], tuple) else -1
            if (
                not isinstance(table, tuple)
                or len(table) != self.heads_q
                or width < 1
                or width % 2 != 1
                or width > 2 * MAX_REL_DISTANCE + 1
                or not all(
                    isinstance(row, tuple)
                    and len(row) == width
                    and all(_is_real(x) and math.isfinite(x) and abs(x) <= MAX_REL_BIAS for x in row)
                    for row in table
                )
            ):
                raise ProblemError(
                    "rel_bias",
                    table,
                    f"None (off) or heads_q={self.heads_q} lists (one per query head) of the same odd length "
                    f"2R + 1 <= {2 * MAX_REL_DISTANCE + 1} of finite floats of magnitude at most {MAX_REL_BIAS:g}",
                )
            if self.dtype in FP8_DTYPES:
                raise ProblemError(
                    "rel_bias",
                    table,
                    f"None with an FP8 dtype ({self.dtype}): the FP8 yardstick (oracles/fp8.py) models no bias",
                )
        if self.values not in VALUE_KINDS and self.values != CAPTURED:
            raise ProblemError("values", self.values, f"one of {VALUE_KINDS}")
        if (self.values == CAPTURED) != (self.capture is not None):
            raise ProblemError("capture", self.capture, "a capture slice exactly when values='captured'")
        if self.capture is not None:
            why = self.capture.unfit(self)
            if why:
                raise ProblemError("capture", self.capture.to_json(), why)
        if not _is_real(self.value_scale) or not math.isfinite(self.value_scale) or self.value_scale <= 0:
            raise ProblemError("value_scale", self.value_scale, "a finite float > 0")
        if not _is_int(self.pad_tail) or not 0 <= self.pad_tail <= MAX_PAD_TAIL:
            raise ProblemError("pad_tail", self.pad_tail, f"an int in 0..{MAX_PAD_TAIL}")
        if self.pad_tail and not self.varlen:
            raise ProblemError("pad_tail", self.pad_tail, "0 unless the problem is varlen (lists of lengths)")
        if not _is_int(self.seed) or not 0 <= self.seed < 2**63:
            raise ProblemError("seed", self.seed, "an int in 0..2**63-1")
        if self.input_version not in INPUT_VERSIONS or not _is_int(self.input_version):
            raise ProblemError("input_version", self.input_version, f"one of {INPUT_VERSIONS}")
        if (self.values in V2_ONLY_KINDS or self.values == CAPTURED) and self.input_version < 2:
            raise ProblemError(
                "values",
                self.values,
                f"one of {tuple(k for k in VALUE_KINDS if k not in V2_ONLY_KINDS)} under "
                f"input_version {self.input_version} ({self.values} needs input_version 2)",
            )
        if self.dtype in FP8_DTYPES and self.input_version < 2:
            raise ProblemError(
                "dtype",
                self.dtype,
                f"one of {DTYPES} under input_version {self.input_version} (FP8 needs input_version 2)",
            )
        why = self.layout.unfit(self)
        if why:
            raise ProblemError("layout", self.layout.kind, why)
        return self

    # ---------------------------------------------------------------- derived
    @property
    def varlen(self) -> bool:
        return isinstance(self.seqlen_q, tuple)

    @property
    def seqlens_q(self) -> tuple[int, ...]:
        return self.seqlen_q if isinstance(self.seqlen_q, tuple) else (self.seqlen_q,) * self.batch

    @property
    def seqlens_k(self) -> tuple[int, ...]:
        return self.seqlen_k if isinstance(self.seqlen_k, tuple) else (self.seqlen_k,) * self.batch

    @property
    def cu_seqlens_q(self) -> tuple[int, ...]:
        return _cumsum(self.seqlens_q)

    @property
    def cu_seqlens_k(self) -> tuple[int, ...]:
        return _cumsum(self.seqlens_k)

    @property
    def total_q(self) -> int:
        """Rows of the packed query buffer (unused tail tokens included)."""
        return sum(self.seqlens_q) + self.pad_tail

    @property
    def total_k(self) -> int:
        return sum(self.seqlens_k) + self.pad_tail

    @property
    def max_seqlen_q(self) -> int:
        return max(self.seqlens_q)

    @property
    def max_seqlen_k(self) -> int:
        return max(self.seqlens_k)

    @property
    def group(self) -> int:
        """Query heads per key/value head (1 = MHA, heads_q = MQA)."""
        return self.heads_q // self.heads_kv

    @property
    def scale(self) -> float:
        """The softmax scale a kernel applies: ``softmax_scale`` resolved, 1/sqrt(head_dim_qk)
        where that is None. What an adapter passes its kernel (``softmax_scale`` itself may be
        None, which a kernel would read as its own default)."""
        return self.softmax_scale if self.softmax_scale is not None else 1.0 / math.sqrt(self.head_dim_qk)

    @property
    def sparse(self) -> bool:
        """A block-sparse mask or top-k selection applies (``sparsity``): a superset of its
        visible keys is what ``key_range`` gives."""
        return self.sparsity is not None

    @property
    def empty_window(self) -> bool:
        """The window's bounds cross (``key_bounds`` left + right <= 0): no row sees any key."""
        left, right = self.key_bounds()
        return left is not None and right is not None and left + right <= 0

    @property
    def masked(self) -> bool:
        return self.causal or self.window_left is not None or self.window_right is not None

    def mask_offset(self, sq: int, sk: int) -> int:
        return sk - sq if self.align == "bottom_right" else 0

    def key_bounds(self) -> tuple[int | None, int | None]:
        """(left, right): query i of a sequence sees key j iff -left <= j - (i + mask_offset) < right,
        None for no bound on that side. The one statement of the masking rule: key_range, the
        oracles' allowed_mask and the truth's fused kernels (oracles/chunked.py) all read it."""
        rights = [1] if self.causal else []
        if self.window_right is not None:
            rights.append(self.window_right + 1)
        return self.window_left, (min(rights) if rights else None)

    @property
    def alibi(self) -> bool:
        """An ALiBi bias applies (``alibi_slopes``)."""
        return self.alibi_slopes is not None

    def alibi_bias(self, h: int, i: int, j: int, sq: int, sk: int) -> float:
        """The bias query head ``h``'s query ``i`` adds to key ``j``'s logit in a (sq, sk)
        sequence (0 without ALiBi): -slope_h * |i + mask_offset - j|, the rule in one line."""
        if self.alibi_slopes is None:
            return 0.0
        return -self.alibi_slopes[h] * abs(i + self.mask_offset(sq, sk) - j)

    @property
    def rel(self) -> bool:
        """A relative-position bias applies (``rel_bias``)."""
        return self.rel_bias is not None

    @property
    def rel_distance(self) -> int:
        """R, the relative-position table's clamp distance (0 without a table)."""
        return (len(self.rel_bias[0]) - 1) // 2 if self.rel_bias is not None else 0

    def rel_bias_at(self, h: int, i: int, j: int, sq: int, sk: int) -> float:
        """The relative-position bias query head ``h``'s query ``i`` adds to key ``j``'s logit in a
        (sq, sk) sequence (0 without a table): table[h][clamp(j - (i + offset), -R, R) + R]."""
        if self.rel_bias is None:
            return 0.0
        r = self.rel_distance
        return self.rel_bias[h][min(r, max(-r, j - (i + self.mask_offset(sq, sk)))) + r]

    @property
    def biased(self) -> bool:
        """A score bias applies: ALiBi's, the relative-position table's, or both."""
        return self.alibi_slopes is not None or self.rel_bias is not None

    def key_range(self, i: int, sq: int, sk: int) -> tuple[int, int]:
        """Half-open range [lo, hi) of keys query i of a (sq, sk) sequence may see."""
        at = i + self.mask_offset(sq, sk)
        left, right = self.key_bounds()
        lo = 0 if left is None else max(0, at - left)
        hi = sk if right is None else min(sk, at + right)
        return lo, max(lo, hi)

    def size(self) -> int:
        """A rough cost (attention score elements), used to rank and bound cases."""
        return (
            sum(a * b for a, b in zip(self.seqlens_q, self.seqlens_k))
            * self.heads_q
            * max(self.head_dim_qk, self.head_dim_v)
        )

    # ---------------------------------------------------------------- (de)serialisation
    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for name in ("seqlen_q", "seqlen_k"):
            if isinstance(d[name], tuple):
                d[name] = list(d[name])
        d["layout"] = self.layout.to_json()
        if self.softcap is None:
            del d["softcap"]
        if self.alibi_slopes is None:
            del d["alibi_slopes"]
        else:
            d["alibi_slopes"] = list(self.alibi_slopes)
        if self.rel_bias is None:
            del d["rel_bias"]
        else:
            d["rel_bias"] = [list(row) for row in self.rel_bias]
        if self.capture is None:
            del d["capture"]
        else:
            d["capture"] = self.capture.to_json(self)
        if self.sparsity is None:
            del d["sparsity"]
        else:
            d["sparsity"] = self.sparsity.to_json()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "Problem":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ProblemError(unknown[0], d[unknown[0]], f"known fields only: {sorted(known)}")
        if "input_version" not in d:  # written before the field existed: the old generator's bytes
            d = {**d, "input_version": LEGACY_INPUT_VERSION}
        return cls(**d).validate()

    @classmethod
    def from_json(cls, s: str) -> "Problem":
        return cls.from_dict(json.loads(s))

    def replace(self, **changes: Any) -> "Problem":
        """A copy with ``changes``. A new ``heads_q`` without new ``alibi_slopes`` keeps one
        slope per query head: the first ``heads_q`` slopes, repeated in turn where there are
        more heads than slopes (so shrinking, signatures and corners stay valid ALiBi problems);
        ``rel_bias`` keeps one table row per query head the same way."""
        hq = changes.get("heads_q")
        if self.alibi_slopes is not None and "alibi_slopes" not in changes and isinstance(hq, int) and hq >= 1:
            changes["alibi_slopes"] = tuple(self.alibi_slopes[h % len(self.alibi_slopes)] for h in range(hq))
        if self.rel_bias is not None and "rel_bias" not in changes and isinstance(hq, int) and hq >= 1:
            changes["rel_bias"] = tuple(self.rel_bias[h % len(self.rel_bias)] for h in range(hq))
        return dataclasses.replace(self, **changes)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """How Hypothesis prints a Problem: its repr. Hypothesis renders every explicit
        example (a campaign's edge corpus) before running it, and its field-by-field
        printer took ~2 ms of a CPU case, more than the case's inputs."""
        printer.text(repr(self))

    def short(self) -> str:
        """One line for tables and logs."""
        sq = list(self.seqlen_q) if isinstance(self.seqlen_q, tuple) else self.seqlen_q
        sk = list(self.seqlen_k) if isinstance(self.seqlen_k, tuple) else self.seqlen_k
        parts = [
            f"b{self.batch}",
            f"sq{sq}",
            f"sk{sk}",
            f"h{self.heads_q}/{self.heads_kv}",
            f"d{self.head_dim_qk}/{self.head_dim_v}",
            self.dtype,
        ]
        if self.causal:
            parts.append(f"causal-{self.align}")
        if self.window_left is not None or self.window_right is not None:
            parts.append(f"win({self.window_left},{self.window_right})-{self.align}")
        if self.sinks:
            parts.append(f"sinks@{self.sink_center:g}")
        if self.softcap is not None:
            parts.append(f"softcap{self.softcap:g}")
        if self.alibi_slopes is not None:
            # unmasked, the alignment shows nowhere else (it moves ALiBi's diagonal)
            align = f"-{self.align}" if not self.masked and self.align != "bottom_right" else ""
            parts.append(f"alibi:{alibi_short(self.alibi_slopes)}{align}")
        if self.rel_bias is not None:
            align = f"-{self.align}" if not self.masked and self.align != "bottom_right" else ""
            parts.append(f"relpos:R{self.rel_distance}:{rel_short(self.rel_bias)}{align}")
        if self.values != "normal":
            parts.append(f"{self.values}x{self.value_scale:g}")
        if self.pad_tail:
            parts.append(f"pad{self.pad_tail}")
        if self.layout != CONTIGUOUS:
            parts.append(f"layout:{self.layout.kind}")
        if self.sparsity is not None:
            parts.append(f"sparse:{self.sparsity.short()}")
        if self.input_version != 2:
            parts.append(f"inputs-v{self.input_version}")
        return " ".join(parts)


def alibi_short(slopes: tuple[float, ...]) -> str:
    """ALiBi slopes in a few characters: ``std`` for the geometric ones, one slope if all are
    equal, else the first two and the range."""
    if slopes == standard_alibi_slopes(len(slopes)):
        return "std"
    if len(set(slopes)) == 1:
        return f"{slopes[0]:.3g}"
    return f"{min(slopes):.3g}..{max(slopes):.3g}"


def rel_short(table: tuple[tuple[float, ...], ...]) -> str:
    """A relative-position table in a few characters: its range, ``xH`` where heads differ."""
    flat = [x for row in table for x in row]
    out = f"{flat[0]:.3g}" if len(set(flat)) == 1 else f"{min(flat):.3g}..{max(flat):.3g}"
    return out + ("xH" if len(set(table)) > 1 else "")


def _cumsum(xs: Iterable[int]) -> tuple[int, ...]:
    out = [0]
    for x in xs:
        out.append(out[-1] + x)
    return tuple(out)
