#!/usr/bin/env python3
"""A network partition between two emulated hosts, run by ctest.

Usage: network_partition.py MPIEXEC WORKER [MPIEXEC_FLAG...]

Makes two emulated hosts (scripts/emulated_hosts.py, named "ldpart") and
starts partition_worker on them, one rank each, over TCP. Two runs:

- healthy: 20 allreduces, every result exact, herd::shutdown returns;
- partition: the ranks reduce until both have one correct result, then the
  hosts' routes to each other become blackholes (packets vanish, as on a
  broken path, while each host still reaches the launcher), and with
  HERD_COLLECTIVE_TIMEOUT=3 both ranks must fail within the timeout and a
  bound, each naming the other rank as "rank N (host H, pid P)" in a
  message that says it made no progress, and herd::shutdown must return
  within a few seconds.

Exits 77 (ctest's skip) where namespaces cannot be made: not root, no `ip`,
or a kernel that refuses them. Removes every namespace and link it made.
"""
import subprocess
import sys

from network_fault_job import (SHUTDOWN_BOUND_S, SKIP, EmulatedHosts, NamespacesUnavailable,
                               WorkerJob, check_failed_rank, verdict, wait_for)

TIMEOUT_S = 3.0
# Time to error beyond the timeout: the wait notices within its backoff, a
# rank cut off in an agreement round first finishes its current transfer,
# and the error waits up to a second for the other ranks' answers.
SLACK_S = 6.0


def healthy_run(hosts, args, failures):
    job = WorkerJob(hosts, *args, ranks_per_host=1, iterations=20, timeout_s=TIMEOUT_S)
    try:
        try:
            job.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pass
        output = job.stop()
        results = job.results()
        for rank in range(job.size):
            lines = results.get(rank, [])
            if not lines or lines[0] != "ok 20":
                failures.append(f"healthy run: rank {rank} wrote {lines!r}; expected 'ok 20'")
        if job.process.returncode != 0:
            failures.append(f"healthy run: mpiexec exited {job.process.returncode}:\n{output}")
    finally:
        job.remove()


def partitioned_run(hosts, args, failures):
    job = WorkerJob(hosts, *args, ranks_per_host=1, iterations=0, timeout_s=TIMEOUT_S)
    try:
        if not wait_for(job.all_ready, 60):
            failures.append("partition run: the ranks never had a first result:\n" + job.stop())
            return
        pids = job.pids()
        hosts.cut_between(*hosts.hosts())
        reported = lambda: all(len(lines) >= 2 for lines in job.results().values()) and \
            len(job.results()) == job.size
        wait_for(reported, TIMEOUT_S + SLACK_S + SHUTDOWN_BOUND_S + 10)
        output = job.stop()
        results = job.results()
        found = []
        for rank in range(job.size):
            peer = 1 - rank
            label = "partition run"
            if rank not in results:
                failures.append(f"{label}: rank {rank} wrote nothing\n{output}")
                continue
            error = check_failed_rank(failures, label, rank, results[rank], TIMEOUT_S * 0.9,
                                      TIMEOUT_S + SLACK_S, [peer], pids)
            if error and "no progress" not in error[1]:
                failures.append(f"{label}: rank {rank}'s message does not say it made no "
                                f"progress: {error[1]!r}")
            found.append(f"partition run: rank {rank}: {results[rank][0]}")
        if not failures:
            print("\n".join(found))
    finally:
        job.remove()


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    mpiexec, worker, *flags = sys.argv[1:]
    hosts = EmulatedHosts("ldpart", 2)
    try:
        hosts.up()
    except NamespacesUnavailable as reason:
        print(f"skipped: {reason}")
        return SKIP
    failures = []
    try:
        args = (mpiexec, flags, worker)
        healthy_run(hosts, args, failures)
        if not failures:
            partitioned_run(hosts, args, failures)
    finally:
        hosts.down()
    return verdict(failures, "network partition")


if __name__ == "__main__":
    sys.exit(main())
