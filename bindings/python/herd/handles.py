"""The table behind Horovod-style integer handles.

Each asynchronous collective returns an int. The table keeps, under that int,
the native handle, every object whose memory the C++ runtime reads or writes
(so the garbage collector cannot free it mid-operation), and a function that
turns the finished operation into the caller's result. ``synchronize`` waits
(without the GIL), removes the entry and returns that result.

A tensor name stays taken from its submission until its handle is
synchronized, even when the operation completed before: submitting it again
in between raises InvalidArgumentError (a ValueError) at once. Horovod refuses
a name still in flight; holding it until ``synchronize`` makes that refusal
independent of how fast the first operation completes.
"""

import itertools
import threading

from herd._native import InvalidArgumentError
from herd.process_sets import process_set_id_of


class _Entry:
    __slots__ = ("native", "keep_alive", "finish", "names")

    def __init__(self, native, keep_alive, finish, names):
        self.native = native
        self.keep_alive = keep_alive
        self.finish = finish
        self.names = names


class HandleTable:
    def __init__(self):
        self._entries = {}
        # (process set id, tensor name) -> the handle that holds the name.
        self._names = {}
        self._next = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, native, keep_alive, finish, names=()):
        """Registers a submitted operation; returns its handle.

        ``finish(native)`` runs in ``synchronize`` after a successful wait and
        returns the result. ``names``: the (process set id, tensor name) pairs
        the operation holds until then.
        """
        names = tuple(names)
        with self._lock:
            handle = next(self._next)
            self._entries[handle] = _Entry(native, keep_alive, finish, names)
            for key in names:
                self._names[key] = handle
        return handle

    def require_free(self, key, caller):
        """Raises InvalidArgumentError if an unsynchronized handle holds ``key``."""
        with self._lock:
            holder = self._names.get(key)
        if holder is not None:
            raise InvalidArgumentError(
                f"{caller}: '{key[1]}' is still held by handle {holder}, not synchronized yet "
                "on this rank; synchronize it before submitting the name again")

    def _entry(self, handle, caller):
        with self._lock:
            entry = self._entries.get(handle)
        if entry is None:
            raise ValueError(
                f"{caller}: handle {handle!r} is unknown or was already synchronized"
            )
        return entry

    def poll(self, handle):
        return self._entry(handle, "herd.poll").native.poll()

    def synchronize(self, handle):
        entry = self._entry(handle, "herd.synchronize")
        try:
            entry.native.wait()
        finally:
            with self._lock:
                self._entries.pop(handle, None)
                for key in entry.names:
                    if self._names.get(key) == handle:
                        del self._names[key]
        return entry.finish(entry.native)

    def clear(self):
        with self._lock:
            self._entries.clear()
            self._names.clear()


table = HandleTable()


def poll(handle):
    """True once the operation behind ``handle`` has completed; never blocks."""
    return table.poll(handle)


def synchronize(handle):
    """Waits (without the GIL) for the operation behind ``handle`` and returns its result:
    the output (a list for grouped calls; ``(received, received_splits)`` for
    alltoall_async). Raises herd.Error (HorovodInternalError) if it failed, ValueError for an
    unknown or already synchronized handle."""
    return table.synchronize(handle)


def wait_all(waits):
    """Calls every ``wait()`` in ``waits``, even after one raised, so nothing still writes
    into the caller's tensors afterwards; then raises the first failure, if any."""
    first_error = None
    for wait in waits:
        try:
            wait()
        except Exception as error:  # noqa: BLE001 -- re-raised below
            if first_error is None:
                first_error = error
    if first_error is not None:
        try:
            raise first_error
        finally:
            # The traceback refers to this frame, which refers to the error: break the
            # cycle so what the waits held is freed now, not at the next gc.
            first_error = None


class AutoNames:
    """Names for tensors submitted without one.

    Every rank must give a tensor the same name; numbering unnamed submissions
    per collective in call order does that as long as every rank submits them
    in the same order (Horovod's rule too).
    """

    def __init__(self):
        self._counters = {}
        self._lock = threading.Lock()

    def name(self, collective, name):
        if name is not None:
            return str(name)
        with self._lock:
            count = self._counters.get(collective, 0)
            self._counters[collective] = count + 1
        return f"{collective}.noname.{count}"


names = AutoNames()


def target(collective, name, process_set, caller):
    """(tensor name, process set id) of a submission; call it after every other check,
    so a refused call consumes no number.

    A given name is used as it is. Unnamed tensors are numbered per collective
    and per process set, so that collectives the members of a set run among
    themselves leave the numbering of the others' unnamed tensors (on the
    global set, say) in step on every rank.
    """
    process_set_id = process_set_id_of(process_set, caller)
    if name is not None:
        table.require_free((process_set_id, str(name)), caller)
        return str(name), process_set_id
    scope = collective if process_set_id == 0 else f"{collective}.set{process_set_id}"
    return names.name(scope, None), process_set_id
