"""Captured activations: difftest.capture records a small trained transformer's attention
calls, whose q/k are measurably non-Gaussian; --values-from draws windows of them that a
correct kernel passes; a reproducer of a small window embeds it and replays without the
file; a hostile file is refused with one line and exit code 2."""

import json
import math
import struct

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings

import difftest
from difftest.commands.cli import main
from difftest.kernels.blockwise import CAPABILITY
from difftest.model.capture import CaptureError, open_capture
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem, ProblemError
from difftest.search.shrinking import complexity, neighbours
from difftest.strategies.values import captured_problems

safetensors = pytest.importorskip("safetensors")

D, H, T, VOCAB = 32, 4, 24, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(T, D) * 0.1)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
        self.head = nn.Linear(D, VOCAB)

    def forward(self, tokens):
        x = self.emb(tokens) + self.pos[: tokens.shape[1]]
        for _ in range(2):
            B, L, _ = x.shape
            q, k, v = self.qkv(x).view(B, L, 3, H, D // H).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, L, D))
            x = x + self.mlp(x)
        return self.head(x)


def _batch(g, n=8):
    """Repeated-text sequences: a random phrase of 6 tokens repeated (next-token prediction
    of a repeat is learnable by attention to the earlier copy)."""
    phrase = torch.randint(0, VOCAB, (n, 6), generator=g)
    seq = phrase.repeat(1, T // 6 + 2)[:, : T + 1]
    return seq[:, :-1], seq[:, 1:]


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Block()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for step in range(40):  # a few dozen steps: attention learns to look back at the repeat
        x, y = _batch(g)
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    path = tmp_path_factory.mktemp("cap") / "acts.safetensors"
    x, y = _batch(g, 4)
    with difftest.capture(path) as rec:
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
    assert loss.item() < first  # it trained
    return path, rec


def _kurtosis(x):
    x = x.double().flatten()
    x = x - x.mean()
    return (x.pow(4).mean() / x.pow(2).mean().pow(2)).item() - 3.0


def _effective_rank(x):
    """Participation ratio of the singular values of [tokens, dim] (dim for white noise)."""
    s = torch.linalg.svdvals(x.double() - x.double().mean(0))
    return (s.sum() ** 2 / (s**2).sum()).item()


def test_capture_records_every_call_forward_and_backward(captured):
    path, rec = captured
    assert len(rec.calls) == 2 and rec.skipped == 0
    cap = open_capture(path)
    assert [c.index for c in cap.calls] == [0, 1]
    c = cap.calls[0]
    assert c.extents == (4, H, H, T, T, 8, 8)
    assert c.causal and c.has_do and c.dtype == "F32" and math.isclose(c.scale, 1 / math.sqrt(8))
    assert torch.equal(cap.tensor("c0.q"), rec.calls[0]["q"])
    assert torch.equal(cap.tensor("c1.do"), rec.calls[1]["do"])
    assert rec.calls[1]["do"].abs().sum() > 0


def test_captured_activations_are_not_gaussian(captured):
    """What makes a capture worth having, measured: per head, q/k rows of low effective rank
    or heavy tails, where Gaussian rows of the same shape have neither."""
    cap = open_capture(captured[0])
    q, k = cap.tensor("c1.q"), cap.tensor("c1.k")  # [B, H, T, 8]
    ranks = [_effective_rank(t[:, h].reshape(-1, 8)) for t in (q, k) for h in range(H)]
    gauss = [_effective_rank(torch.randn(4 * T, 8, generator=torch.Generator().manual_seed(h))) for h in range(8)]
    kurt = max(_kurtosis(t[:, h]) for t in (q, k) for h in range(H))
    print(
        f"\neffective rank per head (of 8): captured {min(ranks):.2f}..{max(ranks):.2f}, "
        f"gaussian {min(gauss):.2f}..{max(gauss):.2f}; largest excess kurtosis {kurt:.2f}"
    )
    assert min(ranks) < min(gauss) - 1.0 or kurt > 1.0


def test_values_from_windows_match_the_capture_and_shrink_toward_smaller_windows(captured):
    cap = open_capture(captured[0])
    seen = []

    @settings(max_examples=25, database=None, deadline=None)
    @given(captured_problems(cap, CAPABILITY, "ci"))
    def check(p):
        x = make_inputs(p)
        s = p.capture
        g = p.group
        ref = cap.tensor(f"c{s.call}.q")[
            s.b0 : s.b0 + p.batch, s.h0 * g : (s.h0 + p.heads_kv) * g, s.q0 : s.q0 + p.seqlen_q
        ]
        got = x.bshd("q").transpose(1, 2)
        assert torch.equal(got.float(), ref.to(got.dtype).float())
        kref = cap.tensor(f"c{s.call}.k")[s.b0 : s.b0 + p.batch, s.h0 : s.h0 + p.heads_kv, s.k0 : s.k0 + p.seqlen_k]
        assert torch.equal(x.bshd("k").transpose(1, 2).float(), kref.to(got.dtype).float())
        seen.append(p)
        for n in neighbours(p, CAPABILITY):  # shrinking keeps the window's start and shrinks it
            try:
                n.validate()
            except ProblemError:
                continue
            assert n.values == "captured" and (n.capture.b0, n.capture.h0, n.capture.q0, n.capture.k0) == (
                s.b0,
                s.h0,
                s.q0,
                s.k0,
            )
            if complexity(n) < complexity(p):  # what the shrinker accepts: never a larger window
                assert n.seqlen_q + n.seqlen_k <= p.seqlen_q + p.seqlen_k and n.batch <= p.batch

    check()
    assert {p.dtype for p in seen} > {"float32"}  # other dtypes too, the call's own first
    big = Problem.from_json(seen[0].to_json())
    with pytest.raises(ProblemError, match="head dims"):
        big.replace(head_dim_qk=4, head_dim_v=4).validate()
    with pytest.raises(ProblemError, match="token windows"):
        big.replace(seqlen_q=T + 1).validate()


def test_small_window_json_embeds_it_and_replays_without_the_file(captured, tmp_path):
    import shutil

    src = tmp_path / "copy.safetensors"
    shutil.copy(captured[0], src)
    cap = open_capture(src)
    c = cap.calls[0]
    from difftest.model.capture import CaptureSlice

    sl = CaptureSlice(cap.path, cap.sha256, 0, c.extents, c.dtype, True, 1, 1, 3, 2)
    p = Problem(seqlen_q=4, seqlen_k=5, head_dim_qk=8, head_dim_v=8, values="captured", capture=sl).validate()
    before = make_inputs(p).digest()
    d = json.loads(p.to_json())
    assert "data" in d["capture"]
    src.unlink()
    again = Problem.from_json(json.dumps(d))
    assert make_inputs(again).digest() == before
    with pytest.raises(CaptureError):  # a larger window needs the (now missing) file
        make_inputs(again.replace(seqlen_q=5))
    del d["capture"]["data"]["do"]  # an embedded window missing a part is not used: the file is
    with pytest.raises(CaptureError):
        make_inputs(Problem.from_json(json.dumps(d)))
    # a Problem without a capture writes no capture key: older JSON and readers see no change
    assert "capture" not in Problem().to_dict()


def test_cli_values_from_runs_a_campaign_on_the_capture(captured, tmp_path):
    out = tmp_path / "out"
    rc = main(
        [
            "run",
            "-k",
            "torch-blockwise",
            "--values-from",
            str(captured[0]),
            "--max-examples",
            "6",
            "--no-isolate",
            "--db",
            "none",
            "--out",
            str(out),
            "-q",
            "--seed",
            "3",
        ]
    )
    assert rc == 0
    cases = [json.loads(line) for line in (next((out / "runs").iterdir()) / "torch-blockwise.cases.jsonl").open()]
    drawn = [c["problem"] for c in cases if c.get("problem")]
    assert drawn and all(p["values"] == "captured" for p in drawn)


# ------------------------------------------------------------------ hostile files
def _file(tmp_path, header: dict | bytes, data: bytes = b"", size: int | None = None):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw) if size is None else size) + raw + data)
    return path


def _raw(tmp_path, data: bytes):
    path = tmp_path / "raw.safetensors"
    path.write_bytes(data)
    return path


META = {
    "difftest.capture": json.dumps(
        {"version": 1, "calls": [{"q": "q", "k": "k", "v": "v", "causal": False, "scale": 0.5}]}
    )
}


def _header(**over):
    h = {
        "__metadata__": META,
        "q": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]},
        "k": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [16, 32]},
        "v": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [32, 48]},
    }
    h.update(over)
    return h


GOOD = struct.pack("<12f", *range(12))
HOSTILE = {
    "short": (lambda t: _raw(t, b"abc"), "shorter than the 8-byte"),
    "header_size": (lambda t: _file(t, _header(), GOOD, size=2**60), "header size"),
    "not_json": (lambda t: _file(t, b"{not json", GOOD), "not JSON"),
    "dtype": (
        lambda t: _file(t, _header(q={"dtype": "I64", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]}), GOOD),
        "dtype",
    ),
    "bytes_for_shape": (
        lambda t: _file(t, _header(q={"dtype": "F32", "shape": [1, 1, 4, 2], "data_offsets": [0, 16]}), GOOD),
        "bytes for shape",
    ),
    "offsets": (
        lambda t: _file(t, _header(v={"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [40, 56]}), GOOD),
        "outside",
    ),
    "overlap": (
        lambda t: _file(t, _header(k={"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [8, 24]}), GOOD),
        "overlap",
    ),
    "no_metadata": (lambda t: _file(t, {k: v for k, v in _header().items() if k != "__metadata__"}, GOOD), "metadata"),
    "call_shapes": (
        lambda t: _file(t, _header(k={"dtype": "F32", "shape": [1, 1, 1, 4], "data_offsets": [16, 32]}), GOOD),
        "shapes",
    ),
    "nan": (lambda t: _file(t, _header(), struct.pack("<12f", *([float("nan")] + list(range(11))))), "non-finite"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_capture_files_are_refused_in_one_line_with_exit_2(case, tmp_path, capsys):
    make, why = HOSTILE[case]
    path = make(tmp_path)
    with pytest.raises(CaptureError, match=why):
        open_capture(path)
    rc = main(
        ["run", "-k", "torch-blockwise", "--values-from", str(path), "--out", str(tmp_path / "o"), "--no-isolate"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--values-from" in err[0], err


def test_a_well_formed_handwritten_file_is_read_without_the_package(tmp_path):
    cap = open_capture(_file(tmp_path, _header(), GOOD))
    assert cap.calls[0].extents == (1, 1, 1, 2, 2, 2, 2) and not cap.calls[0].has_do
    assert cap.tensor("v").flatten().tolist() == list(map(float, range(8, 12)))
