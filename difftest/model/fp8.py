"""FP8 formats and per-tensor scaling: how an FP8 Problem's tensors are stored.

An FP8 Problem (``Problem.dtype`` one of ``FP8_DTYPES``) says that every tensor an FP8
attention kernel reads or writes (Q, K, V, O, dO, the P and dS operands of its GEMMs, dQ,
dK, dV) is stored in that format with one float32 scale per tensor, as cuDNN's
``sdpa_fp8`` / ``sdpa_fp8_backward`` take them (a ``descale_X`` per input, a ``scale_X``
per output, an ``amax_X`` reported per output). LSE and dSink stay float32.

The scaling rule ("current scaling", with power-of-two scales):

    scale(x) = 2^floor(log2(fmax / amax(x)))     (1 where amax is 0 or not finite)
    x_fp8    = fp8(clamp(x * scale, -fmax, fmax))  (round to nearest even)
    x_deq    = float32(x_fp8) * (1 / scale)

Powers of two, as cuDNN's own FP8 SDPA tests choose them (``get_fp8_scale_factor``) and
as the MXFP8 format fixes them: multiplying by one is exact, so a dequantised tensor is
exactly ``x_fp8 * descale`` in float32 or float64 on every device, the truth (float64
attention of the *dequantised* inputs) sees exactly what the kernel was handed, and the
scale costs less than one bit of the format's range (amax * scale lies in (fmax/2, fmax]).
A kernel under test may choose its output scales otherwise; the yardstick and the CPU
emulation use this rule.

Nothing here depends on a device: every step is an exact multiply, an IEEE cast, or a
max, so CPU and GPU give the same bytes.
"""

import math
from dataclasses import dataclass

import torch

from difftest.errors import InputError
from difftest.model.problem import FP8_DTYPES

F32 = torch.float32


@dataclass(frozen=True)
class Fp8Format:
    name: str  # the Problem's dtype string
    torch_dtype: torch.dtype
    fmax: float  # largest finite value
    eps: float  # spacing of the format at 1 (2^-mantissa bits)
    # P (in [0, 1]) is stored as P * P_SCALE: a power of two below fmax, so P = 1 is exact and
    # small probabilities keep the format's normal range (cuDNN's samples use 448 for e4m3)
    p_scale: float


FORMATS = {
    "float8_e4m3fn": Fp8Format("float8_e4m3fn", torch.float8_e4m3fn, 448.0, 2.0**-3, 256.0),
    "float8_e5m2": Fp8Format("float8_e5m2", torch.float8_e5m2, 57344.0, 2.0**-2, 32768.0),
}
assert tuple(FORMATS) == FP8_DTYPES, "difftest/model/problem.py and fp8.py list the same FP8 formats"


def is_fp8(dtype: str) -> bool:
    return dtype in FORMATS


def fmt(dtype: str) -> Fp8Format:
    if dtype not in FORMATS:
        raise InputError(f"dtype={dtype!r}: allowed FP8 dtypes {FP8_DTYPES}")
    return FORMATS[dtype]


def pow2_scale(amax: float, dtype: str) -> float:
    """The power-of-two scale that puts ``amax`` in (fmax/2, fmax]: 1.0 where amax is 0 or
    not finite (nothing to scale; a non-finite amax propagates through the values)."""
    if not (amax > 0.0) or not math.isfinite(amax):
        return 1.0
    f = fmt(dtype).fmax
    m, e = math.frexp(f / amax)  # f / amax = m 2^e, m in [0.5, 1): floor(log2) = e - 1
    s = math.ldexp(1.0, e - 1)
    while amax * s > f:  # the division rounded up across a power of two
        s /= 2.0
    return min(max(s, 2.0**-126), 2.0**126)  # a float32 normal


def amax(x: torch.Tensor) -> float:
    """max |x| as a Python float (0.0 for an empty tensor; NaN propagates)."""
    if x.numel() == 0:
        return 0.0
    return float(x.detach().abs().max().to(torch.float64))


def quantise(x: torch.Tensor, scale: float, dtype: str) -> torch.Tensor:
    """``x`` (any float tensor) times ``scale``, saturated to +-fmax, cast to the FP8 format."""
    f = fmt(dtype)
    y = x.to(F32) * scale
    return torch.where(torch.isnan(y), y, y.clamp(-f.fmax, f.fmax)).to(f.torch_dtype)


def dequantise(x8: torch.Tensor, descale: float, dtype=F32) -> torch.Tensor:
    """The stored FP8 values times ``descale``, in ``dtype`` (exact for a power-of-two descale)."""
    return x8.to(dtype) * descale


def round_trip(x: torch.Tensor, scale: float, dtype: str) -> torch.Tensor:
    """``x`` stored in the FP8 format with ``scale`` and read back (float32)."""
    return dequantise(quantise(x, scale, dtype), 1.0 / scale)


def store_current(x: torch.Tensor, dtype: str) -> tuple[torch.Tensor, float, float]:
    """``x`` stored with current scaling: (dequantised float32 values, scale, amax of x)."""
    a = amax(x)
    s = pow2_scale(a, dtype)
    return round_trip(x, s, dtype), s, a


@dataclass
class Fp8Tensor:
    """One tensor as an FP8 kernel is handed it: the stored bytes and their descale."""

    data: torch.Tensor  # torch.float8_* values
    descale: float  # multiply the stored values by this to get the logical ones
    amax: float  # max |x| of the high-precision values it was quantised from

    @property
    def scale(self) -> float:
        return 1.0 / self.descale

    def dequantised(self, dtype=F32) -> torch.Tensor:
        return dequantise(self.data, self.descale, dtype)

    def to(self, device) -> "Fp8Tensor":
        return Fp8Tensor(self.data.to(device), self.descale, self.amax)

    @classmethod
    def of(cls, x: torch.Tensor, dtype: str) -> "Fp8Tensor":
        """``x`` quantised with current scaling (``pow2_scale`` of its amax)."""
        a = amax(x)
        s = pow2_scale(a, dtype)
        return cls(quantise(x, s, dtype), 1.0 / s, a)
