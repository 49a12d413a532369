"""The precompiled header of our TileLang kernels' CPU builds (kernels/tilelang/pch.py):
every CPU build names the wrapper, g++ uses the PCH beside it and still compiles without it
or with a damaged one, and the folder is read as hostile (a foreign-writable or linked
folder is refused, a linked or oversized ``.gch`` removed, a changed wrapper rewritten)."""

import os
import subprocess

import pytest

pytest.importorskip("tilelang", reason="tilelang is not installed: our TileLang kernels cannot build")

from difftest.kernels.tilelang import pch, source  # noqa: E402
from difftest.kernels.tilelang.tiles import CPU_FLAGS  # noqa: E402

SRC = '#include <tl_templates/cpp/common.h>\nextern "C" int f(float x) { return (int)half_float::half(x); }\n'


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "tl"))
    pch._prepared.cache_clear()
    yield tmp_path / "tl"
    pch._prepared.cache_clear()


def _wrapper(flags=CPU_FLAGS):
    got = pch.include_flags(flags)
    assert got[0] == "-include"
    return got[1]


def _compile(tmp_path, flags):
    """TileLang's g++ command (libgen) for a small source that includes the header, with -H:
    (return code, whether the PCH was read)."""
    compiler, templates = pch._tilelang_paths()
    src = tmp_path / "k.cpp"
    src.write_text(SRC)
    cmd = [compiler, *pch.BASE_FLAGS, "-shared", str(src), f"-I{templates}", *CPU_FLAGS, *flags, "-H"]
    r = subprocess.run([*cmd, "-o", str(tmp_path / "k.so")], capture_output=True, text=True, check=False)
    return r.returncode, any(line.startswith("!") and ".gch" in line for line in r.stderr.splitlines())


def test_cpu_builds_include_the_wrapper_of_a_private_folder(cache_dir):
    flags = source.style("c").compile_kwargs()["compile_flags"]
    assert flags[: len(CPU_FLAGS)] == list(CPU_FLAGS) and flags[len(CPU_FLAGS)] == "-include"
    wrapper = flags[len(CPU_FLAGS) + 1]
    assert wrapper.startswith(str(cache_dir / "difftest-pch"))
    with open(wrapper, "rb") as f:
        assert f.read() == pch.WRAPPER
    for folder in (os.path.dirname(wrapper), os.path.dirname(os.path.dirname(wrapper))):
        assert os.stat(folder).st_mode & 0o777 == 0o700
    assert "-include" not in source.style("cuda").compile_kwargs().get("compile_flags", [])
    assert pch.include_flags(("-O1",)) != flags[len(CPU_FLAGS) :]  # other flags, another PCH


@pytest.mark.slow
def test_gpp_reads_the_pch_and_compiles_without_it_or_with_a_damaged_one(cache_dir, tmp_path):
    flags = pch.include_flags(CPU_FLAGS)
    assert _compile(tmp_path, flags) == (0, False)  # no PCH yet: the wrapper includes the header
    assert pch.build(CPU_FLAGS) == "built"
    assert pch.build(CPU_FLAGS) == "cached"
    assert _compile(tmp_path, flags) == (0, True)
    with open(flags[1] + ".gch", "wb") as f:
        f.write(b"not a precompiled header")
    assert _compile(tmp_path, flags) == (0, False)  # g++ skips it and parses the header


def test_a_folder_others_can_write_or_a_link_is_refused(cache_dir, tmp_path):
    top = cache_dir / "difftest-pch"
    top.mkdir(parents=True)
    top.chmod(0o777)
    assert pch.include_flags(CPU_FLAGS) == [] and pch.build(CPU_FLAGS) == "unusable"
    assert list(top.iterdir()) == []  # nothing written into it

    pch._prepared.cache_clear()
    top.chmod(0o700)
    wrapper = _wrapper()
    digest = os.path.dirname(wrapper)
    elsewhere = tmp_path / "elsewhere"
    os.rename(digest, elsewhere)
    os.symlink(elsewhere, digest)
    pch._prepared.cache_clear()
    assert pch.include_flags(CPU_FLAGS) == []


def test_a_linked_or_oversized_pch_is_removed_and_a_changed_wrapper_rewritten(cache_dir, tmp_path):
    wrapper = _wrapper()
    gch = wrapper + ".gch"
    target = tmp_path / "planted.gch"
    target.write_bytes(b"x")
    os.symlink(target, gch)
    with open(wrapper, "wb") as f:
        f.write(b'#include "/etc/passwd"\n')
    pch._prepared.cache_clear()
    assert _wrapper() == wrapper
    assert not os.path.lexists(gch) and target.exists()
    with open(wrapper, "rb") as f:
        assert f.read() == pch.WRAPPER

    with open(gch, "wb") as f:
        f.truncate(pch.MAX_BYTES + 1)
    pch._prepared.cache_clear()
    _wrapper()
    assert not os.path.lexists(gch)
