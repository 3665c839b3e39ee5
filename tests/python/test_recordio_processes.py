"""herd.recordio across processes: readers pickled (reopened in the copy), writers
refusing it, a handle inherited across fork, a writer inherited across fork that
writes nothing there, and one reader used by spawned (pickled) and forked worker
processes. Expected bytes come from recordio_files.frame(); expected records
from the inputs the test wrote."""

import os
import pickle

import numpy as np
import pytest

from herd import recordio
from recordio_files import GOLDEN_BYTES, GOLDEN_HEADS, GOLDEN_RECORDS, frame, read_all


def test_a_handle_from_another_process(tmp_path):
    # A handle inherited across fork: seek reopens it, read refuses (as MXNet's).
    idx, rec = tmp_path / "p.idx", tmp_path / "p.rec"
    writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    for key in range(3):
        writer.write_idx(key, bytes([key]) * 3)
    writer.pid = -1
    with pytest.raises(RuntimeError, match="opened by process -1"):
        writer.write_idx(3, b"x")
    writer.pid = os.getpid()  # back in the process that opened it, which writes it out
    writer.close()
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    reader.pid = -1
    with pytest.raises(RuntimeError, match="reopen it"):
        reader.read()
    assert reader.read_idx(2) == b"\2\2\2"
    assert reader.pid == os.getpid()
    reader.pid = -1
    reader.seek(1)
    assert reader.read() == b"\1\1\1"


@pytest.mark.parametrize("indexed", [False, True])
def test_a_writer_inherited_across_fork_writes_nothing_there(tmp_path, indexed):
    # The child's copy holds the parent's buffered records and .idx lines; closing it
    # there must not write them too (the two processes share the file's offset).
    idx, rec = tmp_path / "f.idx", tmp_path / "f.rec"
    if indexed:
        writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    else:
        writer = recordio.MXRecordIO(str(rec), "w")
    records = [f"before fork {key}".encode() for key in range(3)] + [b"after fork"]
    for key, record in enumerate(records[:3]):
        writer.write_idx(key, record) if indexed else writer.write(record)
    child = os.fork()
    if child == 0:
        status = 1
        try:
            writer.close()
            assert not writer.is_open
            status = 0
        finally:
            os._exit(status)
    assert os.waitpid(child, 0)[1] == 0
    writer.write_idx(3, records[3]) if indexed else writer.write(records[3])
    writer.close()
    assert rec.read_bytes() == b"".join(frame(r) for r in records)
    if indexed:
        offsets = np.cumsum([0] + [len(frame(r)) for r in records[:3]])
        assert idx.read_text() == "".join(f"{k}\t{o}\n" for k, o in enumerate(offsets))


def test_pickled_reader_reopens(tmp_path):
    path = tmp_path / "golden.rec"
    path.write_bytes(GOLDEN_BYTES)
    reader = recordio.MXRecordIO(str(path), "r")
    assert reader.read() == GOLDEN_RECORDS[0]
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.is_open and copy.uri == str(path)
    assert copy.read() == GOLDEN_RECORDS[0]  # a copy starts at the first record
    assert reader.read() == GOLDEN_RECORDS[1]  # the original goes on
    reader.close()
    closed = pickle.loads(pickle.dumps(reader))
    assert not closed.is_open


def test_pickled_indexed_reader_reopens(tmp_path):
    idx, rec = tmp_path / "g.idx", tmp_path / "g.rec"
    rec.write_bytes(GOLDEN_BYTES)
    idx.write_text("".join(f"{k}\t{o}\n" for k, o in enumerate(GOLDEN_HEADS)))
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.keys == [0, 1, 2, 3]
    assert copy.read_idx(3) == GOLDEN_RECORDS[3]
    assert copy.read_idx(1) == GOLDEN_RECORDS[1]


def read_keys(reader, keys, results):
    try:
        results.put((keys[0], [reader.read_idx(key) for key in keys]))
    except Exception as error:  # reported to the test, which fails on it
        results.put((keys[0], repr(error)))


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_reader_used_in_worker_processes(tmp_path, method):
    # As a data loader's workers use it: pickled into spawned processes, inherited
    # (not pickled) by forked ones, where read_idx reopens the file for the new process.
    import multiprocessing

    idx, rec = tmp_path / "w.idx", tmp_path / "w.rec"
    records = {key: f"record {key}".encode() * (key + 1) for key in range(40)}
    writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    for key, record in records.items():
        writer.write_idx(key, record)
    writer.close()
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert reader.read_idx(3) == records[3]
    shares = [list(range(part, 40, 3)) for part in range(3)]
    context = multiprocessing.get_context(method)
    results = context.Queue()
    workers = [context.Process(target=read_keys, args=(reader, keys, results)) for keys in shares]
    for worker in workers:
        worker.start()
    got = dict(results.get(timeout=60) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert got == {keys[0]: [records[key] for key in keys] for keys in shares}
    assert reader.read_idx(39) == records[39]


def test_an_open_writer_does_not_pickle(tmp_path):
    writer = recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    writer.write(b"kept")
    with pytest.raises(TypeError, match="open for writing and does not pickle"):
        pickle.dumps(writer)
    writer.close()
    assert not pickle.loads(pickle.dumps(writer)).is_open
    assert read_all(tmp_path / "w.rec") == [b"kept"]
