"""What every torch collective's submission shares: the tensor name a call is submitted
under and the name its handle holds, the copy back into a non-contiguous in-place tensor,
compression of a list, and several native operations behind one handle (with the members
of a grouped call that failed part-way kept alive until complete)."""

import torch

from herd.handles import target, wait_all
from herd.process_sets import global_process_set, process_set_id_of

def _target(collective, name, process_set, caller):
    """handles.target, with Horovod's '<collective>.<name>' for a given name. (So a name
    submitted as two different collectives on two ranks never meets, as in Horovod; herd.numpy
    keeps names as given, and the runtime reports that mismatch instead.)"""
    return target(collective, None if name is None else f"{collective}.{name}", process_set,
                  caller)


def _held(collective, name, process_set):
    """The (process set id, tensor name) a named submission holds until its handle is
    synchronized (herd.handles); none for an unnamed one, whose name is never reused."""
    if name is None:
        return []
    return [(process_set_id_of(process_set, collective), f"{collective}.{name}")]


def _copy_back(destination, source):
    """Writes ``source`` into ``destination`` unless they are the same memory (``source`` is
    then the contiguous copy made of a non-contiguous ``destination``)."""
    if destination.data_ptr() != source.data_ptr():
        with torch.no_grad():
            destination.copy_(source)
    return destination


def _compress_each(compression, tensors):
    """The compressed tensors and their contexts, as two lists."""
    pairs = [compression.compress(t) for t in tensors]
    return [c for c, _ in pairs], [context for _, context in pairs]


class _NativeGroup:
    """Several native operations behind one handle, for the grouped collectives
    herd's C++ API runs as separate operations (allgather, reducescatter).

    ``wait`` waits for every member, even after one failed, so that no member
    still writes when the handle is gone, then raises the first failure.
    """

    def __init__(self, natives):
        self.natives = natives

    def poll(self):
        return all(native.poll() for native in self.natives)

    def wait(self):
        wait_all(native.wait for native in self.natives)


# Operations of a grouped call whose later member failed to submit: the
# runtime still reads their inputs, so they stay referenced until complete.
_orphans = []


def _submit_group(submits, keep_alive):
    """Runs each ``submit()`` (each returns a native handle) and groups the handles. If one
    raises, those already submitted stay referenced, with ``keep_alive``, until complete."""
    _orphans[:] = [(native, kept) for native, kept in _orphans if not native.poll()]
    natives = []
    try:
        for submit in submits:
            natives.append(submit())
    except BaseException:
        _orphans.extend((native, keep_alive) for native in natives)
        raise
    return _NativeGroup(natives)


def _set_or_global(process_set):
    """The set a gradient needs the size and ranks of: None means the global set."""
    return global_process_set if process_set is None else process_set
