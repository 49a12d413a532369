"""Adapters to attention kernels under test (ours and production ones)."""
