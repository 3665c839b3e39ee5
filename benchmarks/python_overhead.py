#!/usr/bin/env python3
"""What herd.torch's Python layer adds to an allreduce.

Times, in one process per rank, the same float32 sum three ways on the same
tensor: herd._native.allreduce_async(...).wait() (the C++ runtime with no
Python layer: the baseline), hvd.allreduce (new output tensor, autograd node,
handle table) and hvd.allreduce_ (in place). Prints the medians and the ratios
to the baseline from rank 0.

    mpirun -np 2 .venv/bin/python benchmarks/python_overhead.py
"""

import argparse
import statistics
import time

import torch

import herd.torch as hvd
from herd import _native


def median_us(call, iterations, warmup=20):
    for _ in range(warmup):
        call()
    hvd.barrier()
    times = []
    for _ in range(iterations):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 16 << 20],
                        help="bytes per tensor")
    parser.add_argument("--iterations", type=int, default=2000,
                        help="calls per measurement (divided by 40 above 1 MiB)")
    args = parser.parse_args()
    hvd.init()
    for size in args.sizes:
        count = size // 4
        tensor = torch.ones(count)
        output = torch.empty_like(tensor)

        def native():
            _native.allreduce_async(f"native.{size}", tensor.data_ptr(), output.data_ptr(),
                                    "float32", [count], _native.ReduceOp.SUM).wait()

        def out_of_place():
            hvd.allreduce(tensor, name=f"out_of_place.{size}", op=hvd.Sum)

        def in_place():
            hvd.allreduce_(output, name=f"in_place.{size}", op=hvd.Sum)

        iterations = args.iterations if size <= 1 << 20 else max(1, args.iterations // 40)
        base, new, inplace = (median_us(call, iterations)
                              for call in (native, out_of_place, in_place))
        if hvd.rank() == 0:
            print(f"{size} B, {hvd.size()} ranks: native {base:.1f} us, "
                  f"hvd.allreduce {new:.1f} us ({new / base:.2f}x), "
                  f"hvd.allreduce_ {inplace:.1f} us ({inplace / base:.2f}x)", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
