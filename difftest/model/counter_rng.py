"""A counter-based random generator whose bytes are the same on every CPU and GPU.

Why: ``make_inputs`` used to draw every tensor with one serial CPU ``torch.Generator``
in float64 and copy it to the device. On the H200 that was half of a ``gpu`` campaign's
wall time (2026-11-30, call P1: 49.5 s of 94.5 s for 236 cases; results/speed.md), and
two campaigns side by side fought over the host's cores for it. A serial stream cannot
be split across threads or moved to the device without changing its bytes; a counter-
based one can: element ``i`` of stream ``s`` is a pure function of (seed, s, i).

What (input version 2, ``Problem.input_version``):

- ``bits``: a 32-bit hash of the element index. Keys (k0, k1) come from
  sha256("difftest-inputs-v2:<seed>:<stream>"); h(i) = L(L(lo(i) ^ k0) ^ k1 ^ L(hi(i)))
  with L = ``lowbias32`` (Chris Wellons' 2-multiply integer hash, bias ~0.17), lo/hi the
  low and high 32 bits of i (L(0) = 0, so hi only matters past 2^32 elements). Two
  rounds keyed separately, so no stream is a shifted or permuted copy of another.
- ``normal``: the top 16 bits of h pick a cell of a table of standard-normal quantiles
  at (j + 0.5) / 65537, j = 0..65536 (computed once with Python's
  ``statistics.NormalDist.inv_cdf``, mirrored so the table is exactly antisymmetric,
  rounded to multiples of 2^-30); the low 16 bits interpolate linearly inside the
  cell: x = T[j] + (T[j+1] - T[j]) * (2m + 1) / 2^17. Every operand is a multiple of
  2^-47 below 2^3, so every operation is EXACT in float64: no rounding mode, fused
  multiply-add or library can change a bit. Mean 0 by symmetry, standard deviation
  0.99985 (the tails stop at +-4.33 instead of continuing), so a draw of 10^6 values
  looks like ``torch.randn``'s up to its extreme tail. The table's sha256 is checked
  when it is built: a platform whose ``inv_cdf`` differed would fail loudly, never
  give other bytes.
- ``uniform``: (2h + 1) / 2^33, exact, in (0, 1).

``make_inputs`` then rounds float64 -> float32 -> the Problem's dtype explicitly, each step
round-to-nearest-even on every device (not whatever path torch takes from float64 to a
16-bit type on each backend).

Two implementations of the same function: numpy ``uint32`` (wrap-around multiply is
defined for unsigned integers) in cache-sized chunks, split across threads for large
tensors, for the CPU; torch ``int64`` on the device, holding 32-bit values and
splitting each multiply so no product reaches 2^63 (exact integer arithmetic, the same
on CUDA and CPU), and on CUDA, for normals, one Triton kernel that hashes in uint32 and draws
several streams in one pass (counter_rng_triton.py). tests/test_counter_rng.py checks that all
give identical bytes.
Measured (results/speed.md section 7, 215 Problems of an H200 gpu campaign on the 2-core
CPU box): ``make_inputs`` 1.4-1.9x faster than with the serial generator per core. On a
GPU nothing is drawn on the host nor copied over PCIe.

Alternatives considered: chunked CPU generation with per-chunk ``torch.Generator``s
(parallel, but still a host-to-device copy of every tensor and still the host's cores
that side-by-side shards compete for); Box-Muller on the device (``log``/``cos``/``sqrt``
are not correctly rounded on CUDA, so bytes would differ between CPU and GPU); a sum of
uniforms (exact but bounded at a few sigma and several hashes per value).
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

M32 = 0xFFFFFFFF
TABLE_BITS = 16
_TABLE_GRID = 2.0**-30
# sha256 of the quantile table's float64 bytes (little-endian); see _table()
TABLE_SHA256 = "e1d431ed2a1c719077476acc04e6a2785899f044a9fc6c57a58f2cf2c10167d2"
CHUNK = 1 << 15  # CPU chunk: a few uint32/float64 temporaries stay in L2
PARALLEL_MIN = 1 << 18  # elements from which the CPU path splits across threads
DEVICE_CHUNK = 1 << 24  # device chunk: bounds the int64 temporaries (~128 MiB each)
_C1, _C2 = 0x7FEB352D, 0x846CA68B  # lowbias32's multipliers


def lowbias32(x: int) -> int:
    """The hash on one Python int (keys and the high word of the counter)."""
    x &= M32
    x ^= x >> 16
    x = (x * _C1) & M32
    x ^= x >> 15
    x = (x * _C2) & M32
    x ^= x >> 16
    return x


def stream_keys(seed: int, stream: str) -> tuple[int, int]:
    """(k0, k1): the two 32-bit keys of ``stream`` under ``seed``."""
    d = hashlib.sha256(f"difftest-inputs-v2:{seed}:{stream}".encode()).digest()
    return int.from_bytes(d[0:4], "little"), int.from_bytes(d[4:8], "little")


# ------------------------------------------------------------------ the quantile table
_TABLES: dict = {}
_LOCK = threading.Lock()


def _table_values() -> np.ndarray:
    n = 1 << TABLE_BITS
    nd = statistics.NormalDist()
    half = [round(nd.inv_cdf((j + 0.5) / (n + 1)) / _TABLE_GRID) * _TABLE_GRID for j in range(n // 2)]
    t = np.array(half + [0.0] + [-v for v in reversed(half)], dtype="<f8")
    got = hashlib.sha256(t.tobytes()).hexdigest()
    if got != TABLE_SHA256:
        raise RuntimeError(
            f"difftest.model.counter_rng: the normal quantile table has sha256 {got}, expected "
            f"{TABLE_SHA256}: this platform's statistics.NormalDist.inv_cdf differs, so "
            f"inputs of input_version 2 cannot be reproduced here"
        )
    return t


def _table(device=None) -> tuple:
    """(T, D): quantiles and cell widths, numpy arrays (device None) or torch tensors on
    ``device``; built once per process and device."""
    key = "numpy" if device is None else str(torch.device(device))
    with _LOCK:
        if key not in _TABLES:
            base = _TABLES.get("numpy")
            if base is None:
                t = _table_values()
                base = _TABLES["numpy"] = (t, np.diff(t))
            if key != "numpy":
                _TABLES[key] = tuple(torch.from_numpy(a).to(device) for a in base)
        return _TABLES[key]


# ------------------------------------------------------------------ numpy (CPU) path
def _lowbias_np(x: np.ndarray) -> None:
    x ^= x >> np.uint32(16)
    x *= np.uint32(_C1)
    x ^= x >> np.uint32(15)
    x *= np.uint32(_C2)
    x ^= x >> np.uint32(16)


def _bits_np(start: int, stop: int, k0: int, k1: int) -> np.ndarray:
    """h(i) for start <= i < stop, where the range lies within one 2^32 block."""
    hi = start >> 32
    x = np.arange(start & M32, ((stop - 1) & M32) + 1, dtype=np.uint32)
    x ^= np.uint32(k0)
    _lowbias_np(x)
    x ^= np.uint32(k1 ^ lowbias32(hi))
    _lowbias_np(x)
    return x


def _normal_np(out: np.ndarray, start: int, k0: int, k1: int) -> None:
    t, d = _table()
    x = _bits_np(start, start + out.size, k0, k1)
    idx = (x >> np.uint32(16)).astype(np.intp)
    f = (x & np.uint32(0xFFFF)).astype(np.float64)
    f *= 2.0
    f += 1.0
    f *= 2.0**-17
    np.multiply(d[idx], f, out=out)
    out += t[idx]


def _uniform_np(out: np.ndarray, start: int, k0: int, k1: int) -> None:
    x = _bits_np(start, start + out.size, k0, k1).astype(np.float64)
    x *= 2.0
    x += 1.0
    x *= 2.0**-33
    out[:] = x


def _chunks(n: int, size: int):
    """[start, stop) pieces of at most ``size`` that never cross a 2^32 boundary."""
    s = 0
    while s < n:
        e = min(n, s + size, ((s >> 32) + 1) << 32)
        yield s, e
        s = e


def _threads() -> int:
    return max(1, min(torch.get_num_threads(), os.cpu_count() or 1, 16))


def _fill_np(kind, n: int, k0: int, k1: int) -> np.ndarray:
    out = np.empty(n, dtype=np.float64)
    fn = _normal_np if kind == "normal" else _uniform_np
    pieces = list(_chunks(n, CHUNK))
    workers = _threads() if n >= PARALLEL_MIN else 1
    if workers == 1:
        for s, e in pieces:
            fn(out[s:e], s, k0, k1)
    else:  # numpy releases the GIL inside these ufuncs; the bytes do not depend on the split
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda se: fn(out[se[0] : se[1]], se[0], k0, k1), pieces))
    return out


# ------------------------------------------------------------------ torch int64 (device) path
def _mul32_t(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2^32 for x in [0, 2^32), never forming a product >= 2^49."""
    hi = (x * (c >> 16)).bitwise_and_(0xFFFF).mul_(1 << 16)
    return x.mul_(c & 0xFFFF).add_(hi).bitwise_and_(M32)


def _lowbias_t(x: torch.Tensor) -> torch.Tensor:
    x.bitwise_xor_(x >> 16)
    x = _mul32_t(x, _C1)
    x.bitwise_xor_(x >> 15)
    x = _mul32_t(x, _C2)
    x.bitwise_xor_(x >> 16)
    return x


def _bits_t(start: int, stop: int, k0: int, k1: int, device) -> torch.Tensor:
    hi = start >> 32
    x = torch.arange(start & M32, ((stop - 1) & M32) + 1, dtype=torch.int64, device=device)
    x.bitwise_xor_(k0)
    x = _lowbias_t(x)
    x.bitwise_xor_(k1 ^ lowbias32(hi))
    return _lowbias_t(x)


# Per device type: draw normals with one Triton kernel (counter_rng_triton.py) instead of the
# ~45 torch passes. On for CUDA where Triton imports; tests run it on the CPU under Triton's
# interpreter. A kernel that cannot be built or launched turns it off for the process, with one
# warning, and the torch path draws (the same bytes).
TRITON = {"cuda": True, "cpu": False}
_TRITON: dict = {}


def _triton_module(device):
    """counter_rng_triton if normals on ``device`` are drawn with it, else None."""
    if not TRITON.get(torch.device(device).type, False) or _TRITON.get("failed"):
        return None
    if "module" not in _TRITON:
        try:
            # lazy: optional dependency (Triton), loaded on first CUDA draw
            from difftest.model import counter_rng_triton
        except ImportError:
            counter_rng_triton = None
        _TRITON["module"] = counter_rng_triton
    return _TRITON["module"]


def _fill_normals_triton(keys: list, sizes: list, device) -> torch.Tensor | None:
    """counter_rng_triton.fill_normals, or None where it is off or failed (see TRITON)."""
    mod = _triton_module(device)
    if mod is None or len(sizes) > mod.MAX_STREAMS or max(sizes, default=0) > M32:
        return None
    try:
        return mod.fill_normals(keys, sizes, _table(device), device)
    except torch.OutOfMemoryError:  # the device is full, not the Triton draw broken: the case says so
        raise
    except Exception as e:  # noqa: BLE001 -- any build or launch failure: the torch path draws instead
        _TRITON["failed"] = True
        warnings.warn(
            f"counter_rng: the Triton draw is off for this process, torch from here: {type(e).__name__}: {e}"[:400],
            RuntimeWarning,
            stacklevel=2,
        )
        return None


def _fill_t(kind, n: int, k0: int, k1: int, device) -> torch.Tensor:
    if kind == "normal":
        out = _fill_normals_triton([(k0, k1)], [n], device)
        if out is not None:
            return out
    out = torch.empty(n, dtype=torch.float64, device=device)
    for s, e in _chunks(n, DEVICE_CHUNK):
        x = _bits_t(s, e, k0, k1, device)
        if kind == "normal":
            t, d = _table(device)
            idx = x >> 16
            f = x.bitwise_and_(0xFFFF).to(torch.float64).mul_(2.0).add_(1.0).mul_(2.0**-17)
            torch.mul(d[idx], f, out=out[s:e])
            out[s:e] += t[idx]
        else:
            out[s:e] = x.to(torch.float64).mul_(2.0).add_(1.0).mul_(2.0**-33)
    return out


def _fill_many_t(keys: list, sizes: list, device) -> torch.Tensor:
    """Normals of several streams, concatenated: stream s's n_s elements under its keys
    (k0_s, k1_s), each element the function of its index within its stream that ``_bits_t``
    computes (indices below 2^32: the high word is 0, whose hash is 0). One pass of ~45
    launches instead of ~40 per stream; one Triton kernel where ``TRITON`` allows."""
    out = _fill_normals_triton(keys, sizes, device)
    if out is not None:
        return out
    total = sum(sizes)
    out = torch.empty(total, dtype=torch.float64, device=device)
    starts, acc = [], 0
    for n in sizes:
        starts.append(acc)
        acc += n
    meta = torch.tensor([starts, [k for k, _ in keys], [k for _, k in keys]], dtype=torch.int64, device=device)
    ends = meta[0, 1:]  # where each stream after the first begins
    t, d = _table(device)
    for s, e in _chunks(total, DEVICE_CHUNK):
        i = torch.arange(s, e, dtype=torch.int64, device=device)
        seg = torch.bucketize(i, ends, right=True)  # the stream of each element
        k = meta.index_select(1, seg)  # [3, elements]: its stream's start, k0, k1
        x = i.sub_(k[0]).bitwise_xor_(k[1])
        x = _lowbias_t(x)
        x = _lowbias_t(x.bitwise_xor_(k[2]))
        idx = x >> 16
        f = x.bitwise_and_(0xFFFF).to(torch.float64).mul_(2.0).add_(1.0).mul_(2.0**-17)
        torch.mul(d[idx], f, out=out[s:e])
        out[s:e] += t[idx]
    return out


# ------------------------------------------------------------------ public
def _use_numpy(device, force_torch: bool) -> bool:
    return torch.device(device).type == "cpu" and not force_torch


def _draw(kind, seed: int, stream: str, shape, device, force_torch: bool) -> torch.Tensor:
    shape = tuple(int(s) for s in shape)
    n = 1
    for s in shape:
        n *= s
    k0, k1 = stream_keys(seed, stream)
    if _use_numpy(device, force_torch):
        return torch.from_numpy(_fill_np(kind, n, k0, k1)).view(shape)
    return _fill_t(kind, n, k0, k1, device).view(shape)


def normal(seed: int, stream: str, shape, device="cpu", force_torch: bool = False) -> torch.Tensor:
    """Standard-normal-like float64 values of ``stream`` under ``seed``, on ``device``;
    the same bytes on every device. ``force_torch`` runs the device path on the CPU (tests)."""
    return _draw("normal", seed, stream, shape, device, force_torch)


def normals(seed: int, requests, device="cpu", force_torch: bool = False) -> list:
    """``normal(seed, stream, shape, device)`` for each (stream, shape) of ``requests``: the
    same bytes. On a device (or ``force_torch``) drawn together, as views of one buffer
    (``_fill_many_t``): a case's q, k, v and dO in ~45 launches instead of ~160."""
    shapes = [tuple(int(x) for x in shape) for _, shape in requests]
    sizes = [math.prod(shape) for shape in shapes]
    if _use_numpy(device, force_torch) or not sizes or max(sizes) > M32 or sum(sizes) == 0:
        return [
            _draw("normal", seed, stream, shape, device, force_torch) for (stream, _), shape in zip(requests, shapes)
        ]
    flat = _fill_many_t([stream_keys(seed, stream) for stream, _ in requests], sizes, device)
    out, at = [], 0
    for shape, n in zip(shapes, sizes):
        out.append(flat[at : at + n].view(shape))
        at += n
    return out


def uniform(seed: int, stream: str, shape, device="cpu", force_torch: bool = False) -> torch.Tensor:
    """Uniform float64 values in (0, 1), multiples of 2^-33; the same bytes on every device."""
    return _draw("uniform", seed, stream, shape, device, force_torch)


def normal_bound() -> float:
    """A strict bound on |normal(...)|: the table's largest quantile (4.3249...). The
    interpolation never reaches the end of the last cell, so every value lies below it;
    a generator that scales normals can keep them finite in a dtype with it."""
    return float(_table()[0][-1])


def permutation_keys(seed: int, stream: str, n: int) -> list[int]:
    """0..n-1 ordered by their hash in ``stream``: a seeded permutation (small n)."""
    k0, k1 = stream_keys(seed, stream)
    h = _bits_np(0, n, k0, k1).tolist() if n else []
    return sorted(range(n), key=lambda i: (h[i], i))
