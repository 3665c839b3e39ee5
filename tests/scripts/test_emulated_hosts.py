"""scripts/emulated_hosts.py itself: its exit statuses, its skip where
namespaces cannot be made, and that it leaves nothing behind however its job
ends (tests/multihost/leftovers.py reads what is left from the system).

Run by ctest (test emulated_hosts_script, label multihost) as root; the tests
that make hosts are skipped, with the reason, where namespaces cannot be
made. MPIEXEC names the launcher (default mpiexec). Each test makes a set of
its own, named EMULATED_HOSTS_TEST_NAMES (default "mts") and a digit, 1 to 7.
"""
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "emulated_hosts.py")
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
MPIEXEC_FLAGS = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
NAMES = os.environ.get("EMULATED_HOSTS_TEST_NAMES", "mts")
# The jobs sleep this many seconds (and more), which tells their ranks from
# any other process.
SLEEP = 600000 + os.getpid() * 4


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


leftovers = _load("leftovers", os.path.join(ROOT, "tests", "multihost", "leftovers.py"))
emulated_hosts = _load("emulated_hosts", SCRIPT)

UNAVAILABLE = emulated_hosts.why_namespaces_unavailable()
needs_namespaces = pytest.mark.skipif(UNAVAILABLE is not None,
                                      reason=f"need namespaces: {UNAVAILABLE}")


def script(*args, **kwargs):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=120, **kwargs)


def run_job(name, hosts, ranks_per_host, program, timeout=60, **kwargs):
    return script("run", "--name", name, "--hosts", str(hosts), "--ranks-per-host",
                  str(ranks_per_host), "--mpiexec", MPIEXEC, "--timeout", str(timeout), "--",
                  *MPIEXEC_FLAGS, *program, **kwargs)


def nothing_left(name, wait=0.0):
    deadline = time.monotonic() + wait
    while True:
        left = leftovers.leftovers(name)
        if not left or time.monotonic() >= deadline:
            assert left == [], f"left behind by {name}: {left}"
            return
        time.sleep(0.1)


def processes_running(argv):
    """Pids of processes whose command line is exactly `argv`."""
    wanted = "\0".join(argv) + "\0"
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                if f.read() == wanted:
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_skips_without_ip():
    """No `ip` on PATH: exit 77 and the reason on stdout, and nothing made."""
    with tempfile.TemporaryDirectory() as empty:
        done = run_job(f"{NAMES}1", 2, 1, ["true"], env={"PATH": empty})
    assert done.returncode == 77, done.stdout + done.stderr
    assert done.stdout == "skipped: iproute2's `ip` is not installed\n" or (
        os.geteuid() != 0 and done.stdout.startswith("skipped: network namespaces need root"))
    nothing_left(f"{NAMES}1")


def test_skips_when_not_root():
    """As an unprivileged user (setpriv drops root; else this test runs as
    one): exit 77 naming the uid, and nothing made."""
    command = [sys.executable, SCRIPT, "run", "--name", f"{NAMES}2", "--", "true"]
    uid = os.geteuid()
    if uid == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("runs as root and there is no setpriv to drop it")
        uid = 65534
        command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 77, done.stdout + done.stderr
    assert done.stdout == f"skipped: network namespaces need root (this runs as uid {uid})\n"
    nothing_left(f"{NAMES}2")


@needs_namespaces
def test_job_status_and_hosts():
    """A job that succeeds exits 0, each rank in a namespace that is not the
    caller's; a job whose ranks fail gives their exit status; both leave
    nothing."""
    mine = os.readlink("/proc/self/ns/net")
    check = f'test "$(readlink /proc/self/ns/net)" != "{mine}" && readlink /proc/self/ns/net'
    done = run_job(f"{NAMES}3", 2, 2, ["sh", "-c", check])
    assert done.returncode == 0, done.stdout + done.stderr
    namespaces = sorted(done.stdout.split())
    assert len(namespaces) == 4 and len(set(namespaces)) == 2, done.stdout
    assert namespaces[0] == namespaces[1] and namespaces[2] == namespaces[3]
    nothing_left(f"{NAMES}3")
    done = run_job(f"{NAMES}3", 2, 1, ["sh", "-c", "exit 3"])
    assert done.returncode == 3, done.stdout + done.stderr
    nothing_left(f"{NAMES}3")


@needs_namespaces
def test_hanging_job_is_killed_at_the_timeout():
    """--timeout 2 on a job that sleeps: 124 within a few seconds, the
    message on stderr, nothing left."""
    start = time.monotonic()
    done = run_job(f"{NAMES}4", 2, 1, ["sleep", str(SLEEP)], timeout=2)
    took = time.monotonic() - start
    assert done.returncode == 124, done.stdout + done.stderr
    assert "the job ran over 2 s and was killed" in done.stderr
    assert 2 <= took < 20, f"took {took:.1f} s"
    nothing_left(f"{NAMES}4")
    assert processes_running(["sleep", str(SLEEP)]) == []


def _start_and_wait_for_ranks(name, marker):
    job = subprocess.Popen([sys.executable, SCRIPT, "run", "--name", name, "--hosts", "2",
                            "--ranks-per-host", "2", "--mpiexec", MPIEXEC, "--timeout", "100",
                            "--", *MPIEXEC_FLAGS, "sleep", marker],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(processes_running(["sleep", marker])) < 4:
        assert job.poll() is None, job.communicate()
        assert time.monotonic() < deadline, "the 4 ranks did not start within 30 s"
        time.sleep(0.1)
    return job


@needs_namespaces
def test_sigterm_removes_everything():
    """SIGTERM to the script while its ranks run (^C and hangups alike):
    exit 143, the job killed, nothing left."""
    job = _start_and_wait_for_ranks(f"{NAMES}5", str(SLEEP + 1))
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 128 + signal.SIGTERM, out + err
    assert "ended by signal 15" in err
    nothing_left(f"{NAMES}5")
    assert processes_running(["sleep", str(SLEEP + 1)]) == []


@needs_namespaces
def test_sigkill_leaves_the_removal_to_the_guard():
    """SIGKILL to the script alone (ctest's time limit kills a test's process
    tree so): its guard kills mpiexec and the ranks and removes the hosts."""
    job = _start_and_wait_for_ranks(f"{NAMES}6", str(SLEEP + 2))
    job.kill()
    job.communicate(timeout=60)
    nothing_left(f"{NAMES}6", wait=15)
    assert processes_running(["sleep", str(SLEEP + 2)]) == []


@needs_namespaces
def test_up_flags_down():
    """up prints the claimed subnet; flags reaches the hosts with plain
    mpiexec (a rank per slot, two namespaces); down removes them all, after
    which flags refuses."""
    try:
        done = script("up", "--name", f"{NAMES}7", "--hosts", "2")
        assert done.returncode == 0, done.stdout + done.stderr
        subnet = done.stdout.strip()
        assert subnet.startswith("10.237.") and subnet.count(".") == 2, subnet
        done = script("flags", "--name", f"{NAMES}7", "--hosts", "2", "--ranks-per-host", "2")
        assert done.returncode == 0, done.stderr
        flags = done.stdout.split("\n")[:-1]
        assert flags[flags.index("-H") + 1] == f"{subnet}.2:2,{subnet}.3:2"
        assert flags[flags.index("-np") + 1] == "4"
        ranks = subprocess.run([MPIEXEC, *flags, *MPIEXEC_FLAGS, "readlink", "/proc/self/ns/net"],
                               capture_output=True, text=True, timeout=60)
        assert ranks.returncode == 0, ranks.stdout + ranks.stderr
        namespaces = sorted(ranks.stdout.split())
        assert len(namespaces) == 4 and len(set(namespaces)) == 2, ranks.stdout
        assert os.readlink("/proc/self/ns/net") not in namespaces
    finally:
        done = script("down", "--name", f"{NAMES}7", "--hosts", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    nothing_left(f"{NAMES}7")
    done = script("flags", "--name", f"{NAMES}7")
    assert done.returncode == 2 and f"no hosts named '{NAMES}7' are up" in done.stderr
