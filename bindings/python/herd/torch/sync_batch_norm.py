"""SyncBatchNorm: batch normalization whose statistics span the batches of every rank.

In training, each rank normalizes its own batch with the mean and variance of the
batch all ranks of the process set hold together, as if one process ran the
concatenated batch through ``torch.nn.BatchNorm``; ranks may hold batches of
different sizes, an empty one included. The backward pass gives each rank the
gradient of that single-process computation with respect to its own inputs; the
weight and bias gradients are this rank's share (their sum over the ranks is the
single-process gradient), which DistributedOptimizer then averages like any other.

What travels, per layer and training step (host memory, float64, whatever the
input's device and dtype):

- forward: one allgather of each rank's ``[count, mean (C), m2 (C)]``, m2 being the
  sum of squared deviations from its own mean. The ranks' means and m2 combine
  exactly (Chan's parallel formula), which stays accurate where a sum of squares
  minus a squared sum would cancel.
- backward: one allreduce (Sum) of each rank's per-channel ``sum(dy)`` and
  ``sum(dy * (x - mean))``, the two sums the input gradient needs.

Every rank of the set must therefore run the same layers in the same order, in
training mode and with the same ``requires_grad`` on the input. In eval mode, with a
set of one rank, and on a rank outside the set, the layer is plain batch norm
(``torch.nn.functional.batch_norm``) on the local batch.
"""

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable
from torch.nn.modules.batchnorm import _BatchNorm

from herd.process_sets import ProcessSet, global_process_set
from herd.torch.mpi_ops import Sum, allgather_async, allreduce_async, synchronize

__all__ = ["SyncBatchNorm"]

# Names the statistics travel under: one layer's collectives complete before the next
# layer starts, so every layer can use the same names.
_STATS_NAME = "sync_batch_norm.stats"
_GRAD_SUMS_NAME = "sync_batch_norm.grad_sums"


def _compute_dtype(dtype):
    """The dtype the arithmetic runs in: float32 for half-precision inputs (as torch's
    batch norm kernels accumulate), the input's own otherwise."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _channel_view(values, dims):
    """Per-channel ``values`` (C) shaped to broadcast over an input of ``dims``
    dimensions laid out (N, C, ...)."""
    return values.view([1, -1] + [1] * (dims - 2))


class _SyncBatchNormFunction(torch.autograd.Function):

    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum,
                process_set):
        channels = input.shape[1]
        reduce_dims = [0] + list(range(2, input.dim()))
        compute = _compute_dtype(input.dtype)
        x = input.to(compute)
        count = input.numel() // channels if channels else 0
        if count > 0:
            local_mean = x.mean(reduce_dims)
            local_m2 = (x - _channel_view(local_mean, x.dim())).square().sum(reduce_dims)
        else:  # an empty batch on this rank: weight 0 in the combination below
            local_mean = local_m2 = torch.zeros(channels, dtype=compute, device=input.device)
        local = torch.cat([torch.tensor([float(count)], dtype=torch.float64),
                           local_mean.detach().to("cpu", torch.float64),
                           local_m2.detach().to("cpu", torch.float64)])
        gathered = synchronize(allgather_async(local.unsqueeze(0), name=_STATS_NAME,
                                               process_set=process_set))
        counts = gathered[:, :1]
        means = gathered[:, 1:1 + channels]
        m2s = gathered[:, 1 + channels:]
        total = float(counts.sum())
        if total <= 1:
            # Every rank sees the same total, so every rank raises.
            raise ValueError(
                "SyncBatchNorm: expected more than 1 value per channel when training, got "
                f"{int(total)} across the process set (this rank's input: "
                f"{tuple(input.shape)})")
        mean = (counts * means).sum(0) / total
        m2 = (m2s + counts * (means - mean).square()).sum(0)
        invstd = torch.rsqrt(m2 / total + eps)
        if running_mean is not None:
            running_mean.mul_(1.0 - momentum).add_(
                mean.to(running_mean.device, running_mean.dtype), alpha=momentum)
        if running_var is not None:
            unbiased = m2 / (total - 1.0)
            running_var.mul_(1.0 - momentum).add_(
                unbiased.to(running_var.device, running_var.dtype), alpha=momentum)

        mean = mean.to(input.device, compute)
        invstd = invstd.to(input.device, compute)
        output = (x - _channel_view(mean, x.dim())) * _channel_view(invstd, x.dim())
        if weight is not None:
            output = output * _channel_view(weight.to(compute), x.dim())
        if bias is not None:
            output = output + _channel_view(bias.to(compute), x.dim())
        ctx.save_for_backward(input, weight, mean, invstd)
        ctx.total = total
        ctx.process_set = process_set
        ctx.has_bias = bias is not None
        return output.to(input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        input, weight, mean, invstd = ctx.saved_tensors
        needs_input, needs_weight, needs_bias = ctx.needs_input_grad[:3]
        dims = input.dim()
        reduce_dims = [0] + list(range(2, dims))
        compute = mean.dtype
        dy = grad_output.to(compute)
        xmu = input.to(compute) - _channel_view(mean, dims)
        sum_dy = dy.sum(reduce_dims)
        sum_dy_xmu = (dy * xmu).sum(reduce_dims)

        grad_input = grad_weight = grad_bias = None
        if needs_weight and weight is not None:
            grad_weight = (sum_dy_xmu * invstd).to(weight.dtype)
        if needs_bias and ctx.has_bias:
            grad_bias = sum_dy.to(weight.dtype if weight is not None else compute)
        if needs_input:
            channels = mean.numel()
            local = torch.cat([sum_dy, sum_dy_xmu]).to("cpu", torch.float64)
            sums = synchronize(allreduce_async(local, op=Sum, name=_GRAD_SUMS_NAME,
                                               process_set=ctx.process_set))
            sums = (sums / ctx.total).to(input.device, compute)
            mean_dy, mean_dy_xmu = sums[:channels], sums[channels:]
            scale = invstd if weight is None else invstd * weight.to(compute)
            grad_input = ((dy - _channel_view(mean_dy, dims)
                           - xmu * _channel_view(invstd.square() * mean_dy_xmu, dims))
                          * _channel_view(scale, dims)).to(input.dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over the batches of every rank of ``process_set`` (Horovod's
    ``hvd.SyncBatchNorm``), for inputs (N, C, ...) of any number of dimensions, on the CPU
    or a GPU.

    Arguments are ``torch.nn.BatchNorm``'s: ``num_features`` (C), ``eps``, ``momentum``
    (None: a cumulative average), ``affine``, ``track_running_stats``; ``process_set``
    limits the statistics to a set's ranks (default: every rank). In training the batch
    statistics are those of every rank's batch together, and the running mean and
    variance (unbiased) are updated with them, identically on every rank. In eval mode,
    with one rank in the set, and on a rank outside it, it is plain batch norm.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set, device=None,
                 dtype=None):
        if not isinstance(process_set, ProcessSet):
            raise ValueError(f"SyncBatchNorm: process_set={process_set!r} is not a "
                             "herd.ProcessSet")
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm: expected an input of 2 or more dimensions "
                             f"(N, C, ...), got {input.dim()}")
        if input.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm: the input has {input.shape[1]} channels "
                             f"(dimension 1 of {tuple(input.shape)}); this layer normalizes "
                             f"{self.num_features}")

    def _synchronizes(self):
        """Whether this forward pass takes the statistics of the whole set."""
        return self.training and self.process_set.included() and self.process_set.size() > 1

    def forward(self, input):
        self._check_input_dim(input)
        # torch.nn.BatchNorm's bookkeeping: the factor of the running averages.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        # Running statistics are updated in training only when tracked, and used in eval.
        use_running = not self.training or self.track_running_stats
        running_mean = self.running_mean if use_running else None
        running_var = self.running_var if use_running else None
        if not self._synchronizes():
            batch_stats = self.training or (self.running_mean is None
                                            and self.running_var is None)
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                batch_stats, factor, self.eps)
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean,
                                            running_var, self.eps, factor, self.process_set)
