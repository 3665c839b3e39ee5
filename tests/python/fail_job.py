"""herd.fail from Python: the last rank ends the job with its reason while
rank 0 waits in an allreduce (of 3 ranks, rank 1 submits one after the
failure); every other rank's error names the failing rank by host
and pid (learned here before the failure) and holds the reason, and so does a
later allreduce; herd.shutdown then returns. The failing rank: herd is
stopped, and herd.fail again or before init raises herd.Error.

Run under mpirun --enable-recovery (after the failure MPI is not finalized,
which mpirun reports): each rank prints "rank R passed" or "rank R FAILED:
...", and ctest reads those lines.
"""

import os
import socket
import sys
import time

import numpy as np

import herd
import herd.numpy as hnp

REASON = "bad record at byte 96 of x.rec"
BOUND_S = 20.0


def error_of(call):
    try:
        call()
    except herd.Error as e:
        return str(e)
    return ""


def main():
    failures = []
    before_init = error_of(lambda: herd.fail(REASON))
    if "herd::fail: herd is not initialized" not in before_init:
        failures.append(f"herd.fail before init: {before_init!r}")
    herd.init()
    rank, size = herd.rank(), herd.size()
    failing = size - 1
    hosts = hnp.allgather(np.frombuffer(socket.gethostname().encode().ljust(256, b"\0"),
                                        dtype=np.uint8), name="fail/hosts")
    pids = hnp.allgather(np.array([os.getpid()], dtype=np.int64), name="fail/pids")
    host = bytes(hosts[failing * 256:(failing + 1) * 256]).rstrip(b"\0").decode()
    pid = int(pids[failing])
    expected = f"rank {failing} (host {host}, pid {pid}): {REASON}"
    x = np.ones(4, dtype=np.float32)
    if not np.array_equal(hnp.allreduce(x, op=herd.Sum), x * size):
        failures.append("the allreduce before the failure was wrong")

    if rank == failing:
        time.sleep(0.5)
        herd.fail(REASON)
        if herd.is_initialized():
            failures.append("herd is still initialized after herd.fail")
        again = error_of(lambda: herd.fail(REASON))
        if again != "herd::fail: herd has been shut down":
            failures.append(f"herd.fail after herd.fail: {again!r}")
    else:
        if rank == 1:
            time.sleep(1.5)  # submits after the failure
        start = time.monotonic()
        first = error_of(lambda: hnp.allreduce(x, op=herd.Sum, name="fail/grad"))
        seconds = time.monotonic() - start
        if expected not in first:
            failures.append(f"the waiting allreduce's error {first!r} lacks {expected!r}")
        if seconds >= BOUND_S:
            failures.append(f"the allreduce failed after {seconds:.1f} s")
        later = error_of(lambda: hnp.allreduce(x, op=herd.Sum, name="fail/later"))
        if expected not in later:
            failures.append(f"the later allreduce's error {later!r} lacks {expected!r}")
        herd.shutdown()

    for failure in failures:
        print(f"rank {rank} FAILED: {failure}", flush=True)
    if not failures:
        print(f"rank {rank} passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
