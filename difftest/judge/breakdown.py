"""Where an output is wrong: its error broken down by head, by sequence and by query or
key tile, so a failure names its cause (a GQA head-map bug shows heads 1 and 2 wrong and
0 and 3 right; a tail bug shows only the last tile of each sequence wrong).

``breakdown(problem, name, got, truth, limit, block)`` is a pure function of one output:
per element the error is |got - truth| (an infinity where exactly one side is non-finite,
or both are but differ; 0 where both hold the same non-finite value), over the rows that
belong to sequences (unused tail rows are never judged). Each axis lists the largest
error per index and which indices exceed ``limit`` (the budget gate's limit). Query-side
outputs (o, lse, dq) are tiled by ``block_m`` query rows, key-side ones (dk, dv) by
``block_n`` key rows, counted from the start of each sequence, as a kernel tiles them.

``attach(problem, got, truth, verdicts, capability)`` is the runner's hook: for every
output with a failed verdict it stores the breakdown under ``numbers["breakdown"]`` of
that output's first failed verdict and adds one line to its message.
"""

import torch

from difftest.judge.gates import prepared

QUERY_SIDE = ("o", "lse", "dq")


def _errors(problem, name, got, truth) -> torch.Tensor:
    dev = truth.device
    g, t = prepared(problem, name, got, dev), prepared(problem, name, truth, dev)
    gf, tf = torch.isfinite(g), torch.isfinite(t)
    err = torch.where(gf & tf, (g - t).abs(), torch.zeros_like(g))
    same = (g == t) | (torch.isnan(g) & torch.isnan(t))  # equal infinities, or NaN for NaN
    return torch.where(~(gf & tf) & ~same, torch.full_like(g, float("inf")), err)


def _axis(per_index: torch.Tensor, limit: float, labels=None) -> dict:
    vals = [float(x) for x in per_index.tolist()]
    labels = list(range(len(vals))) if labels is None else labels
    return {
        "index": labels,
        "max_err": vals,
        "wrong": [i for i, v in zip(labels, vals) if v > limit],
        "right": [i for i, v in zip(labels, vals) if v <= limit],
    }


def breakdown(problem, name: str, got: torch.Tensor, truth: torch.Tensor, limit: float, block: int = 64) -> dict:
    """{"limit", "head": axis, "sequence": axis, "tile": axis, "tile_rows": block,
    "tile_side": "query"|"key"}; an axis is {"index", "max_err", "wrong", "right"}
    (dsink has the head axis only; a sequence without rows is left out)."""
    err = _errors(problem, name, got, truth)
    out: dict[str, object] = {"limit": float(limit)}
    if name == "dsink":
        out["head"] = _axis(err, limit)
        return out
    per_row_head = err.amax(dim=-1) if err.dim() == 3 else err  # [rows, heads]
    if per_row_head.numel() == 0:
        return out
    out["head"] = _axis(per_row_head.amax(dim=0), limit)
    per_row = per_row_head.amax(dim=1)
    cu = problem.cu_seqlens_q if name in QUERY_SIDE else problem.cu_seqlens_k
    seqs = [b for b in range(problem.batch) if cu[b + 1] > cu[b]]
    out["sequence"] = _axis(torch.stack([per_row[cu[b] : cu[b + 1]].max() for b in seqs]), limit, seqs)
    tile = torch.cat([torch.arange(cu[b + 1] - cu[b]) // block for b in seqs]).to(per_row.device)
    n_tiles = int(tile.max()) + 1
    per_tile = torch.full((n_tiles,), float("-inf"), dtype=per_row.dtype, device=per_row.device)
    per_tile = per_tile.scatter_reduce(0, tile, per_row, reduce="amax")
    out["tile"] = _axis(per_tile, limit)
    out["tile_rows"], out["tile_side"] = block, "query" if name in QUERY_SIDE else "key"
    return out


def _list(xs) -> str:
    return ",".join(map(str, xs)) if xs else "none"


def render(b: dict) -> str:
    """One line: 'by head: wrong 1,2, right 0,3; by sequence: wrong 0 (of 1); ...' (axes with
    a single index are left out: they tell nothing)."""
    parts = []
    for axis, label in (
        ("head", "head"),
        ("sequence", "sequence"),
        ("tile", f"{b.get('tile_side', 'query')} tile of {b.get('tile_rows', '?')} rows"),
    ):
        a = b.get(axis)
        if not a or len(a["index"]) < 2:
            continue
        if not a["wrong"]:
            parts.append(f"by {label}: none over the limit alone")
        elif not a["right"]:
            parts.append(f"by {label}: all {len(a['index'])} wrong")
        else:
            parts.append(f"by {label}: wrong {_list(a['wrong'])}, right {_list(a['right'])}")
    return "; ".join(parts)


def attach(problem, got, truth, verdicts, capability) -> None:
    """Annotate the first failed verdict of each failing output (never fails a case)."""
    limits = {v.output: v.numbers.get("limit") for v in verdicts if v.gate == "budget"}
    done = set()
    for v in verdicts:
        if v.passed or v.output in done or v.output not in limits or limits[v.output] is None:
            continue
        g, t = got.get(v.output), truth.get(v.output)
        if g is None or t is None or tuple(g.shape) != tuple(t.shape):
            continue
        done.add(v.output)
        block = capability.block_m if v.output in QUERY_SIDE else capability.block_n
        try:
            b = breakdown(problem, v.output, g, t, limits[v.output], block)
        except Exception as e:  # a diagnostic never ends a case
            v.message += f"\n    (breakdown failed: {type(e).__name__}: {e})"
            continue
        v.numbers["breakdown"] = b
        text = render(b)
        if text:
            v.message += f"\n    {v.output} {text}"
