"""herd.kvstore across the ranks of the mpirun: dist_sync (every worker a replica, updated
from the allreduce of the pushes) and horovod. Every rank runs every test, so each call
meets its peers; expected values are computed here from the ranks' known inputs."""

import time

import numpy as np
import pytest

import herd
import herd.kvstore as hkv
import herd.numpy as hn

SHAPE = (2, 3)


def filled(value, dtype=np.float32):
    return np.full(SHAPE, value, dtype=dtype)


def pulled(kv, key):
    out = np.zeros(SHAPE, np.float32)
    kv.pull(key, out=out)
    return out


def test_workers_are_the_ranks(rank, size):
    kv = hkv.create("dist_sync")
    assert kv.type == "dist_sync"
    assert (kv.rank, kv.num_workers) == (rank, size)
    assert kv.is_capable("optimizer")


def test_init_keeps_rank_zeros_value(rank):
    kv = hkv.create("dist_sync")
    kv.init("w", filled(rank + 10))
    assert np.array_equal(pulled(kv, "w"), filled(10))


@pytest.mark.parametrize("store_type", ["dist_sync", "dist_device_sync", "dist"])
def test_pushpull_sums_over_devices_and_workers(store_type, rank, size):
    kv = hkv.create(store_type)
    assert kv.type == store_type
    kv.init(0, filled(0))
    values = [filled(rank + 1), filled(rank + 1)]
    kv.pushpull(0, values)
    expected = filled(size * (size + 1) / 2 * 2)
    for value in values:
        assert np.array_equal(value, expected)
    # The store now holds that sum (the default update assigns it).
    assert np.array_equal(pulled(kv, 0), expected)


def test_push_then_pull_of_several_keys(rank, size):
    kv = hkv.create("dist_sync")
    keys = [3, 5, 7]
    kv.init(keys, [filled(0)] * 3)
    kv.push(keys, [filled(rank * k) for k in keys])
    outs = [np.zeros(SHAPE, np.float32) for _ in keys]
    kv.pull(keys, out=outs)
    for key, out in zip(keys, outs):
        assert np.array_equal(out, filled(key * size * (size - 1) / 2))


def test_broadcast_takes_rank_zeros_value(rank):
    kv = hkv.create("dist_sync")
    outs = [np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float32)]
    kv.broadcast("b", filled(rank + 1), out=outs)
    for out in outs:
        assert np.array_equal(out, filled(1))


def test_updater_sees_the_sum_over_workers(rank, size):
    kv = hkv.create("dist_sync")
    seen = []

    def update(key, merged, stored):
        seen.append((key, merged.copy()))
        stored += merged

    kv.set_updater(update)
    kv.init(4, filled(1))
    kv.push(4, filled(rank + 1))
    total = size * (size + 1) / 2
    assert len(seen) == 1 and seen[0][0] == 4
    assert np.array_equal(seen[0][1], filled(total))
    assert np.array_equal(pulled(kv, 4), filled(1 + total))


def test_sgd_on_dist_sync_follows_the_reference_on_every_replica(rank, size):
    rng = np.random.default_rng(5)
    start = rng.standard_normal(SHAPE).astype(np.float32)
    # grads[step][worker]: every rank draws them all, pushes its own.
    grads = [[rng.standard_normal(SHAPE).astype(np.float32) for _ in range(size)]
             for _ in range(4)]
    lr, momentum, wd, rescale = 0.1, 0.9, 0.01, 1.0 / size
    kv = hkv.create("dist_sync")
    kv.set_optimizer(hkv.SGD(learning_rate=lr, momentum=momentum, wd=wd, rescale_grad=rescale))
    kv.init(0, start if rank == 0 else np.zeros(SHAPE, np.float32))
    for step in grads:
        kv.push(0, step[rank])

    weight = start.astype(np.float64)
    buffer = None
    for step in grads:
        g = np.sum([grad.astype(np.float64) for grad in step], axis=0) * rescale + wd * weight
        buffer = g if buffer is None else momentum * buffer + g
        weight = weight - lr * buffer
    result = pulled(kv, 0)
    np.testing.assert_allclose(result, weight, rtol=1e-5, atol=1e-6)
    # The replicas are bitwise equal.
    replicas = hn.allgather(result[np.newaxis], name="kvstore.replicas")
    for other in replicas:
        assert np.array_equal(other, result)


def test_barrier_meets_every_worker():
    kv = hkv.create("dist_sync")
    kv.barrier()
    kv._barrier()


def test_a_misuse_names_the_key_on_the_rank_that_made_it(rank):
    kv = hkv.create("dist_sync")
    with pytest.raises(herd.Error, match="42"):
        kv.pull(42, out=filled(0))


def test_horovod_pushpull_is_the_allreduce_sum_and_keeps_nothing(rank, size):
    kv = hkv.create("horovod")
    assert not kv.is_capable("optimizer")
    out = np.zeros(SHAPE, np.float32)
    kv.pushpull(0, [filled(rank + 1), filled(1)], out=out)
    assert np.array_equal(out, filled(size * (size + 1) / 2 + size))
    # broadcast copies rank 0's value, as often as asked.
    for round_ in range(2):
        kv.broadcast(1, filled(rank + round_), out=out)
        assert np.array_equal(out, filled(round_))
    with pytest.raises(herd.Error, match="horovod"):
        kv.init(2, filled(0))
    with pytest.raises(herd.Error, match="horovod"):
        kv.set_optimizer(hkv.SGD())


LATE_SECONDS = 1.5


@pytest.mark.parametrize("call", ["barrier", "pushpull", "push_with_updater"])
def test_waiting_releases_the_gil(call, rank):
    """Rank 0 waits in a store call that rank 1 enters LATE_SECONDS late, while another
    Python thread runs (test_basics.py's measurement, with a longer wait for a loaded
    machine); the updater takes the GIL back to run."""
    from test_basics import _run_beside_a_python_thread

    kv = hkv.create("dist_sync")
    kv.init(0, filled(0))
    if call == "push_with_updater":
        kv.set_updater(lambda key, merged, stored: np.copyto(stored, merged + 1))
    body = {
        "barrier": kv.barrier,
        "pushpull": lambda: kv.pushpull(0, filled(1)),
        "push_with_updater": lambda: kv.push(0, filled(1)),
    }[call]
    kv.barrier()
    measured = np.zeros(2)
    if rank == 0:
        measured[:] = _run_beside_a_python_thread(body)
    else:
        if rank == 1:
            time.sleep(LATE_SECONDS)
        body()
    waited, notes = hn.broadcast(measured, 0, name=f"kvstore.gil.{call}")
    assert waited > LATE_SECONDS / 2, f"{call} returned after {waited:.3f} s without waiting"
    assert notes >= 50, (f"{call}: another Python thread ran in only {int(notes)} milliseconds "
                         f"of the {waited:.3f} s wait: the call holds the GIL while it waits")
    if call == "push_with_updater":
        assert np.array_equal(pulled(kv, 0), filled(herd.size() + 1))


def test_two_bit_compression_sums_every_workers_codes(rank, size):
    # Each worker pushes 0.3, then -0.3 on odd ranks, four times; 2-bit codes of threshold
    # 0.5 with the residual carried: 0, +-0.5, 0, +-0.5 per worker.
    kv = hkv.create("dist_sync")
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init(0, filled(0))
    sign = 1 if rank % 2 == 0 else -1
    evens = (size + 1) // 2
    expected_per_push = [0.0, 0.5 * (evens - (size - evens)), 0.0, 0.5 * (evens - (size - evens))]
    for expected in expected_per_push:
        kv.push(0, filled(sign * 0.3))
        assert np.array_equal(pulled(kv, 0), filled(expected))
    with pytest.raises(herd.Error, match="pushpull"):
        kv.pushpull(0, filled(1))


def test_compression_settings_the_store_refuses():
    kv = hkv.create("dist_sync")
    with pytest.raises(herd.Error, match="threshold"):
        kv.set_gradient_compression({"type": "2bit", "threshold": 0})
    with pytest.raises(herd.Error, match="3bit"):
        kv.set_gradient_compression({"type": "3bit"})
    with pytest.raises(ValueError, match="unknown entries"):
        kv.set_gradient_compression({"type": "2bit", "thresold": 0.5})
