"""Every shell script of herd prints its usage for -h and --help and does nothing else.

Run with /usr/bin/python3 -m pytest -q tests/scripts/test_script_help.py (ctest runs it as
script_help). Each script runs from a copy of the repository's scripts (and a few sources for
scripts/format.sh to find), with a PATH whose first folder holds stand-ins for every program a
script could install, build, format or launch with (apt-get, cmake, clang-format, mpirun, ...):
a stand-in only writes its name and arguments to a log. --help passes when the script exits 0,
prints text naming itself, calls no stand-in and leaves every file of the copy as it was. Two
runs without --help check the check: they must reach the stand-ins.
"""

import hashlib
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# The scripts, by path from the root: everything under scripts/ and benchmarks/, the pip
# install test and the Horovod suite's runner.
SCRIPTS = sorted(
    [os.path.join(folder, name)
     for folder in ("scripts", "benchmarks", os.path.join("benchmarks", "gpu"))
     for name in os.listdir(os.path.join(ROOT, folder))
     if name.endswith(".sh")]
    + [os.path.join("tests", "python", "pip_install_test.sh"),
       os.path.join("tests", "compat", "run_horovod_torch_suite.sh")])

# Programs a script could use to change something: each gets a stand-in.
STAND_INS = [
    "apt", "apt-get", "sudo", "dpkg", "dpkg-deb", "dpkg-query", "cmake", "ctest", "ninja",
    "make", "clang-format", "mpirun", "mpiexec", "python", "python3", "pip", "pip3", "nvcc",
    "nvidia-smi", "timeout", "git", "curl", "wget", "tar",
]

# What the copy holds: the folders with scripts, and sources for format.sh to find.
COPIED = ["scripts", "benchmarks", os.path.join("tests", "python"), os.path.join("tests", "compat"),
          "common", ".clang-format"]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    base = tmp_path_factory.mktemp("help")
    repo = base / "repo"
    for entry in COPIED:
        source = os.path.join(ROOT, entry)
        if os.path.isdir(source):
            shutil.copytree(source, repo / entry,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            os.makedirs(repo, exist_ok=True)
            shutil.copy2(source, repo / entry)
    bin_dir = base / "bin"
    bin_dir.mkdir()
    log = base / "calls.log"
    for name in STAND_INS:
        path = bin_dir / name
        path.write_text('#!/bin/sh\nprintf \'%s\\n\' "$(basename "$0") $*" >>"$HERD_TEST_CALLS"\n'
                        "exit 0\n")
        path.chmod(0o755)
    return {"repo": repo, "bin": bin_dir, "log": log, "base": base}


def snapshot(sandbox):
    """Every file of the sandbox with a hash of its bytes, and every folder, but for the log
    of the stand-ins and the folder the scripts run from."""
    folder = sandbox["base"]
    seen = {}
    for current, dirs, files in os.walk(folder):
        for name in dirs:
            seen[os.path.relpath(os.path.join(current, name), folder)] = "dir"
        for name in files:
            path = os.path.join(current, name)
            with open(path, "rb") as f:
                seen[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    for mutable in ("calls.log", "elsewhere"):
        seen.pop(mutable, None)
    return seen


def run(sandbox, script, *args):
    env = {
        "PATH": f"{sandbox['bin']}:/usr/bin:/bin",
        "HOME": str(sandbox["base"] / "home"),
        "HERD_TEST_CALLS": str(sandbox["log"]),
        "HERD_VENV": str(sandbox["base"] / "venv"),
        "HERD_BUILD_DIR": str(sandbox["base"] / "build"),
        "OUT": str(sandbox["base"] / "out"),
    }
    if sandbox["log"].exists():
        sandbox["log"].unlink()
    # From another folder than the copy: the scripts work from any directory.
    cwd = sandbox["base"] / "elsewhere"
    cwd.mkdir(exist_ok=True)
    done = subprocess.run(["bash", str(sandbox["repo"] / script), *args], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    calls = sandbox["log"].read_text().splitlines() if sandbox["log"].exists() else []
    return done, calls


def test_every_script_is_covered():
    assert "scripts/format.sh" in SCRIPTS
    assert "benchmarks/run_report.sh" in SCRIPTS
    assert "benchmarks/gpu/device_check.sh" in SCRIPTS
    assert len(SCRIPTS) >= 13, SCRIPTS


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_help_prints_usage_and_does_nothing_else(sandbox, script, flag):
    before = snapshot(sandbox)
    done, calls = run(sandbox, script, flag)
    assert done.returncode == 0, done.stderr
    assert calls == [], f"{script} {flag} ran: {calls}"
    # The usage: the script's opening comment, which names the script.
    assert os.path.basename(script) in done.stdout, done.stdout
    assert len(done.stdout.splitlines()) >= 2, done.stdout
    assert done.stderr == ""
    assert snapshot(sandbox) == before, f"{script} {flag} changed files"


def test_run_report_takes_no_option_as_its_output_folder(sandbox):
    before = snapshot(sandbox)
    for args in (["--out"], ["out", "--help"], ["out", "0"]):
        done, calls = run(sandbox, "benchmarks/run_report.sh", *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "usage: benchmarks/run_report.sh OUT_DIR [RUNS]" in done.stderr
        assert calls == []
    assert snapshot(sandbox) == before


def test_the_stand_ins_see_a_script_that_runs(sandbox):
    # Without --help, format.sh reaches clang-format (a stand-in here) with the copied sources...
    done, calls = run(sandbox, "scripts/format.sh")
    assert done.returncode == 0, done.stderr
    assert len(calls) == 2, calls  # `clang-format -i ...`, then `clang-format --version`
    assert calls[0].startswith("clang-format -i --style=file ")
    assert "common/status.h" in calls[0]
    # ...and install_deps.sh, which finds every package missing (dpkg-query prints nothing),
    # reaches apt-get through the stand-ins (through sudo when not root).
    done, calls = run(sandbox, "scripts/install_deps.sh")
    assert any(call.startswith(("apt-get install -y", "sudo apt-get install -y"))
               for call in calls), (calls, done.stderr)
