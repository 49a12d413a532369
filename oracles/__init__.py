"""Trusted references: float64/float32 autograd, same-dtype, chunked, FA3."""
