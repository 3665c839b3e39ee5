"""Whole-model helpers on top of the collectives, as in horovod.torch.

``broadcast_parameters`` and ``broadcast_optimizer_state`` make every rank
start from the root's weights and optimizer state; ``broadcast_object`` and
``allgather_object`` move any picklable Python object (pickled into a uint8
tensor: its length first, then the bytes).
"""

import pickle
from collections import defaultdict

import torch

from herd.process_sets import ProcessSet, global_process_set
from herd.torch.mpi_ops import allgather, broadcast_, broadcast_async_, rank, synchronize


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


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites every rank's tensors with ``root_rank``'s, in place.

    ``params``: ``model.state_dict()``, ``model.named_parameters()`` or
    ``model.parameters()`` (or any dict or list of tensors / (name, tensor)
    pairs). All broadcasts are submitted before the first wait, so herd fuses
    them.
    """
    handles = [broadcast_async_(p, root_rank, name, process_set=process_set)
               for name, p in _named_tensors(params, "herd.torch.broadcast_parameters")
               if p is not None]
    for handle in handles:
        synchronize(handle)


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


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Makes every rank's optimizer state and hyper-parameters ``root_rank``'s.

    An optimizer with no state yet (before its first step) first takes one
    step on zero gradients so that its state exists; then every tensor of the
    state is broadcast in place under a deterministic name (``<key>.<n>``, n
    counting the parameters that have the key), and the scalars (lr,
    momentum, betas, non-tensor state entries) travel pickled in one object.
    ``model`` (optional) marks the parameters of sparse embeddings, which get
    sparse zero gradients. torch.optim.LBFGS is refused, as by Horovod.
    """
    if isinstance(model, ProcessSet):  # broadcast_optimizer_state(opt, root, process_set)
        model, process_set = None, model
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("herd.torch.broadcast_optimizer_state: cannot broadcast "
                         "torch.optim.LBFGS state (deeply nested, with None entries)")
    if len(optimizer.state) == 0:
        _initialize_state(optimizer, model)
    if len(optimizer.state) == 0:
        return  # a stateless optimizer: nothing to broadcast

    tensors = []
    scalars = {}
    occurrences = defaultdict(int)
    for index, group in enumerate(optimizer.param_groups):
        for option, value in group.items():
            if option != "params":
                scalars[("option", index, option)] = value
        for p in group["params"]:
            if p not in optimizer.state:
                continue  # no gradient ever (requires_grad=False): no state
            for key, value in optimizer.state[p].items():
                occurrences[key] += 1
                if torch.is_tensor(value):
                    tensors.append((f"{key}.{occurrences[key]}", value))
                else:
                    scalars[("state", index, id(p), key)] = value

    broadcast_parameters(tensors, root_rank, process_set=process_set)

    # Parameters are keyed by position, not id(), in what travels: ids differ across ranks.
    positions = {}
    for index, group in enumerate(optimizer.param_groups):
        for position, p in enumerate(group["params"]):
            positions[id(p)] = (index, position)
    portable = {}
    for key, value in scalars.items():
        if key[0] == "state":
            key = ("state", positions[key[2]], key[3])
        portable[key] = value
    portable = broadcast_object(portable, root_rank, name="optimizer_state.scalars",
                                process_set=process_set)
    for key, value in portable.items():
        if key[0] == "option":
            optimizer.param_groups[key[1]][key[2]] = value
        else:
            (index, position), entry = key[1], key[2]
            optimizer.state[optimizer.param_groups[index]["params"][position]][entry] = value


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns ``root_rank``'s ``obj`` on every rank of ``process_set`` (pickled, then two
    broadcasts: the length, then the bytes). ``name`` defaults to the object's type name."""
    name = type(obj).__name__ if name is None else name
    if rank() == root_rank:
        payload = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
        broadcast_(length, root_rank, f"{name}.sz", process_set=process_set)
    else:
        length = torch.zeros(1, dtype=torch.int64)
        broadcast_(length, root_rank, f"{name}.sz", process_set=process_set)
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, f"{name}.t", process_set=process_set)
    if rank() == root_rank:
        return obj
    return pickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's ``obj``, in rank order of ``process_set`` (pickled;
    one allgather of the lengths, one of the bytes). ``name`` defaults to the type name."""
    name = type(obj).__name__ if name is None else name
    payload = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64), name=f"{name}.sz",
                        process_set=process_set).tolist()
    gathered = allgather(payload, name=f"{name}.t", process_set=process_set).numpy()
    objects = []
    start = 0
    for length in lengths:
        objects.append(pickle.loads(gathered[start:start + length].tobytes()))
        start += length
    return objects
