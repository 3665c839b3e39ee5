#!/usr/bin/env python3
"""One case of the fault matrix, run by ctest: a dead, frozen or early-exiting
rank, and the twin of each without the fault.

Usage: fault_matrix.py CASE MPIEXEC WORKER [MPIEXEC_FLAG...]

Starts tests/mpi/fault_worker under MPIEXEC, waits until every rank has an
exact result, injects the case's fault into one rank (the victim), and
checks what every other rank wrote: the message (naming the victim as
"rank N (host H, pid P)" where the case says so), the time from its last
exact result to the error, and that herd::shutdown returned within a bound.
The twins run the same job without the fault and require every result
exact, so a check that cannot see a fault would fail them.

By default mpirun ends the whole job as soon as one rank dies by a signal or
exits non-zero, before the survivors can report; the cases run with Open
MPI's `--enable-recovery --mca orte_abort_on_non_zero_status 0`, which let
the other ranks run on and end on their own.

Cases (name: ranks, fault):
  kill_shm_np2/np3   SIGKILL rank 1 in a loop of allreduces through shared
                     memory (HERD_ALLREDUCE_ALGORITHM=shm); the others fail
                     within a second or two
  kill_mpi_np2/np3   the same over MPI (HERD_SHM_ALLREDUCE_BYTES=0); the
                     others fail after HERD_COLLECTIVE_TIMEOUT, or at once on
                     the notice of the rank that timed out
  stop_long_mpi_np2, stop_long_shm_np2
                     SIGSTOP rank 1 for longer than HERD_COLLECTIVE_TIMEOUT:
                     the other rank fails, naming it
  stop_short_np2     SIGSTOP rank 1 for less: every result exact (the twin)
  kill_shm_single_copy_np2
                     kill_shm_np2 with 1 MiB allreduces through the single-copy
                     path (HERD_SHM_SINGLE_COPY=on): a survivor reading the
                     dead rank's memory, or waiting for it, fails within a
                     second or two, naming it
  kill_shm_shared_np2
                     kill_shm_np2 with the buffer in a herd::SharedBuffer,
                     reduced in place through the direct path: a survivor
                     waiting for the dead rank fails within a second or two,
                     naming it
  healthy_shm_np3, healthy_mpi_np3, healthy_shm_single_copy_np3,
  healthy_shm_shared_np3
                     no fault: every result exact (the twin of the kills)
  healthy_np2        two allreduces and herd::shutdown on both ranks, exact
                     (the twin of early_exit_np2 and shutdown_pending_np2)
  early_exit_np2     rank 0 returns from main without herd::shutdown; rank 1's
                     next allreduce fails naming it
  shutdown_pending_np2
                     rank 0 calls herd::shutdown; rank 1's next allreduce fails
                     with herd's shutdown message
  slow_peer_np2      rank 0 sleeps 10 s before submitting: rank 1's result is
                     exact and its CPU time while waiting under a quarter of
                     the wall time
  python_kill_mpi_np2, python_healthy_np2, python_early_exit_np2
                     kill_mpi_np2, its twin and early_exit_np2 with WORKER the
                     Python worker
                     (tests/scripts/fault_worker.py, run by /usr/bin/python3
                     with PYTHONPATH passed on), whose interpreter exits after
                     herd.shutdown
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from network_fault_job import wait_for

TIMEOUT_S = 3.0  # HERD_COLLECTIVE_TIMEOUT of the cases that need it
# Beyond the timeout: the wait notices within its backoff, a loaded machine
# (the tests share two cores) is slow to schedule.
SLACK_S = 5.0
SHUTDOWN_BOUND_S = 5.0
# After the fault, every process of the job must have ended within this.
JOB_END_BOUND_S = TIMEOUT_S + SLACK_S + SHUTDOWN_BOUND_S + 10.0
RECOVERY_FLAGS = ["--enable-recovery", "--mca", "orte_abort_on_non_zero_status", "0"]


class Case:
    def __init__(self, ranks, mode, env=None, elements=1024, iterations=0, pause_ms=0,
                 fault=None, victim=1, stop_s=0.0):
        self.ranks, self.mode, self.env = ranks, mode, env or {}
        self.elements, self.iterations, self.pause_ms = elements, iterations, pause_ms
        self.fault, self.victim, self.stop_s = fault, victim, stop_s


MPI_ONLY = {"HERD_SHM_ALLREDUCE_BYTES": "0"}
# The shared-memory cases fix the algorithm: a measured choice could be
# running the ring when the fault lands.
SHM_ONLY = {"HERD_ALLREDUCE_ALGORITHM": "shm"}
SINGLE_COPY = {"HERD_SHM_SINGLE_COPY": "on", **SHM_ONLY}
# 1 MiB of float32: the sizes the single-copy path takes.
MID = 1 << 18
# 4 MiB of float32: a kill lands inside the data exchange more often than not.
BIG = 1 << 20
CASES = {
    "kill_shm_np2": Case(2, "loop", SHM_ONLY, elements=BIG, fault="kill"),
    "kill_shm_np3": Case(3, "loop", SHM_ONLY, elements=BIG, fault="kill"),
    "kill_mpi_np2": Case(2, "loop", MPI_ONLY, elements=BIG, fault="kill"),
    "kill_mpi_np3": Case(3, "loop", MPI_ONLY, elements=BIG, fault="kill"),
    "kill_shm_single_copy_np2": Case(2, "loop", SINGLE_COPY, elements=MID, fault="kill"),
    "kill_shm_shared_np2": Case(2, "loop-shared", SHM_ONLY, elements=BIG, fault="kill"),
    "healthy_shm_np3": Case(3, "loop", SHM_ONLY, iterations=200),
    "healthy_shm_shared_np3": Case(3, "loop-shared", SHM_ONLY, elements=BIG, iterations=100),
    "healthy_shm_single_copy_np3": Case(3, "loop", SINGLE_COPY, elements=MID, iterations=200),
    "healthy_mpi_np3": Case(3, "loop", MPI_ONLY, iterations=200),
    "healthy_np2": Case(2, "loop", iterations=2),
    "stop_long_mpi_np2": Case(2, "loop", MPI_ONLY, fault="stop", stop_s=TIMEOUT_S + 4.0),
    "stop_long_shm_np2": Case(2, "loop", SHM_ONLY, fault="stop", stop_s=TIMEOUT_S + 4.0),
    "stop_short_np2": Case(2, "loop", MPI_ONLY, iterations=300, pause_ms=10, fault="stop",
                           stop_s=1.0),
    "early_exit_np2": Case(2, "early-exit"),
    "shutdown_pending_np2": Case(2, "shutdown-pending"),
    "slow_peer_np2": Case(2, "slow-peer"),
    # WORKER is tests/scripts/fault_worker.py: the interpreter's exit after
    # the failure must end the process too.
    "python_kill_mpi_np2": Case(2, "loop", MPI_ONLY, elements=BIG, fault="kill"),
    "python_healthy_np2": Case(2, "loop", iterations=20),
    "python_early_exit_np2": Case(2, "early-exit"),
}


def read_lines(out_dir, rank):
    path = os.path.join(out_dir, f"result.{rank}")
    if not os.path.exists(path):
        return []
    with open(path, errors="backslashreplace") as f:
        return f.read().splitlines()


def ready_pid(out_dir, rank):
    path = os.path.join(out_dir, f"ready.{rank}")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        text = f.read().strip()
    return int(text) if text else None


def named(rank, pid):
    return f"rank {rank} (host {socket.gethostname()}, pid {pid})"


def check_error_line(failures, rank, lines, low_s, high_s, must_contain, fatal=True):
    errors = [l for l in lines if l.startswith("error ")]
    if not errors:
        failures.append(f"rank {rank} wrote {lines!r}; expected an error")
        return
    _, seconds, message = errors[0].split(" ", 2)
    seconds = float(seconds)
    print(f"rank {rank}: error after {seconds:.2f} s: {message}")
    if not low_s <= seconds <= high_s:
        failures.append(f"rank {rank} failed {seconds:.2f} s after its last exact result; "
                        f"expected {low_s:.1f} to {high_s:.1f} s")
    for text in must_contain:
        if text not in message:
            failures.append(f"rank {rank}'s message lacks {text!r}: {message!r}")
    shutdowns = [l for l in lines if l.startswith("shutdown ")]
    if not shutdowns:
        failures.append(f"rank {rank}: herd::shutdown did not return after the error")
    elif float(shutdowns[0].split()[1]) > SHUTDOWN_BOUND_S:
        failures.append(f"rank {rank}: herd::shutdown took {shutdowns[0].split()[1]} s, over "
                        f"{SHUTDOWN_BOUND_S} s")
    # After a fatal failure herd leaves MPI unfinalized and refuses to start
    # again in the process.
    reinit = [l for l in lines if l.startswith("reinit ")]
    if fatal and not (reinit and "cannot start again" in reinit[0]):
        failures.append(f"rank {rank}: herd::init after the failure did not refuse: {reinit!r}")


def require_ok(failures, rank, lines, results):
    if f"ok {results}" not in lines:
        failures.append(f"rank {rank} wrote {lines!r}; expected 'ok {results}'")


def run(name, case, mpiexec, worker, flags):
    out_dir = tempfile.mkdtemp(prefix="herd-fault-")
    env = dict(os.environ)
    env.update(case.env)
    env["HERD_COLLECTIVE_TIMEOUT"] = str(TIMEOUT_S)
    forwarded = [*case.env, "HERD_COLLECTIVE_TIMEOUT"]
    program = [worker]
    if worker.endswith(".py"):
        program = ["/usr/bin/python3", worker]
        forwarded.append("PYTHONPATH")
    command = [mpiexec, *flags, *RECOVERY_FLAGS, "-np", str(case.ranks),
               *sum((["-x", k] for k in forwarded), []),
               *program, out_dir, case.mode, str(case.elements), str(case.iterations),
               str(case.pause_ms)]
    log_path = os.path.join(out_dir, "mpiexec.log")
    failures = []
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    victim_pid = None
    try:
        if case.fault:
            ready = lambda: all(ready_pid(out_dir, r) for r in range(case.ranks))
            if not wait_for(ready, 60):
                failures.append("the ranks never all had a first exact result")
                return failures, out_dir, process
            victim_pid = ready_pid(out_dir, case.victim)
            if case.fault == "kill":
                os.kill(victim_pid, signal.SIGKILL)
            else:
                os.kill(victim_pid, signal.SIGSTOP)
                time.sleep(case.stop_s)
                os.kill(victim_pid, signal.SIGCONT)
        try:
            process.wait(timeout=JOB_END_BOUND_S + (60 if not case.fault else 0))
        except subprocess.TimeoutExpired:
            failures.append(f"the job did not end within {JOB_END_BOUND_S:.0f} s of the fault")
        return check(name, case, out_dir, victim_pid, failures), out_dir, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def check(name, case, out_dir, victim_pid, failures):
    lines = {r: read_lines(out_dir, r) for r in range(case.ranks)}
    for rank in range(case.ranks):
        print(f"rank {rank} wrote: {lines[rank]}")
    survivors = [r for r in range(case.ranks) if r != case.victim]
    if case.fault == "kill":
        victim = named(case.victim, victim_pid)
        # Through shared memory the pid check finds the dead rank within
        # 100 ms; over MPI the rank waiting on it times out.
        low, high = (0.0, 2.0 + SLACK_S) if "HERD_SHM_ALLREDUCE_BYTES" not in case.env \
            else (0.0, TIMEOUT_S + SLACK_S)
        for rank in survivors:
            check_error_line(failures, rank, lines[rank], low, high, [victim])
    elif case.fault == "stop" and case.stop_s > TIMEOUT_S:
        for rank in survivors:
            check_error_line(failures, rank, lines[rank], TIMEOUT_S * 0.9, TIMEOUT_S + SLACK_S,
                             [named(case.victim, victim_pid), "HERD_COLLECTIVE_TIMEOUT"])
    elif case.mode == "early-exit":
        pid = ready_pid(out_dir, 0)
        check_error_line(failures, 1, lines[1], 0.0, SLACK_S,
                         [f"exited without herd::shutdown", "rank 0 (host "], fatal=False)
        require_ok(failures, 0, lines[0], 1)
    elif case.mode == "shutdown-pending":
        check_error_line(failures, 1, lines[1], 0.0, SLACK_S,
                         ["herd was shut down (herd::shutdown on some rank) before the operation "
                          "completed"], fatal=False)
        require_ok(failures, 0, lines[0], 1)
    elif case.mode == "slow-peer":
        for rank in range(case.ranks):
            require_ok(failures, rank, lines[rank], 1)
        cpu = [l for l in lines[1] if l.startswith("cpu ")]
        if not cpu:
            failures.append(f"rank 1 wrote no CPU time: {lines[1]!r}")
        else:
            _, cpu_s, _, wall_s = cpu[0].split()
            cpu_s, wall_s = float(cpu_s), float(wall_s)
            print(f"rank 1 waited {wall_s:.2f} s using {cpu_s:.3f} s of CPU")
            if wall_s < 8.0:
                failures.append(f"rank 1 waited only {wall_s:.2f} s; rank 0 sleeps 10 s")
            if cpu_s > 0.25 * wall_s:
                failures.append(f"rank 1 used {cpu_s:.2f} s of CPU in a wait of {wall_s:.2f} s, "
                                f"over a quarter")
    else:
        results = case.iterations
        for rank in range(case.ranks):
            require_ok(failures, rank, lines[rank], results)
    return failures


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in CASES:
        print(__doc__, file=sys.stderr)
        return 2
    name, mpiexec, worker, *flags = sys.argv[1:]
    failures, out_dir, _ = run(name, CASES[name], mpiexec, worker, flags)
    if failures:
        with open(os.path.join(out_dir, "mpiexec.log")) as log:
            print("mpiexec output:\n" + log.read())
    for failure in failures:
        print("FAILED:", failure)
    shutil.rmtree(out_dir, ignore_errors=True)
    print(f"{name}:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
