"""The jobs of the network-fault tests (network_partition.py, link_down.py):
partition_worker's ranks on emulated hosts (scripts/emulated_hosts.py), what
they write to a directory the hosts share, the checks of a rank that
failed and the test's verdict.

mpiexec runs with --enable-recovery and orte_abort_on_non_zero_status 0, so
that the rank that reports first, and ends with status 1, does not make
mpiexec end the others before they have reported.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from emulated_hosts import SKIP, EmulatedHosts, NamespacesUnavailable  # noqa: E402,F401

# herd::shutdown after a fault returns within this (docs/errors.md).
SHUTDOWN_BOUND_S = 5.0


class WorkerJob:
    """partition_worker OUT_DIR ITERATIONS on `ranks_per_host` ranks of each
    of `hosts`, with HERD_COLLECTIVE_TIMEOUT=`timeout_s`; mpiexec's output
    goes to a file of OUT_DIR."""

    def __init__(self, hosts, mpiexec, flags, worker, ranks_per_host, iterations, timeout_s):
        self.size = ranks_per_host * hosts.count
        self.out_dir = tempfile.mkdtemp(prefix="herd-network-fault-")
        env = hosts.env()
        env["HERD_COLLECTIVE_TIMEOUT"] = str(timeout_s)
        command = [
            mpiexec, *hosts.mpiexec_flags(ranks_per_host, forward=env), *flags,
            "--enable-recovery", "--mca", "orte_abort_on_non_zero_status", "0",
            worker, self.out_dir, str(iterations),
        ]
        self._log = open(os.path.join(self.out_dir, "mpiexec.log"), "w")
        self.process = subprocess.Popen(command, env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def _path(self, kind, rank):
        return os.path.join(self.out_dir, f"{kind}.{rank}")

    def all_ready(self):
        return all(os.path.exists(self._path("ready", r)) for r in range(self.size))

    def pids(self):
        """Each rank's pid, from its ready file."""
        pids = {}
        for rank in range(self.size):
            with open(self._path("ready", rank)) as f:
                pids[rank] = int(f.read().strip())
        return pids

    def results(self):
        """Each rank's result lines, for the ranks that wrote any."""
        results = {}
        for rank in range(self.size):
            path = self._path("result", rank)
            if os.path.exists(path):
                with open(path) as f:
                    lines = f.read().splitlines()
                if lines:
                    results[rank] = lines
        return results

    def stop(self):
        """Ends mpiexec (killing it and what it started here if it still
        runs) and returns its output."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        self._log.close()
        with open(os.path.join(self.out_dir, "mpiexec.log")) as f:
            return f.read()

    def remove(self):
        shutil.rmtree(self.out_dir, ignore_errors=True)


def wait_for(predicate, seconds):
    """Polls `predicate` every 50 ms for up to `seconds`; whether it held
    (fault_matrix.py waits with it too)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def process_ended(pid):
    """Whether `pid` has exited (a zombie counts: its rank is over)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True


def rank_pattern(rank, pid):
    """How herd names a rank: "rank N (host H, pid P)"."""
    return re.compile(rf"rank {rank} \(host [^,()]+, pid {pid}\)")


def check_failed_rank(failures, label, rank, lines, low_s, high_s, must_name, pids):
    """Checks that `rank` wrote an error after `low_s` to `high_s` seconds
    without a result, naming every rank of `must_name` with its pid, and that
    its herd::shutdown returned within SHUTDOWN_BOUND_S. Returns the error's
    seconds and message, or None."""
    if not lines:
        failures.append(f"{label}: rank {rank} wrote nothing")
        return None
    first = lines[0].split(" ", 2)
    if first[0] != "error" or len(first) < 3:
        failures.append(f"{label}: rank {rank} wrote {lines!r}; expected an error")
        return None
    seconds, message = float(first[1]), first[2]
    if not low_s <= seconds <= high_s:
        failures.append(f"{label}: rank {rank} failed {seconds:.2f} s after its last result; "
                        f"expected {low_s:.1f} to {high_s:.1f}")
    for peer in must_name:
        if not rank_pattern(peer, pids[peer]).search(message):
            failures.append(f"{label}: rank {rank}'s message does not name rank {peer} "
                            f"(pid {pids[peer]}): {message!r}")
    shutdown = [line for line in lines[1:] if line.startswith("shutdown ")]
    if not shutdown:
        failures.append(f"{label}: rank {rank}'s herd::shutdown did not return")
    elif float(shutdown[0].split()[1]) > SHUTDOWN_BOUND_S:
        failures.append(f"{label}: rank {rank}'s herd::shutdown took "
                        f"{shutdown[0].split()[1]} s, over {SHUTDOWN_BOUND_S}")
    return seconds, message


def verdict(failures, test):
    """Prints each failure and `test`'s verdict; returns the exit status."""
    for failure in failures:
        print(failure)
    print(f"{test}:", "FAILED" if failures else "passed")
    return 1 if failures else 0
