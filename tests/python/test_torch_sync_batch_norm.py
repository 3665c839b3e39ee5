"""herd.torch.SyncBatchNorm against single-process torch.nn.BatchNorm on the
concatenated batch.

Every rank builds every rank's batch from a seed; rank r holds rows(r) samples
(unequal counts, an empty batch included). The reference runs plain
torch.nn.BatchNorm1d/2d, in this process, on all ranks' batches concatenated,
with the loss sum(output * g) for a fixed random g. SyncBatchNorm must give each
rank its rows of the reference's output and input gradient, the reference's
running statistics, and weight and bias gradients whose sum over the ranks is
the reference's.
"""

import pytest
import torch

import herd.torch as hvd
from rank_checks import expect

CHANNELS = 3
TOLERANCE = {torch.float64: dict(rtol=1e-10, atol=1e-12),
             torch.float32: dict(rtol=1e-6, atol=1e-6)}


def check_close(actual, expected, what, dtype=torch.float64):
    """Records a mismatch instead of raising it, so this rank still takes part in the
    test's later collectives (conftest fails the test at its end)."""
    try:
        torch.testing.assert_close(actual, expected, **TOLERANCE[dtype])
    except AssertionError as error:
        expect(False, f"{what}: {error}")


def unequal_rows(r):
    return r + 1


def one_rank_empty(r):
    return 0 if r == 1 else 4


def batch(rows, shape, dtype, seed):
    """Every rank's batch, [rank] -> tensor (rows(rank), CHANNELS, *shape), values spread
    around a channel-dependent offset (so the variance is not that of the mean)."""
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.arange(CHANNELS, dtype=torch.float64).view([1, -1] + [1] * len(shape))
    return [(torch.randn((rows(r), CHANNELS) + shape, generator=generator,
                         dtype=torch.float64) * 2.0 + 3.0 * offsets).to(dtype)
            for r in range(hvd.size())]


def make_pair(shape, dtype, members=None, **options):
    """A SyncBatchNorm and the plain BatchNorm of the input's rank, with the same random
    affine parameters."""
    plain_class = torch.nn.BatchNorm2d if len(shape) == 2 else torch.nn.BatchNorm1d
    process_set = hvd.global_process_set if members is None else members
    sync = hvd.SyncBatchNorm(CHANNELS, process_set=process_set, **options).to(dtype)
    plain = plain_class(CHANNELS, **options).to(dtype)
    if sync.affine:
        generator = torch.Generator().manual_seed(11)
        with torch.no_grad():
            for module in (sync, plain):
                module.weight.copy_(torch.rand(CHANNELS, generator=generator,
                                               dtype=torch.float64) + 0.5)
                module.bias.copy_(torch.randn(CHANNELS, generator=generator,
                                              dtype=torch.float64))
                generator.manual_seed(11)
    return sync, plain


def rows_of(tensor, index, members, batches):
    start = sum(batches[r].shape[0] for r in members[:index])
    return tensor[start:start + batches[members[index]].shape[0]]


def train_and_compare(sync, plain, shape, dtype, rows, steps=2, members=None, process_set=None):
    rank = hvd.rank()
    members = list(range(hvd.size())) if members is None else members
    for step in range(steps):
        batches = batch(rows, shape, dtype, seed=100 + step)
        x = batches[rank].clone().requires_grad_()
        everything = torch.cat([batches[r] for r in members]).requires_grad_()
        g = torch.randn(everything.shape, generator=torch.Generator().manual_seed(7 + step),
                        dtype=torch.float64).to(dtype)
        for module in (sync, plain):
            module.zero_grad()

        out = sync(x)
        expected = plain(everything)
        own = members.index(rank)
        check_close(out, rows_of(expected, own, members, batches), f"step {step} output", dtype)
        check_close(sync.running_mean, plain.running_mean, f"step {step} running_mean", dtype)
        check_close(sync.running_var, plain.running_var, f"step {step} running_var", dtype)
        expect(sync.num_batches_tracked.item() == plain.num_batches_tracked.item(),
               f"step {step}: num_batches_tracked {sync.num_batches_tracked.item()}")

        (out * rows_of(g, own, members, batches)).sum().backward()
        (expected * g).sum().backward()
        check_close(x.grad, rows_of(everything.grad, own, members, batches),
                    f"step {step} input gradient", dtype)
        if sync.affine:
            kwargs = {} if process_set is None else {"process_set": process_set}
            for name in ("weight", "bias"):
                summed = hvd.allreduce(getattr(sync, name).grad, op=hvd.Sum,
                                       name=f"sbn.{name}.{step}", **kwargs)
                check_close(summed, getattr(plain, name).grad, f"step {step} {name} gradient",
                            dtype)

    # Eval: plain batch norm with the running statistics, no collective.
    sync.eval()
    plain.eval()
    x = batch(rows, shape, dtype, seed=999)[rank]
    check_close(sync(x), plain(x), "eval output", dtype)
    sync.train()
    plain.train()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)], ids=["NC", "NCL", "NCHW"])
@pytest.mark.parametrize("rows", [unequal_rows, one_rank_empty], ids=["unequal", "empty"])
def test_matches_batch_norm_on_the_concatenated_batch(rank, size, dtype, shape, rows):
    sync, plain = make_pair(shape, dtype)
    train_and_compare(sync, plain, shape, dtype, rows)


@pytest.mark.parametrize("options", [dict(momentum=None), dict(affine=False),
                                     dict(momentum=0.3, eps=1e-3)],
                         ids=["cumulative", "no_affine", "momentum_eps"])
def test_options(rank, size, options):
    sync, plain = make_pair((4,), torch.float64, **options)
    train_and_compare(sync, plain, (4,), torch.float64, unequal_rows, steps=3)


def test_without_running_statistics(rank, size):
    """track_running_stats=False: batch statistics across the ranks in training; eval mode
    normalizes the local batch with its own statistics, as plain BatchNorm does."""
    sync, plain = make_pair((), torch.float64, track_running_stats=False)
    batches = batch(unequal_rows, (), torch.float64, seed=5)
    check_close(sync(batches[rank]),
                rows_of(plain(torch.cat(batches)), rank, list(range(size)), batches),
                "training output")
    sync.eval()
    plain.eval()
    local = batch(lambda r: r + 2, (), torch.float64, seed=8)[rank]
    check_close(sync(local), plain(local), "eval output")


def test_input_without_gradient(rank, size):
    """Only the weight and bias need gradients: the backward pass reduces nothing."""
    sync, plain = make_pair((), torch.float64)
    batches = batch(unequal_rows, (), torch.float64, seed=6)
    sync(batches[rank]).square().sum().backward()
    plain(torch.cat(batches)).square().sum().backward()
    for name in ("weight", "bias"):
        summed = hvd.allreduce(getattr(sync, name).grad, op=hvd.Sum, name=f"nograd.{name}")
        check_close(summed, getattr(plain, name).grad, f"{name} gradient")


def test_process_set(rank, size):
    """Statistics over the even ranks only; the odd ranks normalize among themselves."""
    even = [r for r in range(size) if r % 2 == 0]
    odd = [r for r in range(size) if r % 2 == 1]
    even_set, odd_set = hvd.add_process_set(even), hvd.add_process_set(odd)
    try:
        members, own = (even, even_set) if rank % 2 == 0 else (odd, odd_set)
        sync, plain = make_pair((2,), torch.float64, members=own)
        train_and_compare(sync, plain, (2,), torch.float64, unequal_rows, members=members,
                          process_set=own)
    finally:
        hvd.remove_process_set(odd_set)
        hvd.remove_process_set(even_set)


def test_single_value_per_channel_raises_on_every_rank(rank, size):
    """One sample in the whole set: every rank raises, as BatchNorm does for one sample."""
    sync = hvd.SyncBatchNorm(CHANNELS).double()
    x = torch.ones(1 if rank == 0 else 0, CHANNELS, dtype=torch.float64)
    with pytest.raises(ValueError, match="more than 1 value per channel when training, got 1"):
        sync(x)
    sync2, plain = make_pair((), torch.float64)
    train_and_compare(sync2, plain, (), torch.float64, unequal_rows, steps=1)


def test_refusals(rank, size):
    sync = hvd.SyncBatchNorm(CHANNELS)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        sync(torch.ones(CHANNELS))
    with pytest.raises(ValueError, match="has 4 channels"):
        sync(torch.ones(2, 4))
    with pytest.raises(ValueError, match="is not a herd.ProcessSet"):
        hvd.SyncBatchNorm(CHANNELS, process_set=[0])


def test_model_with_distributed_optimizer(rank, size):
    """Linear, SyncBatchNorm, ReLU, Linear trained with op=Sum on the loss divided by the
    whole batch's size: the same steps as one process on the concatenated batch."""

    def model():
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Linear(4, 6), hvd.SyncBatchNorm(6),
                                   torch.nn.ReLU(), torch.nn.Linear(6, 2)).double()

    def plain_model():
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6),
                                   torch.nn.ReLU(), torch.nn.Linear(6, 2)).double()

    distributed, reference = model(), plain_model()
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(distributed.parameters(), lr=0.1, momentum=0.9),
        named_parameters=distributed.named_parameters(), op=hvd.Sum)
    plain = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        generator = torch.Generator().manual_seed(40 + step)
        xs = [torch.randn(unequal_rows(r), 4, generator=generator, dtype=torch.float64)
              for r in range(size)]
        ys = [torch.randn(unequal_rows(r), 2, generator=generator, dtype=torch.float64)
              for r in range(size)]
        total = sum(x.shape[0] for x in xs)
        optimizer.zero_grad()
        ((distributed(xs[rank]) - ys[rank]).square().sum() / total).backward()
        optimizer.step()
        plain.zero_grad()
        ((reference(torch.cat(xs)) - torch.cat(ys)).square().sum() / total).backward()
        plain.step()
    for (name, p), q in zip(distributed.state_dict().items(), reference.state_dict().values()):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12, msg=name)
