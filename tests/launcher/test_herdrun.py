"""herdrun's real launches at 2 ranks (ctest runs this file with pytest; see
tests/launcher/CMakeLists.txt): the flags reach every rank as HERD_*
variables, every byte of the output arrives, a failed job ends with the
summary naming the first failed rank and its first error line (a rank that
throws, a rank killed by a signal), --max-restarts relaunches with
HERD_RESTART_COUNT counting, an interrupted herdrun ends the job without a
restart, and --check-build reports this build's configuration.

Environment: HERDRUN (the program), HERDRUN_WORKER (herdrun_worker), and the
build's configuration as CMake knows it: HERDRUN_EXPECT_CUDA, _NCCL,
_PYTHON (the version, empty when built without), HERDRUN_EXPECT_PYTHON_EXE.
"""

import os
import re
import signal
import subprocess
import time

import pytest

HERDRUN = os.environ.get("HERDRUN", "")
WORKER = os.environ.get("HERDRUN_WORKER", "")
pytestmark = pytest.mark.skipif(not (HERDRUN and WORKER),
                                reason="HERDRUN and HERDRUN_WORKER are set by ctest")


def herdrun(*args, env=None, timeout=180):
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("HERD_", "HOROVOD_"))}
    environment.update(env or {})
    return subprocess.run([HERDRUN, *args], capture_output=True, text=True, timeout=timeout,
                          env=environment)


def summary_line(stderr):
    lines = [line for line in stderr.splitlines() if line.startswith("herdrun: the job failed")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_flags_reach_every_rank_as_herd_settings():
    show = "HERD_FUSION_THRESHOLD,HERD_CYCLE_TIME,HERD_STALL_CHECK_TIME,HERD_LOG_LEVEL"
    result = herdrun("-np", "2", "--fusion-threshold-mb", "8", "--cycle-time-ms", "2.5",
                     "--stall-check-seconds", "45", WORKER, "ok",
                     env={"HERDRUN_WORKER_SHOW": show, "HERD_LOG_LEVEL": "error"})
    assert result.returncode == 0, result.stderr
    for rank in (0, 1):
        # 8 MiB in bytes; the environment's HERD_LOG_LEVEL is forwarded too.
        assert (f"rank {rank} of 2 restart 0 HERD_FUSION_THRESHOLD=8388608 HERD_CYCLE_TIME=2.5 "
                f"HERD_STALL_CHECK_TIME=45 HERD_LOG_LEVEL=error") in result.stdout.splitlines()
        assert f"rank {rank} sum 3" in result.stdout.splitlines()
    assert "herdrun: the job failed" not in result.stderr


def test_verbose_prints_the_command_and_single_dash_flags_work():
    result = herdrun("-np", "2", "--verbose", "--no-stall-check", WORKER, "ok",
                     env={"HERDRUN_WORKER_SHOW": "HERD_STALL_CHECK_TIME,HERD_STALL_SHUTDOWN_TIME"})
    assert result.returncode == 0, result.stderr
    commands = [line for line in result.stderr.splitlines() if line.startswith("herdrun: /")]
    assert len(commands) == 1, result.stderr
    words = commands[0].split()
    assert words[words.index("-np") + 1] == "2"
    # A scratch directory for the ranks' output copies, removed afterwards.
    scratch = words[words.index("--output-filename") + 1]
    assert os.path.basename(scratch).startswith("herdrun.")
    assert not os.path.exists(scratch)
    assert "HERD_STALL_CHECK_TIME=0" in words and "HERD_RESTART_COUNT=0" in words
    assert words[-2:] == [WORKER, "ok"]
    assert "rank 1 of 2 restart 0 HERD_STALL_CHECK_TIME=0 HERD_STALL_SHUTDOWN_TIME=0" in \
        result.stdout.splitlines()


def test_a_rank_that_throws_is_named_with_its_error():
    result = herdrun("-np", "2", WORKER, "throw")
    assert result.returncode != 0
    line = summary_line(result.stderr)
    assert "Rank 1 failed first: it was killed by signal 6 (Aborted)." in line, line
    assert line.endswith("Its first error line: terminate called after throwing an instance of "
                         "'std::runtime_error': what():  herdrun_worker rank 1: a deliberate "
                         "failure"), line


def test_a_rank_killed_by_a_signal_is_named():
    result = herdrun("-np", "2", WORKER, "kill")
    assert result.returncode != 0
    line = summary_line(result.stderr)
    assert "Rank 1 failed first: it was killed by signal 9 (Killed)." in line, line
    assert line.endswith("Its first error line: herdrun_worker rank 1: sending itself SIGKILL")


def test_max_restarts_relaunches_until_the_job_succeeds():
    result = herdrun("-np", "2", "--max-restarts", "3", WORKER, "fail-until", "2")
    assert result.returncode == 0, result.stderr
    restarts = [line for line in result.stderr.splitlines() if line.startswith("herdrun: restart")]
    assert len(restarts) == 2, result.stderr
    for k, line in enumerate(restarts):
        assert line.startswith(f"herdrun: restart {k + 1} of 3: the job failed"), line
        assert "Rank 1 failed first" in line, line
        assert line.endswith(f"Its first error line: herdrun_worker rank 1: error on launch {k}"), line
    out = result.stdout.splitlines()
    # Rank 0 reached herd::init on every launch; the third ran to the end.
    for k in range(3):
        assert f"rank 0 of 2 restart {k}" in out, result.stdout
    assert "rank 0 sum 3" in out and "rank 1 sum 3" in out
    assert "herdrun: the job failed" not in result.stderr


def test_max_restarts_gives_up_with_the_last_failure():
    result = herdrun("-np", "2", "--max-restarts", "1", WORKER, "fail-until", "5")
    assert result.returncode != 0
    restarts = [line for line in result.stderr.splitlines() if line.startswith("herdrun: restart")]
    assert len(restarts) == 1, result.stderr
    line = summary_line(result.stderr)
    assert line.endswith("Its first error line: herdrun_worker rank 1: error on launch 1"), line
    assert "\nherdrun: that was the last of 2 launches (--max-restarts 1).\n" in result.stderr


def test_every_byte_of_a_busy_job_arrives():
    expected = "".join(f"{n}\n" for n in range(1, 200001))
    result = herdrun("-np", "1", "/bin/sh", "-c", "seq 1 200000; seq 1 1000 >&2")
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected
    assert result.stderr == expected[:len("".join(f"{n}\n" for n in range(1, 1001)))]
    # Two ranks' pieces may interleave within a line, as under a plain
    # mpirun, but none is lost.
    result = herdrun("-np", "2", "/bin/sh", "-c", "seq 1 200000")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout) == sorted(expected * 2)


def test_hosts_and_hostfiles_place_the_ranks(tmp_path):
    result = herdrun("-np", "2", "-H", "localhost:2", "--verbose", WORKER, "ok")
    assert result.returncode == 0, result.stderr
    assert "-H localhost:2" in result.stderr
    assert "rank 1 sum 3" in result.stdout.splitlines()
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# one machine\nlocalhost slots=2\n")
    result = herdrun("-np", "2", "-hostfile", str(hostfile), "--verbose", WORKER, "ok")
    assert result.returncode == 0, result.stderr
    assert "-H localhost:2" in result.stderr
    assert "rank 0 sum 3" in result.stdout.splitlines()


def worker_processes():
    """The pids of herdrun_worker processes in sleep mode."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                words = cmdline.read().split(b"\0")
        except OSError:
            continue
        if words[0] == WORKER.encode() and b"sleep" in words[1:]:
            pids.append(int(entry))
    return pids


def test_an_interrupted_herdrun_ends_the_job_without_a_restart():
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("HERD_", "HOROVOD_"))}
    process = subprocess.Popen([HERDRUN, "-np", "2", "--max-restarts", "3", WORKER, "sleep"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment)
    try:
        started = [process.stdout.readline() for _ in range(2)]
        assert all(line.startswith("rank ") for line in started), started
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0
    assert "herdrun: interrupted; no restart." in stderr, stderr
    assert "herdrun: restart" not in stderr, stderr
    # Every rank is gone (mpirun ends them as it goes).
    deadline = time.monotonic() + 30
    while worker_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker_processes() == []


def test_bad_command_lines_are_refused_before_a_launch():
    result = herdrun(WORKER, "ok")
    assert result.returncode == 2 and "-np N is required" in result.stderr
    result = herdrun("-np", "2", "--log-level", "loud", WORKER, "ok")
    assert result.returncode != 0 and "--log-level" in result.stderr
    result = herdrun("-np", "2", "--max-restarts", "-1", WORKER, "ok")
    assert result.returncode != 0 and "--max-restarts: must be a number, 0 or more (got -1)" \
        in result.stderr
    result = herdrun("-np", "2", "-H", "a:0", WORKER, "ok")
    assert result.returncode == 2 and '"a:0"' in result.stderr
    result = herdrun("-np", "1", "/nonexistent/program")
    assert result.returncode != 0


def mpi_from_ompi_info():
    out = subprocess.run(["ompi_info", "--parsable"], capture_output=True, text=True).stdout
    version = re.search(r"^ompi:version:full:(\S+)$", out, re.M).group(1)
    threads = re.search(r"MPI_THREAD_MULTIPLE: (yes|no)", out).group(1)
    return version, threads


def test_check_build_reports_this_build():
    result = herdrun("--check-build")
    assert result.returncode == 0, result.stderr
    fields = dict(line.strip().split(":", 1) for line in result.stdout.splitlines()[1:])
    fields = {key: value.strip() for key, value in fields.items()}
    try:
        version, threads = mpi_from_ompi_info()
    except (OSError, AttributeError):
        pytest.skip("not Open MPI: no ompi_info to compare with")
    assert fields["MPI"].startswith(f"Open MPI {version} (MPI standard ")
    assert fields["MPI thread level"].startswith(
        "MPI_THREAD_MULTIPLE supported" if threads == "yes" else "MPI_THREAD_MULTIPLE NOT")
    assert fields["CUDA"] == (os.environ["HERDRUN_EXPECT_CUDA"] or "no")
    assert fields["NCCL"] == (os.environ["HERDRUN_EXPECT_NCCL"] or "no")
    python = os.environ["HERDRUN_EXPECT_PYTHON"]
    if not python:
        assert fields["Python module"] == "no" and fields["PyTorch"] == "no"
        return
    executable = os.environ["HERDRUN_EXPECT_PYTHON_EXE"]
    assert fields["Python module"] == f"yes (Python {python}, {executable})"
    torch = subprocess.run([executable, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True)
    assert fields["PyTorch"] == (torch.stdout.strip() if torch.returncode == 0 else "no")
