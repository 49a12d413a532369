"""Sparse attention masks: block-sparse masks and top-k selections.

A ``Sparsity`` is one more mask on top of the Problem's causal/window rule: query i of a
sequence sees key j iff the causal/window rule allows it AND the key block j // block_k is
selected for the query block i // block_q. Two kinds, as the kernels take them:

- ``"block"``: a block-sparse mask over (query block, key block) pairs at the kernel's block
  size (FlexAttention's ``BlockMask``, 128 x 128 by default; FlashAttention-4's block
  sparsity tiles). Each pair is kept or not; ``drop`` percent of the pairs are left out.
- ``"topk"``: per query block (block_q = 1: per query token, as DeepSeek sparse attention and
  native sparse attention select), ``topk`` slots of key-block indices (block_k = 1: key
  tokens). A slot may be *invalid* (-1, or an index >= the number of key blocks: selects
  nothing, FlashMLA's sparse convention) or a *duplicate* of an earlier slot of its row. The
  selected set is the set of valid indices: **a duplicate counts once**. A kernel that gathers
  the selected keys and softmaxes over the gathered list counts a twice-selected key twice
  (its logit gains log 2): that is a bug under this semantic, not another convention. The
  float64 truth, the yardsticks and the edge rows all take the set.

Rows with nothing selected (``empty`` query blocks, every slot invalid, or every kept block
masked by causal/window) follow the Problem's convention for a row that sees no key:
LSE = -inf, O = 0, zero gradients (with sinks: the sink alone).

The pattern is never stored: it is derived, deterministically on any machine, from the
Sparsity's fields and the sequence's (seqlen_q, seqlen_k) (``block_pattern``,
``topk_slots``), so a reproducer stays a small JSON object and shrinking walks the fields:
``drop`` toward 0 (every block kept: the dense pattern), ``empty`` toward 0, ``topk`` toward 1,
``invalid`` and ``dup`` toward 0, ``seed`` toward 0. One pattern per sequence shape: the mask
is shared by every head (as FlexAttention's BlockMask with H=1 and DeepSeek's top-k indices
with one KV head are) and by sequences of equal lengths.
"""

import dataclasses
import functools
import json
import random
from dataclasses import dataclass
from typing import Any

from difftest.errors import InputError

SPARSITY_KINDS = ("block", "topk")
MAX_SPARSE_BLOCK = 4096
MAX_TOPK = 4096
PERCENT_FIELDS = ("drop", "invalid", "dup")


class SparsityError(InputError):
    """A Sparsity field holds a value outside what is allowed (``field``, ``value``, ``expected``)."""

    def __init__(self, field_name: str, value: Any, expected: str):
        self.field, self.value, self.expected = field_name, value, expected
        super().__init__(f"sparsity.{field_name}={value!r}: allowed {expected}")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class Sparsity:
    """A block-sparse mask or a top-k selection, derived from these fields (module docstring)."""

    kind: str = "block"
    block_q: int = 128  # query rows per mask block (topk: 1 selects per query token)
    block_k: int = 128  # keys per mask block (topk: 1 selects key tokens)
    drop: int = 0  # block: percent of (query block, key block) pairs left out (0: all kept)
    empty: int = 0  # query blocks forced to select nothing (both kinds)
    topk: int = 0  # topk: slots per query block
    invalid: int = 0  # topk: percent of slots invalid (-1, or >= the number of key blocks)
    dup: int = 0  # topk: percent of slots repeating an earlier slot of the row
    seed: int = 0

    def check(self) -> "Sparsity":
        """Raise SparsityError naming the first bad field; return self."""
        if self.kind not in SPARSITY_KINDS:
            raise SparsityError("kind", self.kind, f"one of {SPARSITY_KINDS}")
        for name in ("block_q", "block_k"):
            v = getattr(self, name)
            if not _is_int(v) or not 1 <= v <= MAX_SPARSE_BLOCK:
                raise SparsityError(name, v, f"an int in 1..{MAX_SPARSE_BLOCK}")
        for name in PERCENT_FIELDS:
            v = getattr(self, name)
            if not _is_int(v) or not 0 <= v <= 100:
                raise SparsityError(name, v, "an int percentage in 0..100")
        if not _is_int(self.empty) or not 0 <= self.empty <= 2**31:
            raise SparsityError("empty", self.empty, "an int >= 0")
        if not _is_int(self.seed) or not 0 <= self.seed < 2**63:
            raise SparsityError("seed", self.seed, "an int in 0..2**63-1")
        if self.kind == "topk":
            if not _is_int(self.topk) or not 1 <= self.topk <= MAX_TOPK:
                raise SparsityError("topk", self.topk, f"an int in 1..{MAX_TOPK} for kind 'topk'")
            if self.drop:
                raise SparsityError("drop", self.drop, "0 for kind 'topk' (invalid and dup shape its rows)")
            if self.invalid + self.dup > 100:
                raise SparsityError("dup", self.dup, f"at most {100 - self.invalid} (invalid + dup <= 100)")
        elif self.topk or self.invalid or self.dup:
            name = "topk" if self.topk else "invalid" if self.invalid else "dup"
            raise SparsityError(name, getattr(self, name), "0 for kind 'block' (top-k fields)")
        return self

    # ------------------------------------------------------------------ the pattern
    def blocks(self, sq: int, sk: int) -> tuple[int, int]:
        """(query blocks, key blocks) of a (sq, sk) sequence, the last of each possibly partial."""
        return -(-sq // self.block_q), -(-sk // self.block_k)

    def _rng(self, sq: int, sk: int) -> random.Random:
        # a str seed is hashed with SHA-512: the same stream on every machine and Python >= 3.2
        return random.Random(f"difftest-sparsity:{self.kind}:{self.seed}:{sq}:{sk}")

    def _empty_rows(self, rng: random.Random, nq: int) -> set[int]:
        return set(rng.sample(range(nq), min(self.empty, nq)))

    def block_pattern(self, sq: int, sk: int) -> tuple[tuple[bool, ...], ...]:
        """kind 'block': [query block][key block] kept, for a (sq, sk) sequence."""
        return _block_pattern(self, sq, sk)

    def topk_slots(self, sq: int, sk: int) -> tuple[tuple[int, ...], ...]:
        """kind 'topk': [query block][slot] key-block index as a kernel receives it: valid ones
        in 0..nk-1, invalid ones -1 or >= nk, duplicates repeating an earlier slot."""
        return _topk_slots(self, sq, sk)

    def _block_pattern(self, sq: int, sk: int):
        nq, nk = self.blocks(sq, sk)
        rng = self._rng(sq, sk)
        empty = self._empty_rows(rng, nq)
        rows = []
        for qb in range(nq):
            row = [rng.random() * 100 >= self.drop for _ in range(nk)]
            rows.append((False,) * nk if qb in empty else tuple(row))
        return tuple(rows)

    def _topk_slots(self, sq: int, sk: int):
        nq, nk = self.blocks(sq, sk)
        rng = self._rng(sq, sk)
        empty = self._empty_rows(rng, nq)
        rows = []
        for qb in range(nq):
            # distinct valid indices first (a sample: O(topk), not O(key blocks)); more slots
            # than key blocks repeat them
            order = rng.sample(range(nk), min(nk, self.topk)) if nk else []
            row, fresh = [], 0
            for s in range(self.topk):
                r = rng.random() * 100
                if qb in empty or nk == 0 or r < self.invalid:
                    row.append(rng.choice((-1, nk)))
                elif r < self.invalid + self.dup and row:
                    row.append(row[rng.randrange(len(row))])
                else:
                    row.append(order[fresh % len(order)])
                    fresh += 1
            rows.append(tuple(row))
        return tuple(rows)

    def counts(self, sq: int, sk: int):
        """[query blocks, key blocks] torch int64: how many times each block is selected (a
        block mask's 0/1; a top-k row's count of slots naming it, invalid slots none)."""
        return _counts(self, sq, sk)

    def selected(self, sq: int, sk: int) -> list[list[bool]]:
        """[query block][key block] selected: the block pattern, or each top-k row's set of
        valid indices (a duplicate counts once)."""
        return (self.counts(sq, sk) > 0).tolist()

    def allowed(self, sq: int, sk: int, device="cpu", rows: tuple[int, int] | None = None):
        """[rows, sk] torch bool: query i's key block is selected (the sparsity alone, no
        causal/window), for query rows r0..r1-1 (all without ``rows``)."""
        import torch  # lazy: keeps torch off --help (model/problem.py imports this module)

        r0, r1 = rows if rows is not None else (0, sq)
        sel = self.counts(sq, sk) > 0
        qb = torch.arange(r0, r1, device=sel.device) // self.block_q  # on the host, whatever the default device
        kb = torch.arange(sk, device=sel.device) // self.block_k
        return sel[qb][:, kb].to(device)

    def multiplicity(self, sq: int, sk: int) -> list[list[int]]:
        """kind 'topk': [query block][key block] how many slots name it (what a kernel that
        does not deduplicate weighs it by); kind 'block': 0/1."""
        return self.counts(sq, sk).tolist()

    def _counts(self, sq: int, sk: int):
        import torch  # lazy: keeps torch off --help (model/problem.py imports this module)

        nq, nk = self.blocks(sq, sk)
        if self.kind == "block":
            return torch.tensor(self.block_pattern(sq, sk), dtype=torch.int64).reshape(nq, nk)
        slots = torch.tensor(self.topk_slots(sq, sk), dtype=torch.int64).reshape(nq, self.topk)
        slots = torch.where((slots >= 0) & (slots < nk), slots, nk)  # invalid slots: one extra column
        cell = slots + torch.arange(nq).view(nq, 1) * (nk + 1)  # each slot's (row, block) cell, flat
        return torch.bincount(cell.flatten(), minlength=nq * (nk + 1)).view(nq, nk + 1)[:, :nk]

    # ------------------------------------------------------------------ shrinking, JSON
    def complexity(self) -> tuple:
        """Smaller is simpler: block before topk, fewer empty rows, nothing dropped, fewer
        slots, no invalid or duplicate slot, seed 0."""
        return (
            SPARSITY_KINDS.index(self.kind) + 1,
            self.empty,
            self.drop,
            self.topk,
            self.invalid,
            self.dup,
            self.seed,
        )

    def simpler(self):
        """Simpler Sparsities than this one (not yet checked against a Problem)."""
        for name, to in (("empty", 0), ("drop", 0), ("invalid", 0), ("dup", 0), ("seed", 0)):
            if getattr(self, name) != to:
                yield dataclasses.replace(self, **{name: to})
        if self.kind == "topk" and self.topk > 1:
            yield dataclasses.replace(self, topk=1)
            yield dataclasses.replace(self, topk=self.topk // 2)
        if self.empty > 1:
            yield dataclasses.replace(self, empty=1)
        if self.drop > 1:
            yield dataclasses.replace(self, drop=self.drop // 2)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    def short(self) -> str:
        base = f"{self.kind}{self.block_q}x{self.block_k}"
        if self.kind == "topk":
            base += (
                f"-k{self.topk}"
                + (f"-inv{self.invalid}" if self.invalid else "")
                + (f"-dup{self.dup}" if self.dup else "")
            )
        elif self.drop:
            base += f"-drop{self.drop}"
        return base + (f"-empty{self.empty}" if self.empty else "") + f"@{self.seed}"

    @classmethod
    def coerce(cls, x) -> "Sparsity":
        """A Sparsity, or its JSON dict; SparsityError on anything else."""
        if isinstance(x, cls):
            return x
        if isinstance(x, str):
            try:
                x = json.loads(x)
            except ValueError:
                raise SparsityError("kind", x, "a Sparsity or its JSON object") from None
        if not isinstance(x, dict):
            raise SparsityError("kind", x, "a Sparsity or its JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(x) - known)
        if unknown:
            raise SparsityError(unknown[0], x[unknown[0]], f"known fields only: {sorted(known)}")
        return cls(**x)


# the patterns of the sequence shapes in use (a campaign's case meets a few; tile loops ask often)
@functools.lru_cache(maxsize=256)
def _block_pattern(sp: Sparsity, sq: int, sk: int):
    return sp._block_pattern(sq, sk)


@functools.lru_cache(maxsize=256)
def _topk_slots(sp: Sparsity, sq: int, sk: int):
    return sp._topk_slots(sq, sk)


@functools.lru_cache(maxsize=64)
def _counts(sp: Sparsity, sq: int, sk: int):
    return sp._counts(sq, sk)
