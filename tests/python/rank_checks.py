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
