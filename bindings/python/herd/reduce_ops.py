"""Reduction operators, named as Horovod names them.

``Sum``, ``Average``, ``Min``, ``Max``, ``Product`` and ``Adasum`` are herd's
C++ operators. ``Adasum`` combines the ranks' vectors by the Adasum rule
(docs/adasum.md): allreduce only, on float16/float32/float64 CPU tensors, over
a process set whose size is a power of two; herd refuses anything else at the
call.
"""

from herd._native import ReduceOp

Sum = ReduceOp.SUM
Average = ReduceOp.AVERAGE
Min = ReduceOp.MIN
Max = ReduceOp.MAX
Product = ReduceOp.PRODUCT
Adasum = ReduceOp.ADASUM


def resolve_op(op, average, caller):
    """The operator to run from Horovod's ``op=`` and legacy ``average=``.

    Horovod's rules: both given is an error; ``average=True`` is Average,
    ``average=False`` is Sum; neither is Average.
    """
    if op is not None and average is not None:
        raise ValueError(f"{caller}: give op= or the deprecated average=, not both")
    if op is None:
        op = Sum if average is False else Average
    if not isinstance(op, ReduceOp):
        raise ValueError(
            f"{caller}: op={op!r} is not one of Sum, Average, Min, Max, Product, Adasum"
        )
    return op
