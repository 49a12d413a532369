"""flash-attn-triton: `import flash_attn_triton` fails with Triton >= 3.4 (torch >= 2.8 ships it), though the package
asks only for triton >= 3.2.0: attention_kernel.py line 18 imports triton.tools.experimental_descriptor, which
Triton 3.4 removed, and never uses it. Exits 1 while the import fails, 0 once it works. No GPU needed."""

import sys
from importlib.metadata import version

import triton

print("flash-attn-triton", version("flash-attn-triton"), "| triton", triton.__version__)
try:
    import flash_attn_triton  # noqa: F401
except ModuleNotFoundError as e:
    print(f"import flash_attn_triton: ModuleNotFoundError: {e}")
    print("BUG")
    sys.exit(1)
print("import flash_attn_triton: OK")
sys.exit(0)
