"""herd.start_timeline and herd.stop_timeline under mpirun at 2 and 3 ranks (docs/timeline.md).

Each rank writes its own file ("%r" in the path) into its own temporary directory and parses it
back with the json module: the header's clock reading lies between the test's readings around
the start, the tensor names herd.torch gives ('allreduce.<name>') each have one track holding
their negotiation then their operation, and the cycle marks appear only with mark_cycles. A path
without "%r" is written by rank 0 alone; a restart finishes the first file; a path that cannot
be opened raises on the rank that gave it.
"""

import json
import os
import re
import time

import pytest
import torch

import herd
import herd.torch as hvd


def _read(path):
    with open(path) as f:
        return json.load(f)  # raises on a file that is not valid JSON


def _tracks(trace, ready=None):
    """Tensor name -> the names of the spans on its track, in order, and the cycle marks.

    `ready`, a dict, receives each tensor's readiness marks: the ranks they name."""
    names = {}
    spans = {}
    marks = 0
    for event in trace["traceEvents"]:
        if event["ph"] == "M":
            if event["name"] == "process_name" and event["pid"] != 0:
                assert event["pid"] not in names
                names[event["pid"]] = event["args"]["name"]
        elif event["ph"] == "B":
            spans.setdefault(names[event["pid"]], []).append(event["name"])
        elif event["ph"] == "i" and event["pid"] != 0:
            assert event["name"].isdigit() and event["s"] == "t"
            if ready is not None:
                ready.setdefault(names[event["pid"]], []).append(int(event["name"]))
        elif event["ph"] == "i":
            assert event["name"] == "CYCLE_START"
            marks += 1
    return spans, marks


def _micros():
    return time.time_ns() // 1000


def test_timeline_of_torch_collectives(tmp_path):
    pattern = str(tmp_path / "t.%r.json")
    before = _micros()
    hvd.start_timeline(pattern, mark_cycles=True)
    after = _micros()
    summed = hvd.allreduce(torch.tensor([1.0, 2.0, 3.0]), name="test_allreduce", op=hvd.Sum)
    gathered = hvd.allgather(torch.ones(2, 2), name="test_allgather")
    hvd.stop_timeline()
    assert summed.tolist() == [hvd.size() * 1.0, hvd.size() * 2.0, hvd.size() * 3.0]
    assert gathered.shape == (2 * hvd.size(), 2)

    path = tmp_path / f"t.{hvd.rank()}.json"
    trace = _read(path)
    assert trace["otherData"]["rank"] == hvd.rank()
    assert before <= trace["otherData"]["start_time_since_epoch_in_micros"] <= after
    ready = {}
    spans, marks = _tracks(trace, ready)
    assert spans["allreduce.test_allreduce"][:3] == ["NEGOTIATE_ALLREDUCE", "QUEUE", "ALLREDUCE"]
    assert spans["allgather.test_allgather"] == ["NEGOTIATE_ALLGATHER", "QUEUE", "ALLGATHER",
                                                 "RING_ALLGATHER"]
    assert marks > 0
    # New names: rank 0's coordinator marks each rank's request, once.
    expected = list(range(hvd.size())) if hvd.rank() == 0 else []
    for name in ("allreduce.test_allreduce", "allgather.test_allgather"):
        assert sorted(ready.get(name, [])) == expected


def test_path_object_and_rank_zero_alone(tmp_path):
    # Each rank has its own tmp_path: without %r only rank 0's directory gets a file.
    path = tmp_path / "shared.json"
    herd.start_timeline(path)
    hvd.allreduce(torch.ones(4), name="shared")
    herd.stop_timeline()
    if hvd.rank() == 0:
        spans, marks = _tracks(_read(path))
        assert spans["allreduce.shared"][:3] == ["NEGOTIATE_ALLREDUCE", "QUEUE", "ALLREDUCE"]
        assert marks == 0
    else:
        assert not path.exists()


def test_restart_same_path_and_two_stops(tmp_path):
    first = str(tmp_path / "first.%r.json")
    second = str(tmp_path / "second.%r.json")
    hvd.start_timeline(first)
    hvd.allreduce(torch.ones(3), name="restart_x")
    hvd.start_timeline(second, mark_cycles=False)
    hvd.start_timeline(second, mark_cycles=False)
    hvd.allreduce(torch.ones(3), name="restart_y")
    hvd.stop_timeline()
    hvd.stop_timeline()
    rank = hvd.rank()
    spans_first, _ = _tracks(_read(first.replace("%r", str(rank))))
    spans_second, marks = _tracks(_read(second.replace("%r", str(rank))))
    assert list(spans_first) == ["allreduce.restart_x"]
    assert list(spans_second) == ["allreduce.restart_y"]
    assert marks == 0


def test_unwritable_paths_raise(tmp_path):
    missing = tmp_path / "missing" / "t.%r.json"
    expected = str(missing).replace("%r", str(hvd.rank()))
    with pytest.raises(herd.Error, match=re.escape(f"cannot open '{expected}' for writing")):
        hvd.start_timeline(str(missing))
    with pytest.raises(ValueError, match="the file path is empty"):
        hvd.start_timeline("")
    hvd.stop_timeline()  # nothing is written: a no-op
    # Still usable afterwards.
    good = tmp_path / "good.%r.json"
    hvd.start_timeline(str(good))
    hvd.stop_timeline()
    assert os.path.exists(str(good).replace("%r", str(hvd.rank())))


def test_exported_as_horovod_names_them():
    for module in (herd, hvd):
        assert "start_timeline" in module.__all__
        assert "stop_timeline" in module.__all__
    assert hvd.start_timeline is herd.start_timeline
    assert hvd.stop_timeline is herd.stop_timeline
