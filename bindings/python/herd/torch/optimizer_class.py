"""The run-time subclass that turns a torch optimizer into a distributed one.

DistributedOptimizer and the Adasum optimizer keep their methods on a holder
class; this copies them into a subclass of the wrapped optimizer's own class, so
``isinstance``, ``state_dict`` and learning-rate schedulers treat the result as
the original, and ``self._herd_class`` names the subclass for ``super()``.
"""

import functools

_NOT_COPIED = ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__")


@functools.lru_cache(maxsize=None)
def subclass_carrying(holder, base):
    """The subclass of ``base`` with ``holder``'s methods, one per (holder, base) pair."""
    namespace = {name: value for name, value in vars(holder).items() if name not in _NOT_COPIED}
    namespace["__module__"] = holder.__module__
    namespace["__qualname__"] = base.__qualname__
    namespace["__doc__"] = base.__doc__
    cls = type(base.__name__, (base,), namespace)
    cls._herd_class = cls
    return cls
