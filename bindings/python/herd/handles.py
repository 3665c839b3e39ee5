"""The table behind Horovod-style integer handles.

Each asynchronous collective returns an int. The table keeps, under that int,
the native handle, every object whose memory the C++ runtime reads or writes
(so the garbage collector cannot free it mid-operation), and a function that
turns the finished operation into the caller's result. ``synchronize`` waits
(without the GIL), removes the entry and returns that result.
"""

import itertools
import threading


class _Entry:
    __slots__ = ("native", "keep_alive", "finish")

    def __init__(self, native, keep_alive, finish):
        self.native = native
        self.keep_alive = keep_alive
        self.finish = finish


class HandleTable:
    def __init__(self):
        self._entries = {}
        self._next = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, native, keep_alive, finish):
        """Registers a submitted operation; returns its handle.

        ``finish(native)`` runs in ``synchronize`` after a successful wait and
        returns the result.
        """
        with self._lock:
            handle = next(self._next)
            self._entries[handle] = _Entry(native, keep_alive, finish)
        return handle

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
        return entry.finish(entry.native)

    def clear(self):
        with self._lock:
            self._entries.clear()


table = HandleTable()


def poll(handle):
    """True once the operation behind ``handle`` has completed; never blocks."""
    return table.poll(handle)


def synchronize(handle):
    """Waits for the operation behind ``handle`` and returns its result."""
    return table.synchronize(handle)


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
