"""Numerics shared by the end-to-end generation tests: comparisons that hold on every CPU kernel set and thread count.

The tests compare what one model computes along two paths: a cache built incrementally (prefill, one token at a time,
rollback) against a fresh forward pass, and assisted decoding against plain greedy decoding. Different paths run
different kernels (GEMV vs GEMM, other blockings and reduction orders, chosen by `ATEN_CPU_CAPABILITY` and the number
of threads), so in float32 they differ by tens of float32 ulps of the values compared, enough to break a fixed
tolerance or to flip a greedy token on a near-tie. The tiny models therefore run in float64. They are not float64
throughout: upstream code upcasts to float32 and back in places (RMSNorm, `softmax(dtype=float32)` in eager attention,
rotary embeddings, some linear-attention kernels), so two paths can still differ by a few float32 roundings.
`cross_path_atol` bounds that; a stale or missing token changes states and logits by the order of the values
themselves, far above it.
"""

import os
import unittest

import torch


MODEL_DTYPE = torch.float64
# Bound on the difference between two paths, in float32 ulps (eps) of the largest magnitude compared. In float64 the
# paths differ by float64 roundoff: measured at most 6e-15 of the largest magnitude (5e-8 float32 ulps) under
# ATEN_CPU_CAPABILITY=default, avx2 and avx512. The float32 round trips inside the models add nothing as long as both
# paths round the same float64 value; when the two values straddle a float32 rounding boundary (rare, about one in 1e9
# roundings), one element moves by one float32 ulp, which the tiny models (2 layers, widths <= 64) carry to the states
# or logits at most a few times over. 8 ulps (1e-6 relative) covers that; a stale or missing token changes states and
# logits by the order of the values themselves.
CROSS_PATH_ULPS = 8


def cross_path_atol(reference: torch.Tensor) -> float:
    """Absolute tolerance for `reference` computed along another kernel path: `CROSS_PATH_ULPS` float32 ulps of its
    largest magnitude. Absolute, not relative per element: rounding errors scale with the magnitude of the operands
    (a small element obtained by cancellation carries the error of the large ones)."""
    return CROSS_PATH_ULPS * torch.finfo(torch.float32).eps * max(reference.abs().max().item(), 1.0)


def assert_states_close(actual: torch.Tensor, expected: torch.Tensor, msg: str):
    """`actual` and `expected` are the same key/value states computed along two paths (see `cross_path_atol`)."""
    assert actual.dtype == expected.dtype == MODEL_DTYPE, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual, expected, rtol=0, atol=cross_path_atol(expected), msg=msg)


def greedy_margins(step_logits) -> list[float]:
    """Per generation step, the gap between the best and second best logit, relative to the largest |logit|."""
    margins = []
    for logits in step_logits:
        top2 = logits.double().topk(2, dim=-1).values
        margins.extend(((top2[:, 0] - top2[:, 1]) / logits.double().abs().amax(dim=-1).clamp_min(1.0)).tolist())
    return margins


def assert_no_near_tie(step_logits, msg: str = ""):
    """Greedy decoding along another path gives the same tokens only if no step is a near-tie: every margin must be
    above what two paths can differ by (`CROSS_PATH_ULPS` float32 ulps, twice: both logits may move). A failure here
    is a test set-up problem (pick another seed or prompt), not a cache bug."""
    bound = 2 * CROSS_PATH_ULPS * torch.finfo(torch.float32).eps
    margins = greedy_margins(step_logits)
    assert min(margins) > bound, f"near-tie in the reference greedy decoding {msg}: margins {margins}, bound {bound}"


def set_test_threads():
    """Runs the tiny models on one intra-op thread (several times faster on a busy CPU) unless `OMP_NUM_THREADS` is
    set, so that a run with `OMP_NUM_THREADS=$(nproc)` checks the comparisons with all threads. Returns the previous
    count, for `torch.set_num_threads` on tear-down."""
    previous = torch.get_num_threads()
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    return previous


class TinyModelTestCase(unittest.TestCase):
    """A test case of tiny models: its tests run on the threads `set_test_threads` chooses (intra-op threads only add
    synchronisation overhead), and the previous count is restored after the class."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls._num_threads = set_test_threads()

    @classmethod
    def tearDownClass(cls):
        torch.set_num_threads(cls._num_threads)
        super().tearDownClass()
