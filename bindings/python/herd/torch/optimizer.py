"""DistributedOptimizer: gradients averaged across ranks before every step.

``DistributedOptimizer(optimizer, ...)`` returns an optimizer of the wrapped
optimizer's own class (a subclass made at run time, as horovod.torch does) so
``isinstance``, ``state_dict``, ``load_state_dict``, learning-rate schedulers
and ``broadcast_optimizer_state`` treat it as the original. Its state,
hyperparameters and parameter groups carry over from the optimizer given.

How a step's gradients travel:

1. ``__init__`` registers a hook on each trainable parameter's gradient
   accumulator (autograd's AccumulateGrad node), which fires once the
   parameter's gradient of one backward pass has been added into ``p.grad``.
2. The hook counts the parameter's passes. At the last of
   ``backward_passes_per_step`` passes it starts ``allreduce_async_`` of
   ``p.grad`` (compressed) at once, so communication overlaps the rest of the
   backward pass. With ``groups``, a group's members go together in one
   ``grouped_allreduce_async_`` once the last of them is ready.
3. ``step()`` calls ``synchronize()``, which first submits every parameter
   whose hook has not fired (a parameter unused on this rank: its gradient
   becomes zeros, so the ranks that did use it do not wait forever), then waits
   for every reduction and writes the results back into ``p.grad``. The
   wrapped optimizer's own step runs after that. A submission that fails on one rank
   (there, or in a hook, which keeps the failure for ``synchronize``) is followed by
   stand-ins that fail the other ranks' waits at once, and every rank raises
   (docs/python.md, "Errors").

What is averaged: torch adds the gradients of successive backward passes into
``p.grad``, and the hook reduces that sum. So with ``op=Average`` each rank ends
with the mean over ranks of its *sum* over the step's passes (Horovod's rule).
A script that divides its loss by ``backward_passes_per_step`` gets the
gradient of the mean loss over all ranks' and passes' samples (when every
pass and rank has the same number of samples).

Names: parameter ``n`` of ``named_parameters`` travels as ``allreduce.n``
(a group as ``grouped_allreduce.<its first parameter's name>.<k>``, a sparse
gradient as ``allgather.n.indices`` and ``allgather.n.values``); without
``named_parameters`` the j-th parameter of the i-th parameter group is named
``allreduce.noname.i.j`` (Horovod's names, so it travels as
``allreduce.allreduce.noname.i.j``). ``optimizer._parameter_names`` maps each
parameter to its name, as in Horovod. Every rank must therefore build the same
model and parameter groups (it must anyway to train one model).
"""

import collections
import contextlib
import warnings
import weakref

import torch

from herd.handles import wait_all
from herd.process_sets import ProcessSet, global_process_set
from herd.reduce_ops import Adasum, Average, Sum
from herd.torch.agreement import describe, report_after_failure
from herd.torch.compression import Compression
from herd.torch.shared import shared_zeros
from herd.torch.mpi_ops import (
    allreduce_async_,
    grouped_allreduce_async_,
    size,
    sparse_allreduce_async,
    synchronize,
)
from herd.torch.optimizer_adasum import adasum_optimizer
from herd.torch.optimizer_class import subclass_carrying

__all__ = ["DistributedOptimizer"]

# The two misuses Horovod forbids, with the exception type it raises (AssertionError).
_TOO_MANY_PASSES = (
    "DistributedOptimizer: a parameter got more than backward_passes_per_step={passes} "
    "gradients before step(); pass a larger backward_passes_per_step to accumulate more "
    "backward passes locally"
)
_ZERO_GRAD_TOO_EARLY = (
    "DistributedOptimizer: zero_grad() between backward() and step() (or synchronize()) "
    "would race with the gradient reductions under way; call it after step()"
)


def _split_evenly(items, count):
    """``count`` consecutive slices of ``items``, the first ``len % count`` one longer
    (how Horovod forms ``groups=<int>``); empty slices are dropped."""
    base, extra = divmod(len(items), count)
    slices, start = [], 0
    for index in range(count):
        end = start + base + (1 if index < extra else 0)
        if end > start:
            slices.append(items[start:end])
        start = end
    return slices


def _parameter_names(param_groups, named_parameters):
    """{id(parameter): name} for every parameter of ``param_groups``, checked as Horovod
    checks them: (name, tensor) tuples, no name twice, no parameter left unnamed."""
    if named_parameters is None:
        return {
            id(p): f"allreduce.noname.{i}.{j}"
            for i, group in enumerate(param_groups)
            for j, p in enumerate(group["params"])
        }
    named_parameters = list(named_parameters)
    if any(not isinstance(item, tuple) or len(item) != 2 for item in named_parameters):
        raise ValueError(
            "DistributedOptimizer: named_parameters must hold (name, parameter) tuples, as "
            "model.named_parameters() gives"
        )
    seen, duplicates = set(), set()
    for name, _ in named_parameters:
        (duplicates if name in seen else seen).add(name)
    if duplicates:
        raise ValueError(
            "DistributedOptimizer: names in named_parameters must be unique; repeated: "
            + ", ".join(sorted(str(name) for name in duplicates))
        )
    # Sorted by name so a tensor listed under two names gets the same one on every rank.
    names = {id(p): str(name) for name, p in sorted(named_parameters, key=lambda item: item[0])}
    unnamed = [p for group in param_groups for p in group["params"] if id(p) not in names]
    if unnamed:
        raise ValueError(
            f"DistributedOptimizer: named_parameters leaves {len(unnamed)} of the optimizer's "
            "parameters without a name (shapes: "
            + ", ".join(str(list(p.shape)) for p in unnamed) + ")"
        )
    return names


# The prescale of a stand-in reduction (see synchronize). A real one is 1 / f for a finite
# predivide factor f, never 0, so the ranks' prescales disagree and the reduction fails
# on every rank of the set.
_STAND_IN_PRESCALE = 0.0


def _make_hook(optimizer_ref, parameter):
    """The AccumulateGrad hook. It holds the optimizer weakly, so an optimizer the
    program dropped neither stays alive through autograd nor reacts to later passes."""

    def hook(*_):
        optimizer = optimizer_ref()
        if optimizer is not None:
            optimizer._herd_gradient_ready(parameter)

    return hook


def _empty_sparse(shape, sparse_dim, dtype, device):
    """A sparse COO tensor of ``shape`` without entries, its first ``sparse_dim``
    dimensions sparse."""
    shape = tuple(shape)
    return torch.sparse_coo_tensor(
        torch.zeros(sparse_dim, 0, dtype=torch.int64, device=device),
        torch.zeros((0,) + shape[sparse_dim:], dtype=dtype, device=device), shape)


def _write_back(parameter, reduced):
    """Puts the reduced gradient into ``parameter.grad``, keeping the grad tensor itself
    (an in-place reduction of a contiguous, uncompressed gradient is already there)."""
    grad = parameter.grad
    if grad.is_sparse:
        if not reduced.is_sparse:
            reduced = reduced.to_sparse()
        grad.zero_().add_(reduced)
    elif reduced is not grad:
        grad.copy_(reduced)


class _DistributedOptimizer:
    """The methods of every DistributedOptimizer class. Not a base class:
    ``optimizer_class.subclass_carrying`` copies them into a subclass of the wrapped optimizer's
    class, so that class's own ``step`` comes right after them in the MRO and
    ``super(type(opt), opt).step()`` is the plain local step (which
    ``broadcast_optimizer_state`` uses to create missing state without a reduction).
    ``_herd_class`` (that subclass) is what the methods pass to ``super``.
    """

    def _herd_setup(self, named_parameters, compression, backward_passes_per_step, op,
                    gradient_predivide_factor, groups, sparse_as_dense, process_set,
                    shared_gradients=False):
        self._herd_names = _parameter_names(self.param_groups, named_parameters)
        # Horovod's attribute, which scripts and tests read: parameter -> name.
        self._parameter_names = {p: self._herd_names[id(p)]
                                 for group in self.param_groups for p in group["params"]}
        self._compression = compression
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.op = op
        self.gradient_predivide_factor = float(gradient_predivide_factor)
        self.sparse_as_dense = bool(sparse_as_dense)
        self.process_set = process_set
        self._should_synchronize = True
        self._synchronized = False
        # Trainable parameters in parameter-group order: the order synchronize submits in.
        self._herd_params = [p for group in self.param_groups for p in group["params"]
                             if p.requires_grad]
        self._herd_groups = []      # tuples of parameters reduced together
        self._herd_group_of = {}    # id(parameter) -> index into _herd_groups
        self._herd_grad_accs = []   # AccumulateGrad nodes: kept alive so their hooks stay
        self._herd_sparse_dims = {}  # id(parameter) -> sparse_dim of its last sparse gradient
        self._herd_reset_counts()
        # Horovod's rule: nothing to reduce on one rank, or outside the process set.
        self._herd_hooked = process_set.included() and size() > 1
        if self._herd_hooked:
            if groups is not None:
                self._herd_form_groups(groups)
            self._herd_register_hooks()
        # (parameter, its view into a shared arena): gradients kept there across steps.
        self._herd_shared_grads = []
        if shared_gradients and self._herd_hooked:
            self._herd_share_gradients()

    def _herd_share_gradients(self):
        """Puts the .grad of every dense CPU parameter into one shared arena per dtype
        (herd.torch.shared_zeros), laid out in parameter order, so that their allreduces read
        straight from the other ranks' memory and fused ones need no fusion buffer."""
        by_dtype = collections.defaultdict(list)
        for p in self._herd_params:
            if p.device.type == "cpu" and p.layout == torch.strided and (
                    p.grad is None or not p.grad.is_sparse):
                by_dtype[p.dtype].append(p)
        for dtype, params in by_dtype.items():
            arena = shared_zeros((sum(p.numel() for p in params),), dtype=dtype)
            offset = 0
            for p in params:
                view = arena[offset:offset + p.numel()].view(p.shape)
                offset += p.numel()
                if p.grad is not None:
                    view.copy_(p.grad)
                p.grad = view
                self._herd_shared_grads.append((p, view))

    def _herd_reset_counts(self):
        """The state of a step that has not begun: no pass seen, nothing submitted."""
        self._herd_passes_left = {id(p): self.backward_passes_per_step
                                  for p in self._herd_params}
        self._herd_group_ready = [0] * len(self._herd_groups)
        self._herd_submitted = set()  # ids of parameters whose reduction has started
        self._herd_pending = []       # functions that wait for a reduction and write it back
        self._herd_any_pass = False   # a hook fired since the last synchronize
        # This rank's first failure in this step, which synchronize raises on every rank: a
        # hook's submission, or the wrapped optimizer's step() that failed the step before.
        self._herd_hook_failure = None

    def _herd_form_groups(self, groups):
        """Fixes the groups: ``groups=k`` splits the parameters into k runs of consecutive
        parameters; a list of lists makes each inner list a group, and every parameter
        not listed a group of its own. Parameter order is rank 0's (of the set), so every
        rank forms the same groups even if its parameter order differed."""
        from herd.torch.functions import _broadcast_object  # functions imports mpi_ops too

        names = [self._herd_names[id(p)] for p in self._herd_params]
        root = self.process_set.ranks[0]

        def check(root_names):
            """Runs inside broadcast_object's last status exchange: a rank whose parameters
            differ from the root's fails there, and so every rank raises."""
            position = {name: index for index, name in enumerate(root_names)}
            missing = [name for name in names if name not in position]
            if missing or len(root_names) != len(names):
                raise ValueError(
                    f"DistributedOptimizer: the ranks' trainable parameters differ (rank {root} "
                    f"has {len(root_names)}, this rank {len(names)}; names not on rank {root}: "
                    f"{missing}); every rank must build the same model"
                )
            return position

        position = _broadcast_object(names, root, "DistributedOptimizer.parameter_order",
                                     self.process_set, use=check)
        ordered = sorted(self._herd_params, key=lambda p: position[self._herd_names[id(p)]])
        if isinstance(groups, list):
            trainable = {id(p) for p in ordered}
            listed = set()
            formed = []
            for group in groups:
                members = tuple(p for p in group if id(p) in trainable)
                listed.update(id(p) for p in members)
                if members:
                    formed.append(members)
            formed.extend((p,) for p in ordered if id(p) not in listed)
        else:
            formed = [tuple(run) for run in _split_evenly(ordered, groups)]
        self._herd_groups = formed
        self._herd_group_of = {id(p): index for index, group in enumerate(formed)
                               for p in group}
        self._herd_group_ready = [0] * len(formed)

    def _herd_register_hooks(self):
        optimizer_ref = weakref.ref(self)
        with torch.enable_grad():  # expand_as has no grad_fn under no_grad
            for p in self._herd_params:
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(_make_hook(optimizer_ref, p))
                self._herd_grad_accs.append(accumulator)

    def _herd_gradient_ready(self, p):
        """Runs in backward once one pass's gradient of ``p`` is in ``p.grad``."""
        key = id(p)
        if self._herd_passes_left[key] <= 0:
            raise AssertionError(_TOO_MANY_PASSES.format(passes=self.backward_passes_per_step))
        if p.grad is not None and p.grad.requires_grad:
            raise AssertionError(
                "DistributedOptimizer: the gradient requires grad (backward with "
                "create_graph=True); herd cannot reduce a gradient that is part of a graph"
            )
        self._herd_any_pass = True
        self._synchronized = False  # a new step's gradients: an earlier synchronize is spent
        self._herd_passes_left[key] -= 1
        if self._herd_passes_left[key] > 0:
            return
        if self._herd_hook_failure is not None:
            # This rank has failed this step: it submits nothing more, and synchronize
            # submits stand-ins instead, which fail the other ranks' waits.
            return
        try:
            if self._herd_groups:
                index = self._herd_group_of[key]
                self._herd_group_ready[index] += 1
                if self._herd_group_ready[index] == len(self._herd_groups[index]):
                    self._herd_submit_group(index)
            else:
                self._herd_submit_one(p)
        except Exception as error:  # noqa: BLE001 -- synchronize raises it on every rank
            # Raised here it would end this rank's backward while the others wait in step()
            # for reductions it never submits; synchronize raises it after telling them.
            if self._herd_hook_failure is None:
                self._herd_hook_failure = error

    def _herd_scales(self):
        """(prescale, postscale): Average's division by the set's size happens in herd,
        so a predivide factor f becomes a prescale of 1/f and a postscale of f."""
        if self.op == Average:
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _herd_dense_gradient(self, p, in_group):
        """The dense, contiguous tensor to reduce for ``p`` (zeros for a gradient this rank
        never computed, which the other ranks may have)."""
        if p.grad is None:
            p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
        grad = p.grad
        if grad.is_sparse:
            if not self.sparse_as_dense:
                where = "in a group" if in_group else "here"
                raise ValueError(
                    f"DistributedOptimizer: the gradient of {self._herd_names[id(p)]} is "
                    f"sparse and cannot be reduced {where}; pass sparse_as_dense=True"
                )
            return grad.to_dense()
        return grad if grad.is_contiguous() else grad.contiguous()

    def _herd_stand_in(self, p):
        """Zeros shaped as ``p``'s reduction on the wire (``p``'s dtype when the compression
        fails on them too)."""
        zeros = torch.zeros_like(p, memory_format=torch.contiguous_format)
        try:
            return self._compression.compress(zeros)[0]
        except Exception:  # noqa: BLE001 -- any other dtype disagrees as well
            return zeros

    def _herd_submit_one(self, p, stand_in=False):
        name = self._herd_names[id(p)]  # mpi_ops submits it as "allreduce.<name>"
        if p.grad is None and not stand_in and id(p) in self._herd_sparse_dims:
            # Unused on this rank, sparse where used: the other ranks gather its nonzeros,
            # which dense zeros would not meet, so this rank gathers none.
            p.grad = _empty_sparse(p.shape, self._herd_sparse_dims[id(p)], p.dtype, p.device)
        if p.grad is not None and p.grad.is_sparse and not self.sparse_as_dense:
            if not stand_in:
                self._herd_sparse_dims[id(p)] = p.grad.sparse_dim()
            self._herd_pending.append(self._herd_submit_sparse(p, name, stand_in))
            self._herd_submitted.add(id(p))
            return
        prescale, postscale = self._herd_scales()
        if stand_in:
            wire, context, prescale = self._herd_stand_in(p), None, _STAND_IN_PRESCALE
        else:
            wire, context = self._compression.compress(self._herd_dense_gradient(p, False))
        handle = allreduce_async_(wire, name=name, op=self.op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self.process_set)
        self._herd_submitted.add(id(p))

        def finish():
            reduced = synchronize(handle)
            if not stand_in:
                _write_back(p, self._compression.decompress(reduced, context))

        self._herd_pending.append(finish)

    def _herd_submit_sparse(self, p, name, stand_in=False):
        """Reduces a sparse gradient with ``sparse_allreduce_async`` (every rank's nonzeros
        gathered; duplicate indices add up when the optimizer applies the gradient).
        Returns the function that waits and writes the result back. A stand-in is an empty
        sparse tensor with one sparse and one dense dimension more than the gradient, so
        both of its gathers disagree with every other rank's."""
        grad = p.grad
        if stand_in:
            sparse_dim = grad.sparse_dim()
            shape = tuple(grad.shape[:sparse_dim]) + (1,) + tuple(grad.shape[sparse_dim:]) + (1,)
            tensor, op = _empty_sparse(shape, sparse_dim + 1, grad.dtype, grad.device), Sum
        else:
            tensor, op = grad, self.op
        handle = sparse_allreduce_async(tensor, name=name, op=op, process_set=self.process_set)

        def finish():
            reduced = synchronize(handle)
            if not stand_in:
                _write_back(p, reduced)

        return finish

    def _herd_submit_group(self, index, stand_in=False):
        """One grouped allreduce per dtype among the group's (compressed) gradients, since
        a grouped allreduce carries a single dtype. A stand-in submits each of them even
        when another fails (one already submitted is refused as still pending)."""
        members = self._herd_groups[index]
        if stand_in:
            compressed = [(self._herd_stand_in(p), None) for p in members]
        else:
            compressed = [self._compression.compress(self._herd_dense_gradient(p, True))
                          for p in members]
        by_dtype = collections.OrderedDict()
        for position, (wire, _) in enumerate(compressed):
            by_dtype.setdefault(wire.dtype, []).append(position)
        base = self._herd_names[id(members[0])]  # submitted as "grouped_allreduce.<base>.<i>"
        prescale, postscale = self._herd_scales()
        if stand_in:
            prescale = _STAND_IN_PRESCALE
        for dtype, positions in by_dtype.items():
            name = base if len(by_dtype) == 1 else f"{base}.{str(dtype).replace('torch.', '')}"
            try:
                handle = grouped_allreduce_async_([compressed[i][0] for i in positions],
                                                  name=name, op=self.op,
                                                  prescale_factor=prescale,
                                                  postscale_factor=postscale,
                                                  process_set=self.process_set)
            except Exception:
                if stand_in:
                    continue
                raise

            def finish(handle=handle, positions=positions):
                reduced_tensors = synchronize(handle)
                if stand_in:
                    return
                for i, reduced in zip(positions, reduced_tensors):
                    _write_back(members[i], self._compression.decompress(reduced,
                                                                         compressed[i][1]))

            self._herd_pending.append(finish)
        self._herd_submitted.update(id(p) for p in members)

    def _herd_submit_unit(self, p, stand_in=False):
        """Submits ``p``'s reduction: its group's, or its own."""
        if self._herd_groups:
            self._herd_submit_group(self._herd_group_of[id(p)], stand_in)
        else:
            self._herd_submit_one(p, stand_in)

    def _herd_submit_stand_ins(self):
        """After a submission failed on this rank: a stand-in for every reduction not
        submitted, under the same name but with a prescale no rank uses, so every rank's
        wait for it ends with a disagreement instead of lasting for ever."""
        for p in self._herd_params:
            if id(p) not in self._herd_submitted:
                try:
                    self._herd_submit_unit(p, stand_in=True)
                except Exception:  # noqa: BLE001 -- that name is left to the stall check
                    self._herd_submitted.add(id(p))

    def synchronize(self):
        """Waits for every gradient reduction of this step and writes the results into
        ``p.grad``. Parameters whose hook has not fired are submitted first (with zeros
        where ``p.grad`` is None), so every rank submits every name.

        A submission that fails on this rank (in Python, or refused by herd at the call;
        here, or in a gradient hook during backward), or a wrapped optimizer's step() that
        failed on this rank the step before, is followed by stand-ins for every reduction
        not submitted yet: the other ranks' waits for them fail at once, and every rank that saw a failure exchanges which ranks
        failed in Python. That rank raises its own exception, the others herd.Error naming
        it and its error; a disagreement seen by every rank alone raises herd.Error as it
        is."""
        if not self._herd_hooked:
            self._synchronized = True
            return
        failure = self._herd_hook_failure
        if failure is None:
            try:
                for p in self._herd_params:
                    if id(p) not in self._herd_submitted:
                        self._herd_submit_unit(p)
            except Exception as error:  # noqa: BLE001 -- raised after the exchange below
                failure = error
        if failure is not None:
            self._herd_submit_stand_ins()
        collective_failure = None
        try:
            # Wait for everything submitted even after a failure, so no reduction still
            # writes into a gradient after this returns.
            wait_all(self._herd_pending)
        except Exception as error:  # noqa: BLE001 -- raised below
            collective_failure = error
        finally:
            self._herd_reset_counts()
        # Only reduced gradients count as synchronized: after a failure the next step()
        # reduces again.
        self._synchronized = failure is None and collective_failure is None
        if self._synchronized:
            return
        try:
            report_after_failure(failure, collective_failure,
                                 "herd.torch.DistributedOptimizer.synchronize",
                                 "DistributedOptimizer.gradients", "submit", self.process_set)
        finally:
            # The tracebacks refer to this frame, and it to self: without this cycle a
            # dropped optimizer (and its hooks) goes at once, not at the next gc.
            failure = collective_failure = None

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Makes ``step()`` skip its ``synchronize()``, for code that synchronized itself to
        work on the reduced gradients first (gradient clipping):

            loss.backward()
            optimizer.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            with optimizer.skip_synchronize():
                optimizer.step()
        """
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                # The phrase Horovod warns with, which scripts and tests look for.
                warnings.warn(
                    "DistributedOptimizer: optimizer.step() called without "
                    "optimizer.skip_synchronize() right after an explicit synchronize(); the "
                    "gradients are not reduced again. Put step() inside "
                    "`with optimizer.skip_synchronize():`"
                )
                # The gradients are not reduced a second time (Horovod reduces them again,
                # which with op=Sum multiplies them by the set's size).
            else:
                self.synchronize()
        self._synchronized = False
        try:
            return super(self._herd_class, self).step(closure)
        except Exception as error:
            # This rank raises now. The others stepped, so their parameters now differ from
            # this rank's: the next step fails on every rank as a failed hook does.
            if self._herd_hooked:
                self._herd_hook_failure = RuntimeError(
                    "the wrapped optimizer's step() failed on this rank in the previous step "
                    f"({describe(error)}), so this rank's parameters differ from the other "
                    "ranks'")
            raise

    def zero_grad(self, *args, **kwargs):
        if self._herd_any_pass:
            raise AssertionError(_ZERO_GRAD_TOO_EARLY)
        result = super(self._herd_class, self).zero_grad(*args, **kwargs)
        # Shared gradients are zeroed in place, never set to None: autograd then adds the
        # next backward's gradients into the arena.
        for p, view in self._herd_shared_grads:
            view.zero_()
            p.grad = view
        return result

    def load_state_dict(self, *args, **kwargs):
        """Loads the wrapped optimizer's state and starts the step afresh; reductions still
        running are waited for first, so none writes into a gradient afterwards."""
        for finish in self._herd_pending:
            with contextlib.suppress(Exception):
                finish()
        self._herd_reset_counts()
        self._synchronized = False
        self._should_synchronize = True
        return super(self._herd_class, self).load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        """Changes the number of backward passes per step; the current count restarts."""
        self.backward_passes_per_step = int(passes)
        self._herd_passes_left = {id(p): self.backward_passes_per_step
                                  for p in self._herd_params}


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set, shared_gradients=False):
    """Wraps ``optimizer`` so every step applies gradients reduced across ``process_set``.

    Arguments (horovod.torch's):
        optimizer: the torch.optim.Optimizer to wrap; the result is an instance of its class.
        named_parameters: (name, parameter) pairs, usually ``model.named_parameters()``;
            names the reductions. Must name every parameter of the optimizer.
        compression: ``Compression.none`` or ``Compression.fp16`` (gradients travel as
            float16 and come back in their own dtype).
        backward_passes_per_step: backward passes whose gradients add up locally before the
            reduction; ``step()`` follows the last of them.
        op: ``Average`` (default) or ``Sum``; ``Adasum`` on more than one rank gives the
            Adasum optimizer instead (optimizer_adasum.py), which reduces each step's
            parameter change and ignores groups and sparse_as_dense.
        gradient_predivide_factor: with Average, gradients are multiplied by 1/f before the
            sum and by f/size after it (same mean, different rounding and range).
        num_groups: deprecated spelling of ``groups=<int>``.
        groups: an int k (reduce the parameters in k groups of consecutive parameters) or a
            list of lists of parameters (each list a group; unlisted parameters alone).
        sparse_as_dense: reduce sparse gradients as dense tensors instead of gathering their
            nonzeros.
        process_set: reduce among this set's ranks only; elsewhere the optimizer steps
            locally.
        shared_gradients (herd's): keep the ``.grad`` of the dense CPU parameters in one
            ``herd.torch.shared_zeros`` arena per dtype, so that the ranks of a machine
            reduce straight from each other's memory; ``zero_grad`` then zeroes them in
            place instead of setting them to None. Ignored where nothing is reduced (one
            rank, outside the process set) and for the Adasum optimizer.
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("DistributedOptimizer: gradient_predivide_factor applies to "
                         "op=Average only")
    if num_groups != 0:
        warnings.warn("DistributedOptimizer: num_groups is deprecated; pass groups=<int>",
                      DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None:
        if isinstance(groups, list):
            seen = set()
            for group in groups:
                for p in group:
                    if not isinstance(p, torch.Tensor):
                        raise ValueError("DistributedOptimizer: groups must hold lists of "
                                         f"torch.Tensor, not {type(p).__name__}")
                    if id(p) in seen:
                        raise ValueError("DistributedOptimizer: a parameter is in more than "
                                         "one of the groups")
                    seen.add(id(p))
        elif isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
            raise ValueError(f"DistributedOptimizer: groups={groups!r}: give a positive int "
                             "or a list of lists of parameters")
    if int(backward_passes_per_step) < 1:
        raise ValueError(
            f"backward_passes_per_step must be at least 1, got {backward_passes_per_step}"
        )
    if not isinstance(process_set, ProcessSet):
        raise ValueError(f"process_set={process_set!r} is not a herd.ProcessSet")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(
            f"DistributedOptimizer wraps a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    if getattr(type(optimizer), "_herd_class", None) is type(optimizer):
        raise ValueError("the optimizer is already a DistributedOptimizer")

    if op is Adasum and size() > 1:
        return adasum_optimizer(optimizer, _parameter_names(optimizer.param_groups,
                                                            named_parameters),
                                compression, backward_passes_per_step, process_set)
    cls = subclass_carrying(_DistributedOptimizer, type(optimizer))
    wrapped = cls.__new__(cls)
    # The optimizer's attributes carry over, except instance attributes that shadow methods
    # (an LR scheduler made before wrapping puts a `step` bound to the old object there).
    for key, value in vars(optimizer).items():
        if not (callable(value) and hasattr(cls, key)):
            setattr(wrapped, key, value)
    # Same parameter-group dicts (a scheduler of the old object still changes the lr), own
    # list; the per-parameter state carries over (Horovod starts with empty state).
    wrapped.param_groups = list(optimizer.param_groups)
    wrapped.state = collections.defaultdict(dict, optimizer.state)
    wrapped._herd_setup(named_parameters, compression, backward_passes_per_step, op,
                        gradient_predivide_factor, groups, sparse_as_dense, process_set,
                        shared_gradients)
    return wrapped
