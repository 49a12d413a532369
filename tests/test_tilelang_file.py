"""``tilelang-file``: a TileLang kernel module loaded from a path the user gives at run time
(e.g. TileLang's example_gqa_bwd.py). On CPU: the path resolves (or is refused in one
line), the file's interface is checked without running it, the capability is the example's
contract, the per-shape arguments follow the example's own wrapper, and a file-path spec
read from a reproducer counts as an import spec (``difftest repro`` refuses it without
--allow-import). The real kernel only runs on a GPU."""

import json

import pytest

from difftest import Problem
from difftest.execute import adapter as registry
from difftest.execute.adapter import KernelSpecError, is_import_spec
from difftest.kernels import tilelang_file as tf
from difftest.strategies import edge_problems

SIGS = {
    "flashattn_fwd": "batch, heads, seq_len, dim_qk, dim_v, is_causal, block_M, block_N, groups=1",
    "flashattn_bwd_preprocess": "batch, heads, seq_len, dim_v",
    "flashattn_bwd": "batch, heads, seq_len, dim_qk, dim_v, is_causal, block_M, block_N, groups=1",
    "flashattn_bwd_postprocess": "batch, heads, seq_len, dim_qk",
}


def kernel_file(tmp_path, skip=None, marker=None, **sigs):
    """A file with the example's four function signatures; its import writes ``marker``."""
    body = [f"open({str(marker)!r}, 'w').write('ran')"] if marker else []
    for name, args in {**SIGS, **sigs}.items():
        if name != skip:
            body.append(f"def {name}({args}):\n    raise NotImplementedError\n")
    f = tmp_path / "example_gqa_bwd.py"
    f.write_text("\n".join(body) + "\n")
    return f


@pytest.fixture(autouse=True)
def catalogue():
    registry.register_catalogue(tf.PREFIX, tf.CATALOGUE)  # as the entry point does once installed
    yield


def test_path_resolves_without_running_the_file(tmp_path):
    marker = tmp_path / "ran"
    f = kernel_file(tmp_path, marker=marker)
    k = registry.get(f"{tf.PREFIX}:{f}")
    assert k.path == f.resolve() and k.spec == f"{tf.PREFIX}:{f.resolve()}" and k.capability is tf.CAPABILITY
    assert not marker.exists()  # resolving parses, it does not import


@pytest.mark.parametrize(
    "case, says",
    [
        ("missing", "is not a file"),
        ("no_fn", "defines no function 'flashattn_bwd'"),
        ("sig", "does not take"),
        ("syntax", "cannot read"),
    ],
)
def test_unsuitable_file_is_one_clear_line(tmp_path, case, says):
    if case == "missing":
        path = tmp_path / "nope.py"
    elif case == "no_fn":
        path = kernel_file(tmp_path, skip="flashattn_bwd")
    elif case == "sig":
        path = kernel_file(tmp_path, flashattn_bwd_preprocess="b, h, s")
    else:
        path = tmp_path / "bad.py"
        path.write_text("def (:\n")
    with pytest.raises(KernelSpecError) as e:
        registry.get(f"{tf.PREFIX}:{path}")
    assert says in str(e.value) and len(str(e.value).splitlines()) == 1


def test_env_form_records_the_path_spec(tmp_path, monkeypatch):
    f = kernel_file(tmp_path)
    monkeypatch.setenv(tf.ENV, str(f))
    k = tf.from_env()
    assert k.spec == f"{tf.PREFIX}:{f.resolve()}"
    monkeypatch.delenv(tf.ENV)
    with pytest.raises(KernelSpecError, match=tf.ENV):
        tf.from_env()


def test_file_spec_is_an_import_spec_and_repro_refuses_it(tmp_path, capsys):
    from difftest.commands.cli import main

    marker = tmp_path / "ran"
    f = kernel_file(tmp_path, marker=marker)
    spec = f"{tf.PREFIX}:{f}"
    assert is_import_spec(spec)
    registry.get(spec)
    assert is_import_spec(spec)  # still, once resolved
    assert not is_import_spec("mutant:gqa_head_modulo") and not is_import_spec("torch-blockwise")
    p = Problem(seqlen_q=64, seqlen_k=64, dtype="float16", head_dim_qk=64, head_dim_v=64)
    case = tmp_path / "case.json"
    case.write_text(json.dumps({"kernel": spec, "problem": p.to_dict(), "config": {}}))
    try:
        rc = main(["repro", str(case)])
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and "--allow-import" in err and len(err.strip().splitlines()) == 1, err
    assert not marker.exists()


def test_capability_is_the_examples_contract():
    c = tf.CAPABILITY
    ok = Problem(
        batch=2,
        seqlen_q=65,
        seqlen_k=65,
        heads_q=8,
        heads_kv=2,
        dtype="float16",
        head_dim_qk=192,
        head_dim_v=128,
        causal=True,
    ).validate()
    assert c.excludes(ok) is None
    for d_qk, d_v in ((48, 80), (80, 48), (256, 16)):  # every multiple of 16, qk and v apart
        assert c.excludes(ok.replace(head_dim_qk=d_qk, head_dim_v=d_v).validate()) is None
    for bad, why in (
        (ok.replace(dtype="bfloat16"), "dtype"),
        (ok.replace(seqlen_k=64), "seqlen_q != seqlen_k"),
        (ok.replace(softmax_scale=0.5), "custom softmax scale"),
        (ok.replace(head_dim_qk=100), "head_dim_qk"),
    ):
        assert why in c.excludes(bad.validate())
    assert not c.deterministic and c.gqa and not c.softmax_scale
    corpus = edge_problems(c, "gpu")
    assert corpus and all(c.covers(p) for p in corpus) and any(p.heads_q != p.heads_kv for p in corpus)


def test_call_args_follow_the_examples_wrapper():
    p = Problem(
        batch=2,
        seqlen_q=65,
        seqlen_k=65,
        heads_q=8,
        heads_kv=2,
        dtype="float16",
        head_dim_qk=192,
        head_dim_v=128,
        causal=True,
    ).validate()
    a = tf.call_args(p)
    assert a["fwd"] == (2, 8, 65, 192, 128, True, 128, 64, 4)  # groups = heads_q // heads_kv
    assert a["bwd"] == (2, 8, 65, 192, 128, True, 64, 32, 4)
    assert a["prep"] == (2, 8, 65, 128) and a["post"] == (2, 8, 65, 192)
    with pytest.raises(ValueError, match="fixed"):
        tf.call_args(p.replace(softmax_scale=0.3).validate())
    assert set(tf.FUNCTIONS) == set(SIGS)


FAKE_FILE = '''
import math
import torch

COMPILED = []


class FakeJit:
    """Stands in for @tilelang.jit: get_tir returns the "program" (a torch function)."""

    out_idx, execution_backend, pass_configs, compile_flags = None, None, {"fast_math": True}, None

    def __init__(self, fn):
        self.fn = fn

    def get_tir(self, *args):
        return (self.fn.__name__, args, self.fn(*args))


def _scores(q, k, causal, groups):
    kx = k.float().repeat_interleave(groups, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), kx) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return s


@FakeJit
def flashattn_fwd(batch, heads, seq_len, dim_qk, dim_v, is_causal, block_M, block_N, groups=1):
    def run(q, k, v):
        s = _scores(q, k, is_causal, groups)
        lse = torch.logsumexp(s, dim=-1)
        o = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), v.float().repeat_interleave(groups, dim=2))
        return o.half(), lse / math.log(2.0)  # base 2, as the example's kernel writes it
    return run


@FakeJit
def flashattn_bwd_preprocess(batch, heads, seq_len, dim_v):
    return lambda o, do: (o.float() * do.float()).sum(-1).permute(0, 2, 1).contiguous()


@FakeJit
def flashattn_bwd(batch, heads, seq_len, dim_qk, dim_v, is_causal, block_M, block_N, groups=1):
    def run(q, k, v, do, lse2, delta, dq, dk, dv):
        s = _scores(q, k, is_causal, groups)
        p = torch.exp(s - (lse2 * math.log(2.0)).unsqueeze(-1))  # uses the base-2 LSE it was handed
        vx = v.float().repeat_interleave(groups, dim=2)
        dp = torch.einsum("bqhd,bkhd->bhqk", do.float(), vx)
        ds = p * (dp - delta.unsqueeze(-1)) / math.sqrt(q.shape[-1])
        kx = k.float().repeat_interleave(groups, dim=2)
        dq += torch.einsum("bhqk,bkhd->bqhd", ds, kx)
        b, n, hkv, _ = k.shape
        dk += torch.einsum("bhqk,bqhd->bkhd", ds, q.float()).view(b, n, hkv, groups, -1).sum(3).half()
        dv += torch.einsum("bhqk,bqhd->bkhd", p, do.float()).view(b, n, hkv, groups, -1).sum(3).half()
    return run


@FakeJit
def flashattn_bwd_postprocess(batch, heads, seq_len, dim_qk):
    return lambda dq: dq.half()
'''


def test_forward_and_backward_follow_the_examples_calls(tmp_path, monkeypatch):
    """With tilelang.compile and the file's kernels faked in torch: every function is compiled
    for target cuda once per shape with the file's own pass_configs, the base-2 LSE reaches
    difftest in natural log and the backward as written, and the results match the reference."""
    import sys
    import types

    import torch

    from difftest.model.inputs import make_inputs
    from difftest.oracles.reference import reference

    compiled = []

    def compile(prim, out_idx=None, target=None, execution_backend=None, pass_configs=None, compile_flags=None):
        compiled.append((prim[0], prim[1], target, pass_configs))
        return prim[2]

    monkeypatch.setitem(sys.modules, "tilelang", types.SimpleNamespace(compile=compile))
    f = tmp_path / "fake_gqa_bwd.py"
    f.write_text(FAKE_FILE)
    k = tf.TileLangFileAdapter(str(f))
    p = Problem(
        batch=2,
        seqlen_q=20,
        seqlen_k=20,
        heads_q=4,
        heads_kv=2,
        dtype="float16",
        head_dim_qk=32,
        head_dim_v=16,
        causal=True,
    ).validate()
    x = make_inputs(p)
    got, ref = k.run(x), reference(x, "float64")
    for n in ("o", "lse", "dq", "dk", "dv"):
        assert torch.allclose(getattr(got, n).double(), getattr(ref, n).double(), atol=2e-2, rtol=2e-2), n
    assert {c[2] for c in compiled} == {"cuda"} and all(c[3] == {"fast_math": True} for c in compiled)
    assert [c[0] for c in compiled] == [
        "flashattn_fwd",
        "flashattn_bwd_preprocess",
        "flashattn_bwd",
        "flashattn_bwd_postprocess",
    ]
    assert compiled[0][1] == tf.call_args(p)["fwd"] and compiled[2][1] == tf.call_args(p)["bwd"]
    k.run(x)
    assert len(compiled) == 4  # compiled once per shape


def test_warm_builds_the_edge_corpus_shapes_once_each(tmp_path, monkeypatch):
    import sys
    import types

    built = []

    def compile(prim, **kw):
        built.append((prim[0], prim[1], kw["target"]))
        return prim[2]

    monkeypatch.setitem(sys.modules, "tilelang", types.SimpleNamespace(compile=compile))
    f = tmp_path / "fake_gqa_bwd.py"
    f.write_text(FAKE_FILE)
    shapes = tf.warm_shapes("gpu")
    assert len(shapes) == len(set(shapes)) >= 4 and shapes[0][0] == "flashattn_fwd"
    assert tf.warm(str(f), "gpu", jobs=1) == []
    assert [(fn, args) for fn, args, _ in built] == shapes and {t for *_, t in built} == {"cuda"}
    with pytest.raises(KernelSpecError):
        tf.warm(str(tmp_path / "missing.py"), "gpu", jobs=1)


# The example's make_dq_layout addresses ceil(seq_len/8)*8 rows per batch of the caller's
# seq_len-row dQ (results/bugs/tilelang-example/REPORT-dq-layout-overrun.md); this fake does
# the same with a plain row-padded view over dQ's storage, in flashattn_bwd and the postprocess.
OVERRUN_FILE = (
    FAKE_FILE.replace(
        '        dq += torch.einsum("bhqk,bkhd->bqhd", ds, kx)\n',
        '        padded_rows(dq)[:, :seq_len] += torch.einsum("bhqk,bkhd->bqhd", ds, kx)\n',
    ).replace(
        "    return lambda dq: dq.half()\n",
        "    return lambda dq: padded_rows(dq)[:, :seq_len].half()\n",
    )
    + """

def padded_rows(dq):
    b, s, h, d = dq.shape
    s8 = -(-s // 8) * 8
    return torch.as_strided(dq, (b, s8, h, d), (s8 * h * d, h * d, d, 1), dq.storage_offset())
"""
)


def test_a_dq_layout_overrun_reads_nan_and_spares_dk(tmp_path, monkeypatch):
    """A kernel whose dQ layout runs past the end of dQ (seq_len % 8 != 0) gets the NaN guard:
    exactly the over-run elements come back NaN on every run (the nonfinite gate then fails them),
    the in-bounds dQ and dK/dV are right. With a bare torch.zeros dQ the over-run leaves the
    tensor (here: as_strided refuses; on a GPU: into dK or the allocator's slack)."""
    import sys
    import types

    import torch

    from difftest.model.inputs import make_inputs
    from difftest.oracles.reference import reference

    monkeypatch.setitem(sys.modules, "tilelang", types.SimpleNamespace(compile=lambda prim, **kw: prim[2]))
    f = tmp_path / "overrun_gqa_bwd.py"
    f.write_text(OVERRUN_FILE)
    k = tf.TileLangFileAdapter(str(f))
    b, s, h, d = 2, 13, 4, 32  # 13 rows per batch, 16 addressed: batch 1's rows 10-12 lie past the end
    p = Problem(
        batch=b,
        seqlen_q=s,
        seqlen_k=s,
        heads_q=h,
        heads_kv=2,
        dtype="float16",
        head_dim_qk=d,
        head_dim_v=16,
        causal=True,
    ).validate()
    x = make_inputs(p)
    got, ref = k.run(x), reference(x, "float64")
    offset = torch.arange(b).view(b, 1) * 16 + torch.arange(s).view(1, s)  # the row each (batch, token) is stored at
    past = (offset >= b * s).view(b * s)  # THD rows
    dq = got.dq.double()
    assert past.sum() == 3 and dq[past].isnan().all() and not dq[~past].isnan().any()
    assert torch.allclose(dq[~past], ref.dq.double()[~past], atol=2e-2, rtol=2e-2)
    for n in ("o", "lse", "dk", "dv"):
        assert torch.allclose(getattr(got, n).double(), getattr(ref, n).double(), atol=2e-2, rtol=2e-2), n
    assert k.run(x).dq.double()[past].isnan().all()  # the same on a second run
