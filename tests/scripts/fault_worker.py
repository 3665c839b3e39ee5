#!/usr/bin/env python3
"""One rank of the Python fault cases of tests/scripts/fault_matrix.py.

Usage: fault_worker.py OUT_DIR MODE ELEMENTS ITERATIONS PAUSE_MS

The Python twin of tests/mpi/fault_worker.cc's modes `loop` and
`early-exit` (the same files and lines). loop: allreduces of
float32[ELEMENTS] through herd.numpy, each result checked against its closed
form, until ITERATIONS results (0: until one fails). early-exit: one
allreduce on every rank, then rank 0 returns without herd.shutdown, so the
interpreter's exit shuts herd down, and the other ranks' next allreduce
fails naming rank 0. After an error it calls herd.shutdown, tries herd.init again, and
leaves the rest to the interpreter's exit, which must end the process.
"""
import os
import sys
import time

import numpy as np

import herd
import herd.numpy as hn


def main():
    out_dir, mode, elements, iterations, pause_ms = sys.argv[1:6]
    if mode not in ("loop", "early-exit"):
        print(f"fault_worker.py: unknown mode {mode!r}", file=sys.stderr)
        return 2
    elements, iterations, pause_ms = int(elements), int(iterations), int(pause_ms)
    herd.init()
    rank, size = herd.rank(), herd.size()
    out = open(os.path.join(out_dir, f"result.{rank}"), "w")
    index = np.arange(elements)
    last_good = time.monotonic()
    done = 0
    i = 0
    if mode == "early-exit":
        iterations = 1 if rank == 0 else 2
    try:
        while iterations == 0 or i < iterations:
            data = ((index + i + rank) % 64).astype(np.float32)
            result = hn.allreduce(data, name="fault/grad", op=herd.Sum)
            expected = sum(((index + i + r) % 64) for r in range(size)).astype(np.float32)
            if not np.array_equal(result, expected):
                out.write(f"wrong {i}\n")
                return 1
            last_good = time.monotonic()
            done += 1
            if done == 1:
                with open(os.path.join(out_dir, f"ready.{rank}"), "w") as ready:
                    ready.write(str(os.getpid()))
            time.sleep(pause_ms / 1000.0)
            i += 1
        out.write(f"ok {done}\n")
        if mode == "early-exit" and rank == 0:
            out.close()
            return 0  # without herd.shutdown: the interpreter's exit hook runs it
    except herd.Error as error:
        out.write(f"error {time.monotonic() - last_good} {error}\n")
        out.flush()
        start = time.monotonic()
        herd.shutdown()
        out.write(f"shutdown {time.monotonic() - start}\n")
        try:
            herd.init()
            out.write("reinit started\n")
        except herd.Error as refused:
            out.write(f"reinit {refused}\n")
        out.close()
        return 1
    out.flush()
    start = time.monotonic()
    herd.shutdown()
    out.write(f"shutdown {time.monotonic() - start}\n")
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
