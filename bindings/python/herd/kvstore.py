"""MXNet's KVStore (``mxnet.kvstore``) on herd's C++ store (herd/kvstore.h).

    import herd
    import herd.kvstore

    herd.init()                                  # distributed types only
    kv = herd.kvstore.create("dist_sync")
    kv.init(3, weights)                          # rank 0's value reaches every worker
    kv.set_optimizer(herd.kvstore.SGD(learning_rate=0.1, momentum=0.9))
    kv.push(3, [grad_on_dev0, grad_on_dev1])     # summed, then the optimizer runs
    kv.pull(3, out=weights)

Keys are ints or strs, one or a list of them. A value is a NumPy array or a
torch tensor (on the CPU; a CUDA one where herd was built with CUDA), or, for
push, pull and pushpull, a list of them: one per local device. With a list of
keys, the values are a list with one entry per key. Every call returns when
its work is done (its outputs written); nothing is copied on the way in or
out but a non-contiguous array or tensor, which goes through a contiguous
copy. The store's rules and errors are the C++ store's (docs/kvstore.md);
they raise herd.Error with its message. docs/python.md has the mapping from
``mxnet.kvstore`` and what differs.
"""

import os
import sys
from collections.abc import Mapping

import numpy as np

from herd import _native

__all__ = [
    "Adam",
    "AdamW",
    "CosineScheduler",
    "FactorScheduler",
    "KVStore",
    "MultiFactorScheduler",
    "PolyScheduler",
    "SGD",
    "create",
]


def create(name="local", *, type=None):
    """A new store of type ``name`` (MXNet's keyword; ``type=`` is herd's C++ one): local,
    device, dist_sync, dist_device_sync, dist_async or horovod (MXNet's rules: lower-cased,
    then matched by substring). The distributed types need ``herd.init()`` first, and every
    worker creates its stores in the same order."""
    if type is not None:
        if name != "local":
            raise TypeError("herd.kvstore.create: give the store's type once, as name= or type=")
        name = type
    if not isinstance(name, str):
        raise TypeError("herd.kvstore.create: the type is a str, not "
                        f"{name.__class__.__name__}")
    return KVStore(_native.kvstore_create(name))


# --------------------------------------------------------------------------
# Arrays and tensors to the native layer's (address, dtype, shape, device,
# stream) tuples
# --------------------------------------------------------------------------

def _torch_tensor_type():
    """torch.Tensor if torch is imported (a value can only be a tensor then), else None."""
    torch = sys.modules.get("torch")
    return None if torch is None else torch.Tensor


def _is_value(obj):
    tensor_type = _torch_tensor_type()
    return isinstance(obj, np.ndarray) or (tensor_type is not None and isinstance(obj, tensor_type))


def _describe(obj):
    return type(obj).__name__


def _array_tuple(array):
    return (array.ctypes.data, array.dtype.name, list(array.shape), -1, 0)


def _checked_tensor(tensor, caller):
    """The tensor itself, once it is a dense one in memory herd can address."""
    import torch

    if tensor.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{caller}: the tensor is on {tensor.device}; herd takes CPU tensors, "
                         "and CUDA ones where it was built with CUDA")
    if tensor.layout != torch.strided:
        raise ValueError(f"{caller}: {tensor.layout} tensors are not supported; use a dense one")
    return tensor


def _tensor_tuple(tensor):
    if tensor.device.type == "cuda":
        import torch

        device, stream = tensor.device.index, torch.cuda.current_stream(tensor.device).cuda_stream
    else:
        device, stream = -1, 0
    return (tensor.data_ptr(), str(tensor.dtype).replace("torch.", ""), list(tensor.shape),
            device, stream)


class _Call:
    """The values of one native call: their tuples, the objects that must stay alive
    until it returns, and the copies back into non-contiguous outputs."""

    def __init__(self, caller):
        self.caller = caller
        self.keep_alive = []
        self.copies_back = []

    def input(self, value):
        if isinstance(value, np.ndarray):
            if not value.dtype.isnative:
                value = value.astype(value.dtype.newbyteorder("="))
            array = np.ascontiguousarray(value)
            self.keep_alive.append(array)
            return _array_tuple(array)
        if _is_value(value):
            tensor = _checked_tensor(value, self.caller).detach().contiguous()
            self.keep_alive.append(tensor)
            return _tensor_tuple(tensor)
        raise TypeError(f"{self.caller}: a value is a numpy.ndarray or a torch.Tensor, "
                        f"not {_describe(value)}")

    def output(self, value):
        if isinstance(value, np.ndarray):
            if not value.flags.writeable:
                raise ValueError(f"{self.caller}: the output array is read-only")
            if not value.dtype.isnative:
                raise ValueError(f"{self.caller}: the output array's byte order is not the "
                                 "machine's")
            array = value if value.flags.c_contiguous else np.ascontiguousarray(value)
            if array is not value:
                self.copies_back.append(lambda: np.copyto(value, array))
            self.keep_alive.append(array)
            return _array_tuple(array)
        if _is_value(value):
            tensor = _checked_tensor(value, self.caller).detach()
            if not tensor.is_contiguous():
                tensor = tensor.contiguous()
                self.copies_back.append(lambda: _copy_tensor(value, tensor))
            self.keep_alive.append(tensor)
            return _tensor_tuple(tensor)
        raise TypeError(f"{self.caller}: an output is a numpy.ndarray or a torch.Tensor, "
                        f"not {_describe(value)}")

    def finish(self):
        for copy_back in self.copies_back:
            copy_back()


def _copy_tensor(destination, source):
    import torch

    with torch.no_grad():
        destination.copy_(source)


def _keys(key, caller):
    """(list of keys, whether one key was given). The keys' types are the C++ store's to
    check."""
    if isinstance(key, (list, tuple)):
        if not key:
            raise TypeError(f"{caller}: the list of keys is empty")
        return list(key), False
    return [key], True


def _one_or_list(value, convert, caller, what):
    """One key's values: a single array or tensor, or a non-empty list of them (one per
    device)."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise TypeError(f"{caller}: the list of {what} for a key is empty")
        return [convert(v) for v in value]
    return [convert(value)]


def _per_key(keys, single, values, convert, caller, what):
    """Per key, the list of its values' tuples."""
    if single:
        return [_one_or_list(values, convert, caller, what)]
    if not isinstance(values, (list, tuple)) or len(values) != len(keys):
        got = f"{len(values)} entries" if isinstance(values, (list, tuple)) else _describe(values)
        raise TypeError(f"{caller}: {len(keys)} keys take a list of {len(keys)} {what} (one "
                        f"per key, each a value or a list of them), not {got}")
    return [_one_or_list(v, convert, caller, what) for v in values]


def _one_per_key(keys, single, values, convert, caller, what):
    """Per key, exactly one value's tuple (init, broadcast's value)."""
    if single:
        if isinstance(values, (list, tuple)):
            raise TypeError(f"{caller}: one key takes one value, not a list of {len(values)}")
        return [convert(values)]
    if not isinstance(values, (list, tuple)) or len(values) != len(keys):
        got = f"{len(values)} entries" if isinstance(values, (list, tuple)) else _describe(values)
        raise TypeError(f"{caller}: {len(keys)} keys take a list of {len(keys)} {what}, one per "
                        f"key, not {got}")
    for value in values:
        if isinstance(value, (list, tuple)):
            raise TypeError(f"{caller}: each key takes one value here, not a list")
    return [convert(v) for v in values]


# --------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------

class KVStore:
    """One store; make it with ``herd.kvstore.create``. Method names and arguments are
    ``mxnet.kvstore.KVStore``'s."""

    OPTIMIZER = "optimizer"

    def __init__(self, native):
        self._native = native

    @property
    def type(self):
        """The lower-cased type name given to ``create``."""
        return self._native.type

    @property
    def rank(self):
        """This worker's rank among the workers (parameter-server ranks excluded)."""
        return self._native.rank

    @property
    def num_workers(self):
        """The number of workers (parameter-server ranks excluded); 1 for local."""
        return self._native.num_workers

    def init(self, key, value):
        """Gives each key its first value; on distributed types rank 0's value wins."""
        call = _Call("herd.kvstore.init")
        keys, single = _keys(key, call.caller)
        values = _one_per_key(keys, single, value, call.input, call.caller, "values")
        self._native.init(keys, values)

    def push(self, key, value, priority=0):
        """Sums each key's values (one per device; over the workers too on dist_sync) and
        applies the sum to the stored value: the updater, the optimizer, or assignment."""
        call = _Call("herd.kvstore.push")
        keys, single = _keys(key, call.caller)
        values = _per_key(keys, single, value, call.input, call.caller, "values")
        self._native.push(keys, values, int(priority))

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Writes each key's stored value into its outputs (one per device). Every value is
        dense in herd, so ``ignore_sparse`` changes nothing."""
        call = _Call("herd.kvstore.pull")
        if out is None:
            raise TypeError(f"{call.caller}: out= is required: the arrays to write the values "
                            "into")
        keys, single = _keys(key, call.caller)
        outs = _per_key(keys, single, out, call.output, call.caller, "outputs")
        self._native.pull(keys, outs, int(priority))
        call.finish()

    def pushpull(self, key, value, out=None, priority=0):
        """push, then pull into ``out``, or into ``value`` itself when ``out`` is None."""
        call = _Call("herd.kvstore.pushpull")
        keys, single = _keys(key, call.caller)
        if out is None:
            values = _per_key(keys, single, value, call.output, call.caller, "values")
            outs = []
        else:
            values = _per_key(keys, single, value, call.input, call.caller, "values")
            outs = _per_key(keys, single, out, call.output, call.caller, "outputs")
        self._native.pushpull(keys, values, outs, int(priority))
        call.finish()

    def broadcast(self, key, value, out, priority=0):
        """init with ``value`` (rank 0's reaches every worker), then pull into ``out``."""
        call = _Call("herd.kvstore.broadcast")
        keys, single = _keys(key, call.caller)
        values = _one_per_key(keys, single, value, call.input, call.caller, "values")
        outs = _per_key(keys, single, out, call.output, call.caller, "outputs")
        self._native.broadcast(keys, values, outs, int(priority))
        call.finish()

    def set_optimizer(self, optimizer):
        """Runs ``optimizer`` (``herd.kvstore.SGD``, ``Adam`` or ``AdamW``) on every push,
        where the store's values live: in this process, on every dist_sync worker's replica,
        or on the dist_async servers."""
        if not isinstance(optimizer, _Optimizer):
            raise TypeError("herd.kvstore.set_optimizer: takes herd.kvstore.SGD, Adam or AdamW, "
                            f"not {_describe(optimizer)}")
        self._native.set_optimizer(*optimizer._native_config())

    def set_updater(self, updater):
        """Calls ``updater(key, merged, stored)`` on every push instead of the optimizer:
        ``merged`` (read-only) and ``stored`` (updated in place) are NumPy arrays over the
        store's memory, valid during the call only. ``key`` is the int or str pushed."""
        if not callable(updater):
            raise TypeError("herd.kvstore.set_updater: the updater is a callable "
                            f"(key, merged, stored), not {_describe(updater)}")
        self._native.set_updater(updater)

    _set_updater = set_updater

    def set_gradient_compression(self, compression_params):
        """``{'type': '2bit', 'threshold': 0.5}``, ``{'type': '1bit'}`` or
        ``{'type': 'none'}``: compresses what the workers send (distributed types only)."""
        caller = "herd.kvstore.set_gradient_compression"
        if not isinstance(compression_params, Mapping):
            raise TypeError(f"{caller}: takes a dict such as {{'type': '2bit', 'threshold': 0.5}}, "
                            f"not {_describe(compression_params)}")
        unknown = sorted(set(compression_params) - {"type", "threshold"})
        if unknown:
            raise ValueError(f"{caller}: unknown entries {unknown}; it takes 'type' and "
                             "'threshold'")
        if "type" not in compression_params:
            raise ValueError(f"{caller}: the dict names no 'type' ('2bit', '1bit' or 'none')")
        self._native.set_gradient_compression(str(compression_params["type"]),
                                              float(compression_params.get("threshold", 0.5)))

    def is_capable(self, capability):
        """``is_capable('optimizer')``: whether ``set_optimizer`` works (not on horovod)."""
        return self._native.is_capable(capability)

    def barrier(self):
        """Returns when every worker has called it."""
        self._native.barrier()

    _barrier = barrier

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Writes the optimizer's per-key state (and, with ``dump_optimizer``, its settings)
        to ``fname``; only where the updates run in this process (not dist_async)."""
        self._native.save_optimizer_states(os.fspath(fname), bool(dump_optimizer))

    def load_optimizer_states(self, fname):
        self._native.load_optimizer_states(os.fspath(fname))

    @property
    def stats(self):
        """Counters of this store in this process: ``pushes``, ``pulls``, ``bytes_sent``,
        ``bytes_received``."""
        return self._native.stats()

    def update_counts(self):
        """The updates each server has applied, servers in rank order (dist_async); a
        one-entry list of the updates this process's store applied otherwise."""
        return self._native.update_counts()


# --------------------------------------------------------------------------
# Optimizers and learning-rate schedules, as data (herd::kv::OptimizerConfig),
# with MXNet's keyword names
# --------------------------------------------------------------------------

class _Optimizer:
    _kind = None

    def __init__(self, learning_rate, wd, rescale_grad, lr_scheduler, clip_gradient):
        name = type(self).__name__
        if clip_gradient is not None:
            raise ValueError(f"herd.kvstore.{name}: herd's store optimizers do not clip "
                             "gradients; leave clip_gradient=None")
        if lr_scheduler is not None and not isinstance(lr_scheduler, _Scheduler):
            raise TypeError(f"herd.kvstore.{name}: lr_scheduler is a herd.kvstore "
                            "FactorScheduler, MultiFactorScheduler, CosineScheduler or "
                            f"PolyScheduler, not {_describe(lr_scheduler)}")
        self.learning_rate = float(learning_rate)
        self.wd = float(wd)
        self.rescale_grad = float(rescale_grad)
        self.lr_scheduler = lr_scheduler

    def _fields(self):
        raise NotImplementedError

    def _native_config(self):
        fields = dict(self._fields(), lr=self.learning_rate, weight_decay=self.wd,
                      rescale_grad=self.rescale_grad)
        schedule = None
        if self.lr_scheduler is not None:
            # As MXNet, the optimizer's learning rate is the schedule's base rate.
            schedule = self.lr_scheduler._native_schedule(self.learning_rate)
        return self._kind, fields, schedule

    def __repr__(self):
        fields = dict(self._fields(), learning_rate=self.learning_rate, wd=self.wd,
                      rescale_grad=self.rescale_grad, lr_scheduler=self.lr_scheduler)
        return f"herd.kvstore.{type(self).__name__}({fields})"


class SGD(_Optimizer):
    """torch.optim.SGD's rule (herd::SGD) with MXNet's names: ``learning_rate`` (lr),
    ``momentum``, ``wd`` (weight_decay, added to the gradient), ``rescale_grad``
    (multiplies the summed gradient first), ``lr_scheduler``; and herd's ``nesterov``
    and ``dampening``."""

    _kind = "sgd"

    def __init__(self, learning_rate=0.01, momentum=0.0, wd=0.0, rescale_grad=1.0,
                 lr_scheduler=None, nesterov=False, dampening=0.0, clip_gradient=None):
        super().__init__(learning_rate, wd, rescale_grad, lr_scheduler, clip_gradient)
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.dampening = float(dampening)

    def _fields(self):
        return {"momentum": self.momentum, "nesterov": self.nesterov,
                "dampening": self.dampening}


class Adam(_Optimizer):
    """torch.optim.Adam's rule (herd::Adam) with MXNet's names: ``learning_rate`` (lr),
    ``beta1``, ``beta2``, ``epsilon`` (eps), ``wd`` (weight_decay, an L2 term added to the
    gradient), ``rescale_grad``, ``lr_scheduler``."""

    _kind = "adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, wd=0.0,
                 rescale_grad=1.0, lr_scheduler=None, clip_gradient=None):
        super().__init__(learning_rate, wd, rescale_grad, lr_scheduler, clip_gradient)
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.epsilon = float(epsilon)

    def _fields(self):
        return {"beta1": self.beta1, "beta2": self.beta2, "eps": self.epsilon}


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW's rule): the weights shrink by
    ``learning_rate * wd`` before each step instead of ``wd`` entering the gradient."""

    _kind = "adamw"


class _Scheduler:
    def __init__(self, warmup_steps, warmup_begin_lr, warmup_mode):
        if warmup_mode != "linear":
            raise ValueError(f"herd.kvstore.{type(self).__name__}: herd warms up linearly only "
                             f"(warmup_mode='linear'), not '{warmup_mode}'")
        self.warmup_steps = warmup_steps
        self.warmup_begin_lr = float(warmup_begin_lr)

    def _warmup(self, base_lr):
        start_factor = self.warmup_begin_lr / base_lr if base_lr > 0 else 0.0
        return {"warmup_duration": float(self.warmup_steps), "warmup_start_factor": start_factor}

    def __repr__(self):
        return f"herd.kvstore.{type(self).__name__}({vars(self)})"


class FactorScheduler(_Scheduler):
    """The rate times ``factor`` every ``step`` updates (herd's step decay): as MXNet, the
    update numbered ``step + 1`` is the first at the lower rate."""

    def __init__(self, step, factor=1.0, warmup_steps=0, warmup_begin_lr=0.0,
                 warmup_mode="linear"):
        super().__init__(warmup_steps, warmup_begin_lr, warmup_mode)
        self.step = step
        self.factor = float(factor)

    def _native_schedule(self, base_lr):
        return "step", dict(self._warmup(base_lr), base_lr=base_lr, step_size=float(self.step),
                            gamma=self.factor)


class MultiFactorScheduler(_Scheduler):
    """The rate times ``factor`` after each of the update counts in ``step`` (herd's
    multi-step decay)."""

    def __init__(self, step, factor=1.0, warmup_steps=0, warmup_begin_lr=0.0,
                 warmup_mode="linear"):
        super().__init__(warmup_steps, warmup_begin_lr, warmup_mode)
        self.step = [float(s) for s in step]
        self.factor = float(factor)

    def _native_schedule(self, base_lr):
        return "multi_step", dict(self._warmup(base_lr), base_lr=base_lr, milestones=self.step,
                                  gamma=self.factor)


class CosineScheduler(_Scheduler):
    """Cosine decay from the base rate (after the warm-up) to ``final_lr`` at update
    ``max_update`` (herd's cosine decay)."""

    def __init__(self, max_update, final_lr=0.0, warmup_steps=0, warmup_begin_lr=0.0,
                 warmup_mode="linear"):
        super().__init__(warmup_steps, warmup_begin_lr, warmup_mode)
        self.max_update = max_update
        self.final_lr = float(final_lr)

    def _native_schedule(self, base_lr):
        return "cosine", dict(self._warmup(base_lr), base_lr=base_lr,
                              total=float(self.max_update), min_lr=self.final_lr)


class PolyScheduler(_Scheduler):
    """Polynomial decay of power ``pwr`` from the base rate (after the warm-up) to
    ``final_lr`` at update ``max_update`` (herd's polynomial decay)."""

    def __init__(self, max_update, pwr=2, final_lr=0.0, warmup_steps=0, warmup_begin_lr=0.0,
                 warmup_mode="linear"):
        super().__init__(warmup_steps, warmup_begin_lr, warmup_mode)
        self.max_update = max_update
        self.pwr = float(pwr)
        self.final_lr = float(final_lr)

    def _native_schedule(self, base_lr):
        return "polynomial", dict(self._warmup(base_lr), base_lr=base_lr,
                                  total=float(self.max_update), power=self.pwr,
                                  end_lr=self.final_lr)
