#!/usr/bin/env python3
"""A host's link taken down in the middle of allreduces, run by ctest.

Usage: link_down.py HOSTS RANKS_PER_HOST MPIEXEC WORKER [MPIEXEC_FLAG...]

Makes HOSTS emulated hosts (scripts/emulated_hosts.py, named "ldlink") and
starts partition_worker on RANKS_PER_HOST ranks of each, over TCP, with
HERD_COLLECTIVE_TIMEOUT=3. The ranks reduce (every result checked exactly)
until each has one correct result; then the last host's link goes down (its
veth, as a pulled cable: packets vanish, nothing is refused). Checked on
every rank, on both sides of the cut, from the files the ranks write to a
directory the hosts share:

- it fails within the timeout and a bound of its last exact result, with a
  message that says a wait ran out of HERD_COLLECTIVE_TIMEOUT;
- its message names every rank on the other side of the cut as "rank N
  (host H, pid P)", with that rank's pid;
- herd::shutdown returns within 5 s, and the process then ends.

mpiexec itself may never notice that a host's daemon is gone (its TCP
connection to the daemon only stalls); it is killed once the ranks have
reported, and everything left inside the hosts goes with them.

Exits 77 (ctest's skip) where namespaces cannot be made: not root, no `ip`,
or a kernel that refuses them. Removes every namespace and link it made.
"""
import sys
import time

from network_fault_job import (SHUTDOWN_BOUND_S, SKIP, EmulatedHosts, NamespacesUnavailable,
                               WorkerJob, check_failed_rank, process_ended, verdict, wait_for)

TIMEOUT_S = 3.0
# Time to error beyond the timeout: the wait notices within its backoff, a
# rank cut off in an agreement round first finishes its current transfer,
# and the error waits up to a second for the other ranks' answers
# (docs/errors.md).
SLACK_S = 6.0
# After herd::shutdown returned, the process ends within this.
EXIT_BOUND_S = 5.0


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    host_count, ranks_per_host = int(sys.argv[1]), int(sys.argv[2])
    mpiexec, worker, *flags = sys.argv[3:]
    hosts = EmulatedHosts("ldlink", host_count)
    try:
        hosts.up()
    except NamespacesUnavailable as reason:
        print(f"skipped: {reason}")
        return SKIP
    failures = []
    job = None
    try:
        job = WorkerJob(hosts, mpiexec, flags, worker, ranks_per_host, iterations=0,
                        timeout_s=TIMEOUT_S)
        if not wait_for(job.all_ready, 90):
            failures.append("the ranks never had a first result:\n" + job.stop())
            return verdict(failures, "link down")
        pids = job.pids()
        # Ranks are placed host by host (--map-by slot): the last host holds
        # the last RANKS_PER_HOST ranks.
        cut_off = set(range(job.size - ranks_per_host, job.size))
        hosts.link_down(hosts.hosts()[-1])
        down_at = time.monotonic()

        def over():
            results = job.results()
            return len(results) == job.size and \
                all(len(lines) >= 2 for lines in results.values()) and \
                all(process_ended(pid) for pid in pids.values())

        wait_for(over, TIMEOUT_S + SLACK_S + SHUTDOWN_BOUND_S + EXIT_BOUND_S)
        waited = time.monotonic() - down_at
        mpiexec_ended = job.process.poll() is not None
        output = job.stop()
        results = job.results()
        for rank in range(job.size):
            other_side = sorted(set(range(job.size)) - cut_off) if rank in cut_off \
                else sorted(cut_off)
            side = "cut-off host" if rank in cut_off else "reachable host"
            label = f"link down ({side})"
            if rank not in results:
                failures.append(f"{label}: rank {rank} wrote nothing within {waited:.1f} s "
                                f"of the link going down")
                continue
            error = check_failed_rank(failures, label, rank, results[rank], TIMEOUT_S * 0.9,
                                      TIMEOUT_S + SLACK_S, other_side, pids)
            if not process_ended(pids[rank]):
                failures.append(f"{label}: rank {rank}'s process (pid {pids[rank]}) still runs "
                                f"{waited:.1f} s after the link went down")
            # "(HERD_COLLECTIVE_TIMEOUT)" from an MPI wait, "(HERD_COLLECTIVE_TIMEOUT;
            # rank R waiting; ...)" from a shared-memory one: either wait may
            # notice first.
            if error and "(HERD_COLLECTIVE_TIMEOUT" not in error[1]:
                failures.append(f"{label}: rank {rank}'s message does not say that a wait ran "
                                f"out of HERD_COLLECTIVE_TIMEOUT: {error[1]!r}")
            if error:
                print(f"rank {rank} ({side}): error after {error[0]:.2f} s: {error[1]}")
        print(f"mpiexec {'ended' if mpiexec_ended else 'still ran'} {waited:.1f} s after the "
              "link went down" + ("" if mpiexec_ended else " (killed)"))
        if failures:
            print(output)
    finally:
        if job is not None:
            job.stop()
            job.remove()
        hosts.down()
    return verdict(failures, "link down")


if __name__ == "__main__":
    sys.exit(main())
