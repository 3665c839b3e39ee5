"""The DistributedOptimizer that ``op=Adasum`` gives: Adasum of each step's parameter change.

``DistributedOptimizer(optimizer, op=Adasum)`` on more than one rank returns this
optimizer instead of the averaging one (optimizer.py), as horovod.torch does. Adasum
combines what each rank would do to the model, not its gradient, so that the optimizer's
own rule (momentum, Adam's scaling) acts on each rank's gradient before the ranks'
contributions meet:

1. When the last of ``backward_passes_per_step`` passes has put a parameter's gradient
   in ``p.grad`` (the same AccumulateGrad hook as the averaging optimizer), the wrapped
   optimizer steps that parameter alone, locally. The change it made, ``p - start``
   (``start`` being the parameter before the step), replaces ``p`` and is Adasum-allreduced
   in place at once (compressed with ``compression``), overlapping the rest of backward.
2. ``step()`` submits the parameters whose hook has not fired (their gradient is zeros),
   waits for every reduction, and sets each parameter to ``start`` plus the combined change.

So between a parameter's hook and ``step()`` the parameter holds its change, not its
value, as in Horovod. ``synchronize()`` does nothing (there is nothing to wait for
before ``step()``), and ``skip_synchronize()`` raises AssertionError, as in Horovod.

Names: parameter ``n`` travels as ``allreduce.n`` (``noname.i.j`` without
``named_parameters``, as the averaging optimizer names them). Adasum needs the process
set's size to be a power of two and float16/float32/float64 parameters; otherwise the
first reduction raises herd.UnsupportedError or ValueError from ``step()``.

Errors: a submission that fails on this rank (the local step, the compression, a refused
call) is followed by stand-ins for every parameter not submitted yet, which the other
ranks' reductions disagree with, so every rank's ``step()`` raises (this rank its own
exception, the others herd.Error naming it). A parameter whose reduction failed is set
back to its value before the step.
"""

import collections
import contextlib
import weakref

import torch

from herd.handles import wait_all
from herd.reduce_ops import Adasum
from herd.torch.agreement import report_after_failure
from herd.torch.mpi_ops import allreduce_async_, synchronize
from herd.torch.optimizer_class import subclass_carrying

__all__ = ["adasum_optimizer"]

_TOO_MANY_PASSES = (
    "DistributedOptimizer(op=Adasum): a parameter got more than backward_passes_per_step="
    "{passes} gradients before step(); pass a larger backward_passes_per_step to accumulate "
    "more backward passes locally"
)
_ZERO_GRAD_TOO_EARLY = (
    "DistributedOptimizer(op=Adasum): zero_grad() between backward() and step() would race "
    "with the reductions under way; call it after step()"
)
# The prescale of a stand-in (see the module's docstring): real reductions use 1.0, so
# every rank's reduction of that name fails on the disagreement.
_STAND_IN_PRESCALE = 0.0


def _make_hook(optimizer_ref, parameter):
    """The AccumulateGrad hook; it holds the optimizer weakly, as optimizer.py's does."""

    def hook(*_):
        optimizer = optimizer_ref()
        if optimizer is not None:
            optimizer._herd_gradient_ready(parameter)

    return hook


class _DistributedAdasumOptimizer:
    """The methods of every Adasum optimizer class, copied into a subclass of the wrapped
    optimizer's class (``optimizer_class.subclass_carrying``), so ``super(self._herd_class, self).step()`` is
    the wrapped optimizer's own step."""

    def _herd_setup(self, names, compression, backward_passes_per_step, process_set):
        self._herd_names = names
        self._compression = compression
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.process_set = process_set
        self._herd_params = [p for group in self.param_groups for p in group["params"]
                             if p.requires_grad]
        # Each parameter's value before the current step.
        self._herd_start = {id(p): torch.zeros_like(p, requires_grad=False)
                            for p in self._herd_params}
        self._herd_grad_accs = []
        self._herd_reset()
        self._herd_hooked = process_set.included()
        if not self._herd_hooked:
            return
        optimizer_ref = weakref.ref(self)
        with torch.enable_grad():  # expand_as has no grad_fn under no_grad
            for p in self._herd_params:
                if p.grad is None:
                    # A parameter this rank never computes a gradient for still steps
                    # (with zeros) and still reduces, as the other ranks expect.
                    p.grad = torch.zeros_like(p)
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(_make_hook(optimizer_ref, p))
                self._herd_grad_accs.append(accumulator)

    def _herd_reset(self):
        """The state of a step that has not begun."""
        self._herd_passes_left = {id(p): self.backward_passes_per_step
                                  for p in self._herd_params}
        self._herd_pending = collections.OrderedDict()  # id(p) -> function finishing p
        self._herd_failure = None  # this rank's first failure in this step
        self._herd_any_pass = False

    def set_backward_passes_per_step(self, passes):
        """Changes the number of backward passes per step; the current count restarts."""
        self.backward_passes_per_step = int(passes)
        self._herd_passes_left = {id(p): self.backward_passes_per_step
                                  for p in self._herd_params}

    def _herd_gradient_ready(self, p):
        """Runs in backward once one pass's gradient of ``p`` is in ``p.grad``."""
        key = id(p)
        if self._herd_passes_left[key] <= 0:
            raise AssertionError(_TOO_MANY_PASSES.format(passes=self.backward_passes_per_step))
        self._herd_any_pass = True
        self._herd_passes_left[key] -= 1
        if self._herd_passes_left[key] > 0 or self._herd_failure is not None:
            return
        try:
            self._herd_submit(p)
        except Exception as error:  # noqa: BLE001 -- step() raises it on every rank
            self._herd_failure = error

    def _herd_local_change(self, p):
        """Steps ``p`` alone with the wrapped optimizer and leaves its change in ``p``."""
        start = self._herd_start[id(p)]
        stashed = [group["params"] for group in self.param_groups]
        with torch.no_grad():
            start.copy_(p)
        try:
            for group in self.param_groups:
                group["params"] = [p] if any(q is p for q in group["params"]) else []
            super(self._herd_class, self).step()
        except BaseException:
            with torch.no_grad():
                p.copy_(start)
            raise
        finally:
            for group, params in zip(self.param_groups, stashed):
                group["params"] = params
        with torch.no_grad():
            p.sub_(start)

    def _herd_submit(self, p, stand_in=False):
        name = self._herd_names[id(p)]  # mpi_ops submits it as "allreduce.<name>"
        start = self._herd_start[id(p)]
        if stand_in:
            zeros = torch.zeros_like(p, memory_format=torch.contiguous_format)
            try:
                wire = self._compression.compress(zeros)[0]
            except Exception:  # noqa: BLE001 -- any other dtype disagrees as well
                wire = zeros
            context, prescale = None, _STAND_IN_PRESCALE
        else:
            self._herd_local_change(p)
            try:
                wire, context = self._compression.compress(p.data)
                prescale = 1.0
            except BaseException:
                with torch.no_grad():
                    p.copy_(start)
                raise
        try:
            handle = allreduce_async_(wire, name=name, op=Adasum, prescale_factor=prescale,
                                      process_set=self.process_set)
        except BaseException:
            if not stand_in:
                with torch.no_grad():
                    p.copy_(start)
            raise

        def finish():
            try:
                change = synchronize(handle)
            except BaseException:
                if not stand_in:
                    with torch.no_grad():
                        p.copy_(start)
                raise
            if stand_in:
                return
            change = self._compression.decompress(change, context)
            with torch.no_grad():
                start.add_(change)
                p.copy_(start)

        self._herd_pending[id(p)] = finish

    def synchronize(self):
        """Nothing to do: ``step()`` waits for the reductions (Horovod's Adasum optimizer
        has the same no-op)."""

    @contextlib.contextmanager
    def skip_synchronize(self):
        raise AssertionError("DistributedOptimizer(op=Adasum): skip_synchronize() is not "
                             "supported; the reductions finish inside step()")
        yield  # pragma: no cover -- makes this a generator for contextmanager

    def step(self, closure=None):
        """Reduces every parameter's change (submitting those whose hook has not fired) and
        applies the combined changes. ``closure`` runs first, as Horovod runs it."""
        loss = closure() if closure is not None else None
        if not self._herd_hooked:
            # Outside the process set: a plain local step.
            super(self._herd_class, self).step()
            return loss
        failure = self._herd_failure
        if failure is None:
            try:
                for p in self._herd_params:
                    if id(p) not in self._herd_pending:
                        self._herd_submit(p)
            except Exception as error:  # noqa: BLE001 -- raised after the exchange below
                failure = error
        if failure is not None:
            for p in self._herd_params:
                if id(p) not in self._herd_pending:
                    with contextlib.suppress(Exception):
                        self._herd_submit(p, stand_in=True)
        collective_failure = None
        try:
            wait_all(list(self._herd_pending.values()))
        except Exception as error:  # noqa: BLE001 -- raised below
            collective_failure = error
        finally:
            self._herd_reset()
        if failure is None and collective_failure is None:
            return loss
        try:
            report_after_failure(failure, collective_failure,
                                 "herd.torch.DistributedOptimizer(op=Adasum).step",
                                 "DistributedOptimizer.adasum", "submit", self.process_set)
        finally:
            failure = collective_failure = None

    def zero_grad(self, *args, **kwargs):
        if self._herd_any_pass:
            raise AssertionError(_ZERO_GRAD_TOO_EARLY)
        return super(self._herd_class, self).zero_grad(*args, **kwargs)


def adasum_optimizer(optimizer, names, compression, backward_passes_per_step, process_set):
    """``optimizer`` wrapped as the Adasum DistributedOptimizer; ``names`` maps id(parameter)
    to its name. Called by ``DistributedOptimizer`` after checking its arguments."""
    cls = subclass_carrying(_DistributedAdasumOptimizer, type(optimizer))
    wrapped = cls.__new__(cls)
    # As optimizer.py does: the optimizer's attributes, parameter-group dicts and state
    # carry over.
    for key, value in vars(optimizer).items():
        if not (callable(value) and hasattr(cls, key)):
            setattr(wrapped, key, value)
    wrapped.param_groups = list(optimizer.param_groups)
    wrapped.state = collections.defaultdict(dict, optimizer.state)
    wrapped._herd_setup(names, compression, backward_passes_per_step, process_set)
    return wrapped
