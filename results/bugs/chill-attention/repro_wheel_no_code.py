"""chill-attention: the published wheels (1.0.0 to 2.1.0) contain no Python code, only .dist-info, so after
`pip install chill-attention` the documented `from chill_attention import chill_attention` fails. pyproject.toml's
`[tool.setuptools] py-modules = ["chill_attention"]` asks for a single module chill_attention.py, which does not
exist (the code is the package directory chill_attention/). Needs no GPU. Exits 1 while the installed
distribution has no chill_attention code, 0 once the import works."""

import sys
from importlib.metadata import files, version

print("chill-attention", version("chill-attention"), "| Python", sys.version.split()[0])
installed = [str(f) for f in files("chill-attention") or []]
code = [f for f in installed if f.endswith(".py")]
print(f"files installed by the distribution: {len(installed)}, Python files among them: {len(code)}")
for f in installed:
    print("  ", f)
try:
    from chill_attention import chill_attention  # noqa: F401  (the README's first line of usage)
except ImportError as e:
    print(f"from chill_attention import chill_attention: {type(e).__name__}: {e}")
    print("BUG")
    sys.exit(1)
print("import works\nOK")
sys.exit(0)
