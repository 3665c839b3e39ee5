"""Reduction operators, named as Horovod names them.

``Sum``, ``Average``, ``Min``, ``Max`` and ``Product`` are herd's C++
operators. ``Adasum`` exists so scripts that mention it import, but herd does
not implement it: using it raises NotImplementedError.
"""

from herd._native import ReduceOp

Sum = ReduceOp.SUM
Average = ReduceOp.AVERAGE
Min = ReduceOp.MIN
Max = ReduceOp.MAX
Product = ReduceOp.PRODUCT


class _AdasumOp:
    def __repr__(self):
        return "Adasum"


Adasum = _AdasumOp()


def resolve_op(op, average, caller):
    """The operator to run from Horovod's ``op=`` and legacy ``average=``.

    Horovod's rules: both given is an error; ``average=True`` is Average,
    ``average=False`` is Sum; neither is Average.
    """
    if op is not None and average is not None:
        raise ValueError(f"{caller}: give op= or the deprecated average=, not both")
    if op is None:
        op = Sum if average is False else Average
    if op is Adasum:
        raise NotImplementedError(
            f"{caller}: herd does not implement Adasum; use op=Average or op=Sum"
        )
    if not isinstance(op, ReduceOp):
        raise ValueError(
            f"{caller}: op={op!r} is not one of Sum, Average, Min, Max, Product"
        )
    return op
