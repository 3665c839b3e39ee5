"""herd.stats() and hvd.stats() under mpirun at 2 and 3 ranks (docs/operations.md, "Counters").

Every rank reads its counters before and after a known sequence of herd.torch collectives and
checks the difference against the counts and bytes of that sequence, computed here: two
allreduces of 3 float32, a broadcast of 4 float64, an allgather of rank + 1 rows of 2 float32 (its
bytes differ per rank) and a barrier; a failed allreduce (shapes that differ between the ranks)
counts as failed, with no bytes.
"""

import pytest
import torch

import herd
import herd.torch as hvd

KEYS = {"collective", "process_set", "count", "failed", "bytes", "runs", "total_seconds",
        "run_seconds"}


def _by_key(stats):
    result = {}
    for entry in stats:
        assert set(entry) == KEYS
        result[(entry["process_set"], entry["collective"])] = entry
    return result


def _delta(before, after, key, field):
    return after.get(key, {}).get(field, 0) - before.get(key, {}).get(field, 0)


def test_counts_and_bytes_of_a_known_sequence(rank, size):
    assert hvd.stats is herd.stats
    before = _by_key(herd.stats())
    hvd.allreduce(torch.ones(3), name="stats.a", op=hvd.Sum)
    hvd.allreduce(torch.ones(3), name="stats.b", op=hvd.Average)
    hvd.broadcast(torch.zeros(4, dtype=torch.float64), root_rank=0, name="stats.c")
    hvd.allgather(torch.ones(rank + 1, 2), name="stats.d")
    hvd.barrier()
    if size > 1:
        with pytest.raises(herd.Error):
            hvd.allreduce(torch.ones(4 if rank == 0 else 5), name="stats.mismatch", op=hvd.Sum)
    after = _by_key(herd.stats())

    expected = {
        (0, "allreduce"): {"count": 2, "bytes": 24, "failed": 1 if size > 1 else 0},
        (0, "broadcast"): {"count": 1, "bytes": 32, "failed": 0},
        (0, "allgather"): {"count": 1, "bytes": 8 * (rank + 1), "failed": 0},
        (0, "barrier"): {"count": 1, "bytes": 0, "failed": 0},
    }
    for key, fields in expected.items():
        for field, value in fields.items():
            assert _delta(before, after, key, field) == value, (key, field)
        assert 1 <= _delta(before, after, key, "runs") <= fields["count"], key
        assert 0 < _delta(before, after, key, "run_seconds") <= _delta(
            before, after, key, "total_seconds"), key
    # Nothing else ran.
    for key in set(after) - set(expected):
        assert after[key] == before.get(key), key
