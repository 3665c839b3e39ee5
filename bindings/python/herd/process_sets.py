"""Process sets: subsets of the job's ranks that run collectives on their own.

A ``ProcessSet`` is made from a list of global ranks and registered with
``add_process_set`` on every rank of the job (members or not), in the same
order. ``global_process_set`` is every rank and needs no registration.
"""

from herd import _native


class ProcessSet:
    """A set of global ranks; usable in collectives once registered.

    ``process_set_id`` is None until ``add_process_set`` registers it.
    """

    def __init__(self, ranks):
        self.ranks = sorted(int(r) for r in ranks)
        self.process_set_id = None

    def _require_registered(self, what):
        if self.process_set_id is None:
            raise ValueError(
                f"herd: process set {self.ranks} is not registered; "
                f"call herd.add_process_set on every rank before {what}"
            )
        return self.process_set_id

    def size(self):
        """Number of ranks in the set."""
        self._require_registered("size()")
        return len(self.ranks)

    def rank(self):
        """This process's index among the set's ranks, or -1 when not a member."""
        self._require_registered("rank()")
        own = _native.rank()
        return self.ranks.index(own) if own in self.ranks else -1

    def included(self):
        """True when this process belongs to the set."""
        self._require_registered("included()")
        return _native.rank() in self.ranks

    def __eq__(self, other):
        return (
            isinstance(other, ProcessSet)
            and self.process_set_id == other.process_set_id
            and self.ranks == other.ranks
        )

    def __hash__(self):
        return hash((self.process_set_id, tuple(self.ranks)))

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


class _GlobalProcessSet(ProcessSet):
    """Every rank; id 0. Its ranks are known only once herd runs."""

    def __init__(self):
        self.process_set_id = 0

    @property
    def ranks(self):
        return list(range(_native.size()))

    @ranks.setter
    def ranks(self, _):
        raise AttributeError("the global process set's ranks are every rank")

    def rank(self):
        return _native.rank()

    def size(self):
        return _native.size()

    def included(self):
        return True

    def __repr__(self):
        return "global_process_set"


global_process_set = _GlobalProcessSet()

# Sets registered through add_process_set, by id, so remove_process_set and
# shutdown can mark them unregistered again.
_added_sets = {}


def add_process_set(process_set):
    """Registers a set (a ProcessSet or a list of ranks); collective over the job.

    Returns the registered ProcessSet.
    """
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError(f"herd.add_process_set: {process_set} is already registered")
    process_set.process_set_id = _native.add_process_set(process_set.ranks)
    _added_sets[process_set.process_set_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Unregisters a set; collective over the job. Returns True if it was registered."""
    if process_set.process_set_id is None:
        return False
    if process_set.process_set_id == 0:
        raise ValueError("herd.remove_process_set: the global process set cannot be removed")
    _native.remove_process_set(process_set.process_set_id)
    _added_sets.pop(process_set.process_set_id, None)
    process_set.process_set_id = None
    return True


def process_set_id_of(process_set, caller):
    """The native id to pass for ``process_set`` (None means the global set)."""
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError(f"{caller}: process_set={process_set!r} is not a herd.ProcessSet")
    return process_set._require_registered(caller)


def _forget_added_sets():
    for process_set in _added_sets.values():
        process_set.process_set_id = None
    _added_sets.clear()
