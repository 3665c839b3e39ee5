"""herd.kvstore in one process (the 'local' type): every rank of the mpirun runs these on
its own store. The expected values are MXNet's documented ones for the same calls, or
computed here with NumPy."""

import pathlib
import tempfile

import numpy as np
import pytest
import torch

import herd
import herd.kvstore as hkv

SHAPE = (2, 3)


def ones(scale=1.0, dtype=np.float32):
    return np.full(SHAPE, scale, dtype=dtype)


def pulled(kv, key, dtype=np.float32):
    out = np.zeros(SHAPE, dtype=dtype)
    kv.pull(key, out=out)
    return out


def test_the_store_describes_itself():
    kv = hkv.create("LOCAL")
    assert kv.type == "local"
    assert hkv.create().type == "local"
    assert hkv.create(type="Local").type == "local"
    assert kv.rank == 0
    assert kv.num_workers == 1
    assert kv.is_capable(hkv.KVStore.OPTIMIZER) is True


def test_mxnet_single_process_vectors():
    kv = hkv.create("local")
    kv.init(3, ones(2))
    assert np.array_equal(pulled(kv, 3), ones(2))
    kv.push(3, ones(8))
    assert np.array_equal(pulled(kv, 3), ones(8))
    # Four devices' values are summed; the default update assigns the sum.
    kv.push(3, [ones() for _ in range(4)])
    outs = [np.zeros(SHAPE, np.float32) for _ in range(4)]
    kv.pull(3, out=outs)
    for out in outs:
        assert np.array_equal(out, ones(4))

    def update(key, merged, stored):
        stored += 2 * merged

    kv.set_updater(update)
    kv.push(3, ones())
    assert np.array_equal(pulled(kv, 3), ones(6))

    keys = [5, 7, 9]
    kv.init(keys, [ones()] * 3)
    kv.push(keys, [ones()] * 3)
    outs = [np.zeros(SHAPE, np.float32) for _ in keys]
    kv.pull(keys, out=outs)
    for out in outs:
        assert np.array_equal(out, ones(3))
    kv.push(keys, [[ones() for _ in range(4)] for _ in keys])
    outs = [[np.zeros(SHAPE, np.float32) for _ in range(2)] for _ in keys]
    kv.pull(keys, out=outs)
    for per_device in outs:
        for out in per_device:
            assert np.array_equal(out, ones(3 + 2 * 4))


def test_the_default_update_assigns():
    kv = hkv.create("local")
    kv.init(0, ones(1))
    kv.push(0, ones(5))
    kv.push(0, ones(7))
    assert np.array_equal(pulled(kv, 0), ones(7))


def test_str_keys():
    kv = hkv.create("local")
    kv.init("fc1.weight", ones(1))
    kv.init(["fc1.bias", "fc2.weight"], [ones(2), ones(3)])
    kv.push(["fc1.weight", "fc2.weight"], [ones(10), [ones(20), ones(30)]])
    outs = [np.zeros(SHAPE, np.float32) for _ in range(3)]
    kv.pull(["fc1.weight", "fc1.bias", "fc2.weight"], out=outs)
    assert [out[0, 0] for out in outs] == [10, 2, 50]


def test_mixed_key_types_are_refused():
    kv = hkv.create("local")
    kv.init(3, ones())
    with pytest.raises(herd.Error, match="fc1"):
        kv.init("fc1", ones())


def test_push_and_pull_before_init_are_refused():
    kv = hkv.create("local")
    with pytest.raises(herd.Error, match="4"):
        kv.push(4, ones())
    with pytest.raises(herd.Error, match="4"):
        kv.pull(4, out=ones())


def test_init_twice_is_refused():
    kv = hkv.create("local")
    kv.init(1, ones())
    with pytest.raises(herd.Error, match="1"):
        kv.init(1, ones())


def test_compression_is_refused_on_local():
    kv = hkv.create("local")
    with pytest.raises(herd.Error, match="local"):
        kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})


def test_unknown_types_are_refused():
    with pytest.raises(herd.Error, match="nonsense"):
        hkv.create("nonsense")


def test_updater_gets_the_key_pushed():
    for keys in ([11, 12], ["a", "b"]):
        kv = hkv.create("local")
        seen = []

        def update(key, merged, stored):
            seen.append((key, float(merged[0, 0])))
            stored[...] = merged

        kv.set_updater(update)
        kv.init(keys, [ones(), ones()])
        kv.push(keys, [ones(3), ones(4)])
        assert sorted(seen) == [(keys[0], 3.0), (keys[1], 4.0)]


def test_updater_views_are_the_store_memory():
    kv = hkv.create("local")
    kv.init(0, ones(1, np.float64))

    def update(key, merged, stored):
        assert stored.dtype == np.float64 and stored.shape == SHAPE
        assert not merged.flags.writeable and stored.flags.writeable
        stored *= merged

    kv.set_updater(update)
    kv.push(0, ones(3, np.float64))
    kv.push(0, ones(5, np.float64))
    assert np.array_equal(pulled(kv, 0, np.float64), ones(15, np.float64))


def test_an_updater_error_reaches_the_caller_as_itself():
    kv = hkv.create("local")
    kv.init(2, ones())

    def update(key, merged, stored):
        raise KeyError(f"no rule for {key}")

    kv.set_updater(update)
    with pytest.raises(KeyError, match="no rule for 2") as raised:
        kv.push(2, ones())
    assert raised.value.__notes__ == ["raised by the herd.kvstore updater on key 2"]
    # The store still works; a later failure of its own is its own.
    with pytest.raises(herd.Error):
        kv.pull(99, out=ones())


def test_torch_tensors_in_and_out():
    kv = hkv.create("local")
    kv.init(0, torch.full(SHAPE, 2.0))
    kv.push(0, [torch.ones(SHAPE), torch.full(SHAPE, 3.0)])
    out = torch.zeros(SHAPE)
    kv.pull(0, out=out)
    assert torch.equal(out, torch.full(SHAPE, 4.0))
    # A tensor that needs a gradient is read through detach(); a non-contiguous output
    # receives the values through a contiguous copy.
    kv.push(0, torch.full(SHAPE, 6.0, requires_grad=True))
    transposed = torch.zeros(SHAPE[::-1]).t()
    assert not transposed.is_contiguous()
    kv.pull(0, out=transposed)
    assert torch.equal(transposed, torch.full(SHAPE, 6.0))


def test_numpy_and_torch_mix_in_one_call():
    kv = hkv.create("local")
    kv.init([0, 1], [ones(1), torch.ones(SHAPE, dtype=torch.float64)])
    kv.push([0, 1], [[ones(2), torch.full(SHAPE, 3.0)], np.full(SHAPE, 5.0)])
    out0, out1 = torch.zeros(SHAPE), np.zeros(SHAPE)
    kv.pull([0, 1], out=[out0, out1])
    assert torch.equal(out0, torch.full(SHAPE, 5.0))
    assert np.array_equal(out1, np.full(SHAPE, 5.0))


def test_non_contiguous_numpy_arrays():
    kv = hkv.create("local")
    source = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]  # (3, 2), strided
    kv.init(0, np.zeros((3, 2), np.float32))
    kv.push(0, source)
    out = np.zeros((2, 3), np.float32).T
    kv.pull(0, out=out)
    assert np.array_equal(out, source)


def test_pushpull_in_place_and_into_out():
    kv = hkv.create("local")
    kv.init(["x", "y"], [ones(), ones()])
    values = [ones(2), ones(3)]
    kv.pushpull("x", values)
    assert np.array_equal(values[0], ones(5)) and np.array_equal(values[1], ones(5))
    out = np.zeros(SHAPE, np.float32)
    kv.pushpull("y", ones(7), out=out)
    assert np.array_equal(out, ones(7))


def test_broadcast_initialises_and_pulls():
    kv = hkv.create("local")
    outs = [np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float32)]
    kv.broadcast(8, ones(9), out=outs)
    for out in outs:
        assert np.array_equal(out, ones(9))
    kv.broadcast([1, 2], [ones(1), ones(2)], out=[outs[0], outs[1]])
    assert np.array_equal(outs[0], ones(1)) and np.array_equal(outs[1], ones(2))


def test_argument_shapes_that_make_no_sense_are_type_errors():
    kv = hkv.create("local")
    kv.init([0, 1], [ones(), ones()])
    with pytest.raises(TypeError, match="int or a str"):
        kv.push(1.5, ones())
    with pytest.raises(TypeError, match="2 keys"):
        kv.push([0, 1], [ones()])
    with pytest.raises(TypeError, match="2 keys"):
        kv.push([0, 1], ones())
    with pytest.raises(TypeError, match="numpy.ndarray or a torch.Tensor"):
        kv.push(0, [[1.0, 2.0]])
    with pytest.raises(TypeError, match="one key takes one value"):
        kv.init(5, [ones(), ones()])
    with pytest.raises(TypeError, match="out="):
        kv.pull(0)
    with pytest.raises(TypeError, match="empty"):
        kv.push([], [])
    with pytest.raises(TypeError, match="SGD, Adam or AdamW"):
        kv.set_optimizer("sgd")
    with pytest.raises(TypeError, match="callable"):
        kv.set_updater(3)
    with pytest.raises(TypeError, match="dict"):
        kv.set_gradient_compression("2bit")
    with pytest.raises(TypeError, match="str"):
        hkv.create(3)
    with pytest.raises(TypeError, match="once"):
        hkv.create("device", type="local")


def test_read_only_outputs_are_refused():
    kv = hkv.create("local")
    kv.init(0, ones())
    out = ones()
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        kv.pull(0, out=out)


def test_values_that_disagree_with_the_key_come_from_the_store():
    kv = hkv.create("local")
    kv.init(0, ones())
    with pytest.raises(herd.Error, match="0"):
        kv.push(0, np.ones((4,), np.float32))
    with pytest.raises(herd.Error, match="0"):
        kv.pull(0, out=np.ones(SHAPE, np.float64))


def sgd_reference(weight, grads, lr, momentum, wd, rescale):
    """torch.optim.SGD's rule in float32, as herd's SGD documents it."""
    weight = weight.astype(np.float32).copy()
    buffer = None
    for grad in grads:
        g = grad.astype(np.float32) * np.float32(rescale)
        g = g + np.float32(wd) * weight
        buffer = g if buffer is None else np.float32(momentum) * buffer + g
        weight = weight - np.float32(lr) * buffer
    return weight


def test_sgd_on_the_store_follows_the_reference():
    rng = np.random.default_rng(7)
    start = rng.standard_normal(SHAPE).astype(np.float32)
    grads = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(5)]
    kv = hkv.create("local")
    kv.set_optimizer(hkv.SGD(learning_rate=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5))
    kv.init(0, start)
    for grad in grads:
        kv.push(0, [grad, grad])  # two devices: the optimizer sees their sum
    expected = sgd_reference(start, [2 * g for g in grads], 0.1, 0.9, 0.01, 0.5)
    np.testing.assert_allclose(pulled(kv, 0), expected, rtol=1e-5, atol=1e-6)
    assert kv.update_counts() == [5]


def test_a_factor_schedule_lowers_the_rate_after_step_updates():
    # Plain SGD on a gradient of ones: each update subtracts the rate of that update.
    # FactorScheduler(step=2, factor=0.5): updates 1 and 2 at 1.0, 3 and 4 at 0.5, 5 at 0.25.
    kv = hkv.create("local")
    kv.set_optimizer(hkv.SGD(learning_rate=1.0,
                             lr_scheduler=hkv.FactorScheduler(step=2, factor=0.5)))
    kv.init(0, ones(10))
    for _ in range(5):
        kv.push(0, ones())
    assert np.array_equal(pulled(kv, 0), ones(10 - (1 + 1 + 0.5 + 0.5 + 0.25)))


@pytest.mark.parametrize("scheduler, rates", [
    # Rates of updates t = 0, 1, 2, ... from herd's formulas with a base rate of 1.
    (hkv.MultiFactorScheduler(step=[1, 3], factor=0.5), [1, 0.5, 0.5, 0.25, 0.25]),
    (hkv.CosineScheduler(max_update=2, final_lr=0.2), [1, 0.6, 0.2, 0.2]),
    (hkv.PolyScheduler(max_update=4, pwr=1), [1, 0.75, 0.5, 0.25, 0, 0]),
    (hkv.FactorScheduler(step=100, warmup_steps=2, warmup_begin_lr=0.5), [0.5, 0.75, 1, 1]),
])
def test_schedules_give_the_rate_of_each_update(scheduler, rates):
    kv = hkv.create("local")
    kv.set_optimizer(hkv.SGD(learning_rate=1.0, lr_scheduler=scheduler))
    kv.init(0, ones(10))
    for _ in rates:
        kv.push(0, ones())
    np.testing.assert_allclose(pulled(kv, 0), ones(10 - sum(rates)), rtol=1e-6)


def test_schedules_refuse_what_herd_lacks():
    with pytest.raises(ValueError, match="linear"):
        hkv.FactorScheduler(step=2, warmup_mode="constant")
    with pytest.raises(TypeError, match="lr_scheduler"):
        hkv.SGD(lr_scheduler=lambda t: 0.1)


def test_adam_on_the_store_follows_the_reference():
    rng = np.random.default_rng(3)
    start = rng.standard_normal(SHAPE).astype(np.float32)
    grads = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(4)]
    lr, beta1, beta2, eps, wd = 0.01, 0.8, 0.9, 1e-6, 0.1
    for optimizer, decoupled in ((hkv.Adam, False), (hkv.AdamW, True)):
        kv = hkv.create("local")
        kv.set_optimizer(optimizer(learning_rate=lr, beta1=beta1, beta2=beta2, epsilon=eps,
                                   wd=wd))
        kv.init(0, start)
        w = start.astype(np.float64)
        m = np.zeros(SHAPE)
        v = np.zeros(SHAPE)
        for t, grad in enumerate(grads, start=1):
            kv.push(0, grad)
            g = grad.astype(np.float64)
            if decoupled:
                w = w * (1 - lr * wd)
            else:
                g = g + wd * w
            m = beta1 * m + (1 - beta1) * g
            v = beta2 * v + (1 - beta2) * g * g
            w = w - (lr / (1 - beta1 ** t)) * m / (np.sqrt(v) / np.sqrt(1 - beta2 ** t) + eps)
        np.testing.assert_allclose(pulled(kv, 0), w, rtol=1e-4, atol=1e-6)


def test_clip_gradient_is_refused():
    with pytest.raises(ValueError, match="clip"):
        hkv.SGD(clip_gradient=1.0)


def test_optimizer_states_survive_a_save_and_load():
    # Two stores take the same first pushes; the second is then rebuilt from the first's
    # saved state and both take the same further pushes. Momentum makes the state matter.
    rng = np.random.default_rng(11)
    start = rng.standard_normal(SHAPE).astype(np.float32)
    grads = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(6)]
    optimizer = hkv.SGD(learning_rate=0.05, momentum=0.9)
    original = hkv.create("local")
    original.set_optimizer(optimizer)
    original.init(0, start)
    for grad in grads[:3]:
        original.push(0, grad)
    resumed = hkv.create("local")
    resumed.set_optimizer(optimizer)
    resumed.init(0, pulled(original, 0))
    # A folder of this process's own: pytest's tmp_path is not made for several processes.
    with tempfile.TemporaryDirectory(prefix="herd_kvstore_states.") as folder:
        path = pathlib.Path(folder) / "states"
        original.save_optimizer_states(path)
        resumed.load_optimizer_states(str(path))
    for grad in grads[3:]:
        original.push(0, grad)
        resumed.push(0, grad)
    assert np.array_equal(pulled(resumed, 0), pulled(original, 0))


def test_stats_count_the_calls():
    kv = hkv.create("local")
    kv.init([0, 1], [ones(), ones()])
    kv.push([0, 1], [ones(), ones()])
    kv.pull(0, out=ones())
    assert (kv.stats.pushes, kv.stats.pulls) == (2, 1)
    assert "pushes=2" in repr(kv.stats)


def test_barrier_returns_at_once_on_local():
    kv = hkv.create("local")
    kv.barrier()
    kv._barrier()


def test_element_types_herd_lacks_are_refused_by_name():
    kv = hkv.create("local")
    with pytest.raises(ValueError, match="'bool'"):
        kv.init(0, torch.ones(SHAPE, dtype=torch.bool))
    with pytest.raises(ValueError, match="'complex64'"):
        kv.init(0, np.ones(SHAPE, np.complex64))


def test_integer_values_are_summed_and_assigned():
    kv = hkv.create("local")
    kv.init(0, np.zeros(SHAPE, np.int64))
    kv.push(0, [np.full(SHAPE, 2**40, np.int64), torch.full(SHAPE, 3, dtype=torch.int64)])
    out = np.zeros(SHAPE, np.int64)
    kv.pull(0, out=out)
    assert np.array_equal(out, np.full(SHAPE, 2**40 + 3, np.int64))


def test_tensors_herd_cannot_address_are_refused():
    kv = hkv.create("local")
    with pytest.raises(ValueError, match="meta"):
        kv.init(0, torch.ones(SHAPE, device="meta"))
    with pytest.raises(ValueError, match="sparse"):
        kv.init(0, torch.ones(SHAPE).to_sparse())


def test_dumped_optimizer_states_bring_their_optimizer():
    # With dump_optimizer the file carries the optimizer too: a store without one takes it
    # and continues bitwise as the original; without it, that store refuses the file.
    rng = np.random.default_rng(13)
    grads = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(4)]
    original = hkv.create("local")
    original.set_optimizer(hkv.Adam(learning_rate=0.01, wd=0.1,
                                    lr_scheduler=hkv.FactorScheduler(step=1, factor=0.9)))
    original.init("w", ones())
    for grad in grads[:2]:
        original.push("w", grad)
    resumed, refusing = hkv.create("local"), hkv.create("local")
    for store in (resumed, refusing):
        store.init("w", pulled(original, "w"))
    with tempfile.TemporaryDirectory(prefix="herd_kvstore_states.") as folder:
        with_optimizer = pathlib.Path(folder) / "with_optimizer"
        without = pathlib.Path(folder) / "without"
        original.save_optimizer_states(with_optimizer, dump_optimizer=True)
        original.save_optimizer_states(without)
        resumed.load_optimizer_states(with_optimizer)
        with pytest.raises(herd.Error, match="the store has no optimizer and the file holds none"):
            refusing.load_optimizer_states(without)
    for grad in grads[2:]:
        original.push("w", grad)
        resumed.push("w", grad)
    assert np.array_equal(pulled(resumed, "w"), pulled(original, "w"))


def test_bad_optimizer_settings_are_refused_by_the_store():
    kv = hkv.create("local")
    with pytest.raises(herd.Error, match="-1"):
        kv.set_optimizer(hkv.SGD(learning_rate=-1.0))
    with pytest.raises(herd.Error, match="beta1"):
        kv.set_optimizer(hkv.Adam(beta1=1.5))
    with pytest.raises(herd.Error, match="step_size"):
        kv.set_optimizer(hkv.SGD(lr_scheduler=hkv.FactorScheduler(step=0)))
