"""Where a job's elastic state lives between launches, and how it gets there.

One file, ``<HERD_ELASTIC_DIR>/state.pt``, written by rank 0 at every
``state.commit()`` and read by rank 0 when a relaunched job starts. The write is
atomic: the bytes go to a temporary file beside it, which is fsync'ed and renamed
over the file (and the directory fsync'ed), so a crash at any point leaves the
previous commit or the new one, never a torn mix.

The content is a ``torch.save`` of a dict (herd's binary checkpoint format holds
float tensors by name only; a TorchState also holds optimizer hyper-parameters,
sampler positions and arbitrary Python objects).
"""

import io
import os

import torch

ENV_DIR = "HERD_ELASTIC_DIR"
ENV_RESTART_COUNT = "HERD_RESTART_COUNT"
DEFAULT_DIR = "herd-elastic"
FILE_NAME = "state.pt"

FORMAT = "herd.torch.elastic"
VERSION = 1


def restart_count():
    """This job's launch: 0 for the first (or without a launcher that restarts), k for
    the k-th relaunch after a failure (HERD_RESTART_COUNT, set by herdrun
    --max-restarts)."""
    text = os.environ.get(ENV_RESTART_COUNT, "")
    if text == "":
        return 0
    if not text.isdigit():
        raise ValueError(f"{ENV_RESTART_COUNT} is {text!r}; expected a non-negative integer "
                         "(the launch count)")
    return int(text)


def restartable():
    """Whether a launcher that relaunches this job set HERD_RESTART_COUNT."""
    return os.environ.get(ENV_RESTART_COUNT, "") != ""


def path():
    """The commit file: HERD_ELASTIC_DIR (default ``herd-elastic`` in the working
    directory) / state.pt, as an absolute path."""
    return os.path.abspath(os.path.join(os.environ.get(ENV_DIR) or DEFAULT_DIR, FILE_NAME))


def write(target, content):
    """Saves ``content`` (a dict) to ``target`` atomically; raises OSError naming the path
    and the step that failed, and leaves no temporary file behind."""
    buffer = io.BytesIO()
    torch.save(dict(content, format=FORMAT, version=VERSION), buffer)
    directory = os.path.dirname(target)
    temporary = f"{target}.tmp.{os.getpid()}"
    step = "create the directory"
    try:
        os.makedirs(directory, exist_ok=True)
        step = "write"
        with open(temporary, "wb") as out:
            out.write(buffer.getbuffer())
            out.flush()
            step = "fsync"
            os.fsync(out.fileno())
        step = "rename"
        os.replace(temporary, target)
    except OSError as failure:
        try:
            os.remove(temporary)
        except OSError:
            pass
        raise OSError(failure.errno,
                      f"herd.torch.elastic: cannot commit the state to {target} "
                      f"({step}): {failure.strerror}") from failure
    # The rename is durable once the directory is; best effort, as not every
    # file system lets a directory be opened for it.
    try:
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    except OSError:
        pass


def read(source):
    """The dict saved by ``write`` at ``source``; ValueError naming the path when the file is
    not an elastic state of this version."""
    try:
        content = torch.load(source, map_location="cpu", weights_only=False)
    except Exception as failure:  # noqa: BLE001 -- re-raised with the path
        raise ValueError(f"herd.torch.elastic: {source} is not a committed state: "
                         f"{type(failure).__name__}: {failure}") from failure
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise ValueError(f"herd.torch.elastic: {source} is not a committed state "
                         f"(no '{FORMAT}' format mark)")
    if content.get("version") != VERSION:
        raise ValueError(f"herd.torch.elastic: {source} has format version "
                         f"{content.get('version')}; this herd reads version {VERSION}")
    return content


def remove(target):
    """Removes an earlier job's commit file, if any."""
    try:
        os.remove(target)
    except FileNotFoundError:
        pass
