#!/usr/bin/env python3
"""A network partition between two emulated hosts, run by ctest.

Usage: network_partition.py MPIEXEC WORKER AGENT [MPIEXEC_FLAG...]

Makes two network namespaces on a bridge of their own (the emulated hosts
10.234.17.2 and 10.234.17.3; the launching namespace is 10.234.17.1), and
starts partition_worker on them, one rank each, over TCP: Open MPI's
launcher reaches each host through AGENT, which runs the rank's daemon
inside that namespace. Two runs:

- healthy: 20 allreduces, every result exact, herd::shutdown returns;
- partition: the ranks reduce until both have one correct result, then the
  hosts' routes to each other become blackholes (packets vanish, as on a
  broken link, while each host still reaches the launcher), and with
  HERD_COLLECTIVE_TIMEOUT=3 both ranks must fail within the timeout and a
  bound, each naming the other rank as "rank N (host H, pid P)", and
  herd::shutdown must return within a few seconds. mpirun runs with
  --enable-recovery and orte_abort_on_non_zero_status 0, so that the rank that
  reports first, and ends with status 1, does not make mpirun end the other
  before it has reported.

Exits 77 (ctest's skip) where namespaces cannot be made: not root, no `ip`,
or a kernel that refuses them. Removes every namespace and link it made.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

PREFIX = "herdpart"
BRIDGE = "herdpbr0"
SUBNET = "10.234.17"
HOSTS = (2, 3)
TIMEOUT_S = 3.0
# Time to error beyond the timeout: the wait notices within its backoff, and
# a rank cut off in an agreement round first finishes its current transfer.
SLACK_S = 6.0
SHUTDOWN_BOUND_S = 5.0


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def namespace(host):
    return f"{PREFIX}{host}"


def hosts_down():
    for host in HOSTS:
        ip("netns", "del", namespace(host), check=False)
        ip("link", "del", f"{PREFIX}v{host}", check=False)
    ip("link", "del", BRIDGE, check=False)


def hosts_up():
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")
    for host in HOSTS:
        ns, outer, inner = namespace(host), f"{PREFIX}v{host}", f"{PREFIX}e{host}"
        ip("netns", "add", ns)
        ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        ip("link", "set", outer, "master", BRIDGE)
        ip("link", "set", outer, "up")
        ip("link", "set", inner, "netns", ns)
        ip("-n", ns, "addr", "add", f"{SUBNET}.{host}/24", "dev", inner)
        ip("-n", ns, "link", "set", inner, "up")
        ip("-n", ns, "link", "set", "lo", "up")


def cut_between_hosts():
    a, b = HOSTS
    ip("-n", namespace(a), "route", "add", "blackhole", f"{SUBNET}.{b}/32")
    ip("-n", namespace(b), "route", "add", "blackhole", f"{SUBNET}.{a}/32")


def launch(mpiexec, flags, worker, agent, out_dir, iterations):
    env = dict(os.environ)
    env.update(
        HERD_COLLECTIVE_TIMEOUT=str(TIMEOUT_S),
        HERD_AGENT_PREFIX=PREFIX,
        PMIX_MCA_gds="hash",
    )
    command = [
        mpiexec, *flags,
        # Let a rank that reported and ended with status 1 leave its peer
        # running until that one has reported too (mpirun would end it).
        "--enable-recovery", "--mca", "orte_abort_on_non_zero_status", "0",
        "--mca", "rtc", "^hwloc",
        "--mca", "plm_rsh_agent", agent,
        "--mca", "btl", "tcp,self",
        "--mca", "btl_tcp_if_include", f"{SUBNET}.0/24",
        "--mca", "oob_tcp_if_include", f"{SUBNET}.0/24",
        "-x", "HERD_COLLECTIVE_TIMEOUT",
        "-H", ",".join(f"{SUBNET}.{h}:1" for h in HOSTS),
        "-np", str(len(HOSTS)),
        worker, out_dir, str(iterations),
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def read_results(out_dir):
    results = {}
    for rank in range(len(HOSTS)):
        path = os.path.join(out_dir, f"result.{rank}")
        if os.path.exists(path):
            with open(path) as f:
                results[rank] = f.read().splitlines()
    return results


def wait_for(predicate, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def stop(process):
    if process.poll() is None:
        process.kill()
    output, _ = process.communicate()
    return output


def healthy_run(args, failures):
    out_dir = tempfile.mkdtemp(prefix="herd-partition-")
    try:
        process = launch(*args, out_dir, 20)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pass
        output = stop(process)
        results = read_results(out_dir)
        for rank in range(len(HOSTS)):
            lines = results.get(rank, [])
            if not lines or lines[0] != "ok 20":
                failures.append(f"healthy run: rank {rank} wrote {lines!r}; expected 'ok 20'")
        if process.returncode != 0:
            failures.append(f"healthy run: mpiexec exited {process.returncode}:\n{output}")
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def partitioned_run(args, failures):
    out_dir = tempfile.mkdtemp(prefix="herd-partition-")
    try:
        process = launch(*args, out_dir, 0)
        ready = lambda: all(os.path.exists(os.path.join(out_dir, f"ready.{r}"))
                            for r in range(len(HOSTS)))
        if not wait_for(ready, 60):
            failures.append("partition run: the ranks never had a first result:\n" + stop(process))
            return
        cut_between_hosts()
        cut = time.monotonic()
        done = lambda: all(len(lines) >= 2 for lines in read_results(out_dir).values()) and \
            len(read_results(out_dir)) == len(HOSTS)
        wait_for(done, TIMEOUT_S + SLACK_S + SHUTDOWN_BOUND_S + 10)
        waited = time.monotonic() - cut
        output = stop(process)
        results = read_results(out_dir)
        for rank in range(len(HOSTS)):
            peer = 1 - rank
            lines = results.get(rank)
            if not lines:
                failures.append(f"partition run: rank {rank} wrote nothing within {waited:.1f} s "
                                f"of the cut\n{output}")
                continue
            first = lines[0].split(" ", 2)
            if first[0] != "error" or len(first) < 3:
                failures.append(f"partition run: rank {rank} wrote {lines!r}; expected an error")
                continue
            seconds, message = float(first[1]), first[2]
            if not TIMEOUT_S * 0.9 <= seconds <= TIMEOUT_S + SLACK_S:
                failures.append(f"partition run: rank {rank} failed {seconds:.2f} s after its "
                                f"last result; expected {TIMEOUT_S} to {TIMEOUT_S + SLACK_S}")
            if f"rank {peer} (host " not in message or "no progress" not in message:
                failures.append(f"partition run: rank {rank}'s message does not say it made no "
                                f"progress waiting for rank {peer}: {message!r}")
            shutdown = [l for l in lines[1:] if l.startswith("shutdown ")]
            if not shutdown:
                failures.append(f"partition run: rank {rank}'s herd::shutdown did not return")
            elif float(shutdown[0].split()[1]) > SHUTDOWN_BOUND_S:
                failures.append(f"partition run: rank {rank}'s herd::shutdown took "
                                f"{shutdown[0].split()[1]} s, over {SHUTDOWN_BOUND_S}")
        if not failures:
            for rank in range(len(HOSTS)):
                print(f"partition run: rank {rank}: {results[rank][0]}")
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    mpiexec, worker, agent, *flags = sys.argv[1:]
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("skipped: network namespaces need root and iproute2's ip")
        return 77
    hosts_down()
    try:
        try:
            hosts_up()
        except subprocess.CalledProcessError as error:
            print(f"skipped: cannot make network namespaces here: {error.stderr.strip()}")
            return 77
        failures = []
        args = (mpiexec, flags, worker, agent)
        healthy_run(args, failures)
        if not failures:
            partitioned_run(args, failures)
    finally:
        hosts_down()
    for failure in failures:
        print(failure)
    print("network partition:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
