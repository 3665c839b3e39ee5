#!/usr/bin/python3
"""A ResNet-50 step's gradient allreduces through a Horovod-style Python module.

Each step submits ResNet-50's 161 gradients (25,557,032 float32, 97.5 MiB per
rank) with ``hvd.allreduce_async_`` in backward order, as a DistributedOptimizer's
hooks do, then synchronizes every handle. The same script runs through
``herd.torch`` (the default) or ``horovod.torch`` (``--module``), so two
launches compare the modules step for step; Horovod's settings come from its
environment variables (``HOROVOD_FUSION_THRESHOLD=0`` is its fastest here).

``--arena shared`` (herd.torch only) keeps the gradients as views of one
``herd.torch.shared_zeros`` arena, as ``DistributedOptimizer(shared_gradients=True)``
does; ``--arena plain`` (the default) gives each gradient its own tensor.

A step's time is the slowest rank's; the figure is the median over the timed
steps. Rank 0 prints one line, and ``--json FILE`` writes it as a record.

    mpirun -np 2 /usr/bin/python3 benchmarks/python_step.py
    mpirun -np 2 -x HOROVOD_FUSION_THRESHOLD=0 -x PYTHONPATH=HOROVOD_SRC \\
        /usr/bin/python3 benchmarks/python_step.py --module horovod.torch
"""

import argparse
import importlib
import json
import os
import statistics
import time

import torch


def resnet50_gradient_sizes():
    """Element counts of ResNet-50's parameters (torchvision's layout), in
    registration order: the stem, four stages of bottleneck blocks, the head."""
    sizes = [64 * 3 * 7 * 7, 64, 64]
    channels = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        expanded = width * 4
        for block in range(blocks):
            sizes += [channels * width, width, width]
            sizes += [width * width * 3 * 3, width, width]
            sizes += [width * expanded, expanded, expanded]
            if block == 0:
                sizes += [channels * expanded, expanded, expanded]
            channels = expanded
    sizes += [2048 * 1000, 1000]
    return sizes


def make_gradients(hvd, arena, sizes, rank):
    if arena == "shared":
        storage = hvd.shared_zeros(sum(sizes))
        gradients, offset = [], 0
        for size in sizes:
            gradients.append(storage[offset:offset + size])
            offset += size
    else:
        gradients = [torch.zeros(size) for size in sizes]
    for gradient in gradients:
        gradient.fill_(float(rank + 1))
    return gradients


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", default="herd.torch",
                        help="module with horovod.torch's API (herd.torch, horovod.torch)")
    parser.add_argument("--arena", choices=("plain", "shared"), default="plain",
                        help="gradients as tensors of their own, or views of one shared arena "
                             "(herd.torch only)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    args = parser.parse_args()
    torch.set_num_threads(1)
    hvd = importlib.import_module(args.module)
    if args.arena == "shared" and not hasattr(hvd, "shared_zeros"):
        raise SystemExit(f"python_step: {args.module} has no shared_zeros; --arena shared "
                         f"needs herd.torch")
    hvd.init()
    rank, ranks = hvd.rank(), hvd.size()
    sizes = resnet50_gradient_sizes()
    gradients = make_gradients(hvd, args.arena, sizes, rank)
    order = list(reversed(range(len(gradients))))

    def step():
        handles = [hvd.allreduce_async_(gradients[i], name=f"step.grad.{i}", op=hvd.Sum)
                   for i in order]
        for handle in handles:
            hvd.synchronize(handle)

    def reset():
        for gradient in gradients:
            gradient.fill_(float(rank + 1))

    for _ in range(args.warmup):
        reset()
        step()
    times = []
    for _ in range(args.steps):
        reset()
        hvd.allreduce_(torch.zeros(1), name="step.barrier", op=hvd.Sum)
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    slowest = hvd.allreduce(torch.tensor(times, dtype=torch.float64), name="step.times",
                            op=hvd.Max)
    # Every element is the sum of rank + 1 over the ranks.
    expected = ranks * (ranks + 1) / 2
    wrong = sum(int((gradient != expected).sum()) for gradient in gradients)
    wrong = int(hvd.allreduce(torch.tensor([wrong], dtype=torch.float64), name="step.wrong",
                              op=hvd.Sum).item())
    median_ms = statistics.median(slowest.tolist()) * 1e3
    if rank == 0:
        fusion = os.environ.get("HOROVOD_FUSION_THRESHOLD", "default")
        print(f"{args.module} arena={args.arena} ranks={ranks} "
              f"HOROVOD_FUSION_THRESHOLD={fusion}: {median_ms:.2f} ms per step "
              f"(median of {args.steps}), {wrong} wrong elements", flush=True)
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"module": args.module, "arena": args.arena, "ranks": ranks,
                           "fusion_threshold": fusion, "steps": args.steps,
                           "median_ms": round(median_ms, 3), "wrong": wrong}, out, indent=1)
    hvd.shutdown()
    if wrong:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
