#!/usr/bin/env python3
"""Data-parallel training of a small CNN on Fashion-MNIST with herd.torch.

A Horovod script with one changed line (``import herd.torch as hvd``): every
rank reads its own shard of the training set through torch's
DistributedSampler, DistributedOptimizer averages the gradients across ranks,
and rank 0 prints one line per epoch with the mean training loss, the test
accuracy (every rank scores its shard of the test set; the counts are summed)
and the samples per second of the whole job. During an epoch rank 0 shows its
progress on stderr: redrawn in place on a terminal, else (under mpirun stderr
is a pipe) a line every --progress-interval seconds.

    mpirun -np 2 .venv/bin/python examples/pytorch_fashion_mnist.py --epochs 3

The data is the Debian package dataset-fashion-mnist (gzip-compressed IDX
files under /usr/share/datasets/fashion-mnist).
"""

import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Subset, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import herd.torch as hvd

DATA_DIR = "/usr/share/datasets/fashion-mnist"
# Mean and standard deviation of the training images' pixels in [0, 1].
PIXEL_MEAN, PIXEL_STD = 0.2860, 0.3530


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--lr", type=float, default=0.01,
                        help="learning rate of one rank; multiplied by the number of ranks")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--data-dir", default=DATA_DIR)
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="send gradients as float16")
    parser.add_argument("--backward-passes-per-step", type=int, default=1)
    parser.add_argument("--train-limit", type=int, default=0,
                        help="use only the first N training images (0: all), for quick runs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    parser.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                        help="rank 0's progress on stderr: auto (in place on a terminal, "
                        "else a line every --progress-interval seconds), always (in place "
                        "even when stderr is not a terminal: a terminal behind mpirun), never")
    parser.add_argument("--progress-interval", type=float, default=5.0,
                        help="seconds between two progress lines when not redrawn in place")
    parser.add_argument("--min-accuracy", type=float, default=0.0,
                        help="exit with status 1 when the last epoch's test accuracy (0-1) "
                        "is below this (for smoke tests)")
    return parser.parse_args(argv)


def read_idx(path, expected_magic):
    """The array in a gzip-compressed IDX file (big-endian header, uint8 data)."""
    if not os.path.exists(path):
        sys.exit(f"{path}: not found; install the dataset with "
                 "`apt-get install dataset-fashion-mnist` or pass --data-dir")
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    if magic != expected_magic:
        sys.exit(f"{path}: magic number {magic:#x}, expected {expected_magic:#x}")
    ndim = magic & 0xFF
    shape = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    payload = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if payload.size != int(np.prod(shape)):
        sys.exit(f"{path}: {payload.size} bytes of data for shape {shape}")
    return payload.reshape(shape)


def load_split(data_dir, prefix, limit=0):
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 0x803)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 0x801)
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = (torch.from_numpy(images.astype(np.float32) / 255.0) - PIXEL_MEAN) / PIXEL_STD
    return TensorDataset(x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64)))


class Net(nn.Module):
    """Two 5x5 convolutions with max-pooling, then two linear layers."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=5, padding=2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


class Progress:
    """One epoch's progress on a stream: in place (redrawn at most every 0.1 s), as a line
    every `interval` seconds (none before the first interval), or nothing."""

    def __init__(self, stream, mode, interval):
        terminal = stream.isatty()
        self.stream = stream
        self.in_place = mode == "always" or (mode == "auto" and terminal)
        self.on = mode != "never"
        self.interval = 0.1 if self.in_place else interval
        self.next = time.monotonic() + (0.0 if self.in_place else interval)
        self.shown = False

    def due(self):
        return self.on and time.monotonic() >= self.next

    def show(self, text):
        if not self.due():
            return
        if self.in_place:
            self.stream.write(f"\r{text}\033[K")
            self.shown = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.next = time.monotonic() + self.interval

    def clear(self):
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


def train_epoch(model, optimizer, loader, sampler, epoch, args):
    model.train()
    sampler.set_epoch(epoch)
    loss_sum, batches = 0.0, 0
    progress = Progress(sys.stderr, args.progress if hvd.rank() == 0 else "never",
                        args.progress_interval)
    started = time.perf_counter()
    for images, labels in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        loss_sum += loss.item()
        batches += 1
        if progress.due():
            rate = batches * args.batch_size * hvd.size() / (time.perf_counter() - started)
            progress.show(f"epoch {epoch}/{args.epochs} step {batches}/{len(loader)} "
                          f"({100 * batches // len(loader)}%) loss {loss_sum / batches:.4f} "
                          f"{rate:.0f} samples/s")
    progress.clear()
    # The mean over every rank's batches.
    totals = hvd.allreduce(torch.tensor([loss_sum, float(batches)], dtype=torch.float64),
                           op=hvd.Sum, name="train.loss")
    return (totals[0] / totals[1]).item()


def evaluate(model, loader):
    model.eval()
    correct, seen = 0, 0
    with torch.no_grad():
        for images, labels in loader:
            correct += (model(images).argmax(dim=1) == labels).sum().item()
            seen += labels.numel()
    totals = hvd.allreduce(torch.tensor([correct, seen], dtype=torch.int64), op=hvd.Sum,
                           name="test.accuracy")
    return totals[0].item() / totals[1].item(), totals[1].item()


def main(argv):
    args = parse_args(argv)
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    train_set = load_split(args.data_dir, "train", args.train_limit)
    test_set = load_split(args.data_dir, "t10k")
    # Each rank reads its own shard; drop_last=False pads the shards to one length.
    train_sampler = DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(),
                                       shuffle=True, seed=args.seed)
    # The test set in disjoint slices, without padding, so every image counts once.
    test_shard = Subset(test_set, range(hvd.rank(), len(test_set), hvd.size()))
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    test_loader = DataLoader(test_shard, batch_size=1000)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none,
        backward_passes_per_step=args.backward_passes_per_step)
    # Every rank starts from rank 0's weights and optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    if hvd.rank() == 0:
        print(f"pytorch_fashion_mnist: {hvd.size()} ranks, {len(train_set)} training images "
              f"({len(train_sampler)} per rank), batch {args.batch_size} per rank, "
              f"lr {args.lr * hvd.size():g}", flush=True)
    for epoch in range(1, args.epochs + 1):
        started = time.perf_counter()
        loss = train_epoch(model, optimizer, train_loader, train_sampler, epoch, args)
        # The slowest rank's time: the job's samples/s.
        elapsed = hvd.allreduce(torch.tensor([time.perf_counter() - started]), op=hvd.Max,
                                name="train.seconds").item()
        accuracy, tested = evaluate(model, test_loader)
        if hvd.rank() == 0:
            samples = len(train_sampler) * hvd.size()
            print(f"epoch {epoch}: loss {loss:.4f}  test accuracy {100 * accuracy:.2f}% "
                  f"({tested} images)  {samples / elapsed:.0f} samples/s", flush=True)
    hvd.shutdown()
    if args.epochs and accuracy < args.min_accuracy:
        sys.exit(f"pytorch_fashion_mnist: test accuracy {accuracy:.4f} is below "
                 f"--min-accuracy {args.min_accuracy}")


if __name__ == "__main__":
    main(sys.argv[1:])
