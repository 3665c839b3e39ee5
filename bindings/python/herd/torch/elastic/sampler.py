"""ElasticSampler: a DistributedSampler that can start an epoch part-way through."""

import torch

from herd.torch.mpi_ops import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Shards ``dataset`` over the ranks as torch's DistributedSampler does (the same
    order for the same ``seed`` and epoch, padded to a multiple of the ranks by repeating
    the order's first samples), and skips the samples already processed in the epoch.

    The training loop calls ``record_batch(batch_idx, batch_size)`` after each batch and
    ``set_epoch(epoch + 1)`` at the end of an epoch (which clears the count). Tracked by
    a TorchState, the count is committed with the model; a relaunched job's sampler then
    yields, on every rank, exactly the rest of the order an uninterrupted run would have
    yielded, since every rank processed as many batches (synchronous training). With
    another number of ranks than the run that committed, the rest of the order is
    sharded over the new ranks instead.

    Args:
        dataset: the dataset (its length is read once an epoch).
        shuffle: permute the samples every epoch (default True).
        seed: the permutation's seed, the same on every rank (default 0); epoch e uses
            ``seed + e``.
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        # Samples of this epoch's order processed by all ranks together.
        self.processed_num = 0
        self.num_replicas = 1
        self.rank = 0
        self.indices = []
        self.num_samples = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch ``epoch`` from its first sample. Call it at the end of an epoch
        (not at the start), so that a commit within the epoch keeps its position."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Counts one batch of ``batch_size`` samples on every rank as processed."""
        del batch_idx  # the count is what matters: batches are taken in order
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def _order(self):
        count = len(self.dataset)
        if not self.shuffle:
            return list(range(count))
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return torch.randperm(count, generator=generator).tolist()

    def reset(self):
        """Recomputes this rank's share of the epoch's unprocessed samples (after a change
        of epoch, position or number of ranks)."""
        self.num_replicas = size()
        self.rank = rank()
        order = self._order()
        remaining = order[self.processed_num:]
        # The padding repeats the start of the whole order, as an uninterrupted epoch
        # pads, so a resumed epoch ends with the same samples.
        shortfall = -len(remaining) % self.num_replicas
        padding = []
        while order and len(padding) < shortfall:
            padding += order[:shortfall - len(padding)]
        padded = remaining + padding
        self.indices = padded[self.rank::self.num_replicas]
        self.num_samples = len(self.indices)

    def __iter__(self):
        return iter(list(self.indices))

    def __len__(self):
        return self.num_samples
