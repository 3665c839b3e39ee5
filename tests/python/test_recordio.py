"""herd.recordio in one process (no mpirun, no herd.init): MXNet's own recordio unit
tests of plain and indexed files, the reference's golden bytes, and every error
with its file and offset or .idx line. Expected bytes come from the reference's
golden dump or from recordio_files.frame(), a separate implementation of
dmlc-core's framing rules; expected records from the inputs the test wrote."""

import os
import random
import struct
import threading

import numpy as np
import pytest

import herd
from herd import recordio
from recordio_files import (GOLDEN_BYTES, GOLDEN_HEADS, GOLDEN_RECORDS, MAGIC, frame, read_all,
                            write_records)


def test_the_reference_frame_gives_the_golden_bytes():
    # frame() is the reference the other tests compare with: check it first.
    assert b"".join(frame(r) for r in GOLDEN_RECORDS) == GOLDEN_BYTES
    assert len(GOLDEN_BYTES) == 76


def test_golden_bytes_written_byte_for_byte(tmp_path):
    path = tmp_path / "golden.rec"
    writer = recordio.MXRecordIO(str(path), "w")
    heads = []
    for record in GOLDEN_RECORDS:
        heads.append(writer.tell())
        writer.write(record)
    assert writer.tell() == 76
    assert writer.handle.escaped_magic_count == 3
    writer.close()
    assert path.read_bytes() == GOLDEN_BYTES
    assert heads == GOLDEN_HEADS


def test_golden_bytes_read(tmp_path):
    path = tmp_path / "golden.rec"
    path.write_bytes(GOLDEN_BYTES)
    reader = recordio.MXRecordIO(str(path), "r")
    for head, expected in zip(GOLDEN_HEADS, GOLDEN_RECORDS):
        assert reader.tell() == head
        assert reader.read() == expected
    assert reader.tell() == 76
    assert reader.read() is None
    assert reader.read() is None
    reader.reset()
    assert reader.read() == GOLDEN_RECORDS[0]


def test_mxnet_255_one_char_records(tmp_path):
    # MXNet's test_recordio: chr(i) for i < 255, UTF-8 (one or two bytes each).
    path = tmp_path / "chars.rec"
    records = [chr(i).encode("utf-8") for i in range(255)]
    writer = recordio.MXRecordIO(str(path), "w")
    for record in records:
        writer.write(record)
    del writer  # closed (and flushed) when collected, as MXNet's test relies on
    assert path.read_bytes() == b"".join(frame(r) for r in records)
    reader = recordio.MXRecordIO(str(path), "r")
    for _ in range(2):
        for expected in records:
            assert reader.read() == expected
        assert reader.read() is None
        reader.reset()


def test_mxnet_indexed_random_access(tmp_path):
    # MXNet's test_indexed_recordio: write by key, read the keys back in random order.
    idx, rec = tmp_path / "chars.idx", tmp_path / "chars.rec"
    records = {i: chr(i).encode("utf-8") for i in range(255)}
    writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    for key, record in records.items():
        writer.write_idx(key, record)
    writer.close()

    expected_rec = b""
    expected_idx = ""
    for key, record in records.items():
        expected_idx += f"{key}\t{len(expected_rec)}\n"
        expected_rec += frame(record)
    assert rec.read_bytes() == expected_rec
    assert idx.read_text() == expected_idx

    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert reader.keys == list(range(255))
    keys = list(reader.keys)
    random.Random(7).shuffle(keys)
    for key in keys:
        assert reader.read_idx(key) == records[key]
    # After a seek, read() goes on with the records that follow.
    reader.seek(250)
    assert [reader.read() for _ in range(6)] == [records[k] for k in range(250, 255)] + [None]
    reader.close()


@pytest.mark.parametrize("key_type", [str, int])
def test_indexed_keys_of_any_type(tmp_path, key_type):
    idx, rec = tmp_path / "keys.idx", tmp_path / "keys.rec"
    keys = [key_type(k) for k in (17, 3, 250, 9)]
    writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w", key_type=key_type)
    for key in keys:
        writer.write_idx(key, f"record {key}".encode())
    writer.close()
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r", key_type=key_type)
    assert reader.keys == keys
    for key in reversed(keys):
        assert reader.read_idx(key) == f"record {key}".encode()


def test_idx_read_with_any_whitespace(tmp_path):
    # dmlc's reader takes any whitespace between key and offset; so does herd's.
    rec = tmp_path / "golden.rec"
    rec.write_bytes(GOLDEN_BYTES)
    idx = tmp_path / "golden.idx"
    idx.write_text("10 0\n11\t\t16\n\n12   48\r\n13\t56")
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert reader.keys == [10, 11, 12, 13]
    assert [reader.read_idx(k) for k in (13, 12, 11, 10)] == GOLDEN_RECORDS[::-1]


@pytest.mark.parametrize("length", range(10))
def test_payload_lengths_0_to_9(tmp_path, length):
    path = tmp_path / "lengths.rec"
    records = [bytes(range(1, length + 1)), bytes(length), b"\xff" * length]
    write_records(path, records)
    assert path.read_bytes() == b"".join(frame(r) for r in records)
    assert read_all(path) == records


@pytest.mark.parametrize("offset", range(9))
def test_payloads_holding_the_magic(tmp_path, offset):
    # At a 4-aligned offset the magic is escaped (cflag 1, 2, 3 parts), anywhere else
    # it is written as it is; the reader gives back the payload either way.
    path = tmp_path / "magic.rec"
    records = [
        b"x" * offset + MAGIC,
        b"x" * offset + MAGIC + b"tail",
        b"x" * offset + MAGIC + MAGIC + b"y" * offset,
        MAGIC * 3,
    ]
    writer = recordio.MXRecordIO(str(path), "w")
    for record in records:
        writer.write(record)
    escaped = writer.handle.escaped_magic_count
    writer.close()
    aligned = offset % 4 == 0
    assert escaped == (4 + 3 if aligned else 3)
    assert path.read_bytes() == b"".join(frame(r) for r in records)
    assert read_all(path) == records


def test_write_takes_bytes_like_objects(tmp_path):
    path = tmp_path / "buffers.rec"
    array = np.arange(6, dtype=np.int32)
    records = [bytearray(b"abc"), memoryview(b"defgh"), array]
    write_records(path, records)
    assert read_all(path) == [b"abc", b"defgh", array.tobytes()]
    writer = recordio.MXRecordIO(str(path), "w")
    with pytest.raises(TypeError):
        writer.write("text, not bytes")
    with pytest.raises(ValueError, match="contiguous"):
        writer.write(np.arange(10, dtype=np.int8)[::2])


def test_many_records_of_random_sizes(tmp_path):
    # Records bigger than a read buffer, empty ones and magic words at random places.
    rng = np.random.default_rng(3)
    records = []
    for _ in range(300):
        size = int(rng.choice([0, 1, 7, 100, 4096, 70000, 1 << 20 | 3]))
        record = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        for at in rng.integers(0, max(size - 3, 1), 3):
            if size >= 4:
                record[at:at + 4] = MAGIC
        records.append(bytes(record))
    path = tmp_path / "random.rec"
    write_records(path, records)
    assert path.read_bytes() == b"".join(frame(r) for r in records)
    assert read_all(path) == records


def test_threads_read_one_indexed_file(tmp_path):
    idx, rec = tmp_path / "t.idx", tmp_path / "t.rec"
    records = {k: bytes([k % 256]) * (k * 37 % 5000) for k in range(400)}
    writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    for key, record in records.items():
        writer.write_idx(key, record)
    writer.close()
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    mismatches = []

    def read_some(seed):
        keys = list(records)
        random.Random(seed).shuffle(keys)
        for key in keys:
            if reader.read_idx(key) != records[key]:
                mismatches.append(key)

    threads = [threading.Thread(target=read_some, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert mismatches == []


def test_mxnet_names():
    # What scripts import from mxnet.recordio.
    for name in ("MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
                 "unpack_img"):
        assert name in recordio.__all__ and hasattr(recordio, name)
    assert recordio.IRHeader._fields == ("flag", "label", "id", "id2")


def test_idx_lines_written_in_batches(tmp_path):
    idx, rec = tmp_path / "many.idx", tmp_path / "many.rec"
    writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    for key in range(10000):
        writer.write_idx(key, b"abcd")
    writer.close()
    assert idx.read_text() == "".join(f"{k}\t{12 * k}\n" for k in range(10000))
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert reader.read_idx(9999) == b"abcd"


# ---- errors -----------------------------------------------------------------------


def corrupted(tmp_path, edit):
    data = bytearray(GOLDEN_BYTES)
    data = edit(data)
    path = tmp_path / "bad.rec"
    path.write_bytes(bytes(data))
    return path


def read_until_error(path):
    reader = recordio.MXRecordIO(str(path), "r")
    good = []
    with pytest.raises(herd.Error) as raised:
        while True:
            record = reader.read()
            assert record is not None, "the broken file read to its end"
            good.append(record)
    return good, str(raised.value)


def test_error_wrong_magic_names_file_and_offset(tmp_path):
    def edit(data):
        data[48] ^= 0xFF  # record 3's magic
        return data

    path = corrupted(tmp_path, edit)
    good, message = read_until_error(path)
    assert good == GOLDEN_RECORDS[:2]
    assert str(path) in message and "at byte 48:" in message


def test_error_truncated_file_names_file_and_offset(tmp_path):
    path = corrupted(tmp_path, lambda data: data[:72])  # record 4's last part cut
    good, message = read_until_error(path)
    assert good == GOLDEN_RECORDS[:3]
    assert str(path) in message and "at byte 68:" in message


def test_error_length_past_the_end(tmp_path):
    def edit(data):
        data[4:8] = struct.pack("<I", 1000)  # record 1 claims 1000 bytes
        return data

    path = corrupted(tmp_path, edit)
    good, message = read_until_error(path)
    assert good == []
    assert str(path) in message and "at byte 0:" in message and "1000" in message


def test_error_parts_out_of_order(tmp_path):
    def edit(data):
        data[28:32] = struct.pack("<I", 0 << 29 | 4)  # record 2's middle part says cflag 0
        return data

    path = corrupted(tmp_path, edit)
    good, message = read_until_error(path)
    assert good == GOLDEN_RECORDS[:1]
    assert str(path) in message and "at byte 24:" in message


def test_error_idx_offset_not_a_record_head(tmp_path):
    rec = tmp_path / "golden.rec"
    rec.write_bytes(GOLDEN_BYTES)
    idx = tmp_path / "golden.idx"
    idx.write_text("0\t0\n1\t24\n2\t6\n")  # 24: a middle part; 6: inside record 1
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert reader.read_idx(0) == GOLDEN_RECORDS[0]
    for key, offset in ((1, 24), (2, 6)):
        with pytest.raises(herd.Error) as raised:
            reader.read_idx(key)
        assert str(raised.value).startswith(
            f"key {key} of RecordIO index '{idx}': RecordIO file '{rec}' at byte {offset}: "
            "not a record head")
    # A failed read leaves the reader usable.
    assert reader.read_idx(0) == GOLDEN_RECORDS[0]


@pytest.mark.parametrize("text, line, what", [
    ("0\t0\nzero\t16\n", 2, "got 'zero\\\\t16'"),
    ("0\t0\n1\t16\n2\n", 3, "got '2'"),
    ("0\t0\n1\tsixteen\n", 2, "integer offset"),
    ("0\t0\n1\t80\n", 2, "offset 80 of key 1 lies outside .*76 bytes"),
    ("0\t0\n1\t76\n", 2, "offset 76 of key 1 lies outside .*76 bytes"),
    ("0\t-4\n", 1, "offset -4 of key 0 lies outside"),
    ("0\t0\n1\t16\n0\t48\n", 3, "key 0 is given twice .first at offset 0, again at 48."),
])
def test_error_bad_idx_lines(tmp_path, text, line, what):
    rec = tmp_path / "golden.rec"
    rec.write_bytes(GOLDEN_BYTES)
    idx = tmp_path / "bad.idx"
    idx.write_text(text)
    with pytest.raises(ValueError, match=f"RecordIO index '{idx}' line {line}: .*{what}"):
        recordio.MXIndexedRecordIO(str(idx), str(rec), "r")


def test_error_unknown_key(tmp_path):
    idx, rec = tmp_path / "k.idx", tmp_path / "k.rec"
    writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    writer.write_idx(5, b"five")
    with pytest.raises(ValueError, match=f"RecordIO index '{idx}': key 5 is written already "
                       r"\(at offset 0\)"):
        writer.write_idx(5, b"again")
    writer.close()
    assert idx.read_text() == "5\t0\n"
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    with pytest.raises(KeyError, match=f"RecordIO index '{idx}' has no key 6"):
        reader.read_idx(6)


def test_error_missing_file_and_misuse(tmp_path):
    missing = tmp_path / "missing.rec"
    with pytest.raises(herd.Error, match=str(missing)):
        recordio.MXRecordIO(str(missing), "r")
    with pytest.raises(ValueError, match="the flag is 'r' or 'w', not 'a'"):
        recordio.MXRecordIO(str(tmp_path / "x.rec"), "a")
    writer = recordio.MXRecordIO(str(tmp_path / "x.rec"), "w")
    with pytest.raises(OSError, match="open for writing"):
        writer.read()
    writer.close()
    writer.close()  # twice: nothing
    with pytest.raises(ValueError, match="is closed"):
        writer.write(b"late")
    reader = recordio.MXRecordIO(str(tmp_path / "x.rec"), "r")
    with pytest.raises(OSError, match="open for reading"):
        reader.write(b"x")
    assert reader.read() is None
    reader.close()
    with pytest.raises(ValueError, match="is closed"):
        reader.read()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_error_a_full_disk():
    # Writes are buffered: the failure comes from close (or from the write that flushes),
    # naming the file, the offset and the reason; the writer is closed after it.
    writer = recordio.MXRecordIO("/dev/full", "w")
    writer.write(b"x" * 10)
    with pytest.raises(herd.Error, match="RecordIO file '/dev/full': writing 20 bytes at byte 0 "
                       "failed: No space left on device"):
        writer.close()
    assert not writer.is_open
    writer.close()
    writer = recordio.MXRecordIO("/dev/full", "w")
    with pytest.raises(herd.Error, match="No space left on device"):
        for _ in range(1000):
            writer.write(b"y" * 100000)
