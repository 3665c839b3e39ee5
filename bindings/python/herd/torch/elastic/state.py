"""The state of an elastic job: State, ObjectState and TorchState, with Horovod's API.

herd's elastic training restarts the whole job (herdrun --max-restarts) instead of
changing its ranks in place, so the state has three copies: the live objects, the copy
of the last ``commit()`` in memory (``restore()`` returns to it) and the same copy on
disk (a relaunched job starts from it, herd.torch.elastic.run reads it).
"""

import copy

import torch

from herd.process_sets import global_process_set
from herd.torch.agreement import agree
from herd.torch.elastic import commit_file
from herd.torch.elastic.sampler import ElasticSampler
from herd.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from herd.torch.mpi_ops import rank, size

_CALLER = "herd.torch.elastic"


class State:
    """What a training function needs to resume: ``commit()`` saves it (in memory, and on
    disk for a relaunch), ``restore()`` returns to the last commit, ``sync()`` gives every
    rank rank 0's. Subclasses provide ``save``, ``restore``, ``sync`` and the two
    snapshot methods.

    Args:
        bcast_object: broadcasts a Python object from a root rank (herd.torch's
            broadcast_object).
        get_rank: returns this process's rank.
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions called after a reset. herd never resets a job in place (a failure
        relaunches it), so they run only if ``on_reset`` is called explicitly."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Horovod's host-change notice; a herd job's hosts never change while it runs."""

    def commit(self):
        """Saves the state in memory and writes it (rank 0) to the commit file atomically.
        Every rank calls it at the same point of the training loop: a failure to write
        raises on every rank, naming the file."""
        self.save()
        target = commit_file.path()
        error = None
        if self._rank() == 0:
            try:
                commit_file.write(target, {"ranks": size(), "state": self._snapshot()})
            except Exception as failure:  # noqa: BLE001 -- raised on every rank by agree
                error = failure
        try:
            agree(error, _CALLER, "commit", "write", global_process_set)
        finally:
            error = None  # raised with a traceback through this frame: no cycle
        self.check_host_updates()

    def check_host_updates(self):
        """Horovod checks for added or removed hosts here; a herd job's hosts never change
        while it runs (a failure relaunches the whole job), so there is nothing to check."""

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError

    def reset(self):
        """Called by ``on_reset``; nothing to do for a job restarted from scratch."""

    def _snapshot(self):
        """The last saved state, as a picklable dict for the commit file."""
        raise NotImplementedError

    def _load_snapshot(self, snapshot):
        """Makes ``snapshot`` (from the commit file) the saved and the live state."""
        raise NotImplementedError


class ObjectState(State):
    """State made of plain Python objects, given as keyword arguments and kept as
    attributes (``state.epoch``, ``state.batch``, ...). ``save`` deep-copies them,
    ``sync`` broadcasts rank 0's saved copy."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name))
                             for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        self.save()
        self._saved_state = self._bcast_object(self._saved_state)
        self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))

    def _snapshot(self):
        return {"objects": self._saved_state}

    def _load_snapshot(self, snapshot):
        objects = snapshot.get("objects", {})
        _require_same_names("objects", set(self._saved_state), set(objects))
        self._saved_state = objects
        self._set_attrs()


class _StateDictHandler:
    """An object with state_dict()/load_state_dict(): a copy of its state as saved by
    the last commit, put back by restore; subclasses say how rank 0's state reaches the
    other ranks (sync)."""

    def __init__(self, value):
        self.value = value
        self.saved = None
        self.save()

    def save(self):
        self.saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self.saved)


class _ModuleHandler(_StateDictHandler):
    """A torch.nn.Module: rank 0's parameters and buffers on sync."""

    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_StateDictHandler):
    """A torch optimizer (or DistributedOptimizer): rank 0's state and hyper-parameters
    on sync."""

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class _SamplerHandler(_StateDictHandler):
    """An ElasticSampler: rank 0's epoch and position on sync."""

    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict(), root_rank=0,
                                                    name="herd.elastic.sampler"))


def _handler_for(value):
    if isinstance(value, torch.nn.Module):
        return _ModuleHandler(value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(value)
    if isinstance(value, ElasticSampler):
        return _SamplerHandler(value)
    return None


def _require_same_names(what, live, committed):
    if live != committed:
        raise ValueError(f"herd.torch.elastic: the committed state's {what} are "
                         f"{sorted(committed)}, this state's are {sorted(live)}: resume with "
                         "the state of the run that committed it")


class TorchState(ObjectState):
    """The state of a PyTorch training loop: ``model`` and ``optimizer`` (either may be
    None), and every keyword argument as an attribute. Modules, optimizers and
    ElasticSamplers among them are saved through their state_dict and synchronized with
    herd's broadcasts; the other values are plain objects (ObjectState)."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        self._handlers = {}
        objects = {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is None:
                objects[name] = value
            else:
                self._handlers[name] = handler
                setattr(self, name, value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **objects)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        # Optimizers first: a rank whose optimizer has no state yet creates it with one
        # step on zero gradients, which may move its parameters (weight decay); the
        # modules' broadcast after it gives every rank rank 0's parameters exactly.
        order = sorted(self._handlers.values(),
                       key=lambda handler: not isinstance(handler, _OptimizerHandler))
        for handler in order:
            handler.sync()
        for handler in self._handlers.values():
            handler.save()
        super().sync()

    def _snapshot(self):
        snapshot = super()._snapshot()
        snapshot["handlers"] = {name: handler.saved for name, handler in self._handlers.items()}
        return snapshot

    def _load_snapshot(self, snapshot):
        saved = snapshot.get("handlers", {})
        _require_same_names("models, optimizers and samplers", set(self._handlers), set(saved))
        super()._load_snapshot(snapshot)
        for name, handler in self._handlers.items():
            handler.saved = saved[name]
            handler.restore()
