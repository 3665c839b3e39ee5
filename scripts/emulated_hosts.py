#!/usr/bin/env python3
"""Emulated hosts: network namespaces on a bridge of their own, for multi-host
jobs on one machine over real TCP.

    scripts/emulated_hosts.py run [--hosts H] [--ranks-per-host L] [--name NAME]
        [--mpiexec PATH] [--timeout S] [--btl LIST] -- [MPIEXEC_FLAG...] PROGRAM [ARG...]
    scripts/emulated_hosts.py up|down [--hosts H] [--name NAME]
    scripts/emulated_hosts.py flags [--hosts H] [--ranks-per-host L] [--name NAME]

`run` makes H hosts (default 2), runs PROGRAM on L ranks each (default 1)
under mpiexec over Open MPI's TCP transport only (--btl tcp,self, the
default; --btl tcp,vader,self adds shared memory between the ranks of one
host, as Open MPI uses by default on real hosts), and removes the hosts
again, also when the job fails, times out or is interrupted; it exits with
mpiexec's status, 124 on the time limit (the job is killed), 128+N when
ended by signal N (SIGTERM, SIGINT, SIGHUP), and 77 (ctest's skip) with the
reason on stdout where namespaces cannot be made (not root, no `ip`, a
kernel or container that refuses them). `up` and `down` make and remove the
hosts to keep across several jobs of one's own, and `flags` prints the
mpiexec flags that reach them, one a line (`mpiexec $(scripts/emulated_hosts.py flags) ...`).
Every HERD_* and HOROVOD_* variable of the caller's environment is forwarded
to the ranks.

Hosts made by `run` or by the module are watched by a guard, a process of
this script outside the caller's process tree: when the caller dies without
removing them (SIGKILL, as ctest's time limit ends a test's whole process
tree), the guard kills the job and removes the hosts.

Each host i (2 .. H+1) is a namespace holding the address SUBNET.i on a veth
link to a bridge in the caller's namespace, which holds SUBNET.1 and runs
mpiexec. Open MPI starts its daemon on each host through
scripts/emulated_hosts_agent, its launch agent (plm_rsh_agent), which runs
the daemon inside the namespace that owns the host's address, with a TMPDIR
of the host's own, $TMPDIR/herd-NAME-h<i> (Open MPI's per-job directories;
removed with the host), under the namespace's name as its host name. The
hosts share the machine's CPUs, memory and file systems; only the network
stack and the host name are theirs, so shared memory between ranks
of one host works as on a real one, and ranks of different hosts reach each
other only over TCP.

Names: NAME (default "mh", at most 8 letters and digits) names the
namespaces herd-NAME-h<i>, the bridge hb-NAME and the links hvNAME-<i>; a subnet 10.237.X.0/24 is claimed for the set under
/run/herd-emulated-hosts, so that several sets made at once (parallel tests)
never share addresses. A set left behind by a killed run is removed when a
set of the same name is made.

As a module: `with EmulatedHosts("ag", 2) as hosts:` then
`hosts.mpiexec_command(ranks_per_host, [program...])`, `hosts.env()`,
`hosts.link_down(host)`, `hosts.cut_between(a, b)`; NamespacesUnavailable
says why they cannot be made.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

SKIP = 77
CLAIMS = "/run/herd-emulated-hosts"
# Second octet of every emulated subnet; the third is claimed per set.
SUBNET_PREFIX = "10.237"
AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "emulated_hosts_agent")


class NamespacesUnavailable(Exception):
    """Network namespaces cannot be made here; the message says why."""


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


class IpFailed(Exception):
    """An `ip` command of a batch failed; the message names it."""


def ip_batch(commands, namespace=None, force=False):
    """Runs `ip` commands (an argument list each) in one `ip -batch` process,
    inside `namespace` if given: a few processes per set of hosts instead of
    several per host, which on a busy machine takes seconds off every run.
    Stops at the first that fails and raises IpFailed naming it, unless
    `force` (go on past failures, raise nothing)."""
    args = ["ip", *(["-n", namespace] if namespace else []), *(["-force"] if force else []),
            "-batch", "-"]
    done = subprocess.run(args, input="".join(" ".join(c) + "\n" for c in commands),
                          capture_output=True, text=True)
    if done.returncode != 0 and not force:
        # ip names the failing line of its input: "Command failed -:N".
        failed = re.search(r"\s*Command failed -:(\d+)\s*", done.stderr)
        line = int(failed.group(1)) if failed else 0
        command = " ".join(commands[line - 1]) if 0 < line <= len(commands) else "-batch"
        why = done.stderr.replace(failed.group(0), " ") if failed else done.stderr
        where = f" -n {namespace}" if namespace else ""
        raise IpFailed(f"`ip{where} {command}` failed: {why.strip()}")
    return done


def why_namespaces_unavailable():
    """None where namespaces can be made, else the reason."""
    if os.geteuid() != 0:
        return "network namespaces need root (this runs as uid %d)" % os.geteuid()
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    probe = f"herdprobe{os.getpid()}"
    try:
        ip_batch([["netns", "add", probe], ["netns", "del", probe]])
    except IpFailed as failed:
        return f"cannot make a network namespace here: {failed}"
    return None


# Where `ip netns` keeps its namespaces, one file each.
NETNS_DIR = "/var/run/netns"


def _ns_id(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _pids_inside(namespaces):
    """The processes whose network namespace is one of `namespaces` (what
    `ip netns pids` tells for one, for all of them in one pass)."""
    wanted = set()
    for ns in namespaces:
        try:
            wanted.add(_ns_id(os.path.join(NETNS_DIR, ns)))
        except OSError:
            pass
    if not wanted:
        return []
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if _ns_id(f"/proc/{pid}/ns/net") in wanted:
                    pids.append(int(pid))
            except OSError:
                continue
    return pids


def _kill_inside(namespaces):
    """Kills every process in `namespaces`, until none is left (or 2.5 s)."""
    for _ in range(50):
        pids = _pids_inside(namespaces)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class EmulatedHosts:
    def __init__(self, name="mh", hosts=2):
        if not re.fullmatch(r"[a-z0-9]{1,8}", name):
            raise ValueError(f"emulated hosts' name {name!r}: 1 to 8 lower-case letters or digits")
        if not 1 <= hosts <= 200:
            raise ValueError(f"emulated hosts: {hosts} hosts; expected 1 to 200")
        self.name = name
        self.count = hosts
        self.subnet = None  # "10.237.X" once claimed
        self._claim = None
        self._guard = None  # the guard's Popen, its stdin our end of the pipe

    # Names. Link names must stay within Linux's 15 characters.
    def namespace(self, host):
        """The namespace of host `host` (2 .. count+1): the agent's prefix and the host's octet."""
        return f"{self.agent_prefix()}{host}"

    def agent_prefix(self):
        return f"herd-{self.name}-h"

    def bridge(self):
        return f"hb-{self.name}"

    def outer_link(self, host):
        return f"hv{self.name}-{host}"

    def inner_link(self, host):
        return f"he{self.name}-{host}"

    def tmpdir(self, host):
        """The TMPDIR of host `host`'s daemon and ranks (the agent makes it)."""
        return os.path.join(os.environ.get("TMPDIR") or "/tmp", self.namespace(host))

    def hosts(self):
        return list(range(2, self.count + 2))

    def address(self, host):
        return f"{self.subnet}.{host}"

    # Making and removing.
    def __enter__(self):
        self.up()
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    def up(self, guarded=True):
        """Makes the hosts; `guarded`: a guard removes them should this
        process die before down()."""
        reason = why_namespaces_unavailable()
        if reason:
            raise NamespacesUnavailable(reason)
        self.remove_leftovers()
        self._claim_subnet()
        if guarded:
            self._start_guard()
        bridge = self.bridge()
        outside = [["link", "add", bridge, "type", "bridge"],
                   ["addr", "add", f"{self.subnet}.1/24", "dev", bridge],
                   ["link", "set", bridge, "up"]]
        for host in self.hosts():
            ns, outer, inner = self.namespace(host), self.outer_link(host), self.inner_link(host)
            outside += [["netns", "add", ns],
                        ["link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns],
                        ["link", "set", outer, "master", bridge],
                        ["link", "set", outer, "up"]]
        try:
            ip_batch(outside)
            for host in self.hosts():
                inner = self.inner_link(host)
                ip_batch([["addr", "add", f"{self.address(host)}/24", "dev", inner],
                          ["link", "set", inner, "up"],
                          ["link", "set", "lo", "up"]], namespace=self.namespace(host))
        except IpFailed as failed:
            self.down()
            raise NamespacesUnavailable(str(failed)) from None

    def remove_leftovers(self):
        """Removes whatever a set of this name left behind (a killed run)."""
        prefix = self.agent_prefix()
        listed = [line.split()[0] for line in ip("netns", "list", check=False).stdout.splitlines()
                  if line.strip()]
        stale = [ns for ns in listed if ns.startswith(prefix)]
        links = []
        for link in ip("-o", "link", "show", check=False).stdout.splitlines():
            fields = link.split(": ")
            if len(fields) > 1:
                name = fields[1].split("@")[0]
                if name == self.bridge() or name.startswith(f"hv{self.name}-"):
                    links.append(name)
        _kill_inside(stale)
        if stale or links:
            ip_batch([["netns", "del", ns] for ns in stale] + [["link", "del", l] for l in links],
                     force=True)
        tmp = os.environ.get("TMPDIR") or "/tmp"
        for entry in os.listdir(tmp) if os.path.isdir(tmp) else []:
            if entry.startswith(prefix) and entry[len(prefix):].isdigit():
                shutil.rmtree(os.path.join(tmp, entry), ignore_errors=True)

    def down(self):
        """Kills what still runs inside the hosts and removes them: nothing stays."""
        namespaces = [self.namespace(host) for host in self.hosts()]
        _kill_inside(namespaces)
        ip_batch([["netns", "del", ns] for ns in namespaces]
                 + [["link", "del", self.outer_link(host)] for host in self.hosts()]
                 + [["link", "del", self.bridge()]], force=True)
        for host in self.hosts():
            shutil.rmtree(self.tmpdir(host), ignore_errors=True)
        self._release_subnet()
        self._tell_guard("done")

    def watch(self, pid):
        """Has the guard also kill process group `pid` (a job's mpiexec, run
        in a process group of its own through setsid, outside the hosts)
        should this process die."""
        self._tell_guard(f"job {pid}")

    def _start_guard(self):
        # The guard leaves this process's tree at once (guard() forks and its
        # first process exits), so that a kill of the tree spares it; it
        # acts when its stdin, this end of a pipe, closes without "done".
        self._guard = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "guard", "--name", self.name,
             "--hosts", str(self.count), "--subnet", self.subnet],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
            start_new_session=True)
        self._guard.wait()

    def _tell_guard(self, line):
        if self._guard is None:
            return
        try:
            self._guard.stdin.write(line + "\n")
            self._guard.stdin.flush()
        except OSError:
            pass
        if line in ("done", "keep"):
            try:
                self._guard.stdin.close()
            except OSError:
                pass
            self._guard = None

    def _claim_subnet(self):
        os.makedirs(CLAIMS, exist_ok=True)
        start = sum(self.name.encode()) % 200
        for step in range(200):
            octet = 20 + (start + step) % 200
            claim = os.path.join(CLAIMS, f"{SUBNET_PREFIX}.{octet}")
            try:
                os.mkdir(claim)
            except FileExistsError:
                owner = self._claim_owner(claim)
                if owner is not None and _pid_alive(owner):
                    continue
                shutil.rmtree(claim, ignore_errors=True)
                try:
                    os.mkdir(claim)
                except FileExistsError:
                    continue
            with open(os.path.join(claim, "owner"), "w") as f:
                f.write(f"{os.getpid()} {self.name}\n")
            self._claim = claim
            self.subnet = f"{SUBNET_PREFIX}.{octet}"
            return
        raise NamespacesUnavailable(f"no free subnet {SUBNET_PREFIX}.20-219.0/24 to claim")

    @staticmethod
    def _claim_owner(claim):
        try:
            with open(os.path.join(claim, "owner")) as f:
                return int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _release_subnet(self):
        if self._claim:
            shutil.rmtree(self._claim, ignore_errors=True)
            self._claim = None

    # Links.
    def link_down(self, host):
        """Takes host `host`'s link to the bridge down, as a pulled cable would."""
        ip("link", "set", self.outer_link(host), "down")

    def link_up(self, host):
        ip("link", "set", self.outer_link(host), "up")

    def cut_between(self, a, b):
        """Makes hosts `a` and `b` lose each other's packets (blackhole
        routes), as on a broken path, while both still reach the bridge."""
        ip("-n", self.namespace(a), "route", "add", "blackhole", f"{self.address(b)}/32")
        ip("-n", self.namespace(b), "route", "add", "blackhole", f"{self.address(a)}/32")

    # Launching.
    def env(self, base=None):
        env = dict(os.environ if base is None else base)
        env["HERD_AGENT_PREFIX"] = self.agent_prefix()
        # Open MPI's PMIx otherwise warns about its shared-memory data store
        # on every launch through the agent.
        env["PMIX_MCA_gds"] = "hash"
        return env

    def mpiexec_flags(self, ranks_per_host=1, hosts=None, forward=None, btl="tcp,self"):
        """Open MPI flags that place `ranks_per_host` ranks on each of `hosts`
        (default all) over TCP between the hosts' addresses only, with Open
        MPI's transports `btl`, and forward the HERD_*/HOROVOD_* variables of
        `forward` (default os.environ)."""
        hosts = self.hosts() if hosts is None else hosts
        env = os.environ if forward is None else forward
        flags = [
            # hwloc's topology write crashes a remote daemon now and then when
            # several daemons share one machine.
            "--mca", "rtc", "^hwloc",
            "--mca", "plm_rsh_agent", AGENT,
            "--mca", "btl", btl,
            "--mca", "btl_tcp_if_include", f"{self.subnet}.0/24",
            "--mca", "oob_tcp_if_include", f"{self.subnet}.0/24",
            "-H", ",".join(f"{self.address(h)}:{ranks_per_host}" for h in hosts),
            "-np", str(ranks_per_host * len(hosts)),
            # mpiexec starts every host's daemon itself, at once, rather than
            # through daemons started before (a tree): quicker here.
            "--mca", "plm_rsh_no_tree_spawn", "1",
        ]
        for key in sorted(env):
            if key.startswith(("HERD_", "HOROVOD_")) and key != "HERD_AGENT_PREFIX":
                flags += ["-x", key]
        return flags

    def mpiexec_command(self, ranks_per_host, rest, mpiexec="mpiexec", hosts=None,
                        btl="tcp,self"):
        """mpiexec, the hosts' flags, then `rest` (more flags, the program and its arguments)."""
        return [mpiexec, *self.mpiexec_flags(ranks_per_host, hosts, btl=btl), *rest]


class _Ended(Exception):
    """The run was ended by a signal (ctest's SIGTERM, ^C, a hangup)."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _run(args):
    rest = args.rest
    if not rest:
        print("emulated_hosts.py run: no program given after --", file=sys.stderr)
        return 2
    hosts = EmulatedHosts(args.name, args.hosts)

    def end(signum, _frame):
        raise _Ended(signum)

    ending = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    for signum in ending:
        signal.signal(signum, end)
    made = False
    process = None
    try:
        try:
            made = True
            hosts.up()
        except NamespacesUnavailable as reason:
            made = False  # up() removed what it had made
            print(f"skipped: {reason}", flush=True)
            return SKIP
        command = hosts.mpiexec_command(args.ranks_per_host, rest, args.mpiexec, btl=args.btl)
        process = subprocess.Popen(command, env=hosts.env(), start_new_session=True)
        hosts.watch(process.pid)
        try:
            return process.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"emulated_hosts.py: the job ran over {args.timeout:g} s and was killed",
                  file=sys.stderr, flush=True)
            return 124
    except _Ended as ended:
        print(f"emulated_hosts.py: ended by signal {ended.signum}; the job is killed and the "
              "hosts removed", file=sys.stderr, flush=True)
        return 128 + ended.signum
    finally:
        # A second signal must not cut the removal short.
        for signum in ending:
            signal.signal(signum, signal.SIG_IGN)
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
        if made:
            hosts.down()


def _guard(args):
    """Watches hosts made by another process (EmulatedHosts.up): reads lines
    from stdin, "job PID" (a process group to kill), then "done" (removed) or
    "keep" (left up on purpose); at the end of stdin without either, the
    maker died, and the guard kills the job and removes the hosts."""
    if os.fork() != 0:
        os._exit(0)  # the maker waits for this; the guard goes on reparented
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    jobs = []
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["job"] and len(words) == 2:
            jobs.append(int(words[1]))
        elif words[:1] in (["done"], ["keep"]):
            return 0
    for job in jobs:
        try:
            os.killpg(job, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    hosts = EmulatedHosts(args.name, args.hosts)
    hosts.subnet = args.subnet
    hosts._claim = os.path.join(CLAIMS, args.subnet)
    hosts.down()
    print(f"emulated_hosts.py: the maker of hosts {args.name!r} died without removing them; "
          "the guard killed their processes and removed them", file=sys.stderr, flush=True)
    return 0


def _claim_named(name):
    """The subnet claim of the hosts named `name`, or None."""
    for claim in sorted(os.listdir(CLAIMS)) if os.path.isdir(CLAIMS) else []:
        try:
            with open(os.path.join(CLAIMS, claim, "owner")) as f:
                if f.read().split()[1:2] == [name]:
                    return os.path.join(CLAIMS, claim)
        except OSError:
            continue
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Emulated hosts (network namespaces) for multi-host herd jobs on one machine.",
        epilog=__doc__.split("\n\n", 2)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["run", "up", "down", "flags", "guard"])
    parser.add_argument("--hosts", type=int, default=2, help="number of hosts (default 2)")
    parser.add_argument("--ranks-per-host", type=int, default=1, help="ranks on each (default 1)")
    parser.add_argument("--name", default="mh", help="names the set (default mh)")
    parser.add_argument("--mpiexec", default="mpiexec", help="the launcher (default mpiexec)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds before the job is killed (default none)")
    parser.add_argument("--subnet", help=argparse.SUPPRESS)  # the guard's
    parser.add_argument("--btl", default="tcp,self",
                        help="Open MPI's transports (--mca btl; default tcp,self)")
    argv = sys.argv[1:] if argv is None else argv
    # Everything after the first "--" is the job's: mpiexec flags, the
    # program and its arguments.
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    args.rest = argv[split + 1:]
    if args.action == "run":
        return _run(args)
    if args.action == "guard":
        return _guard(args)
    hosts = EmulatedHosts(args.name, args.hosts)
    if args.action == "up":
        try:
            hosts.up(guarded=False)
        except NamespacesUnavailable as reason:
            print(f"skipped: {reason}")
            return SKIP
        # The claim stays until `down`; its owner is whoever made the hosts.
        with open(os.path.join(hosts._claim, "owner"), "w") as f:
            f.write(f"0 {hosts.name}\n")
        print(hosts.subnet)
        return 0
    if args.action == "down":
        hosts.remove_leftovers()
        claim = _claim_named(hosts.name)
        if claim:
            shutil.rmtree(claim, ignore_errors=True)
        return 0
    # flags: for hosts made with `up`, whose subnet is the claim naming them.
    claim = _claim_named(hosts.name)
    if claim is None:
        print(f"emulated_hosts.py flags: no hosts named {hosts.name!r} are up "
              "(scripts/emulated_hosts.py up first)", file=sys.stderr)
        return 2
    hosts.subnet = os.path.basename(claim)
    print("\n".join(hosts.mpiexec_flags(args.ranks_per_host, btl=args.btl)))
    return 0

if __name__ == "__main__":
    sys.exit(main())
