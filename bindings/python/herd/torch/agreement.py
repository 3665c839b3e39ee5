"""Failures of the Python-level collective helpers reach every rank.

A helper such as ``broadcast_object`` runs Python code (pickling, checking
tensors, applying what arrived) between its collectives. If that code raises
on one rank only, that rank leaves the helper while the others wait in its
next collective. So each such step ends in an exchange of statuses: every
member of the process set contributes whether its step failed (with the
exception's type and text) and one integer the helper needs anyway (a length,
a count). When no member failed the exchange is one allgather of two integers
per rank; when one did, a second allgather carries the error texts, and every
rank raises: the failing ranks their own exception, the others ``herd.Error``
naming each failing rank and its error.
"""

import torch

from herd._native import Error
from herd.torch.mpi_ops import allgather


def describe(error):
    """``Type: text`` of an exception, as it travels to the other ranks."""
    return f"{type(error).__name__}: {error}"


def _text_tensor(text):
    data = text.encode("utf-8", "backslashreplace")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(
        0, dtype=torch.uint8)


def _exchange(error, value, name, step, process_set):
    """The collectives: (every member's [failed, value, text length], the failed members'
    texts concatenated, or None when no member failed)."""
    text = "" if error is None else describe(error)
    status = torch.tensor([[0 if error is None else 1, int(value), len(_text_tensor(text))]],
                          dtype=torch.int64)
    statuses = allgather(status, name=f"{name}.{step}.status", process_set=process_set).tolist()
    if not any(failed for failed, _, _ in statuses):
        return statuses, None
    texts = allgather(_text_tensor(text), name=f"{name}.{step}.errors",
                      process_set=process_set).numpy().tobytes()
    return statuses, texts


def _peer_failure(statuses, texts, what, name, step, process_set):
    """The herd.Error that names every failed member and its error."""
    ranks = process_set.ranks
    failures, start = [], 0
    for member, (failed, _, length) in enumerate(statuses):
        if failed:
            failures.append(f"rank {ranks[member]} failed: "
                            f"{texts[start:start + length].decode('utf-8', 'replace')}")
        start += length
    return Error(f"{what} '{name}', {step}: " + "; ".join(failures))


def exchange_status(error, value, what, name, step, process_set):
    """Every member's ``value`` (an int), in member order, when no member failed.

    ``error``: this rank's exception from the step just done, or None. ``what`` (the
    helper, e.g. ``herd.torch.broadcast_object``), ``name`` (the helper call's name, the
    same on every rank) and ``step`` (which of the helper's steps, e.g. ``pickle``) name
    the allgathers and head the message. Raises ``error`` itself on a rank that failed,
    after the others have been told; ``herd.Error`` on the others.
    """
    try:
        statuses, texts = _exchange(error, value, name, step, process_set)
        if texts is None:
            return [member_value for _, member_value, _ in statuses]
        if error is not None:
            raise error
        raise _peer_failure(statuses, texts, what, name, step, process_set)
    finally:
        error = None  # the traceback refers to this frame: no cycle through it


def agree(error, what, name, step, process_set):
    """``exchange_status`` without a value: returns when no member failed."""
    exchange_status(error, 0, what, name, step, process_set)


def report_after_failure(error, collective_error, what, name, step, process_set):
    """For a step that failed on this rank, in Python (``error``) or in a collective
    (``collective_error``, a herd.Error every member of the set sees alike): tells every
    member which ranks failed in Python, and raises. A rank that failed in Python raises
    its own exception, the others herd.Error naming those ranks; when none did,
    ``collective_error``. When the exchange itself cannot run (the set has failed for
    good), this rank's own error. A ``collective_error`` that is not a herd.Error (so not
    seen alike by every member) with no Python failure is raised as it is, without an
    exchange."""
    try:
        if error is None and not isinstance(collective_error, Error):
            raise collective_error
        try:
            statuses, texts = _exchange(error, 0, name, step, process_set)
        except Exception:  # noqa: BLE001 -- the set is gone: report what this rank saw
            raise error if error is not None else collective_error from None
        if error is not None:
            raise error
        if texts is None:
            raise collective_error
        raise _peer_failure(statuses, texts, what, name, step, process_set) from collective_error
    finally:
        error = collective_error = None  # the tracebacks refer to this frame: no cycle
