"""herd.kvstore's dist_async with parameter-server ranks (HERD_NUM_SERVERS, set by
tests/python/CMakeLists.txt): the last ranks serve from herd.init() on and never run a
test; the others are the workers. Expected values are computed here from the workers'
known pushes, with values that float32 sums exactly in any order."""

import os

import numpy as np
import pytest

import herd
import herd.kvstore as hkv

SHAPE = (2, 3)
NUM_SERVERS = int(os.environ.get("HERD_NUM_SERVERS", "0"))


def filled(value, shape=SHAPE):
    return np.full(shape, value, dtype=np.float32)


def test_workers_exclude_the_servers(rank, size):
    kv = hkv.create("dist_async")
    assert kv.type == "dist_async"
    assert (kv.rank, kv.num_workers) == (rank, size)
    assert kv.is_capable("optimizer")
    assert len(kv.update_counts()) == NUM_SERVERS


def test_init_keeps_rank_zeros_value(rank):
    kv = hkv.create("dist_async")
    kv.init("w", filled(rank + 10))
    kv.barrier()
    out = filled(0)
    kv.pull("w", out=out)
    assert np.array_equal(out, filled(10))


@pytest.mark.parametrize("elements", [6, 4096])
def test_sgd_applies_every_push_as_it_arrives(rank, size, elements):
    # Plain SGD is commutative: whatever order the pushes arrive in, the value ends at
    # init - lr * rescale_grad * (the sum of every push). 4096 elements exceed the
    # HERD_KVSTORE_BIGARRAY_BOUND this test runs with, so that key is split over the servers.
    shape = (elements,)
    lr, rescale, pushes = 0.25, 0.5, 5
    kv = hkv.create("dist_async")
    kv.set_optimizer(hkv.SGD(learning_rate=lr, rescale_grad=rescale))
    start = np.arange(elements, dtype=np.float32)
    kv.init([0, 1], [start, filled(100, shape)])
    for step in range(pushes):
        kv.push([0, 1], [filled(rank + 1 + step, shape), [filled(1, shape), filled(2, shape)]])
    kv.barrier()
    out = [filled(0, shape), filled(0, shape)]
    kv.pull([0, 1], out=out)
    total = sum(w + 1 + s for w in range(size) for s in range(pushes))
    assert np.array_equal(out[0], start - np.float32(lr * rescale * total))
    assert np.array_equal(out[1], filled(100 - lr * rescale * 3 * size * pushes, shape))
    # Each server counts the pushes of the keys it holds a slice of: a small key lives on
    # one server, a split one on all of them.
    counts = kv.update_counts()
    if elements > 1024:
        assert counts == [2 * size * pushes] * NUM_SERVERS
    else:
        assert sum(counts) == 2 * size * pushes


def test_pushes_need_an_optimizer(rank):
    kv = hkv.create("dist_async")
    kv.init(7, filled(0))
    with pytest.raises(herd.Error, match="optimizer"):
        kv.push(7, filled(1))


def test_pushpull_returns_a_value_with_this_workers_push_applied(rank, size):
    # Every push adds one (SGD at rate 1 on a gradient of -1): the value a worker gets back
    # has its own push and any number of the others' applied.
    kv = hkv.create("dist_async")
    kv.set_optimizer(hkv.SGD(learning_rate=1.0))
    kv.init(8, filled(0))
    kv.barrier()
    value = filled(-1)
    kv.pushpull(8, value)
    assert np.all(value == value[0, 0]) and 1 <= value[0, 0] <= size
    kv.barrier()
    out = filled(0)
    kv.pull(8, out=out)
    assert np.array_equal(out, filled(size))


def test_the_updater_is_refused_where_the_servers_update(rank):
    kv = hkv.create("dist_async")
    with pytest.raises(herd.Error, match="dist_async"):
        kv.set_updater(lambda key, merged, stored: None)


def test_optimizer_states_stay_on_the_servers():
    kv = hkv.create("dist_async")
    kv.set_optimizer(hkv.SGD(learning_rate=0.1, momentum=0.9))
    with pytest.raises(herd.Error, match="dist_async"):
        kv.save_optimizer_states("never_written")
