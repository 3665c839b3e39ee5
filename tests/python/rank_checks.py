"""Checks shared by the torch tests.

A wrong value is recorded instead of raised, so a rank that sees one still
takes part in the rest of the test's collectives and no other rank is left
waiting for it; conftest.py's autouse fixture fails the test at its end, on
that rank, with every recorded message.
"""

import math

import torch

import herd

failures = []


def expect(condition, message):
    if not condition:
        failures.append(f"rank {herd.rank()}: {message}")


def rank_values(rank, shape, dtype=torch.float64, salt=0):
    """Rank-unique small integers 1..11, exact in every dtype, sums of 3 included."""
    count = math.prod(shape)
    v = (torch.arange(count, dtype=torch.int64) * 7 + 3 * rank + salt) % 11 + 1
    return v.reshape(shape).to(dtype)


# A float average may come out one rounding away from sum / p (herd may multiply by 1 / p).
ROUNDING = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 2.5e-7,
            torch.float64: 5e-16}


def check_tensor(actual, expected, what="", close=False):
    """Exact comparison (within one rounding for floats when ``close``) of two tensors on the
    same device; a failure names the rank, the first wrong index and both values."""
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        expect(False, f"{what}: {actual.dtype} {tuple(actual.shape)}, expected "
                      f"{expected.dtype} {tuple(expected.shape)}")
        return
    if close and expected.is_floating_point():
        tolerance = ROUNDING[expected.dtype] * expected.double().abs()
        wrong_mask = (actual.double() - expected.double()).abs() > tolerance
    else:
        wrong_mask = actual != expected
    if wrong_mask.any():
        wrong = wrong_mask.reshape(-1).nonzero()[0].item()
        expect(False, f"{what}: index {wrong}: expected {expected.reshape(-1)[wrong].item()}, "
                      f"got {actual.reshape(-1)[wrong].item()}")
