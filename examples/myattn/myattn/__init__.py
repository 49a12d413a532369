"""myattn: a small varlen attention kernel (plain torch, float32 math) with its own
forward and backward, written the way a FlashAttention-style kernel is called. It is
difftest's worked example of bringing your own kernel: ``difftest_adapter.py`` is the
adapter, ``pyproject.toml`` registers it, docs/adapters.md walks through both."""

from .kernel import attention_backward, attention_forward

__all__ = ["attention_backward", "attention_forward"]
