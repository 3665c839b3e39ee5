#!/usr/bin/python3
"""The transport settings each process set runs with, across emulated hosts.

Usage: transport_fit_hosts.py WORKER

Runs tests/mpi/transport_fit_worker (WORKER) on 2 emulated hosts of 2 ranks
each (scripts/emulated_hosts.py, Open MPI over TCP between the hosts, ranks
0 and 1 on the first host, 2 and 3 on the second) with HERD_LOG_LEVEL=debug,
twice:

- with every transport setting at auto: the global set {0..3} and the set
  {0, 3} span the hosts and run with the TCP values (4 MiB ring segments, no
  eager pieces); the set {0, 1} lies on one host and keeps the one-machine
  values (1 MiB segments; no eager pieces either, since the emulated hosts
  run Open MPI without its shared-memory transport, whose eager limit is
  then not there to read); every set runs recursive doubling up to 64 KiB,
  the threshold by the number of ranks;
- with HERD_RING_SEGMENT_BYTES, HERD_EAGER_PIECE_BYTES and
  HERD_SMALL_ALLREDUCE_BYTES set: every set runs with those values.

Each member of a set logs its set's line once; every allreduce's result must
be exact ("ok <rank>" from every rank). Exits 0 when all holds, 1 naming
what differs, 77 (ctest's skip) when namespaces cannot be made here.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EMULATED_HOSTS = os.path.join(ROOT, "scripts", "emulated_hosts.py")
SKIP = 77
KIB = 1024
MIB = 1024 * KIB

LINE = re.compile(r"\[herd (\d+)\] DEBUG: process set (\d+): ring segments of (\d+) bytes, "
                  r"eager pieces of (\d+) bytes, recursive doubling up to (\d+) bytes")

# The sets the worker makes at 2 x 2 ranks: id -> members.
SETS = {0: [0, 1, 2, 3], 1: [0, 1], 2: [0, 3]}


def run(worker, extra_env):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("HERD_", "HOROVOD_"))}
    env.update(extra_env)
    env["HERD_LOG_LEVEL"] = "debug"
    command = [sys.executable, EMULATED_HOSTS, "run", "--name", "tc2", "--hosts", "2",
               "--ranks-per-host", "2", "--timeout", "120", "--",
               "--allow-run-as-root", "--oversubscribe", worker]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=170)
    return done.returncode, done.stdout + done.stderr


def check(name, output, returncode, expected):
    """expected: set id -> (segment, eager piece, recursive doubling bytes). Returns the
    problems found."""
    problems = []
    if returncode != 0:
        problems.append(f"{name}: the job exited {returncode}")
    for rank in range(4):
        if not re.search(rf"^ok {rank}$", output, re.MULTILINE):
            problems.append(f"{name}: rank {rank} did not report exact results")
    seen = {}
    for match in LINE.finditer(output):
        rank, set_id = int(match.group(1)), int(match.group(2))
        values = tuple(int(match.group(i)) for i in (3, 4, 5))
        if (rank, set_id) in seen:
            problems.append(f"{name}: rank {rank} logged set {set_id} twice")
        seen[(rank, set_id)] = values
    for set_id, members in SETS.items():
        for rank in members:
            got = seen.pop((rank, set_id), None)
            if got != expected[set_id]:
                problems.append(f"{name}: set {set_id} on rank {rank}: (segment, eager piece, "
                                f"recursive doubling) = {got}, expected {expected[set_id]}")
    for (rank, set_id), values in sorted(seen.items()):
        problems.append(f"{name}: rank {rank} logged set {set_id}, which it is not in: {values}")
    return problems


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    worker = argv[1]
    across = (4 * MIB, 0, 64 * KIB)
    one_host = (1 * MIB, 0, 64 * KIB)
    runs = [
        ("auto", {}, {0: across, 1: one_host, 2: across}),
        ("set by the user",
         {"HERD_RING_SEGMENT_BYTES": "65536", "HERD_EAGER_PIECE_BYTES": "1000",
          "HERD_SMALL_ALLREDUCE_BYTES": "0"},
         {set_id: (65536, 1000, 0) for set_id in SETS}),
    ]
    problems = []
    for name, env, expected in runs:
        returncode, output = run(worker, env)
        if returncode == SKIP:
            print(output.strip())
            return SKIP
        found = check(name, output, returncode, expected)
        if found:
            print(f"--- output of the {name} run ---\n{output}", file=sys.stderr)
        problems += found
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print("transport settings: TCP values on the sets across hosts, one-machine values on "
              "the set within one, the user's values on all when set")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
