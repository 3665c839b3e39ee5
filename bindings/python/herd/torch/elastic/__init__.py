"""``hvd.elastic``: elastic training by restart, with Horovod's API.

Horovod's elastic mode keeps a job running while hosts come and go; herd restarts the
job instead. ``herdrun --max-restarts N`` relaunches a failed job (every launch gets
``HERD_RESTART_COUNT``, 0 for the first), and a script written for
``horovod.torch.elastic`` resumes where it last committed:

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        ...                   # the loop; state.commit() every few batches

    train(state)

``state.commit()`` writes the state atomically to ``$HERD_ELASTIC_DIR/state.pt`` (rank
0); ``run`` loads it on a relaunch, gives every rank rank 0's state and calls the
function. docs/python.md has the details.
"""

import functools
import os

from herd.process_sets import global_process_set
from herd.torch.agreement import agree
from herd.torch.elastic import commit_file
from herd.torch.elastic.sampler import ElasticSampler
from herd.torch.elastic.state import ObjectState, State, TorchState
from herd.torch.mpi_ops import rank


def _load_last_commit(state):
    """On rank 0: on a relaunch, the last commit becomes the live state; on a first launch
    that a launcher may relaunch, an earlier job's commit file is removed, so that a
    relaunch before this job's first commit starts over instead of resuming it. Returns
    the launch number. Failures raise on every rank."""
    launch, error = 0, None
    try:
        launch = commit_file.restart_count()
        if rank() == 0:
            target = commit_file.path()
            # A launch that failed before its first commit left no file: start over.
            if launch > 0 and os.path.exists(target):
                state._load_snapshot(commit_file.read(target)["state"])
            elif commit_file.restartable():
                commit_file.remove(target)
    except Exception as failure:  # noqa: BLE001 -- raised on every rank by agree
        error = failure
    try:
        agree(error, "herd.torch.elastic.run", "resume", "load", global_process_set)
    finally:
        error = None  # raised with a traceback through this frame: no cycle
    return launch


def run(func):
    """Decorates a training function ``func(state, *args, **kwargs)``.

    The call first resumes the state: on a relaunch (``HERD_RESTART_COUNT`` > 0) rank 0
    loads the last commit, if the failed launch made one; then ``state.sync()`` gives
    every rank rank 0's state, and ``func`` runs. An exception ends the call (and, through
    the launcher, the launch), as there is no rank to recover in place: the next launch
    resumes from the last commit.
    """

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        _load_last_commit(state)
        state.sync()
        return func(state, *args, **kwargs)

    return wrapper


__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run"]
