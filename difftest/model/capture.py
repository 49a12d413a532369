"""Captured activations: the q, k, v and dO of a real model's attention calls, as inputs.

Why: some kernel bugs only show on the activations of a trained model (low rank, sinks,
heavy tails, a dO that comes from a loss); the structured value kinds imitate them, a
capture is the real thing.

- ``capture(path)``: a context manager (``difftest.capture``). While it is active every
  call of ``torch.nn.functional.scaled_dot_product_attention`` (also the one inside
  ``nn.MultiheadAttention``) is recorded: q, k, v as they were passed and, when the
  output takes part in a backward, dO (a hook on the output). Calls with an attention
  mask, dropout or other than 4 dimensions are counted but not recorded (a Problem cannot
  say them). On exit the calls are written as safetensors: tensors ``c<i>.q``, ``.k``,
  ``.v``, ``.do`` in their own dtype and SDPA layout [batch, heads, tokens, dim], and the
  metadata key ``difftest.capture``: JSON with each call's shapes, dtype, causal flag
  and softmax scale. Writing needs the ``safetensors`` package (the ``capture`` extra).
- ``open_capture(path)``: reads such a file back without the package. The file is hostile
  input: the header's size, JSON, dtypes, shapes, offsets and every call's shapes are
  checked before a byte of tensor data is read, and the tensors for non-finite values;
  any fault raises ``CaptureError`` (the CLI prints its one line and exits 2).
- ``CaptureSlice``: the part of a Problem (``Problem.capture``, ``values="captured"``)
  that names the file (path and sha256), the call and where the Problem's window starts
  (batch, key/value head, query and key token); the window's size is the Problem's own
  batch, heads and sequence lengths, so shrinking the Problem shrinks the window. When the
  window is small (``EMBED_MAX`` bytes) its JSON embeds the window's bytes, so a shrunk
  reproducer replays without the file.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import math
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

import numpy as np
import torch
import torch.nn.functional as F

from difftest.errors import FileFormatError, InputError
from difftest.safeio import open_regular

META_KEY = "difftest.capture"
FORMAT_VERSION = 1
MAX_HEADER = 16 << 20  # a header larger than this is refused before it is read
MAX_CALLS = 4096
MAX_HEAD_DIM = 512
MAX_SOFTMAX_SCALE = 1e4  # a call's scale: problem.MAX_SOFTMAX_SCALE (this module cannot import problem.py)
EMBED_MAX = 32 << 10  # window bytes (q, k, v, dO together) up to which a Problem's JSON embeds them
DTYPES = {
    "F16": (torch.float16, np.uint16, 2),
    "BF16": (torch.bfloat16, np.uint16, 2),
    "F32": (torch.float32, np.float32, 4),
}
TORCH_NAMES = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32"}
PROBLEM_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}


class Window(Protocol):
    """What a CaptureSlice reads of the Problem it is the values of: problem.py's Problem, which
    this module cannot import, not even for annotations (problem.py imports this module, and
    tests/test_layers.py counts every import in its cycle check)."""

    @property
    def values(self) -> str: ...
    @property
    def varlen(self) -> bool: ...
    @property
    def pad_tail(self) -> int: ...
    @property
    def batch(self) -> int: ...
    @property
    def heads_q(self) -> int: ...
    @property
    def heads_kv(self) -> int: ...
    @property
    def group(self) -> int: ...
    @property
    def head_dim_qk(self) -> int: ...
    @property
    def head_dim_v(self) -> int: ...
    @property
    def seqlen_q(self) -> int | tuple[int, ...]: ...
    @property
    def seqlen_k(self) -> int | tuple[int, ...]: ...


def _lengths(p: Window) -> tuple[int, int]:
    """A dense Problem's (seqlen_q, seqlen_k): a capture window is dense (``unfit`` says so)."""
    if isinstance(p.seqlen_q, tuple) or isinstance(p.seqlen_k, tuple):
        raise CaptureError(f"a capture window is dense: seqlen_q={p.seqlen_q!r}, seqlen_k={p.seqlen_k!r}")
    return p.seqlen_q, p.seqlen_k


class CaptureError(FileFormatError):
    """A capture file that cannot be used, with the reason in one line (exit 2)."""


# ------------------------------------------------------------------ recording
class Recorder:
    """What ``capture`` collects; ``calls`` holds dicts of CPU tensors and settings."""

    def __init__(self, max_calls: int) -> None:
        self.max_calls = max_calls
        self.calls: list[dict] = []
        self.skipped = 0
        self._lock = threading.Lock()

    def wrap(self, sdpa: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(
            query: Any,
            key: Any,
            value: Any,
            attn_mask: Any = None,
            dropout_p: float = 0.0,
            is_causal: bool = False,
            scale: float | None = None,
            **kw: Any,
        ) -> Any:
            out = sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, **kw)
            self._record(query, key, value, attn_mask, dropout_p, is_causal, scale, kw, out)
            return out

        functools.update_wrapper(recorded, sdpa, assigned=(), updated=())  # sets __wrapped__ only
        return recorded

    # what the model passed scaled_dot_product_attention and got back, checked here before use
    def _record(
        self,
        q: Any,
        k: Any,
        v: Any,
        mask: Any,
        dropout_p: float,
        causal: bool,
        scale: float | None,
        kw: dict[str, Any],
        out: Any,
    ) -> None:
        usable = (
            mask is None
            and not dropout_p
            and set(kw) <= {"enable_gqa"}
            and all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (q, k, v))
            and q.dtype in TORCH_NAMES
            and q.dtype == k.dtype == v.dtype
            and q.shape[1] % k.shape[1] == 0
        )
        with self._lock:
            if not usable or len(self.calls) >= self.max_calls:
                self.skipped += 1
                return
            i = len(self.calls)
            call = {
                "q": _host(q),
                "k": _host(k),
                "v": _host(v),
                "do": None,
                "causal": bool(causal),
                "scale": float(scale) if scale is not None else 1.0 / math.sqrt(q.shape[-1]),
            }
            self.calls.append(call)
        if isinstance(out, torch.Tensor) and out.requires_grad:

            def grad(g: torch.Tensor, call: dict = call) -> None:
                call["do"] = _host(g)

            out.register_hook(grad)
        del i

    def tensors_and_metadata(self) -> tuple[dict, dict]:
        tensors, calls = {}, []
        for i, c in enumerate(self.calls):
            entry = {"causal": c["causal"], "scale": c["scale"], "dtype": TORCH_NAMES[c["q"].dtype]}
            for n in ("q", "k", "v", "do"):
                t = c[n]
                if t is None:
                    continue
                tensors[f"c{i}.{n}"] = t.to(c["q"].dtype).contiguous()
                entry[n] = f"c{i}.{n}"
                entry[f"shape_{n}"] = list(t.shape)
            calls.append(entry)
        meta = {"version": FORMAT_VERSION, "calls": calls, "skipped": self.skipped}
        return tensors, {META_KEY: json.dumps(meta, sort_keys=True)}

    def save(self, path: str | os.PathLike[str]) -> None:
        try:
            # lazy: optional dependency (safetensors: pip install 'difftest[capture]')
            from safetensors.torch import save_file
        except ImportError as e:  # the writer only; reading needs no package
            raise RuntimeError("difftest.capture writes safetensors: pip install 'difftest[capture]'") from e
        tensors, meta = self.tensors_and_metadata()
        save_file(tensors, os.fspath(path), metadata=meta)


def _host(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", copy=True).contiguous()


@contextlib.contextmanager
def capture(path: str | os.PathLike[str], *, max_calls: int = 64) -> Iterator[Recorder]:
    """Record the q/k/v/dO of up to ``max_calls`` ``scaled_dot_product_attention`` calls
    made while active (forward and, for outputs that get a gradient, backward) and write
    them to ``path`` (safetensors) on exit. Yields the ``Recorder``."""
    if not isinstance(max_calls, int) or not 1 <= max_calls <= MAX_CALLS:
        raise InputError(f"max_calls={max_calls!r}: allowed an int in 1..{MAX_CALLS}")
    rec = Recorder(max_calls)
    original = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = rec.wrap(original)
    try:
        yield rec
    finally:
        F.scaled_dot_product_attention = original
    rec.save(path)


# ------------------------------------------------------------------ reading (hostile input)
@dataclass(frozen=True)
class Call:
    """One recorded call: shapes [B, Hq, L, E] (q), [B, Hkv, S, E] (k), [B, Hkv, S, Ev] (v)."""

    index: int
    batch: int
    heads_q: int
    heads_kv: int
    seqlen_q: int
    seqlen_k: int
    head_dim_qk: int
    head_dim_v: int
    dtype: str  # F16, BF16 or F32
    causal: bool
    scale: float
    has_do: bool
    names: dict = field(compare=False, hash=False, default_factory=dict)

    @property
    def extents(self) -> tuple:
        return (
            self.batch,
            self.heads_q,
            self.heads_kv,
            self.seqlen_q,
            self.seqlen_k,
            self.head_dim_qk,
            self.head_dim_v,
        )


@dataclass
class Capture:
    path: str
    sha256: str
    calls: list  # usable Calls
    unusable: dict  # call index -> why
    skipped: int
    _entries: dict
    _data_start: int

    def read(self, name: str) -> np.ndarray:
        """The raw (memory-mapped, read-only) array of tensor ``name``: uint16 for 16-bit dtypes."""
        e = self._entries[name]
        np_dt = DTYPES[e["dtype"]][1]
        if not e["numel"]:
            return np.zeros(e["shape"], dtype=np_dt)
        return np.memmap(
            self.path, dtype=np_dt, mode="r", offset=self._data_start + e["begin"], shape=tuple(e["shape"])
        )

    def tensor(self, name: str, index: tuple[slice, ...] | None = None) -> torch.Tensor:
        """Tensor ``name`` (or its ``index`` slice) as a torch tensor in its own dtype (a copy)."""
        e = self._entries[name]
        a = self.read(name)
        a = np.array(a if index is None else a[index])
        t = torch.from_numpy(a)
        return t.view(DTYPES[e["dtype"]][0]) if a.dtype == np.uint16 else t


def _fail(path: str, why: str) -> NoReturn:
    raise CaptureError(f"{path}: not a usable difftest capture: {why}")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _file_sha(path: str) -> str:
    h = hashlib.sha256()
    with open_regular(path, CaptureError, "capture file") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def open_capture(path: str | os.PathLike[str]) -> Capture:
    """Read and validate a capture file (see the module docstring); CaptureError if unusable."""
    path = os.path.abspath(os.fspath(path))
    try:
        with open_regular(path, CaptureError, "capture file (safetensors)") as f:  # a FIFO cannot hang it
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                _fail(path, f"{size} bytes, shorter than the 8-byte header size")
            n = int.from_bytes(head, "little")
            if n < 2 or n > MAX_HEADER or n > size - 8:
                _fail(path, f"header size {n} outside 2..{min(MAX_HEADER, size - 8)} (file of {size} bytes)")
            raw = f.read(n)
    except OSError as e:
        raise CaptureError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        _fail(path, f"header is not JSON ({type(e).__name__})")
    if not isinstance(header, dict):
        _fail(path, "header is not a JSON object")
    data_start, data_size = 8 + n, size - 8 - n
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict) or not isinstance(meta.get(META_KEY), str):
        _fail(path, f"no {META_KEY!r} metadata (write it with difftest.capture)")
    entries = {}
    spans = []
    for name, spec in header.items():
        if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data_offsets"}:
            _fail(path, f"tensor {name!r}: expected dtype, shape, data_offsets")
        if spec["dtype"] not in DTYPES:
            _fail(path, f"tensor {name!r}: dtype {spec['dtype']!r} not one of {sorted(DTYPES)}")
        shape, offs = spec["shape"], spec["data_offsets"]
        if not isinstance(shape, list) or len(shape) != 4 or not all(_is_int(s) and 0 <= s < 2**31 for s in shape):
            _fail(path, f"tensor {name!r}: shape {shape!r} is not 4 sizes in 0..2^31-1")
        if (
            not isinstance(offs, list)
            or len(offs) != 2
            or not all(_is_int(o) for o in offs)
            or not 0 <= offs[0] <= offs[1] <= data_size
        ):
            _fail(path, f"tensor {name!r}: data_offsets {offs!r} outside the {data_size} data bytes")
        numel = math.prod(shape)
        if offs[1] - offs[0] != numel * DTYPES[spec["dtype"]][2]:
            _fail(path, f"tensor {name!r}: {offs[1] - offs[0]} bytes for shape {shape} of {spec['dtype']}")
        if offs[0] % DTYPES[spec["dtype"]][2]:
            _fail(path, f"tensor {name!r}: offset {offs[0]} not aligned to its element size")
        entries[name] = {"dtype": spec["dtype"], "shape": shape, "begin": offs[0], "numel": numel}
        if numel:
            spans.append((offs[0], offs[1], name))
    spans.sort()
    for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            _fail(path, f"tensors {an!r} and {bn!r} overlap")
    try:
        info = json.loads(meta[META_KEY])
    except (json.JSONDecodeError, RecursionError):
        _fail(path, f"{META_KEY} metadata is not JSON")
    if not isinstance(info, dict) or info.get("version") != FORMAT_VERSION or not isinstance(info.get("calls"), list):
        _fail(path, f"{META_KEY} metadata: expected version {FORMAT_VERSION} and a list of calls")
    if len(info["calls"]) > MAX_CALLS:
        _fail(path, f"{len(info['calls'])} calls, more than {MAX_CALLS}")
    cap = Capture(path, "", [], {}, info.get("skipped", 0) if _is_int(info.get("skipped")) else 0, entries, data_start)
    for i, c in enumerate(info["calls"]):
        call = _check_call(path, i, c, entries)
        bad = _non_finite(cap, call)
        if bad:
            cap.unusable[i] = bad
        else:
            cap.calls.append(call)
    if not cap.calls:
        why = "; ".join(f"call {i}: {w}" for i, w in sorted(cap.unusable.items())[:3])
        _fail(path, "no usable call" + (f" ({why})" if why else " (none recorded)"))
    cap.sha256 = _file_sha(path)
    return cap


def _check_call(path: str, i: int, c: object, entries: dict) -> Call:
    where = f"call {i}"
    if not isinstance(c, dict):
        _fail(path, f"{where} is not an object")
    if not isinstance(c.get("causal"), bool):
        _fail(path, f"{where}: causal must be true or false")
    scale = c.get("scale")
    if (
        not isinstance(scale, (int, float))
        or isinstance(scale, bool)
        or not math.isfinite(scale)
        or scale <= 0
        or scale > MAX_SOFTMAX_SCALE
    ):
        _fail(
            path,
            f"{where}: scale {scale!r}: allowed a finite number > 0, at most {MAX_SOFTMAX_SCALE:g} "
            "(a Problem's softmax_scale)",
        )
    names = {}
    for n in ("q", "k", "v", "do"):
        name = c.get(n)
        if name is None and n == "do":
            continue
        if not isinstance(name, str) or name not in entries:
            _fail(path, f"{where}: tensor {n} ({name!r}) is not in the file")
        names[n] = name
    sh = {n: entries[names[n]]["shape"] for n in names}
    dts = {entries[names[n]]["dtype"] for n in names}
    if len(dts) != 1:
        _fail(path, f"{where}: q, k, v, dO of different dtypes {sorted(dts)}")
    B, Hq, L, E = sh["q"]
    _, Hkv, S, _ = sh["k"]
    Ev = sh["v"][3]
    if sh["k"] != [B, Hkv, S, E] or sh["v"] != [B, Hkv, S, Ev] or ("do" in sh and sh["do"] != [B, Hq, L, Ev]):
        _fail(path, f"{where}: shapes {sh} are not q [B,Hq,L,E], k [B,Hkv,S,E], v [B,Hkv,S,Ev], do [B,Hq,L,Ev]")
    if min(B, Hq, Hkv, L, S) < 1 or Hq % Hkv:
        _fail(path, f"{where}: shapes {sh}: empty, or query heads not a multiple of key heads")
    if not (1 <= E <= MAX_HEAD_DIM and 1 <= Ev <= MAX_HEAD_DIM):
        _fail(path, f"{where}: head dims {E}/{Ev} outside 1..{MAX_HEAD_DIM}")
    return Call(i, B, Hq, Hkv, L, S, E, Ev, dts.pop(), c["causal"], float(scale), "do" in names, names)


def _non_finite(cap: Capture, call: Call) -> str | None:
    for n, name in call.names.items():
        a = cap.read(name)
        flat = a.reshape(-1)
        for s in range(0, flat.size, 1 << 22):
            t = torch.from_numpy(np.array(flat[s : s + (1 << 22)]))
            if a.dtype == np.uint16:
                t = t.view(DTYPES[cap._entries[name]["dtype"]][0])
            if not torch.isfinite(t).all():
                return f"{n} holds non-finite values"
    return None


_OPEN: dict = {}
_OPEN_LOCK = threading.Lock()


def cached_capture(path: str, sha256: str) -> Capture:
    """The validated capture at ``path``, opened once per process; CaptureError when its
    sha256 is not the one a Problem recorded (the file changed since)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise CaptureError(f"{path}: cannot read: {e.strerror or e}") from None
    key = (path, st.st_size, st.st_mtime_ns)
    with _OPEN_LOCK:
        cap = _OPEN.get(key)
        if cap is None:
            cap = _OPEN[key] = open_capture(path)
    if cap.sha256 != sha256:
        raise CaptureError(f"{path}: sha256 {cap.sha256}, the Problem was drawn from {sha256}: the file changed")
    return cap


# ------------------------------------------------------------------ the Problem's slice
class CaptureSliceError(FileFormatError):
    """A capture slice read from a file is malformed: ``Problem`` turns it into a ProblemError
    (this module sits below problem.py and does not import it)."""

    def __init__(self, value: object, expected: str) -> None:
        super().__init__(expected)
        self.value, self.expected = value, expected


@dataclass(frozen=True)
class CaptureSlice:
    """Where a Problem's window lies in a capture (see the module docstring)."""

    file: str
    sha256: str
    call: int
    extents: tuple  # the call's (B, Hq, Hkv, L, S, E, Ev), checked against the Problem without the file
    dtype: str  # the call's dtype (F16, BF16, F32)
    has_do: bool
    b0: int = 0
    h0: int = 0  # first key/value head; query heads h0 * group ...
    q0: int = 0
    k0: int = 0
    data: tuple | None = field(default=None, compare=False, hash=False)  # embedded window (from JSON)

    @classmethod
    def coerce(cls, x: object) -> CaptureSlice:
        if isinstance(x, CaptureSlice):
            return x
        if not isinstance(x, dict):
            raise CaptureSliceError(x, "an object naming a capture file and a slice of it")
        need = {"file", "sha256", "call", "extents", "dtype", "has_do", "b0", "h0", "q0", "k0"}
        if not need <= set(x) or not set(x) <= need | {"data"}:
            raise CaptureSliceError(x, f"the fields {sorted(need)} (and data)")
        ext = x["extents"]
        if (
            not isinstance(ext, list)
            or len(ext) != 7
            or not all(_is_int(v) and v >= 1 for v in ext)
            or not all(_is_int(x[n]) and x[n] >= 0 for n in ("call", "b0", "h0", "q0", "k0"))
            or x["dtype"] not in DTYPES
            or not isinstance(x["has_do"], bool)
            or not isinstance(x["file"], str)
            or not isinstance(x["sha256"], str)
        ):
            raise CaptureSliceError(x, "7 extents >= 1, offsets >= 0, a dtype of F16/BF16/F32")
        data = x.get("data")
        if data is not None:
            if (
                not isinstance(data, dict)
                or not isinstance(data.get("window"), list)
                or not all(isinstance(data.get(n), str) for n in ("q", "k", "v"))
            ):
                raise CaptureSliceError(x, "embedded data: window and base64 q, k, v (and do)")
            data = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in data.items()))
        return cls(
            x["file"],
            x["sha256"],
            x["call"],
            tuple(ext),
            x["dtype"],
            x["has_do"],
            x["b0"],
            x["h0"],
            x["q0"],
            x["k0"],
            data,
        )

    def unfit(self, p: Window) -> str | None:
        """Why Problem ``p`` cannot be a window of this call, or None."""
        B, Hq, Hkv, L, S, E, Ev = self.extents
        if p.values != "captured":
            return "only with values='captured'"
        if p.varlen or p.pad_tail:
            return "a dense window (captured calls are dense)"
        if (p.head_dim_qk, p.head_dim_v) != (E, Ev):
            return f"the call's head dims {E}/{Ev}"
        if p.group != Hq // Hkv:
            return f"the call's {Hq // Hkv} query heads per key head"
        if self.b0 + p.batch > B or self.h0 + p.heads_kv > Hkv:
            return f"batch and heads inside the call's {B} x {Hkv} key heads"
        sq, sk = _lengths(p)
        if self.q0 + sq > L or self.k0 + sk > S:
            return f"token windows inside the call's {L} queries and {S} keys"
        return None

    def needs_file(self, p: Window) -> bool:
        """Whether Problem ``p``'s window must be read from the file (its bytes are not embedded)."""
        return self._embedded(p) is None

    def window_key(self, p: Window) -> list:
        return [p.batch, p.heads_kv, *_lengths(p)]

    def to_json(self, p: Window | None = None) -> dict:
        d: dict[str, Any] = {
            "file": self.file,
            "sha256": self.sha256,
            "call": self.call,
            "extents": list(self.extents),
            "dtype": self.dtype,
            "has_do": self.has_do,
            "b0": self.b0,
            "h0": self.h0,
            "q0": self.q0,
            "k0": self.k0,
        }
        if p is not None and self.window_bytes(p) <= EMBED_MAX:
            got = self._embedded(p)
            if got is None:
                try:
                    got = {
                        n: base64.b64encode(t.contiguous().view(torch.uint8).numpy().tobytes()).decode()
                        for n, t in self._from_file(p).items()
                    }
                except CaptureError:
                    got = None
            if got is not None:
                d["data"] = {"window": self.window_key(p), **got}
        return d

    def window_bytes(self, p: Window) -> int:
        item = DTYPES[self.dtype][2]
        sq, sk = _lengths(p)
        n_q = p.batch * p.heads_q * sq
        n_k = p.batch * p.heads_kv * sk
        return item * (
            n_q * p.head_dim_qk + n_k * (p.head_dim_qk + p.head_dim_v) + (n_q * p.head_dim_v if self.has_do else 0)
        )

    def _shapes(self, p: Window) -> dict[str, tuple[int, int, int, int]]:
        sq, sk = _lengths(p)
        s = {
            "q": (p.batch, p.heads_q, sq, p.head_dim_qk),
            "k": (p.batch, p.heads_kv, sk, p.head_dim_qk),
            "v": (p.batch, p.heads_kv, sk, p.head_dim_v),
        }
        if self.has_do:
            s["do"] = (p.batch, p.heads_q, sq, p.head_dim_v)
        return s

    def _embedded(self, p: Window) -> dict | None:
        if self.data is None:
            return None
        d = dict(self.data)
        names = self._shapes(p)
        if list(d["window"]) != self.window_key(p) or not all(isinstance(d.get(n), str) for n in names):
            return None  # another window's bytes (the Problem shrank since), or a part missing: the file
        return {n: d[n] for n in names}

    def _from_file(self, p: Window) -> dict[str, torch.Tensor]:
        cap = cached_capture(self.file, self.sha256)
        call = next((c for c in cap.calls if c.index == self.call), None)
        if call is None or call.extents != self.extents:
            raise CaptureError(f"{self.file}: call {self.call} is not the one the Problem was drawn from")
        g = p.group
        hq = slice(self.h0 * g, (self.h0 + p.heads_kv) * g)
        hk = slice(self.h0, self.h0 + p.heads_kv)
        b = slice(self.b0, self.b0 + p.batch)
        sq, sk = _lengths(p)
        rows_q, rows_k = slice(self.q0, self.q0 + sq), slice(self.k0, self.k0 + sk)
        out = {
            "q": cap.tensor(call.names["q"], (b, hq, rows_q)),
            "k": cap.tensor(call.names["k"], (b, hk, rows_k)),
            "v": cap.tensor(call.names["v"], (b, hk, rows_k)),
        }
        if self.has_do:
            out["do"] = cap.tensor(call.names["do"], (b, hq, rows_q))
        return out

    def window(self, p: Window, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
        """name -> float64 packed [batch * len, heads, dim] tensors of Problem ``p``'s window:
        from the embedded bytes when they are this window's, else from the file."""
        emb = self._embedded(p)
        if emb is not None:
            dt = DTYPES[self.dtype][0]
            raw = {}
            for n, shape in self._shapes(p).items():
                b = base64.b64decode(emb[n].encode(), validate=True)
                if len(b) != math.prod(shape) * DTYPES[self.dtype][2]:
                    raise CaptureError(f"embedded {n}: {len(b)} bytes, the window needs {shape}")
                raw[n] = torch.frombuffer(bytearray(b), dtype=torch.uint8).view(dt).view(shape)
        else:
            raw = self._from_file(p)
        return {
            n: t.to(device).to(torch.float64).transpose(1, 2).reshape(-1, t.shape[1], t.shape[3])
            for n, t in raw.items()
        }
