"""What crosses the worker pipe: a case's outputs, every run's, in one buffer.

The isolation worker (isolation.py) used to pickle each run's Outputs as they were: torch
sends a CPU tensor through shared memory, one segment and one file descriptor per tensor,
and the parent fetches each descriptor from the worker's resource sharer over a socket of
its own. A case of two runs with six outputs made ~12 such round trips: ~5 ms of the
parent's CPU per case on the 2-core machine (cProfile of a ci campaign,
``rebuild_storage_fd``), more than its gates. A CUDA output was copied to the host tensor
by tensor, one synchronisation each.

Now every tensor of every run is copied, as raw bytes at 64-byte aligned offsets, into one
uint8 buffer on the outputs' device, which reaches the host in one copy. A buffer of at most
``INLINE_BYTES`` travels inside the pickled reply (a few copies of a small buffer cost less
than a shared-memory segment); a larger one as one shared-memory tensor (one descriptor).
``unpack_outputs`` gives each run's Outputs back as views of the buffer, moved first, in one
copy, to ``device`` when asked (the runner's: on a GPU the gates then read outputs already
there). The bytes, dtypes and shapes are the kernel's; strides become contiguous (no gate
reads a stride: the values are the same elements in the same order).
"""

import torch

from difftest.errors import InputError
from difftest.model.outputs import Outputs

INLINE_BYTES = 1 << 20  # at most this many bytes travel inside the pickled reply
ALIGN = 64  # each tensor's offset in the buffer: any dtype's view of it is aligned


def _dtype(name: str) -> torch.dtype:
    dt = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dt, torch.dtype):
        raise InputError(f"packed output dtype {name!r} is not a torch dtype")
    return dt


def pack_outputs(runs: list) -> tuple:
    """(layout, buffer): ``layout`` one {output: (dtype, shape, offset, nbytes)} per run;
    ``buffer`` bytes (small) or a uint8 CPU tensor in shared memory (large)."""
    layout, pieces, total, device = [], [], 0, None
    for out in runs:
        entry = {}
        for name, t in out.items():
            flat = t.detach().contiguous().reshape(-1).view(torch.uint8) if t.numel() else None
            n = 0 if flat is None else flat.numel()
            entry[name] = (str(t.dtype), tuple(t.shape), total, n)
            if n:
                assert flat is not None
                pieces.append((total, flat))
                device = device or flat.device
            total += -(-n // ALIGN) * ALIGN
        layout.append(entry)
    device = device or torch.device("cpu")
    inline = total <= INLINE_BYTES
    # a large buffer is made in shared memory at once: the pieces (CPU) or the device's buffer
    # (one copy) land there, never in a private buffer copied over again
    host = None if inline else torch.empty(total, dtype=torch.uint8).share_memory_()
    buf = host if host is not None and device.type == "cpu" else torch.empty(total, dtype=torch.uint8, device=device)
    for off, flat in pieces:  # the padding between them is never read
        buf[off : off + flat.numel()].copy_(flat)
    if inline:
        return layout, buf.cpu().numpy().tobytes()
    assert host is not None
    if buf is not host:
        host.copy_(buf)
    return layout, host


def unpack_outputs(packed: tuple, device=None) -> list:
    """The runs' Outputs from ``pack_outputs``' result, as views of one buffer (on
    ``device`` when given, moved there in one copy)."""
    layout, buf = packed
    if not isinstance(buf, torch.Tensor):
        buf = torch.frombuffer(bytearray(buf), dtype=torch.uint8) if buf else torch.zeros(0, dtype=torch.uint8)
    if device is not None and buf.numel():
        buf = buf.to(device)
    runs = []
    for entry in layout:
        tensors = {}
        for name, (dtype, shape, off, n) in entry.items():
            dt = _dtype(dtype)
            if n:
                tensors[name] = buf[off : off + n].view(dt).view(shape)
            else:
                tensors[name] = torch.empty(shape, dtype=dt, device=buf.device)
        runs.append(Outputs(**tensors))
    return runs
