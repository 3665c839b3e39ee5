"""Whole-model helpers on top of the collectives, as in horovod.torch.

``broadcast_parameters`` and ``broadcast_optimizer_state`` make every rank
start from the root's weights and optimizer state; ``broadcast_object`` and
``allgather_object`` move any Python object cloudpickle serializes (as Horovod:
lambdas and classes defined inside functions too) in a uint8 tensor.

Each helper fails on every rank when its Python code fails on one (an object
that does not pickle, a tensor herd cannot take, a state that does not
apply): the steps around its collectives end in a status exchange
(herd.torch.agreement), so no rank is left waiting for a collective that a
failed rank never submits.
"""

import functools
import pickle
from collections import defaultdict

import cloudpickle

import torch

from herd._native import Error
from herd.handles import wait_all
from herd.process_sets import ProcessSet, global_process_set
from herd.torch.agreement import agree, exchange_status
from herd.torch.mpi_ops import (
    _wire_dtype,
    allgather,
    broadcast_,
    broadcast_async_,
    rank,
    synchronize,
)


def _named_tensors(params, caller):
    """(name, tensor) pairs from a state_dict-like mapping (sorted by name, so every rank
    submits in the same order) or an iterable of tensors or (name, tensor) pairs."""
    if isinstance(params, dict):
        return sorted(params.items())
    if isinstance(params, (str, bytes)) or not hasattr(params, "__iter__"):
        raise ValueError(f"{caller}: invalid params of type {type(params).__name__}; give a "
                         "dict such as model.state_dict() or a list of tensors or "
                         "(name, tensor) pairs")
    return [p if isinstance(p, tuple) else (None, p) for p in params]


def _checked_tensors(params, caller):
    """The (name, tensor) pairs of ``params`` to broadcast, each one checked as the
    broadcast will check it, so a tensor herd refuses fails here, before any submission."""
    tensors = [(name, p) for name, p in _named_tensors(params, caller) if p is not None]
    for _, p in tensors:
        _wire_dtype(p, caller, reduces=False)
    return tensors


def _require_same_counts(counts, caller, what, process_set):
    """Raises on every rank (all see the same ``counts``) unless every member submits the
    same number of tensors; otherwise some would wait for a name the others never send."""
    if len(set(counts)) > 1:
        per_rank = ", ".join(f"rank {r} {count}" for r, count in zip(process_set.ranks, counts))
        raise Error(f"{caller}: the ranks hold different numbers of {what} ({per_rank}); "
                    "every rank must pass the same model's")


def _broadcast_tensors(tensors, root_rank, process_set):
    """Broadcasts every (name, tensor) in place: all submitted before the first wait, so
    herd fuses them. Everything submitted is waited for, even after a failure."""
    handles = []
    try:
        for name, p in tensors:
            handles.append(broadcast_async_(p, root_rank, name, process_set=process_set))
    finally:
        wait_all([functools.partial(synchronize, handle) for handle in handles])


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites every rank's tensors with ``root_rank``'s, in place.

    ``params``: ``model.state_dict()``, ``model.named_parameters()`` or
    ``model.parameters()`` (or any dict or list of tensors / (name, tensor)
    pairs). The tensors are checked first and the ranks exchange the outcome
    and their tensor counts; then all broadcasts are submitted before the
    first wait, so herd fuses them.
    """
    caller = "herd.torch.broadcast_parameters"
    tensors, error = [], None
    try:
        tensors = _checked_tensors(params, caller)
    except Exception as failure:  # noqa: BLE001 -- raised on every rank by exchange_status
        error = failure
    try:
        counts = exchange_status(error, len(tensors), caller, "broadcast_parameters", "check",
                                 process_set)
    finally:
        error = None  # raised with a traceback through this frame: no cycle
    _require_same_counts(counts, caller, "tensors", process_set)
    _broadcast_tensors(tensors, root_rank, process_set)


def _step_without_allreduce(optimizer):
    """Runs the torch optimizer's own step. A herd DistributedOptimizer's step would
    allreduce gradients, which deadlocks unless every rank steps; its ``_herd_class`` is the
    subclass whose parent holds that plain step."""
    herd_class = getattr(type(optimizer), "_herd_class", None)
    if herd_class is None:
        return optimizer.step()
    return super(herd_class, optimizer).step()


def _initialize_state(optimizer, model):
    """Gives a fresh optimizer its state (momentum buffers, Adam moments) with one step on
    zero gradients, as Horovod does, so every rank has the tensors the root broadcasts."""
    sparse_ids = set()
    if model is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding) and module.sparse:
                sparse_ids.update(id(p) for p in module.parameters())
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p not in optimizer.state:
                p.grad = torch.zeros_like(p.data)
                if isinstance(optimizer, torch.optim.SparseAdam) or id(p) in sparse_ids:
                    p.grad = p.grad.to_sparse()
    _step_without_allreduce(optimizer)


def _optimizer_state(optimizer, model, caller):
    """(tensors, scalars) of the optimizer's state, creating the state first if it has
    none; ``(None, None)`` for an optimizer that has no state even then.

    tensors: (``<key>.<n>``, tensor) pairs, n counting the parameters that have the key;
    scalars: hyper-parameters and non-tensor state entries, keyed by parameter position
    (ids differ across ranks)."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError(f"{caller}: cannot broadcast torch.optim.LBFGS state (deeply "
                         "nested, with None entries)")
    if len(optimizer.state) == 0:
        _initialize_state(optimizer, model)
    if len(optimizer.state) == 0:
        return None, None  # a stateless optimizer: nothing to broadcast

    tensors = []
    scalars = {}
    occurrences = defaultdict(int)
    for index, group in enumerate(optimizer.param_groups):
        for option, value in group.items():
            if option != "params":
                scalars[("option", index, option)] = value
        for position, p in enumerate(group["params"]):
            if p not in optimizer.state:
                continue  # no gradient ever (requires_grad=False): no state
            for key, value in optimizer.state[p].items():
                occurrences[key] += 1
                if torch.is_tensor(value):
                    _wire_dtype(value, caller, reduces=False)
                    tensors.append((f"{key}.{occurrences[key]}", value))
                else:
                    scalars[("state", (index, position), key)] = value
    return tensors, scalars


def _apply_scalars(optimizer, scalars):
    for key, value in scalars.items():
        if key[0] == "option":
            optimizer.param_groups[key[1]][key[2]] = value
        else:
            (index, position), entry = key[1], key[2]
            optimizer.state[optimizer.param_groups[index]["params"][position]][entry] = value


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Makes every rank's optimizer state and hyper-parameters ``root_rank``'s.

    An optimizer with no state yet (before its first step) first takes one
    step on zero gradients so that its state exists; then every tensor of the
    state is broadcast in place under a deterministic name (``<key>.<n>``, n
    counting the parameters that have the key), and the scalars (lr,
    momentum, betas, non-tensor state entries) travel pickled in one object.
    ``model`` (optional) marks the parameters of sparse embeddings, which get
    sparse zero gradients. torch.optim.LBFGS is refused, as by Horovod.
    A failure on one rank (in that first step, in collecting, sending or
    applying the state) raises on every rank.
    """
    caller = "herd.torch.broadcast_optimizer_state"
    if isinstance(model, ProcessSet):  # broadcast_optimizer_state(opt, root, process_set)
        model, process_set = None, model
    tensors, scalars, error = None, None, None
    try:
        tensors, scalars = _optimizer_state(optimizer, model, caller)
    except Exception as failure:  # noqa: BLE001 -- raised on every rank by exchange_status
        error = failure
    # -1: no state at all, which every rank must agree on as well.
    try:
        counts = exchange_status(error, -1 if tensors is None else len(tensors), caller,
                                 "optimizer_state", "collect", process_set)
    finally:
        error = None  # raised with a traceback through this frame: no cycle
    _require_same_counts(counts, caller, "optimizer state tensors", process_set)
    if tensors is None:
        return
    _broadcast_tensors(tensors, root_rank, process_set)
    _broadcast_object(scalars, root_rank, "optimizer_state.scalars", process_set,
                      use=lambda received: _apply_scalars(optimizer, received))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns ``root_rank``'s ``obj`` on every rank of ``process_set``. ``name`` names the
    collectives (default ``broadcast_object``, whatever the object: the other ranks often
    pass None).

    The root pickles ``obj``; an allgather of statuses tells every rank the payload's
    length, or that pickling failed; a broadcast carries the bytes; a last status exchange
    tells every rank whether each one could unpickle them. A failure on one rank raises on
    every rank: there the original exception, elsewhere ``herd.Error`` naming the rank.
    """
    return _broadcast_object(obj, root_rank, "broadcast_object" if name is None else str(name),
                             process_set)


def _broadcast_object(obj, root_rank, name, process_set, use=None):
    """broadcast_object; ``use`` (optional) runs on every rank on what arrived (the root's
    own object on the root) before the last status exchange, so its failures reach every
    rank too, and its result is returned."""
    caller = "herd.torch.broadcast_object"
    is_root = rank() == root_rank
    payload, error = None, None
    if is_root:
        try:
            payload = torch.frombuffer(bytearray(cloudpickle.dumps(obj)), dtype=torch.uint8)
        except Exception as failure:  # noqa: BLE001 -- raised on every rank by exchange_status
            error = failure
    # Only the root contributes a length (a pickle is never empty); with a root_rank outside
    # the set nobody does, and the broadcast below reports the bad root on every rank.
    try:
        length = max(exchange_status(error, 0 if payload is None else payload.numel(),
                                     caller, name, "pickle", process_set))
    finally:
        error = None  # raised with a traceback through this frame: no cycle
    if not is_root:
        payload = torch.empty(length, dtype=torch.uint8)
    broadcast_(payload, root_rank, f"{name}.t", process_set=process_set)
    result, error = None, None
    try:
        result = obj if is_root else pickle.loads(payload.numpy().tobytes())
        if use is not None:
            result = use(result)
    except Exception as failure:  # noqa: BLE001 -- raised on every rank by agree
        error = failure
    try:
        agree(error, caller, name, "receive", process_set)
    finally:
        error = None  # raised with a traceback through this frame: no cycle
    return result


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's ``obj``, in rank order of ``process_set``. ``name``
    names the collectives (default ``allgather_object``, whatever the ranks' objects).

    Every rank pickles its object; an allgather of statuses carries the lengths (or that
    pickling failed), one of the bytes the payloads, and a last status exchange whether
    every rank could unpickle them all. A failure on one rank raises on every rank: there
    the original exception, elsewhere ``herd.Error`` naming the rank.
    """
    caller = "herd.torch.allgather_object"
    name = "allgather_object" if name is None else str(name)
    payload, error = torch.empty(0, dtype=torch.uint8), None
    try:
        payload = torch.frombuffer(bytearray(cloudpickle.dumps(obj)), dtype=torch.uint8)
    except Exception as failure:  # noqa: BLE001 -- raised on every rank by exchange_status
        error = failure
    try:
        lengths = exchange_status(error, payload.numel(), caller, name, "pickle", process_set)
    finally:
        error = None  # raised with a traceback through this frame: no cycle
    gathered = allgather(payload, name=f"{name}.t", process_set=process_set).numpy()
    objects, error = [], None
    try:
        start = 0
        for length in lengths:
            objects.append(pickle.loads(gathered[start:start + length].tobytes()))
            start += length
    except Exception as failure:  # noqa: BLE001 -- raised on every rank by agree
        error = failure
    try:
        agree(error, caller, name, "receive", process_set)
    finally:
        error = None  # raised with a traceback through this frame: no cycle
    return objects
