"""pytest setup for herd's Python tests, which run under mpirun: every rank
runs the same tests in the same order, so every collective meets its peers.

herd is initialized once per process for the whole session and shut down at
the end; tests that need a fresh start use their own subprocess.
"""

import pytest

import herd


@pytest.fixture(scope="session", autouse=True)
def herd_running():
    herd.init()
    yield
    herd.shutdown()


@pytest.fixture
def rank():
    return herd.rank()


@pytest.fixture
def size():
    return herd.size()


@pytest.fixture(autouse=True)
def fail_after_the_collectives():
    """Fails a test on the rank where rank_checks.expect recorded a wrong value,
    after the test's collectives have all run."""
    import rank_checks

    yield
    if rank_checks.failures:
        message = "\n".join(rank_checks.failures)
        rank_checks.failures.clear()
        pytest.fail(message)
