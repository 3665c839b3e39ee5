#!/usr/bin/env python3
"""What sets of emulated hosts left behind, read from the system itself.

Usage: leftovers.py [--wait S] NAME...

For each set NAME (scripts/emulated_hosts.py --name NAME) lists what is
still there: its network namespaces (herd-NAME-h<i>) and the processes in
them, its bridge (hb-NAME) and veth links (hvNAME-<i>), its subnet claim
under /run/herd-emulated-hosts, its hosts' TMPDIRs, and any process whose
environment names the set (HERD_AGENT_PREFIX=herd-NAME-h: mpiexec and the
launch agents; TMPDIR=.../herd-NAME-h<i>: the daemons and the ranks of its
jobs), wherever it runs,
and emulated_hosts.py itself run or guarding with --name NAME.
Exits 0 when nothing is left, else 1 after printing each thing left;
--wait S looks again for up to S seconds first (a guard may still be
removing a set). Written apart from emulated_hosts.py, which it checks.
"""
import argparse
import os
import re
import subprocess
import sys
import time

CLAIMS = "/run/herd-emulated-hosts"


def _ip(*args):
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True)
    except FileNotFoundError:
        return ""
    return done.stdout


def _namespaces():
    return [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]


def _links():
    names = []
    for line in _ip("-o", "link", "show").splitlines():
        fields = line.split(": ")
        if len(fields) > 1:
            names.append(fields[1].split("@")[0])
    return names


def _environ_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _command_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def leftovers(name):
    """Everything of set `name` still there, one line each."""
    left = []
    ns_pattern = re.compile(rf"herd-{re.escape(name)}-h\d+")
    for ns in _namespaces():
        if ns_pattern.fullmatch(ns):
            left.append(f"network namespace {ns}")
            for pid in _ip("netns", "pids", ns).split():
                left.append(f"process {pid} in {ns}: {_command_of(pid)}")
    for link in _links():
        if link == f"hb-{name}" or re.fullmatch(rf"hv{re.escape(name)}-\d+", link):
            left.append(f"link {link}")
    if os.path.isdir(CLAIMS):
        for claim in sorted(os.listdir(CLAIMS)):
            try:
                with open(os.path.join(CLAIMS, claim, "owner")) as f:
                    owner = f.read().split()
            except OSError:
                continue
            if owner[1:2] == [name]:
                left.append(f"subnet claim {os.path.join(CLAIMS, claim)} (owner pid {owner[0]})")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    if os.path.isdir(tmp):
        for entry in sorted(os.listdir(tmp)):
            if ns_pattern.fullmatch(entry):
                left.append(f"host TMPDIR {os.path.join(tmp, entry)}")
    launcher = f"HERD_AGENT_PREFIX=herd-{name}-h".encode()
    host_tmpdir = re.compile(rb"TMPDIR=.*/herd-" + re.escape(name).encode() + rb"-h\d+")
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        if int(pid) == os.getpid():
            continue
        environ = _environ_of(pid)
        if (launcher in environ or any(host_tmpdir.fullmatch(v) for v in environ)
                or _runs_script_for(pid, name)):
            left.append(f"process {pid} of the set: {_command_of(pid)}")
    return left


def _runs_script_for(pid, name):
    """emulated_hosts.py (a run, a guard) with --name `name`."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        return False
    named = any(argv[i] == "--name" and argv[i + 1] == name for i in range(len(argv) - 1))
    return named and any(arg.endswith("emulated_hosts.py") for arg in argv)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wait", type=float, default=0.0)
    parser.add_argument("names", nargs="+")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.wait
    while True:
        left = [line for name in args.names for line in leftovers(name)]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if left:
        print("left behind by emulated hosts:")
        print("\n".join(f"  {line}" for line in left))
        return 1
    print(f"nothing left of the emulated hosts {', '.join(args.names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
