"""herd.torch as horovod.torch: the probes, the exception types, init's arguments,
objects that only cloudpickle serializes and hvd.elastic's names, under mpirun.

Each error case raises the Python type Horovod raises, on the rank whose call
was wrong, and the collectives after it still work on every rank.
"""

import pytest
import torch

import herd
import herd.numpy as hnp
import herd.torch as hvd
from rank_checks import expect, rank_values

import numpy as np


def still_works(rank, size, what):
    """A global allreduce after an error: every rank must get the exact sum."""
    expected = sum(rank_values(r, (5,), torch.int64) for r in range(size))
    got = hvd.allreduce(rank_values(rank, (5,), torch.int64), op=hvd.Sum, name=f"after.{what}")
    expect(torch.equal(got, expected), f"after {what}: {got.tolist()} != {expected.tolist()}")


# --------------------------------------------------------------------------
# The namespace
# --------------------------------------------------------------------------

# Every public name of horovod.torch 0.28 (its package namespace).
HOROVOD_TORCH_NAMES = """
    elastic Compression allgather_object broadcast_object broadcast_optimizer_state
    broadcast_parameters allreduce allreduce_async allreduce_ allreduce_async_
    grouped_allreduce grouped_allreduce_async grouped_allreduce_ grouped_allreduce_async_
    sparse_allreduce_async allgather allgather_async grouped_allgather grouped_allgather_async
    broadcast broadcast_async broadcast_ broadcast_async_ alltoall alltoall_async reducescatter
    reducescatter_async grouped_reducescatter grouped_reducescatter_async join barrier poll
    synchronize init shutdown is_initialized start_timeline stop_timeline size local_size
    cross_size rank local_rank cross_rank mpi_threads_supported mpi_enabled mpi_built
    gloo_enabled gloo_built nccl_built ddl_built ccl_built cuda_built rocm_built ProcessSet
    global_process_set add_process_set remove_process_set Average Sum Adasum Min Max Product
    HorovodInternalError DistributedOptimizer SyncBatchNorm
""".split()


def test_every_name_of_horovod_torch_is_there():
    missing = [name for name in HOROVOD_TORCH_NAMES if not hasattr(hvd, name)]
    assert not missing, missing


# --------------------------------------------------------------------------
# Probes
# --------------------------------------------------------------------------

def test_every_probe_of_horovods_basics_answers_for_herd(size):
    assert hvd.mpi_built() is True
    assert hvd.mpi_enabled() is True
    assert hvd.gloo_built() is False
    assert hvd.gloo_enabled() is False
    assert hvd.ccl_built() is False
    assert hvd.ddl_built() is False
    assert hvd.rocm_built() is False
    assert hvd.cuda_built() == herd._native.cuda_built()
    assert hvd.mpi_threads_supported() is True
    # Horovod's nccl_built is NCCL's version code, 0 without NCCL.
    code = hvd.nccl_built()
    assert isinstance(code, int)
    if herd._native.nccl_built():
        major, minor = code // 10000, code // 100 % 100
        assert major >= 2 and code >= 2700, code
        assert minor < 100
    else:
        assert code == 0
    # One machine here: every rank runs on it.
    assert hvd.local_size() == size
    assert hvd.is_homogeneous() is True
    for name in ("mpi_built", "mpi_enabled", "gloo_built", "gloo_enabled", "ccl_built",
                 "ddl_built", "rocm_built", "cuda_built", "nccl_built", "is_homogeneous",
                 "mpi_threads_supported"):
        assert name in hvd.__all__ and getattr(herd, name) is getattr(hvd, name)


# --------------------------------------------------------------------------
# Exception types
# --------------------------------------------------------------------------

def test_exception_classes_are_horovods_types():
    assert issubclass(hvd.HorovodInternalError, RuntimeError)
    assert hvd.HorovodInternalError is herd.Error
    assert issubclass(herd.InvalidArgumentError, ValueError)
    assert issubclass(herd.InvalidArgumentError, herd.Error)
    assert issubclass(herd.UnsupportedError, NotImplementedError)
    assert issubclass(herd.UnsupportedError, herd.Error)


def test_duplicate_pending_name_is_a_value_error_and_nothing_hangs(rank, size):
    tensor = rank_values(rank, (4, 3), torch.float32)
    # Rank by rank, as Horovod's suite does: the others wait in a barrier while
    # the first submission of each rank waits for its peers.
    handles = []
    for turn in range(size):
        if rank == turn:
            handles.append(hvd.allreduce_async(tensor, name="compat.duplicate", op=hvd.Sum))
            with pytest.raises(ValueError, match="still held by handle"):
                hvd.allreduce_async(tensor, name="compat.duplicate", op=hvd.Sum)
        hvd.barrier()
    expected = sum(rank_values(r, (4, 3), torch.float32) for r in range(size))
    got = hvd.synchronize(handles[0])
    expect(torch.equal(got, expected), f"duplicate's first submission: {got} != {expected}")
    still_works(rank, size, "duplicate")


def test_a_name_stays_taken_until_its_handle_is_synchronized(rank, size):
    tensor = rank_values(rank, (6,), torch.float64)
    expected = sum(rank_values(r, (6,), torch.float64) for r in range(size))
    handle = hvd.allreduce_async(tensor, name="compat.held", op=hvd.Sum)
    while not hvd.poll(handle):  # complete, but not synchronized
        pass
    for submit in (lambda: hvd.allreduce_async(tensor, name="compat.held"),
                   lambda: hvd.allreduce_async_(tensor.clone(), name="compat.held")):
        with pytest.raises(ValueError, match=f"'allreduce.compat.held' is still held by handle "
                                             f"{handle}, not synchronized yet on this rank"):
            submit()
    # Another collective's name of the same text is another name.
    gathered = hvd.allgather(tensor.reshape(1, 6), name="compat.held")
    expect(gathered.shape == (size, 6), f"allgather beside a held name: {gathered.shape}")
    got = hvd.synchronize(handle)
    expect(torch.equal(got, expected), f"held: {got} != {expected}")
    again = hvd.synchronize(hvd.allreduce_async(tensor, name="compat.held", op=hvd.Sum))
    expect(torch.equal(again, expected), f"after synchronize: {again} != {expected}")


def test_bad_root_is_a_value_error_at_the_call(rank, size):
    with pytest.raises(ValueError, match=f"root {size} is not a rank of this job"):
        hvd.broadcast(torch.ones(3), root_rank=size, name="compat.bad_root")
    still_works(rank, size, "bad_root")


def test_disagreement_across_ranks_is_horovod_internal_error(rank, size):
    tensor = torch.ones(rank + 1)
    with pytest.raises(hvd.HorovodInternalError) as raised:
        hvd.allreduce(tensor, name="compat.shapes")
    assert not isinstance(raised.value, ValueError)
    assert isinstance(raised.value, RuntimeError)
    still_works(rank, size, "shapes")


def test_a_process_set_this_rank_is_not_in_is_a_value_error(rank, size):
    outside = hvd.add_process_set([0])
    try:
        if rank != 0:
            with pytest.raises(ValueError, match="not in process set"):
                hvd.allreduce(torch.ones(2), name="compat.outside", process_set=outside)
    finally:
        hvd.remove_process_set(outside)
    still_works(rank, size, "outside")


def test_herd_numpy_raises_the_same_types(rank, size):
    array = np.arange(6, dtype=np.float32)
    with pytest.raises(ValueError, match=f"root {size} is not a rank"):
        hnp.broadcast(array, root_rank=size, name="compat.numpy.root")
    handle = hnp.allreduce_async(array, name="compat.numpy.dup", op=herd.Sum)
    with pytest.raises(ValueError, match="still held by handle"):
        hnp.allreduce_async(array, name="compat.numpy.dup", op=herd.Sum)
    while not hnp.poll(handle):
        pass
    with pytest.raises(ValueError, match="still held by handle"):
        hnp.allreduce_async(array, name="compat.numpy.dup", op=herd.Sum)
    got = hnp.synchronize(handle)
    expect(np.array_equal(got, array * size), f"numpy duplicate's first: {got}")
    with pytest.raises(herd.Error) as raised:
        hnp.allreduce(np.ones(rank + 1, dtype=np.float32), name="compat.numpy.shapes")
    assert not isinstance(raised.value, ValueError)
    still_works(rank, size, "numpy")


# --------------------------------------------------------------------------
# init's arguments
# --------------------------------------------------------------------------

def test_init_takes_dynamic_process_sets(rank, size):
    hvd.init(process_sets="dynamic")  # already running: idempotent, as Horovod's
    added = hvd.add_process_set(list(range(size)))
    try:
        got = hvd.allreduce(torch.full((2,), float(rank)), op=hvd.Sum, name="compat.dynamic",
                            process_set=added)
        expect(torch.equal(got, torch.full((2,), float(sum(range(size))))), f"dynamic: {got}")
    finally:
        assert hvd.remove_process_set(added)
    with pytest.raises(ValueError, match="process_sets='static'"):
        hvd.init(process_sets="static")


# --------------------------------------------------------------------------
# Objects only cloudpickle serializes
# --------------------------------------------------------------------------

def test_broadcast_object_takes_lambdas_and_local_classes(rank, size):
    class Local:
        def __init__(self, value):
            self.value = value

    offset = 7
    sent = (lambda x: x + offset, Local(rank)) if rank == 0 else None
    function, instance = hvd.broadcast_object(sent, root_rank=0, name="compat.lambda")
    assert function(1) == 8
    assert instance.value == 0 and type(instance).__name__ == "Local"


def test_allgather_object_takes_lambdas(rank, size):
    functions = hvd.allgather_object(lambda x, r=rank: x * (r + 1), name="compat.gather")
    assert [f(2) for f in functions] == [2 * (r + 1) for r in range(size)]


# --------------------------------------------------------------------------
# hvd.elastic
# --------------------------------------------------------------------------

def test_elastic_has_horovods_names():
    # horovod.torch.elastic's names, and the State classes of horovod.common.elastic
    # that scripts subclass; test_torch_elastic.py tests what they do.
    for name in ("run", "State", "ObjectState", "TorchState", "ElasticSampler"):
        assert hasattr(hvd.elastic, name), name
    assert issubclass(hvd.elastic.TorchState, hvd.elastic.ObjectState)
    assert issubclass(hvd.elastic.ObjectState, hvd.elastic.State)
    for method in ("commit", "restore", "sync", "save", "check_host_updates",
                   "register_reset_callbacks", "on_reset"):
        assert callable(getattr(hvd.elastic.TorchState, method)), method


# --------------------------------------------------------------------------
# Join
# --------------------------------------------------------------------------

def test_other_collectives_fail_at_once_while_a_rank_is_joined(rank, size):
    # The ranks take turns joining while the others gather an unnamed tensor:
    # their unnamed counters drift apart, so the refusal cannot wait for every
    # rank that has not joined to ask for the same name. From 3 ranks on,
    # another rank may have been refused and joined too before this one asks:
    # the joined ranks named must include `first`.
    for first in range(size):
        if rank != first:
            joined = rf"ranks \[(\d+, )*{first}(, \d+)*\] have joined \(herd::join\)"
            with pytest.raises(herd.Error, match=joined):
                hvd.allgather(torch.ones(2, 1))
        last = hvd.join()
        assert hvd.allgather_object(last, name=f"compat.join.{first}") == [last] * size
    still_works(rank, size, "join")
