"""The differentiable blocking collectives: allreduce, grouped_allreduce, allgather,
grouped_allgather, broadcast, alltoall, reducescatter and grouped_reducescatter, each an
autograd Function over its ``*_async`` call whose backward pass is Horovod's (each class
states its rule). The in-place calls are not differentiable, as in Horovod."""

import torch

from herd.basics import rank
from herd.handles import synchronize
from herd.process_sets import global_process_set
from herd.reduce_ops import Average, Sum
from herd.torch.allreduce_ops import allreduce_async, grouped_allreduce_async
from herd.torch.collective_ops import (
    allgather_async,
    alltoall_async,
    broadcast_async,
    grouped_allgather_async,
    grouped_reducescatter_async,
    reducescatter_async,
)
from herd.torch.compression import Compression
from herd.torch.submission import _compress_each, _set_or_global
from herd.torch.tensor_bridge import _needs_gradient

class HorovodAllreduce(torch.autograd.Function):
    """Allreduce; the gradient is the allreduce of the incoming gradient with the same
    operator, scale factors and process set (Horovod's rule)."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor,
                process_set):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, average=ctx.average, op=ctx.op,
                         prescale_factor=ctx.prescale_factor,
                         postscale_factor=ctx.postscale_factor, process_set=ctx.process_set)
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` across ranks and returns the result in a new tensor (differentiable).
    ``compression`` converts the tensor before it travels and back after."""
    compressed, context = compression.compress(tensor)
    if _needs_gradient(compressed):
        reduced = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor,
                                         postscale_factor, process_set)
    else:
        reduced = synchronize(allreduce_async(compressed, average, name, op, prescale_factor,
                                              postscale_factor, process_set))
    return compression.decompress(reduced, context)


class HorovodGroupedAllreduce(torch.autograd.Function):
    """Grouped allreduce; the gradients are a grouped allreduce of the incoming ones with the
    same operator, scale factors and process set."""

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set,
                *tensors):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allreduce_async(
            list(tensors), average, name, op, prescale_factor, postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce(list(grad_outputs), average=ctx.average, op=ctx.op,
                                  prescale_factor=ctx.prescale_factor,
                                  postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors as one unit; returns a list of new tensors (differentiable)."""
    compressed, contexts = _compress_each(compression, tensors)
    reduced = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor,
                                            postscale_factor, process_set, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, contexts)]


def _rows_before_this_rank(first_dims, process_set):
    """Offset of this rank's rows in an allgather's result, from every member's row counts."""
    counts = allgather(torch.tensor(first_dims, dtype=torch.int64).reshape(1, -1),
                       process_set=process_set)
    own = process_set.rank()
    return counts[:own].sum(dim=0).tolist()


class HorovodAllgather(torch.autograd.Function):
    """Allgather; the gradient is the incoming gradient averaged across the process set
    (Horovod's rule, not summed), narrowed to this rank's rows."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 0
        ctx.process_set = _set_or_global(process_set)
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        offset = _rows_before_this_rank([ctx.rows], ctx.process_set)[0]
        return grad.narrow(0, offset, ctx.rows), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's ``tensor`` along the first dimension (differentiable)."""
    return HorovodAllgather.apply(tensor, name, process_set)


class HorovodGroupedAllgather(torch.autograd.Function):
    """Grouped allgather; each gradient is its allgather's rule (averaged, narrowed)."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] if t.dim() > 0 else 0 for t in tensors]
        ctx.process_set = _set_or_global(process_set)
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce(list(grad_outputs), op=Average, process_set=ctx.process_set)
        offsets = _rows_before_this_rank(ctx.rows, ctx.process_set)
        return (None, None, *[g.narrow(0, offset, rows)
                              for g, offset, rows in zip(grads, offsets, ctx.rows)])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers each tensor of the list; returns a list (differentiable)."""
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


class HorovodBroadcast(torch.autograd.Function):
    """Broadcast; the gradient is the incoming gradient averaged across the process set on
    the root and zero elsewhere (Horovod's rule)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            grad = torch.zeros_like(grad)
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns a new tensor holding ``root_rank``'s ``tensor`` (differentiable)."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


class HorovodAlltoall(torch.autograd.Function):
    """Alltoall; the gradient is an alltoall of the incoming gradient back to the senders,
    with the received splits as splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received_splits = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set = process_set
        ctx.received_splits = received_splits
        if splits is None:
            return output
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx, grad_output, *unused_split_grads):
        grad, _ = synchronize(alltoall_async(grad_output, splits=ctx.received_splits,
                                             process_set=ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Alltoall (differentiable). Returns the received tensor, and with ``splits`` given,
    ``(received, received_splits)`` as Horovod does."""
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


def _reducescatter_grad_scale(op, prescale_factor, postscale_factor, process_set):
    """Horovod 0.28's factor on a reducescatter's gradient: the set's size for Sum (1 for
    Average), times both scale factors."""
    scale = float(process_set.size()) if op == Sum else 1.0
    return scale * prescale_factor * postscale_factor


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter; the gradient is the allgather of the incoming gradient, multiplied by
    the process set's size for op=Sum and by both scale factors (Horovod 0.28's rule)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.process_set = _set_or_global(process_set)
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor,
                                              ctx.process_set)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.scale != 1.0:
            grad_output = grad_output * ctx.scale
        return allgather(grad_output, process_set=ctx.process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces ``tensor`` across ranks and returns this rank's block of rows
    (differentiable)."""
    compressed, context = compression.compress(tensor)
    reduced = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                         postscale_factor)
    return compression.decompress(reduced, context)


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Grouped reducescatter; each gradient is its reducescatter's rule."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.process_set = _set_or_global(process_set)
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor,
                                              ctx.process_set)
        return tuple(synchronize(grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = [g * ctx.scale if ctx.scale != 1.0 else g for g in grad_outputs]
        return (None, None, None, None, None,
                *grouped_allgather(grads, process_set=ctx.process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatters each tensor of the list; returns a list (differentiable)."""
    compressed, contexts = _compress_each(compression, tensors)
    reduced = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                                postscale_factor, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, contexts)]
