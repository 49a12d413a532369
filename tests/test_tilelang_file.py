"""``tilelang-file``: a TileLang kernel module loaded from a path the user gives at run time
(seed 004, TileLang's example_gqa_bwd.py). On CPU: the path resolves (or is refused in one
line), the file's interface is checked without running it, the capability is the example's
contract, the per-shape arguments follow the example's own wrapper, and a file-path spec
read from a reproducer counts as an import spec (``difftest repro`` refuses it without
--allow-import). The real kernel only runs on a GPU (scripts/device/kernels13.sh)."""

import json

import pytest

from difftest import Problem
from difftest import adapter as registry
from difftest.adapter import KernelSpecError, is_import_spec
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


@pytest.mark.parametrize("case, says", [("missing", "is not a file"), ("no_fn", "defines no function 'flashattn_bwd'"),
                                        ("sig", "does not take"), ("syntax", "cannot read")])
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
    from difftest.cli import main

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
    ok = Problem(batch=2, seqlen_q=65, seqlen_k=65, heads_q=8, heads_kv=2, dtype="float16", head_dim_qk=192,
                 head_dim_v=128, causal=True).validate()
    assert c.excludes(ok) is None
    for bad, why in ((ok.replace(dtype="bfloat16"), "dtype"), (ok.replace(seqlen_k=64), "seqlen_q != seqlen_k"),
                     (ok.replace(softmax_scale=0.5), "custom softmax scale"),
                     (ok.replace(head_dim_qk=100), "head_dim_qk")):
        assert why in c.excludes(bad.validate())
    assert not c.deterministic and c.gqa and not c.softmax_scale
    corpus = edge_problems(c, "gpu")
    assert corpus and all(c.covers(p) for p in corpus) and any(p.heads_q != p.heads_kv for p in corpus)


def test_call_args_follow_the_examples_wrapper():
    p = Problem(batch=2, seqlen_q=65, seqlen_k=65, heads_q=8, heads_kv=2, dtype="float16", head_dim_qk=192,
                head_dim_v=128, causal=True).validate()
    a = tf.call_args(p)
    assert a["fwd"] == (2, 8, 65, 192, 128, True, 128, 64, 4)  # groups = heads_q // heads_kv
    assert a["bwd"] == (2, 8, 65, 192, 128, True, 64, 32, 4)
    assert a["prep"] == (2, 8, 65, 128) and a["post"] == (2, 8, 65, 192)
    with pytest.raises(ValueError, match="fixed"):
        tf.call_args(p.replace(softmax_scale=0.3).validate())
    assert set(tf.FUNCTIONS) == set(SIGS)
