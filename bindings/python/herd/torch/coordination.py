"""The calls that take no tensor: ``join`` and ``barrier``. (``synchronize`` and ``poll``,
which complete and query the handles of every collective, are herd.handles'.)"""

from herd import _native
from herd.process_sets import global_process_set, process_set_id_of
from herd.torch.tensor_bridge import _CUDA, _NO_GPU

def join(device=-1):
    """Declares that this rank has no more data: blocks until every rank has joined, taking
    part meanwhile in the other ranks' allreduces with zeros. Returns the rank that joined
    last. ``device`` is Horovod's (where its zeros live): -1, or in a build with CUDA a GPU's
    index, which herd's join does not need (it takes no tensor) and ignores."""
    if device is not None:
        index = int(device)
        if index < -1:
            raise ValueError(f"herd.torch.join: device={device}: give -1 (the CPU) or a GPU's "
                             "index")
        if index >= 0 and not _CUDA:
            raise ValueError(f"herd.torch.join: device={device}: {_NO_GPU}")
    return _native.join()


def barrier(process_set=global_process_set):
    """Returns once every rank of ``process_set`` has called barrier."""
    _native.barrier(process_set_id_of(process_set, "herd.torch.barrier"))
