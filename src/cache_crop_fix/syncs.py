"""Counts the host-device syncs of a call: `aten._local_scalar_dense`, what `.item()`, `int(t)` and `bool(t)` of a
tensor dispatch to. On CPU it does not wait, but it is the op that waits for an accelerator, so a count on CPU is the
count a GPU would pay. Used by `tests/test_syncs.py` and `benchmarks/bench_crop.py`. It also records every op
dispatched (`ops`), to count the kernels a call launches."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class SyncCounter(TorchDispatchMode):
    """Counts the host syncs (`aten._local_scalar_dense`) dispatched while active."""

    def __init__(self):
        super().__init__()
        self.count = 0
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))
