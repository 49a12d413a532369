"""A finding's signature: what one distinct bug is, as data.

A signature holds the triage kind of the failure, what failed (the failing ``output:gate``
labels, or for a kernel error the exception type), and the *needs*: the features of the
shrunk Problem the failure cannot do without. A need is found by re-running a few bounded
variations of the shrunk Problem (``variations``): switched off (causal, window, sinks,
GQA, varlen, padding, unequal head dims, special values, a custom softmax scale, a strided
layout), reduced by one (batch, heads, the sequence lengths the shrinker left), or moved
to another head dim or dtype. A variation that no longer fails the same way makes its
feature a need; one that still fails shows the feature is incidental.

Needs are predicates over Problems, so a signature *explains* a Problem (the Problem has
every need) and a failing case (it also fails the same way: a gate in common, or an error
of the same type). A hunting campaign (``campaign.py``) steers away from Problems a found
signature explains, attributes a failing case to the findings that explain it, and shrinks
only what no finding explains. The same identity marks findings as known (``--known``,
``load_known``) and separates a known failure from a new one in ``difftest gate``.

What failed is the case's *root* failing gates (``root_gates``): where the forward's O or
LSE fails, only those, since a correct backward fed a wrong LSE is wrong too (cuDNN's THD
GQA Stats bug failed lse alone, lse with NaN gradients, and lse with finite wrong gradients:
one bug, not three findings). A race (triage kind nondeterminism) is not measured by a few
passing reruns: its variations only count where the differing output no longer exists (no
dSink without sinks); a pass proves nothing (``FLAKY``). A wrong result on an output that also races
(cuDNN's dQ at head dims 136..160, zero in some runs and not others) is as flaky on that
output: a variation where only racing outputs are left to fail is inconclusive (``RACY``);
the needs come from the steady outputs and from what makes the racing ones vanish. Unless the
failure is steady after all: where every failing gate races (cuDNN 9.19 at d_qk > 128 with a
smaller d_v: dQ wrong on every call, and different on every call, so dq:budget and
dq:determinism), the shrunk Problem is run ``RACE_CONFIRM`` more times; if it fails in at least
``RACE_MIN_FAILS`` of them, a variation that passes ``RACE_CONFIRM`` more times too is a pass (its
feature is a need: at a failure rate of 2/3, four passes in a row happen by chance 1.2% of the
time). On the H100's cuDNN nightly of 2026-12-06, without this, five findings of that one bug
found no need at all ("fails on every variation") and none of them steered the hunt away from
the next; the same configuration failed 3 of 4 and 4 of 6 times there, never every time.

Kinds of need (``needs`` maps a name to a value):

- a switch, value ``true``: ``causal``, ``window``, ``sinks``, ``gqa``, ``varlen``,
  ``empty_q``/``empty_k`` (a varlen batch holding an empty query / key sequence), ``pad_tail``,
  ``dims_differ``, ``softmax_scale``, ``sparse`` (a block-sparse mask or top-k selection);
- a lower bound, value an int: ``batch>=``, ``heads_q>=``, ``seqlen_q>=``, ``seqlen_k>=``
  (the longest sequence of the Problem);
- one of a few values, a list: ``head_dim_qk``, ``dtype``, ``values``, ``layout``, ``align``;
- a tail, value an int m: ``seqlen_q%``, ``seqlen_k%``: a query (key) sequence whose length is not a
  multiple of m (a kernel's partial last block). Found by rounding the lengths up: a failure that goes
  away at the largest multiple that fits is a tail's, and m is the smallest multiple whose rounding
  passes (cuDNN's FP8 dQ at s_q = 2 signs "seqlen_q not a multiple of 16", not only "seqlen_k >= 2",
  so problems with whole blocks are still searched).
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from difftest.errors import FileFormatError
from difftest.judge import triage
from difftest.model.layouts import CONTIGUOUS
from difftest.model.problem import Problem, ProblemError
from difftest.safeio import parse_json, read_capped
from difftest.search.failure_store import FOLDER, safe_name
from difftest.vocab import Status

SWITCHES = (
    "causal",
    "window",
    "sinks",
    "gqa",
    "varlen",
    "empty_q",
    "empty_k",
    "pad_tail",
    "dims_differ",
    "softmax_scale",
    "sparse",
    "softcap",
    "alibi",
    "relpos",
)
BOUNDS = ("batch>=", "heads_q>=", "seqlen_q>=", "seqlen_k>=")
CHOICES = ("head_dim_qk", "dtype", "values", "layout", "align")
TAILS = ("seqlen_q%", "seqlen_k%")
MULTIPLES = (8, 16, 32, 64, 128)  # the block sizes a tail need is looked for at
RUN = "all:run"  # the label of a kernel error (it fails no gate)
UNEXPLAINED_LISTED = 20  # failing cases no finding explains, listed by name (the rest counted)
FORWARD = ("o", "lse")  # outputs whose failure makes a correct backward's outputs wrong too
FLAKY = (str(triage.Kind.NONDETERMINISM),)  # kinds whose passing variation proves nothing
RACY = ":determinism"  # gates a passing variation proves nothing about (a wrong result may race too)
MAX_VARIATIONS = 24  # re-runs per signature, at most
RACE_CONFIRM = 3  # fresh runs that show a racing wrong result steady, and a variation's pass real
RACE_MIN_FAILS = 2  # of the shrunk Problem's RACE_CONFIRM fresh runs, failing ones that make it steady
MESSAGE_CHARS = 200  # an error message's shape keeps this many characters
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\\x1b\[[0-9;]*[A-Za-z]")  # terminal colour codes, raw or escaped
# what varies between two raises of one error: numbers, hex, quoted text with digits or paths, paths
_VARYING = (
    (re.compile(r"0x[0-9a-fA-F]+"), "#"),
    (re.compile(r"'[^']*[\d/][^']*'|\"[^\"]*[\d/][^\"]*\""), "''"),
    (re.compile(r"(?<![\w.])/[\w./-]+"), "/"),
    (re.compile(r"\d+(\.\d+)?"), "#"),
    (re.compile(r"\s+"), " "),
)
# a CuTe layout or shape once its numbers are "#": parentheses, commas, colons and "#" only
_LAYOUT = re.compile(r"\((?:[#(),:]|\s)*#(?:[#(),:]|\s)*\)")
# a dtype's name inside a message (torch's, CuTe DSL's, MLIR's element types): one error raised
# in float16 and in bfloat16 is one error (FA4 b25 on the H100, 2026-12-07: the DSL's
# "Misaligned Tensor data on argument ... Tensor([...], float16)" and "... bfloat16)" became two
# findings, and a bfloat16 case stayed unexplained beside the float16 finding)
_DTYPE = re.compile(
    r"(?<![\w.])(?:torch\.)?(?:b?float(?:8_e4m3fnuz|8_e4m3fn|8_e5m2fnuz|8_e5m2|16|32|64)|half|"
    r"BFloat16|Float(?:16|32|64)|bf16|fp16|fp32|f16|f32|f64)(?![\w])"
)


def message_shape(reason: str) -> str:
    """The shape of an error's message: its text without the exception type, terminal colour
    codes, numbers, hex, quoted names and paths, and with a layout's nesting (``(#,(#))``,
    ``((#,#),(#,#))``) as ``(...)``, its first informative lines joined, so two raises of one
    error (at head dims 24 and 56) share it and two different errors of one exception type (an
    MLIR build failure and an MLIR partition failure) do not; a dtype's name is ``<dtype>``
    (the same error met in float16 and bfloat16 is one). A message that names a CUDA runtime
    error is that name (``triage.failure_name``: one device fault, whichever wrapper raised it).
    A message whose first line is empty (CuTe DSL's ``DSLRuntimeError:`` puts the IR verifier's
    error on the lines after it) is read from the lines that follow."""
    return triage.cuda_error_name(reason) or _text_shape(reason, layouts=True)


def message_shapes(reason: str) -> tuple[str, ...]:
    """(the message's shape, its shape before dtype names were ``<dtype>``, its shape by the
    rule before CUDA error names and layouts): a signature recorded by an older rule (a
    ``--known`` file, the failure store) still knows its failure."""
    before_dtypes = triage.cuda_error_name(reason) or _text_shape(reason, layouts=True, dtypes=False)
    return message_shape(reason), before_dtypes, _text_shape(reason)


def _text_shape(reason: str, layouts: bool = False, dtypes: bool = True) -> str:
    text = _ANSI.sub("", reason or "").replace("\\x1b", "")
    text = text.split("Traceback (most recent call last)")[0]
    out = []
    for line in text.splitlines():
        line = line.strip()
        for _ in range(3):  # "Type: " prefixes, however many wrappers added theirs
            typ, sep, rest = line.partition(":")
            if not sep or not re.fullmatch(r"[\w.]*(Error|Exception|Crashed|Timeout|Warning)", typ.strip()):
                break
            line = rest.strip()
        if line:
            out.append(line)
        if sum(len(x) for x in out) >= MESSAGE_CHARS:
            break
    head = " ".join(out)
    if layouts and dtypes:
        head = _DTYPE.sub("<dtype>", head)
    for pattern, repl in _VARYING:
        head = pattern.sub(repl, head)
    if layouts:
        head = _LAYOUT.sub("(...)", head)
    return head.strip()[:MESSAGE_CHARS]


class SignatureError(FileFormatError):
    """A signature record that is not one (a hostile or damaged file): one line."""


def _switch(p: Problem, name: str) -> bool:
    return {
        "causal": p.causal,
        "window": p.window_left is not None or p.window_right is not None,
        "sinks": p.sinks,
        "gqa": p.heads_q != p.heads_kv,
        "varlen": p.varlen,
        "pad_tail": p.pad_tail > 0,
        "empty_q": p.varlen and 0 in p.seqlens_q,
        "empty_k": p.varlen and 0 in p.seqlens_k,
        "dims_differ": p.head_dim_qk != p.head_dim_v,
        "softmax_scale": p.softmax_scale is not None,
        "sparse": p.sparse,
        "softcap": p.softcap is not None,
        "alibi": p.alibi,
        "relpos": p.rel,
    }[name]


def _switched_off(p: Problem, name: str) -> Problem:
    if name == "causal":
        return p.replace(causal=False)
    if name == "window":
        return p.replace(window_left=None, window_right=None)
    if name == "sinks":
        return p.replace(sinks=False, sink_center=0.0)
    if name == "gqa":
        return p.replace(heads_kv=p.heads_q)
    if name == "varlen":
        return p.replace(seqlen_q=max(1, p.max_seqlen_q), seqlen_k=max(1, p.max_seqlen_k), pad_tail=0)
    if name == "pad_tail":
        return p.replace(pad_tail=0)
    if name in ("empty_q", "empty_k"):  # each empty sequence of that side one token long
        side = "seqlen_q" if name == "empty_q" else "seqlen_k"
        return p.replace(**{side: tuple(x or 1 for x in getattr(p, side))})
    if name == "dims_differ":
        return p.replace(head_dim_v=p.head_dim_qk)
    if name == "sparse":
        return p.replace(sparsity=None)
    if name == "softcap":
        return p.replace(softcap=None)
    if name == "alibi":
        return p.replace(alibi_slopes=None)
    if name == "relpos":
        return p.replace(rel_bias=None)
    return p.replace(softmax_scale=None)


def _bound(p: Problem, name: str) -> int:
    return {"batch>=": p.batch, "heads_q>=": p.heads_q, "seqlen_q>=": p.max_seqlen_q, "seqlen_k>=": p.max_seqlen_k}[
        name
    ]


def _lowered(p: Problem, name: str, step: int) -> Problem | None:
    """``p`` with the bounded quantity one ``step`` lower (None: nothing lower is a Problem)."""
    if name == "batch>=":
        if p.batch <= 1:
            return None
        if p.varlen:
            return p.replace(batch=p.batch - 1, seqlen_q=p.seqlen_q[:-1], seqlen_k=p.seqlen_k[:-1])  # type: ignore[index]  # varlen: tuples
        return p.replace(batch=p.batch - 1)
    if name == "heads_q>=":
        hq = p.heads_q - p.group
        return p.replace(heads_q=hq, heads_kv=hq // p.group) if hq >= 1 else None
    field_, longest = ("seqlen_q", p.max_seqlen_q) if name == "seqlen_q>=" else ("seqlen_k", p.max_seqlen_k)
    if longest - step < 1:
        return None
    if p.varlen:
        lens = list(getattr(p, field_))
        lens = [min(x, longest - step) for x in lens]
        return p.replace(**{field_: tuple(lens)})
    return p.replace(**{field_: longest - step})


def _lengths(p: Problem, name: str) -> list[int]:
    v = p.seqlen_q if name == "seqlen_q%" else p.seqlen_k
    return list(v) if isinstance(v, (tuple, list)) else [v]


def _has_tail(p: Problem, name: str, m: int) -> bool:
    return any(n % m for n in _lengths(p, name))


def _rounded_up(p: Problem, name: str, m: int) -> Problem | None:
    """``p`` with every query (key) length rounded up to a multiple of ``m``; None where, under
    a mask, that turns a sequence's query side from longer than its key side to not (or back):
    another set of visible keys, not a whole block (a causal fault on rows that see no key, at
    seqlen_q 2 and seqlen_k 1, passed at seqlen_k 8 and signed a tail of 8)."""
    lens = tuple(-(-n // m) * m for n in _lengths(p, name))
    q = p.replace(**{"seqlen_q" if name == "seqlen_q%" else "seqlen_k": lens if p.varlen else lens[0]})
    if p.masked and _longer_queries(q) != _longer_queries(p):
        return None
    return q


def _longer_queries(p: Problem) -> tuple[bool, ...]:
    return tuple(a > b for a, b in zip(p.seqlens_q, p.seqlens_k))


def _choice(p: Problem, name: str):
    return {
        "head_dim_qk": p.head_dim_qk,
        "dtype": p.dtype,
        "values": p.values,
        "layout": p.layout.kind,
        "align": p.align,
    }[name]


def _holds(p: Problem, name: str, value) -> bool:
    """``p`` has the need ``name`` (a switch, a bound, a tail or a choice) of ``value``."""
    if name in SWITCHES:
        return _switch(p, name)
    if name in BOUNDS:
        return _bound(p, name) >= value
    if name in TAILS:
        return _has_tail(p, name, value)
    return _choice(p, name) in value


def missed_needs(sig: "Signature", p: Problem) -> list:
    """The needs of ``sig`` that ``p`` does not have."""
    return [(n, v) for n, v in sig.needs if not _holds(p, n, v)]


def _with_choice(p: Problem, name: str, value, capability) -> Problem:
    if name == "head_dim_qk":
        same = p.head_dim_v == p.head_dim_qk or (capability is not None and capability.equal_head_dims)
        return p.replace(head_dim_qk=value, head_dim_v=value if same else p.head_dim_v)
    if name == "dtype":
        return p.replace(dtype=value)
    if name == "values":
        return p.replace(values=value, value_scale=1.0 if value == "normal" else p.value_scale)
    if name == "layout":
        return p.replace(layout=CONTIGUOUS)
    return p.replace(align=value)


def _others(capability, name: str, p: Problem, limit: int = 3) -> list:
    """Other values of a choice to try: for head dims the nearest below and above (a tail bug
    lives at a few dims, not at all of them) and the far end of the declared range from this
    one (the smallest for a head dim in the upper half, else the largest: a bug of every large
    head dim, cuDNN 9.19's d_qk > 128 on the H100, failed at 160, 176 and the largest 256 and
    read "needs nothing found (fails on every variation)"); dtypes all others."""
    if name == "values":
        return ["normal"] if p.values != "normal" else []
    if name == "layout":
        return [CONTIGUOUS.kind] if p.layout.kind != CONTIGUOUS.kind else []
    if capability is None:
        return []
    if name == "align":
        return [a for a in capability.aligns if a != p.align] if p.masked else []
    if name == "dtype":
        return [d for d in capability.dtypes if d != p.dtype][:limit]
    dims = sorted(d for d in capability.head_dims_qk if d != p.head_dim_qk)
    below = [d for d in dims if d < p.head_dim_qk]
    above = [d for d in dims if d > p.head_dim_qk]
    declared = capability.head_dims_qk
    upper = bool(declared) and p.head_dim_qk > (min(declared) + max(declared)) / 2
    far = below[:1] if upper else above[-1:]
    return list(dict.fromkeys(below[-1:] + above[:1] + far))[:limit]


def _valid(p: Problem | None, capability) -> TypeGuard[Problem]:
    if p is None:
        return False
    try:
        p.validate()
    except ProblemError:
        return False
    return capability is None or capability.covers(p)


@dataclass(frozen=True)
class Signature:
    kind: str  # triage kind (judge/triage.py)
    gates: tuple[str, ...]  # failing output:gate labels, sorted; ("all:run",) for a kernel error
    error_type: str = ""  # the exception type of a kernel error
    needs: tuple = ()  # ((name, value), ...) sorted by name; value: True, an int bound or a tuple of choices
    tried: int = field(default=0, compare=False)  # variations run to find the needs
    message: str = ""  # a kernel error's message shape (message_shape); "" for a wrong result or an old record
    # False: the budget (calls or the deadline) ended before every variation ran, so a need may
    # be missing; "needs nothing" then means "not measured", never "fails on every variation"
    complete: bool = field(default=True, compare=False)
    # needs the budget left unmeasured, pinned at the shrunk Problem's value (``derive``): a
    # signature cut before its head-dim variations explains its own head dim only, not every
    # case raising its exception (FA4 b25's launch failure at d 192/232, "needs not measured",
    # took the empty-sequence launch failure's cases); names among ``needs``
    assumed: tuple[str, ...] = field(default=(), compare=False)
    # True: the shrunk Problem failed in the kernel's worker process after other cases had run
    # there and passed in a fresh one (``hunt``'s fresh-process check). What the kernel returned
    # depended on what ran before it (memory it read but did not write, state an earlier case
    # left), so no variation run in that process measured a need: every switch and choice is
    # held (``assumed``), and it is one bug with no other signature (``same_identity``). cuDNN
    # 9.19 on the H100, 2026-12-07: 4 of 19 reproducers of an unattended nightly passed when
    # replayed alone; two had signed "needs nothing found (fails on every variation)".
    history: bool = field(default=False, compare=False)
    # for a history-dependent signature, the Problem (``Problem.short``) after whose run in a fresh process
    # this one failed: the case whose kernel call leaves its process corrupt ("" when none was found)
    after: str = field(default="", compare=False)

    # ------------------------------------------------------------------ identity
    @property
    def id(self) -> str:
        """A short stable name of the identity (kind, gates or error type, needs)."""
        parts = [self.kind, list(self.gates), self.error_type, _jsonable(self.needs)]
        blob = json.dumps(parts + ([self.message] if self.message else []), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]

    def describe(self) -> str:
        what = self.error_type or ", ".join(self.gates)
        if self.message and self.message != self.error_type:
            what += f" ({self.message})"
        needs = ", ".join(_need_text(n, v) for n, v in self.needs if n not in self.assumed)
        pinned = ", ".join(_need_text(n, v) for n, v in self.needs if n in self.assumed)
        if self.complete and pinned:  # every variation ran: another error hid what these would say
            hid = f"held at {pinned}: another error hid their variations"
            needs = f"{needs} ({hid})" if needs else f"not measured ({hid})"
        if not self.complete:
            ran = f"{self.tried} variation{'s' * (self.tried != 1)}"
            held = f"held at {pinned} until measured; " if pinned else ""
            needs = (
                f"{needs} (maybe more: {held}the budget ran out after {ran})"
                if needs
                else f"not measured ({held}the budget ran out after {ran})"
            )
        if self.history:
            before = f"{self.after} ran" if self.after else "other cases ran"
            return (
                f"{self.kind} on {what}, only after {before} in the same kernel process (passed in a "
                f"fresh one: it reads memory it did not write, or state an earlier case left); needs not "
                f"measured (held at {', '.join(_need_text(n, v) for n, v in self.needs) or 'its Problem'})"
            )
        return f"{self.kind} on {what}; needs {needs or 'nothing found (fails on every variation)'}"

    # --------------------------------------------------------------- predicates
    def explains_problem(self, p: Problem) -> bool:
        """``p`` has every need."""
        return all(_holds(p, name, value) for name, value in self.needs)

    def fails_alike(self, case) -> bool:
        """``case`` fails the way this signature's failure does (ignoring the needs)."""
        if not case.failed:
            return False
        if self.error_type or self.gates == (RUN,):
            # the exception type or CUDA error name, the message's shape by either rule (older records)
            return (
                case.status == Status.ERROR
                and self.error_type in ((case.error_type or ""), triage.failure_name(case))
                and (not self.message or self.message in message_shapes(case.reason))
            )
        return case.status == Status.FAILED and bool(set(root_gates(case)) & set(self.gates))

    def explains(self, case) -> bool:
        return self.fails_alike(case) and self.explains_problem(case.problem)

    # ------------------------------------------------------------------- data
    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "gates": list(self.gates),
            "error_type": self.error_type,
            **({"message": self.message} if self.message else {}),
            "needs": {n: _jsonable(v) for n, v in self.needs},
            "variations_run": self.tried,
            **({} if self.complete else {"variations_complete": False}),
            **({"needs_assumed": list(self.assumed)} if self.assumed else {}),
            **({"history_dependent": True} if self.history else {}),
            **({"after": self.after} if self.after else {}),
            "describe": self.describe(),
        }

    @classmethod
    def from_dict(cls, d, where: str = "signature") -> "Signature":
        """From ``to_dict``'s record; anything else raises SignatureError (one line)."""
        if not isinstance(d, dict):
            raise SignatureError(f"{where}: a {type(d).__name__}: allowed an object with kind, gates, needs")
        kind = d.get("kind")
        if kind not in {str(k) for k in triage.FINDINGS} | {str(triage.Kind.INTERNAL)}:
            raise SignatureError(
                f"{where}: kind {str(kind)[:40]!r}: allowed one of {sorted(str(k) for k in triage.FINDINGS)}"
            )
        gates = d.get("gates")
        if (
            not isinstance(gates, list)
            or not gates
            or not all(isinstance(g, str) and ":" in g and len(g) < 80 for g in gates)
        ):
            raise SignatureError(f"{where}: gates {str(gates)[:60]!r}: allowed a non-empty list of 'output:gate'")
        err = d.get("error_type", "")
        if not isinstance(err, str) or len(err) > 200:
            raise SignatureError(f"{where}: error_type {str(err)[:40]!r}: allowed a string")
        message = d.get("message", "")
        if not isinstance(message, str) or len(message) > MESSAGE_CHARS:
            raise SignatureError(
                f"{where}: message {str(message)[:40]!r}: allowed a string of at most {MESSAGE_CHARS} characters"
            )
        needs = d.get("needs", {})
        if not isinstance(needs, dict):
            raise SignatureError(f"{where}: needs {str(needs)[:40]!r}: allowed an object")
        out = []
        for name, v in needs.items():
            if name in SWITCHES:
                if v is not True:
                    raise SignatureError(f"{where}: needs.{name}={v!r}: allowed true")
            elif name in BOUNDS:
                if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**40:
                    raise SignatureError(f"{where}: needs.{name}={str(v)[:40]!r}: allowed an int >= 0")
            elif name in TAILS:
                if not isinstance(v, int) or isinstance(v, bool) or not 2 <= v < 2**20:
                    raise SignatureError(f"{where}: needs.{name}={str(v)[:40]!r}: allowed an int >= 2")
            elif name in CHOICES:
                if (
                    not isinstance(v, list)
                    or not v
                    or len(v) > 64
                    or not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in v)
                ):
                    raise SignatureError(f"{where}: needs.{name}={str(v)[:40]!r}: allowed a non-empty list")
                v = tuple(v)
            else:
                raise SignatureError(
                    f"{where}: needs.{str(name)[:40]!r}: allowed {list(SWITCHES + BOUNDS + CHOICES + TAILS)}"
                )
            out.append((name, v))
        complete = d.get("variations_complete", True)
        if not isinstance(complete, bool):
            raise SignatureError(f"{where}: variations_complete {str(complete)[:40]!r}: allowed true or false")
        tried = d.get("variations_run", 0)
        if not isinstance(tried, int) or isinstance(tried, bool) or not 0 <= tried < 2**31:
            raise SignatureError(f"{where}: variations_run {str(tried)[:40]!r}: allowed an int >= 0")
        assumed = d.get("needs_assumed", [])
        if not isinstance(assumed, list) or not all(isinstance(n, str) and n in needs for n in assumed):
            raise SignatureError(f"{where}: needs_assumed {str(assumed)[:40]!r}: allowed a list of names among needs")
        history = d.get("history_dependent", False)
        if not isinstance(history, bool):
            raise SignatureError(f"{where}: history_dependent {str(history)[:40]!r}: allowed true or false")
        after = d.get("after", "")
        if not isinstance(after, str) or len(after) > MESSAGE_CHARS:
            raise SignatureError(
                f"{where}: after {str(after)[:40]!r}: allowed a string of at most {MESSAGE_CHARS} characters"
            )
        return cls(
            str(kind),
            tuple(sorted(gates)),
            err,
            tuple(sorted(out)),
            tried,
            message=message,
            complete=complete,
            assumed=tuple(sorted(set(assumed))),
            history=history,
            after=after,
        )


def _jsonable(v):
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    return v


def _need_text(name, v) -> str:
    if v is True:
        return name
    if name in BOUNDS:
        return f"{name}{v}"
    if name in TAILS:
        return f"{name[:-1]} not a multiple of {v}"
    return f"{name} in {{{','.join(str(x) for x in v)}}}" if len(v) > 1 else f"{name}={v[0]}"


def root_gates(case) -> list[str]:
    """The failing gates that name ``case``'s bug: the forward's (O, LSE) where one fails,
    else every failing gate."""
    failed = case.failed_gates
    forward = [g for g in failed if g.partition(":")[0] in FORWARD]
    return forward or failed


def gates_of(case) -> tuple[str, ...]:
    return (RUN,) if case.status == Status.ERROR else tuple(sorted(root_gates(case)))


def failure_of(case, gates=None) -> Signature:
    """``case``'s failure with no needs: its triage kind, its gates (default: the ones that name
    its bug), and for a kernel error the CUDA runtime error or exception type and the message's
    shape. ``fails_alike`` then says whether another case fails the same way: a signature's
    variations are judged by it, and so is a hunt's shrink (FA4 b25 on the H100, 2026-12-07: an
    empty sequence's ``cudaErrorInvalidValue`` shrank into a ``cudaErrorIllegalAddress`` at
    another head dim, both a ``CUDADialectError``, and was taken for that finding's bug)."""
    error = case.status == Status.ERROR
    return Signature(
        str(triage.classify(case)),
        tuple(sorted(gates)) if gates else gates_of(case),
        triage.failure_name(case) if error else "",
        message=message_shape(case.reason) if error else "",
    )


def derive(
    case,
    run,
    capability=None,
    *,
    gates=None,
    budget_calls: int = MAX_VARIATIONS,
    deadline=None,
    rerun=None,
    clean=None,
    hidden=None,
) -> Signature:
    """The signature of the failing ``case`` (its Problem shrunk already) about ``gates``
    (default: every gate it fails; a hunt passes the ones no earlier finding explains, so
    a Problem that also shows an earlier bug is not signed by that bug's needs).
    ``run(problem)`` returns the CaseResult of a Problem (run or replayed from what the
    campaign has seen); ``rerun(problem)`` runs it afresh (never replayed), to tell a steady
    failure of racing outputs from a flaky one; at most ``budget_calls`` variations and
    reruns run, none once ``deadline()``.

    ``clean()`` (a hunt on a kernel that runs in a worker process) starts the kernel's process
    afresh: a wrong result's switched-off variation that still fails is run once more after it,
    since what failed it may be the state the failing runs before it left (a kernel that writes
    out of bounds corrupts the memory of the cases after it). A need is then measured where it
    shows: cuDNN 9.19's d_qk 192 / d_v 104 wrong dQ signed "needs nothing found" in its nightly's
    process, while with equal head dims it passes alone.

    ``hidden(problem)``: True where a run would only raise another error already known to raise there
    (``SearchState.hidden_by_error``); such a variation is not run and counts as one that raised it."""
    gates = tuple(sorted(gates)) if gates else gates_of(case)
    error = case.status == Status.ERROR
    base = failure_of(case, gates)
    p = case.problem
    needs: list[tuple[str, Any]]  # (name, True | an int bound | a tuple of choices)
    needs, calls = [], 0
    cut: list[bool] = []  # [True] once a variation was wanted and the budget had ended
    # [True] while the last variation raised another error: it hid whether this failure was there (FA4
    # 4.0.0b25's predicate build error at most head dims: a GQA build error's head-dim neighbours raised
    # it, read as passes, and one bug at head dims 176-192 was signed twice with disjoint sets)
    masked: list[bool] = []

    # the gates a passing variation can speak for: those of an output that races (its
    # determinism gate fails: its wrong values may come and go) only where the output is gone
    racing = {g.partition(":")[0] for g in gates if g.endswith(RACY)}
    racy = set(gates) if base.kind in FLAKY else {g for g in gates if g.partition(":")[0] in racing}
    steady = set(gates) - racy
    confirmed: list[bool] = []  # [whether the shrunk Problem failed often enough afresh], once asked

    def spare() -> bool:
        if calls < budget_calls and not (deadline is not None and deadline()):
            return True
        cut[:] = [True]
        return False

    def fresh_fails(q, stop_at_fail: bool) -> int | None:
        """How many of ``RACE_CONFIRM`` fresh runs of ``q`` fail alike (stopping at the first
        failure if ``stop_at_fail``); None when the budget ends first."""
        nonlocal calls
        fails = 0
        for _ in range(RACE_CONFIRM):
            if not spare():
                return None
            calls += 1
            if base.fails_alike(rerun(q)):
                fails += 1
                if stop_at_fail:
                    break
        return fails

    def steady_after_all() -> bool:
        """A wrong result whose every output races, yet fails on most fresh runs."""
        if rerun is None or steady or base.kind in FLAKY:
            return False
        if not confirmed:
            confirmed.append((fresh_fails(p, stop_at_fail=False) or 0) >= RACE_MIN_FAILS)
        return confirmed[0]

    def still(q) -> bool | None:  # None: not a Problem here, out of budget, or (a race) inconclusive
        nonlocal calls
        masked[:] = []
        if not _valid(q, capability):
            return None
        if hidden is not None and hidden(q):  # another error raises there: as if run and raised, without a build
            masked[:] = [True]
            return None
        if not spare():
            return None
        calls += 1
        res = run(q)
        if base.fails_alike(res):
            return True
        if res.status == Status.SKIPPED:  # not judged (the device's memory ran out): no pass
            return None
        if res.status == Status.ERROR:  # another error: no verdict on this failure either way
            masked[:] = [True]
            return None
        labels = {v.label for v in res.verdicts}
        if not (steady & labels) and racy & labels:
            # only a race's output is left to fail, and it happened to agree this time: a pass
            # only where the failure is steady and the variation passes its fresh runs too
            if not steady_after_all():
                return None
            fails = fresh_fails(q, stop_at_fail=True)
            return None if fails is None else fails > 0
        return False

    # switches and choices the budget left unmeasured, held at p's value (bounds and tails are
    # not: they never tell two bugs apart, ``same_identity``, and would only cost re-hunts)
    assumed: list[str] = []

    def hold(name: str, value) -> None:
        needs.append((name, value))
        assumed.append(name)

    def clean_still(q) -> bool | None:
        """``still(q)``, a failure of a steady wrong result confirmed in a fresh process."""
        nonlocal calls
        got = still(q)
        if got is not True or clean is None or rerun is None or error or racy or not spare():
            return got
        calls += 1
        clean()
        return base.fails_alike(rerun(q))

    for name in SWITCHES:
        if _switch(p, name):
            got = clean_still(_switched_off(p, name))
            if got is False:
                needs.append((name, True))
            elif got is None and (cut or masked):
                hold(name, True)
    for name in BOUNDS:
        if _bound(p, name) > 1:
            step = capability.seqlen_multiple if capability is not None and "seqlen" in name else 1
            got = still(_lowered(p, name, step))
            if got is False:
                needs.append((name, _bound(p, name)))
    for name in TAILS:
        tails = [m for m in MULTIPLES if _has_tail(p, name, m)]
        top = None  # the largest multiple whose rounding is a Problem here, and its verdict
        for m in reversed(tails):
            got = still(_rounded_up(p, name, m))
            if got is not None:
                top = (m, got)
                break
        if top is None or top[1] is not False:  # still failing with whole blocks: not a tail's
            continue
        need = top[0]
        for m in tails:
            if m >= top[0]:
                break
            if still(_rounded_up(p, name, m)) is False:
                need = m
                break
        needs.append((name, need))
    for name in CHOICES:
        others = _others(capability, name, p)
        if not others:
            continue
        failing, tried, missed, hid = [_choice(p, name)], 0, False, False
        for v in others:
            got = still(_with_choice(p, name, v, capability))
            if got is None:
                missed, hid = missed or bool(cut), hid or bool(masked)
                continue
            tried += 1
            if got:
                failing.append(v)
        if tried and len(failing) <= tried:  # some other value passed: the choice matters
            needs.append((name, tuple(sorted(failing, key=str))))
        elif missed or (hid and not tried):  # the budget ended, or another error hid every other value:
            # only the failing ones are known (one other value failing alike says it is not a need)
            hold(name, tuple(sorted(failing, key=str)))
    return Signature(
        base.kind,
        base.gates,
        base.error_type,
        tuple(sorted(needs)),
        calls,
        base.message,
        complete=not cut,
        assumed=tuple(sorted(assumed)),
    )


def escapes(sig: Signature, p: Problem, capability=None) -> list[Problem]:
    """Problems next to ``p`` that ``sig`` does not explain: ``p`` with one need undone (a
    switch off, a bound one below, the lengths rounded up to the tail's multiple, another value
    of a choice). A hunt runs one of them instead of a drawn Problem a finding explains, so the
    draw's other features (the sinks of a Problem whose dK bug is known) are still searched."""
    out = []
    q: Problem | None
    for name, value in sig.needs:
        if name in SWITCHES:
            q = _switched_off(p, name)
        elif name in BOUNDS:
            q = _below(p, name, value)
        elif name in TAILS:
            q = _rounded_up(p, name, value)
        else:
            others = [v for v in _others(capability, name, p, limit=8) if v not in value]
            q = _with_choice(p, name, others[0], capability) if others else None
        if _valid(q, capability) and not sig.explains_problem(q):
            out.append(q)
    return out


def _below(p: Problem, name: str, bound: int) -> Problem | None:
    """``p`` with the bounded quantity just below ``bound`` (None: nothing lower is a Problem)."""
    if bound <= 1:
        return None
    if name == "batch>=":
        n = bound - 1
        if p.varlen:
            return p.replace(batch=n, seqlen_q=p.seqlen_q[:n], seqlen_k=p.seqlen_k[:n], pad_tail=p.pad_tail)  # type: ignore[index]  # varlen: tuples
        return p.replace(batch=n)
    if name == "heads_q>=":
        kv = max(1, (bound - 1) // p.group)
        return p.replace(heads_q=kv * p.group, heads_kv=kv) if kv * p.group < bound else None
    side = "seqlen_q" if name == "seqlen_q>=" else "seqlen_k"
    lens = getattr(p, side)
    if p.varlen:
        return p.replace(**{side: tuple(min(x, bound - 1) for x in lens)})
    return p.replace(**{side: min(lens, bound - 1)})


def explaining(signatures, case) -> list:
    """The signatures among ``signatures`` that explain ``case``."""
    return [s for s in signatures if s.explains(case)]


def unexplained_gates(signatures, case) -> set:
    """The failing gates of ``case`` that none of the signatures explaining it covers
    (a kernel error: its label when nothing explains it)."""
    sigs = explaining(signatures, case)
    if case.status == Status.ERROR:
        return set() if sigs else {RUN}
    covered = set().union(*(set(s.gates) for s in sigs)) if sigs else set()
    return set(root_gates(case)) - covered


def same_identity(
    a: Signature, b: Signature, problem_b: Problem | None = None, problem_a: Problem | None = None
) -> bool:
    """``b`` is ``a``'s bug: one finding per root cause. The same id; or the same failure (triage
    kind, exception type and message shape, where both records have one, and a gate in common)
    triggered the same way:

    - the same switches, whatever the choices: FA4's MLIRError on unequal head dims, signed
      at head dims {24,32}, {56,64} and {88,96}, is one bug, not three;
    - one's switches nested in the other's, and no choice both constrain disjoint: a fault on
      dK under a causal mask, met again on a causal Problem with sinks, is the same fault (no
      run can tell them apart).

    A gate in common includes one output failing its budget in one record and its determinism
    in the other (``_shared_failure``): a racing wrong value shows as either, depending on
    which run it corrupts (cuDNN 9.19 at d_qk > 128, H100 2026-12-06: ``dq:budget`` and
    ``dq:determinism``, both needing unequal head dims, came back as two findings).

    Not the same: switches neither nested (two triggers on one output: dK under a causal mask
    and dK with sinks), or nested with a choice both constrain disjoint. Lower bounds, tails
    and a choice only one of them constrains never separate two signatures: they are where a
    shrinker stopped and what made the fault visible there (a fault invisible at one key
    without sinks shrinks to two keys, with sinks to one; a 5% error hides inside float16's
    budget on a tiny Problem, so one sighting needs float32 and another, larger, does not).
    The shrunk Problems (``problem_a``, ``problem_b``) are accepted for callers that have them;
    the comparison needs only the two signatures."""
    if a.id == b.id:
        return True
    if a.history or b.history:  # needs never measured (``Signature.history``): one such bug per failure,
        # never one with a measured rule (a kernel corrupting its process fails the cases after it anywhere)
        return a.history and b.history and a.kind == b.kind and _shared_failure(a, b)
    if a.kind != b.kind or a.error_type != b.error_type or not _shared_failure(a, b):
        return False
    if a.message and b.message and a.message != b.message:
        return False
    if _held_apart(a, b) or _held_apart(b, a):
        return False
    # switches a cut signature only holds (``assumed``) are no trigger of its bug: measured ones are
    sa = {n for n, v in a.needs if n in SWITCHES and n not in a.assumed}
    sb = {n for n, v in b.needs if n in SWITCHES and n not in b.assumed}
    if sa == sb:
        return True
    if not (sa <= sb or sb <= sa):
        return False
    if _contradicted(a, b, problem_b) or _contradicted(b, a, problem_a):
        return False
    # nor does a choice only held: no variation said its other values pass
    ca = {n: set(v) for n, v in a.needs if n in CHOICES and n not in a.assumed}
    cb = {n: set(v) for n, v in b.needs if n in CHOICES and n not in b.assumed}
    return not any(ca[n].isdisjoint(cb[n]) for n in set(ca) & set(cb))


def one_bug(a: Signature, b: Signature, problem_a: Problem | None = None, problem_b: Problem | None = None) -> bool:
    """``same_identity`` either way round, for two findings neither of which came first (a
    hunt's end-of-run fold, the merge of shards, the CI gate's baseline and candidate);
    ``problem_a`` and ``problem_b``: the shrunk Problems each was signed at, where known."""
    return same_identity(a, b, problem_b, problem_a) or same_identity(b, a, problem_a, problem_b)


def device_fault_only(sig: Signature) -> bool:
    """``sig``'s failure is known by a CUDA error's name alone (its message shape is that name): one
    name is many causes' (FA4 4.0.0b25 on the H100, 2026-12-07: ``cudaErrorInvalidValue`` both for a
    backward on an empty key sequence and at dense head dims 88/176), so the name is no identity for
    a rule never measured."""
    return bool(sig.error_type) and sig.message == sig.error_type == triage.cuda_error_name(sig.error_type)


def _held_apart(a: Signature, b: Signature) -> bool:
    """Two records of one CUDA error name (``device_fault_only``), no switch measured by both,
    where ``a`` holds a switch, not measured, that ``b`` does not have at all: ``b``'s shrunk
    Problem failed without it, ``a``'s was never tried without it, so nothing but the name says
    they are one trigger. FA4 b25's merged nightly joined a
    cut ``cudaErrorInvalidValue`` signature at dense head dims with one holding an empty query
    sequence under varlen (both not measured), and the empty-sequence launch failure was lost in it."""
    if not (device_fault_only(a) and device_fault_only(b)):
        return False
    measured = {n for n, _ in a.needs if n in SWITCHES and n not in a.assumed}
    if measured & {n for n, _ in b.needs if n in SWITCHES and n not in b.assumed}:
        return False  # a trigger both measured ties them (two empty-key launch failures needing varlen)
    held = {n for n, _ in a.needs if n in SWITCHES and n in a.assumed}
    return bool(held - {n for n, _ in b.needs if n in SWITCHES})


def _contradicted(a: Signature, b: Signature, problem_b: Problem | None) -> bool:
    """A kernel error's signature ``a`` claims to fail where ``b``'s signing saw the same error
    go away: ``b`` needs a switch ``a`` does not, ``b``'s shrunk Problem with that switch off
    passed (that is how the need was found), and ``a``'s measured needs hold there. Two
    triggers of one exception and message, not one bug: FA4 b25's ``cudaErrorInvalidValue`` at
    dense head dims 192/232, its needs not measured, and the empty-sequence launch failure that
    needs varlen (b25 gave both one finding). Needs held only because the budget ran out
    (``assumed``) claim nothing; a wrong result is never split this way (a shrinker's stopping
    point can decide whether a fault shows, see ``same_identity``), nor a flaky kind."""
    if problem_b is None or not a.error_type or a.kind in FLAKY:
        return False
    switches_a = {n for n, _ in a.needs if n in SWITCHES}
    claims = [(n, v) for n, v in a.needs if n not in a.assumed]
    for name, _ in b.needs:
        if name not in SWITCHES or name in switches_a or name in b.assumed:
            continue
        q = _switched_off(problem_b, name)
        if _valid(q, None) and all(_holds(q, n, v) for n, v in claims):
            return True
    return False


def fold(items: list, one_bug, join) -> list:
    """``items`` with every later item that ``one_bug(earlier, later)`` calls the earlier's bug
    joined into it (``join(earlier, later)`` is the joined item), until no two are one bug: the
    order things were kept in never decides what ends up one finding (a hunt's findings, each
    signed against the rules of its moment; shards merged in any order)."""
    out = list(items)
    while True:
        pair = next(((i, j) for j in range(len(out)) for i in range(j) if one_bug(out[i], out[j])), None)
        if pair is None:
            return out
        i, j = pair
        out[i] = join(out[i], out.pop(j))


def _shared_failure(a: Signature, b: Signature) -> bool:
    """A gate in common, or an output one record fails by its determinism gate and the other by
    another of its gates (a race's wrong value, caught in the first run or in a rerun)."""
    if set(a.gates) & set(b.gates):
        return True
    racing = {g.partition(":")[0] for g in a.gates + b.gates if g.endswith(RACY)}
    outputs_a = {g.partition(":")[0] for g in a.gates}
    outputs_b = {g.partition(":")[0] for g in b.gates}
    return bool(outputs_a & outputs_b & racing)


WIDENED = ("head_dim_qk", "dtype", "align")  # choices a finding's Problem can be moved along
DROP_FROM = 8  # a choice of at least this many declared values is dropped once widened past half


def widening(sig: Signature, p: Problem, anchor: Problem, capability=None) -> tuple[Signature, Problem] | None:
    """Where ``p`` has every need of ``sig`` but one choice (its head dim, dtype or alignment
    is outside the set), that signature with ``p``'s value added, and the Problem that puts it
    to the test: ``anchor`` (the finding's shrunk Problem) moved to that value. If the moved
    Problem fails the same way, the finding's bug lives at the new value too: one run instead
    of a shrink and a signature's variations (a compile each on a JIT kernel), and one
    finding per root cause. None where ``p`` misses a switch, a bound, a tail or two choices,
    or the moved Problem is not one the capability covers. A choice of ``DROP_FROM`` values or
    more widened past half of them is dropped from the needs: a bug met at most head dims is
    not a head dim's."""
    missed = missed_needs(sig, p)
    if sig.history or len(missed) != 1 or missed[0][0] not in WIDENED:
        return None
    name, value = missed[0]
    x = _choice(p, name)
    # a head dim moves with the case's own head_dim_v: the pair failed there (the anchor's v with
    # the new qk can be another bug's corner: d_v below d_qk on FA4-like kernels)
    q = anchor.replace(head_dim_qk=x, head_dim_v=p.head_dim_v) if name == "head_dim_qk" else None
    if not _valid(q, capability):
        q = _with_choice(anchor, name, x, capability)
    if not _valid(q, capability) or _choice(q, name) != x:
        return None
    wider = tuple(sorted({*value, x}, key=str))
    declared = _declared(capability, name)
    if len(declared) >= DROP_FROM and 2 * len(wider) > len(declared):
        # met at most of the values the kernel takes: no longer a need (sdpa-flash's misaligned
        # address on the H100 was widened to 17 of 32 head dims, one sighting at a time); not
        # for a few values (float16 and bfloat16 but not float32 is a need)
        needs = tuple((n, v) for n, v in sig.needs if n != name)
    else:
        needs = tuple((n, wider) if n == name else (n, v) for n, v in sig.needs)
    wide = Signature(
        sig.kind, sig.gates, sig.error_type, needs, sig.tried + 1, sig.message, sig.complete, _held(sig.assumed, needs)
    )
    return wide, q


def _held(assumed, needs) -> tuple[str, ...]:
    """The names of ``assumed`` still among ``needs`` (a widened or merged rule)."""
    names = {n for n, _ in needs}
    return tuple(n for n in assumed if n in names)


def _declared(capability, name: str) -> tuple:
    """The values a capability takes for a widened choice (none known without a capability)."""
    if capability is None:
        return ()
    return {"head_dim_qk": capability.head_dims_qk, "dtype": capability.dtypes, "align": capability.aligns}[name]


def merged(a: Signature, b: Signature) -> Signature:
    """The smallest rule covering two signatures of one bug (``same_identity``): the switches
    both need, the choices both constrain with the values of either, the lower of two bounds,
    the coarser of two tails; a need only one of them has is dropped (the other shows the bug
    without it). Gates of either; variations of both."""
    na, nb = dict(a.needs), dict(b.needs)
    out: list[tuple[str, Any]] = []
    for name in set(na) & set(nb):
        va, vb = na[name], nb[name]
        if name in SWITCHES:
            out.append((name, True))
        elif name in BOUNDS:
            out.append((name, min(va, vb)))
        elif name in TAILS:
            if max(va, vb) % min(va, vb) == 0:
                out.append((name, max(va, vb)))
        else:
            out.append((name, tuple(sorted(set(va) | set(vb), key=str))))
    return Signature(
        a.kind,
        tuple(sorted(set(a.gates) | set(b.gates))),
        a.error_type,
        tuple(sorted(out)),
        a.tried + b.tried,
        a.message or b.message,
        a.complete and b.complete,
        _held(sorted(set(a.assumed) & set(b.assumed)), out),  # measured by either: measured
        a.history and b.history,  # one id: a fresh process failed it in either
        (a.after or b.after) if a.history and b.history else "",
    )


def absorbed(sig: Signature, p: Problem, capability=None) -> Signature | None:
    """A kernel error's signature widened to hold for ``p``, a case that raised the same
    exception with the same message shape outside its needs: the case itself shows that the
    needs it misses are not needed. A switch or a tail it misses is dropped, a bound lowered
    to its value, a choice takes its value (dropped past half of a choice of ``DROP_FROM`` or
    more, as ``widening``). None for a wrong result (a gate in common is no identity: two
    wrong-dQ bugs must not become one rule) or where ``p`` misses nothing. No run: the
    campaign's end, where a shard's budget left such cases unexplained (FA4 b25's
    misaligned-pointer error signed 'seqlen_q not a multiple of 8' and met again at 128)."""
    if not sig.error_type or not sig.message or device_fault_only(sig):
        return None  # a CUDA error's name alone: many causes' (a run decides: ``widening``, or a hunt)
    if not missed_needs(sig, p):
        return None
    needs = []
    for name, value in sig.needs:
        if not _holds(p, name, value):
            if name in SWITCHES or name in TAILS:
                continue
            if name in BOUNDS:
                value = _bound(p, name)
                if value <= 1:
                    continue
            else:
                value = tuple(sorted({*value, _choice(p, name)}, key=str))
                declared = _declared(capability, name) if name in WIDENED else ()
                if len(declared) >= DROP_FROM and 2 * len(value) > len(declared):
                    continue
        needs.append((name, value))
    return Signature(
        sig.kind,
        sig.gates,
        sig.error_type,
        tuple(needs),
        sig.tried,
        sig.message,
        sig.complete,
        _held(sig.assumed, needs),
    )


def widening_cost(sig: Signature, wider: Signature, p: Problem) -> tuple[int, int]:
    """How much ``sig`` widened into ``wider`` to hold ``p``: the needs it lost (a dropped switch
    claims far more problems than a lowered bound or a joined head dim), then the needs ``p``
    missed; of several findings a case fails alike, the cheapest widening absorbs it."""
    return len(sig.needs) - len(wider.needs), len(missed_needs(sig, p))


def cheapest_absorption(alike, p: Problem, capability=None):
    """Of ``alike``, (owner, index, signature) triples whose signature fails alike a kernel error
    at ``p``, the one that widens least to hold ``p`` (``absorbed``, ``widening_cost``; the first
    of equals) as (owner, index, widened signature); None where none widens. The campaign's end
    (findings) and merge (finding records) apply it to their own owners."""
    best = None
    for n, (owner, i, sig) in enumerate(alike):
        wider = absorbed(sig, p, capability)
        if wider is None:
            continue
        key = (widening_cost(sig, wider, p), n)
        if best is None or key < best[0]:
            best = (key, owner, i, wider)
    return None if best is None else best[1:]


# ---------------------------------------------------------------------------- known findings
MAX_KNOWN_BYTES = 64 * 2**20  # a --known file larger than this is refused
MAX_KNOWN_ENTRIES = 10_000


@dataclass
class Known:
    """A finding known from an earlier run: its signature (None for a failure-store entry,
    which holds only Problems: its signature is found when it is replayed), the Problems
    that showed it (replayed first), the kernel it belongs to, the file it came from."""

    signature: Signature | None
    problems: list
    kernel: str | None  # a kernel name or registry spec; None: every kernel of the run
    source: str


def _problem(d, where: str) -> Problem:
    try:
        return Problem.from_dict(d).validate() if isinstance(d, dict) else Problem.from_json(d)
    except (ValueError, TypeError, KeyError, ProblemError, RecursionError) as e:
        raise SignatureError(
            f"{where}: not a Problem ({str(e).splitlines()[0][:120] if str(e) else type(e).__name__})"
        ) from None


def _read(path) -> str:
    """The text of ``path``, read at most ``MAX_KNOWN_BYTES`` (an ``.xz`` decompressed as a stream)."""
    data = read_capped(path, MAX_KNOWN_BYTES, SignatureError, "report.json, findings.json or failure-store .jsonl")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SignatureError(f"{path}: not UTF-8 text (byte {e.start})") from None


def load_known(path) -> list[Known]:
    """The known findings in ``path``: a report.json or a findings.json written by
    ``difftest run`` (each campaign's ``findings``, or its one ``failure`` in a report
    written before findings had signatures), a failure-store file
    (``difftest-failures/<spec>.jsonl``, one Problem a line) or a database folder holding
    one. Anything else raises SignatureError naming the file and what is wrong (one line)."""
    path = Path(path)
    if path.is_dir():
        store = path / FOLDER if (path / FOLDER).is_dir() else path
        files = sorted(store.glob("*.jsonl"))
        if not files:
            raise SignatureError(
                f"{path}: a folder without failure-store files (*.jsonl): allowed a report.json, "
                f"a findings.json, a failure-store .jsonl or its database folder"
            )
        return [k for f in files for k in load_known(f)]
    text = _read(path)
    if path.suffix == ".jsonl":
        problems = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                problems.append(_problem(line, f"{path}:{i}"))
            if len(problems) > MAX_KNOWN_ENTRIES:
                raise SignatureError(f"{path}: more than {MAX_KNOWN_ENTRIES} problems")
        return [Known(None, [p], path.stem, str(path)) for p in dict.fromkeys(problems)]

    doc = parse_json(text, str(path), SignatureError)  # depth, huge integers, lone surrogates: one line
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("campaigns"), list)
        or not ("difftest_report" in doc or "difftest_findings" in doc)
    ):
        raise SignatureError(
            f"{path}: not a difftest report or findings file (no 'campaigns' list): allowed a "
            f"report.json, a findings.json or a failure-store .jsonl"
        )
    out = []
    for i, c in enumerate(doc["campaigns"]):
        where = f"{path}: campaigns[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("kernel"), str):
            raise SignatureError(f"{where}: allowed an object with a 'kernel' string")
        spec = (c.get("settings") or {}).get("spec") if isinstance(c.get("settings"), dict) else None
        kernel = spec if isinstance(spec, str) and spec else c["kernel"]
        findings = c.get("findings")
        if findings is None:  # a report written before findings: its one shrunk failure
            if isinstance(c.get("failure"), dict):
                out.append(Known(None, [_problem(c["failure"].get("problem"), f"{where}.failure")], kernel, str(path)))
            continue
        if not isinstance(findings, list) or len(findings) > MAX_KNOWN_ENTRIES:
            raise SignatureError(f"{where}.findings: allowed a list of findings")
        for j, f in enumerate(findings):
            w = f"{where}.findings[{j}]"
            if not isinstance(f, dict):
                raise SignatureError(f"{w}: allowed an object with a signature")
            sig = Signature.from_dict(f.get("signature"), f"{w}.signature")
            probs = []
            if f.get("failure") is not None:
                if not isinstance(f["failure"], dict):
                    raise SignatureError(f"{w}.failure: allowed a case record")
                probs.append(_problem(f["failure"].get("problem"), f"{w}.failure.problem"))
            out.append(Known(sig, probs, kernel, str(path)))
    return out


def known_for(entries, kernel) -> list[Known]:
    """The entries that belong to ``kernel`` (an adapter): by registry spec, name, or for a
    failure-store file by its file name (the spec made safe)."""
    spec = getattr(kernel, "spec", None) or kernel.name
    names = {spec, kernel.name, safe_name(spec), safe_name(kernel.name)}
    return [k for k in entries if k.kernel is None or k.kernel in names]
