"""herd.recordio in one process (no mpirun, no herd.init): MXNet's own recordio unit
tests, the reference's golden bytes, errors, pickling, and files crossing between
Python and herd-rec (C++). Expected bytes come from the reference's golden dump or
from frame() below, a separate implementation of dmlc-core's framing rules written
from the format description; expected records from the inputs the test wrote."""

import gzip
import os
import pathlib
import pickle
import random
import struct
import subprocess
import threading

import numpy as np
import pytest

import herd
from herd import recordio

MAGIC = struct.pack("<I", 0xCED7230A)

# The reference's dump of dmlc-core writing four records: "ab"+M+"cd" (unaligned
# magic, kept), M+"wxyz"+M+"q" (two aligned ones, escaped), "" and "abcd"+M.
GOLDEN_RECORDS = [b"ab" + MAGIC + b"cd", MAGIC + b"wxyz" + MAGIC + b"q", b"", b"abcd" + MAGIC]
GOLDEN_BYTES = bytes.fromhex(
    "0a23d7ce 08000000 6162 0a23d7ce 6364"
    "0a23d7ce 00000020"
    "0a23d7ce 04000040 7778797a"
    "0a23d7ce 01000060 71000000"
    "0a23d7ce 00000000"
    "0a23d7ce 04000020 61626364"
    "0a23d7ce 00000060".replace(" ", ""))
# Offsets of the golden file's parts: record 1 at 0; record 2's three parts at 16,
# 24, 36; record 3 at 48; record 4's two parts at 56, 68.
GOLDEN_HEADS = [0, 16, 48, 56]


def frame(payload):
    """The parts dmlc-core writes for one record: cut at each magic word at a
    4-aligned offset (the word dropped), cflag 1 for the first part, 2 for the
    middle ones, 3 for the last; 0 for a record without cuts; zero padding."""
    pieces = []
    start = 0
    for at in range(0, len(payload) - 3, 4):
        if payload[at:at + 4] == MAGIC:
            pieces.append(payload[start:at])
            start = at + 4
    pieces.append(payload[start:])
    out = b""
    for number, piece in enumerate(pieces):
        if len(pieces) == 1:
            cflag = 0
        elif number == 0:
            cflag = 1
        elif number == len(pieces) - 1:
            cflag = 3
        else:
            cflag = 2
        out += MAGIC + struct.pack("<I", cflag << 29 | len(piece)) + piece
        out += b"\0" * (-len(piece) % 4)
    return out


def write_records(path, records):
    writer = recordio.MXRecordIO(str(path), "w")
    for record in records:
        writer.write(record)
    writer.close()


def read_all(path):
    reader = recordio.MXRecordIO(str(path), "r")
    records = []
    while True:
        record = reader.read()
        if record is None:
            break
        records.append(record)
    reader.close()
    return records


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


# ---- image-record headers: pack and unpack ------------------------------------------


def test_mxnet_multi_label_pack_unpack():
    # MXNet's test_recordio_pack_label: label sizes 1-254, payloads 0-254 bytes; here
    # with float32 labels of every magnitude, which must come back exactly.
    rng = np.random.default_rng(0)
    for size in range(1, 255):
        labels = (rng.standard_normal(size) * 10.0 ** rng.integers(-30, 30, size)).astype(
            np.float32)
        for length in range(255):
            content = rng.integers(ord("A"), ord("Z") + 1, length, dtype=np.uint8).tobytes()
            packed = recordio.pack(recordio.IRHeader(0, labels, size, 0), content)
            assert packed == (struct.pack("<IfQQ", size, 0.0, size, 0) +
                              labels.astype("<f4").tobytes() + content)
            header, rest = recordio.unpack(packed)
            assert header.flag == size
            assert header.label.dtype == np.float32
            assert np.array_equal(header.label, labels)
            assert (header.id, header.id2) == (size, 0)
            assert rest == content


def test_pack_a_scalar_label():
    packed = recordio.pack((9, 3.25, 7, 1), b"pixels")  # flag is set to 0
    assert packed == struct.pack("<IfQQ", 0, 3.25, 7, 1) + b"pixels"
    header, rest = recordio.unpack(packed)
    assert header == recordio.IRHeader(0, 3.25, 7, 1)
    assert isinstance(header.label, float)
    assert rest == b"pixels"
    assert recordio.unpack(recordio.pack(recordio.IRHeader(0, np.float32(2.5), 0, 0), b""))[0] \
        == (0, 2.5, 0, 0)
    # A list of labels is an array label, as in MXNet.
    header, rest = recordio.unpack(recordio.pack((0, [1, 2.5], 4, 0), b"z"))
    assert header.flag == 2 and header.label.tolist() == [1.0, 2.5] and rest == b"z"


def test_unpack_refuses_short_records():
    with pytest.raises(ValueError, match="has 23 bytes, fewer than the 24-byte"):
        recordio.unpack(b"\0" * 23)
    record = struct.pack("<IfQQ", 3, 0.0, 0, 0) + b"\0" * 11
    with pytest.raises(ValueError, match="counts 3 float32 labels .12 bytes. but the record "
                       "has 11 bytes"):
        recordio.unpack(record)


def test_irheader_pickles():
    header = recordio.IRHeader(1, 2.0, 3, 4)
    assert pickle.loads(pickle.dumps(header)) == header


def bgr_test_image():
    """A smooth colour gradient (JPEG keeps it within a few levels) whose three
    channels differ everywhere, so a swapped channel order shows."""
    y, x = np.mgrid[0:48, 0:64]
    return np.stack([x * 4, y * 5, 255 - x * 2 - y], axis=2).astype(np.uint8)


def test_pack_img_png_round_trip_and_bgr_order():
    Image = pytest.importorskip("PIL.Image")
    import io

    image = bgr_test_image()
    record = recordio.pack_img(recordio.IRHeader(0, 4.0, 12, 0), image, img_fmt=".png")
    header, encoded = recordio.unpack(record)
    assert header == recordio.IRHeader(0, 4.0, 12, 0)
    assert encoded[:8] == b"\x89PNG\r\n\x1a\n"
    # Stored as RGB, as OpenCV stores a BGR array: the file's red is the array's channel 2.
    stored = np.asarray(Image.open(io.BytesIO(encoded)))
    assert np.array_equal(stored, image[:, :, ::-1])
    header, decoded = recordio.unpack_img(record)
    assert header.label == 4.0 and header.id == 12
    assert decoded.dtype == np.uint8 and np.array_equal(decoded, image)
    grey = image[:, :, 1].copy()
    _, decoded = recordio.unpack_img(recordio.pack_img((0, 1.0, 0, 0), grey, img_fmt=".png"))
    assert np.array_equal(decoded, grey)
    _, colour = recordio.unpack_img(recordio.pack_img((0, 1.0, 0, 0), grey, img_fmt=".png"),
                                    iscolor=1)
    assert colour.shape == (48, 64, 3) and all(np.array_equal(colour[:, :, c], grey)
                                               for c in range(3))
    bgra = np.concatenate([image, np.full((48, 64, 1), 7, np.uint8)], axis=2)
    _, decoded = recordio.unpack_img(recordio.pack_img((0, [1, 2], 0, 0), bgra, img_fmt=".png"))
    assert np.array_equal(decoded, bgra)


def test_pack_img_jpeg_is_close():
    pytest.importorskip("PIL.Image")
    image = bgr_test_image()
    record = recordio.pack_img((0, [1.5, 2.5], 3, 0), image)  # .jpg, quality 95
    header, encoded = recordio.unpack(record)
    assert header.flag == 2 and header.label.tolist() == [1.5, 2.5]
    assert encoded[:2] == b"\xff\xd8"
    header, decoded = recordio.unpack_img(record)
    assert decoded.shape == image.shape
    assert np.abs(decoded.astype(int) - image).mean() < 2.0
    _, grey = recordio.unpack_img(record, iscolor=0)
    assert grey.shape == (48, 64)


def test_pack_img_refusals():
    pytest.importorskip("PIL.Image")
    with pytest.raises(ValueError, match="img_fmt is one of"):
        recordio.pack_img((0, 0.0, 0, 0), bgr_test_image(), img_fmt=".gif")
    with pytest.raises(TypeError, match="uint8, not float32"):
        recordio.pack_img((0, 0.0, 0, 0), np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="not .4, 4, 2."):
        recordio.pack_img((0, 0.0, 0, 0), np.zeros((4, 4, 2), np.uint8))
    with pytest.raises(ValueError, match="no alpha"):
        recordio.pack_img((0, 0.0, 0, 0), np.zeros((4, 4, 4), np.uint8))
    with pytest.raises(ValueError, match="the 5 bytes after the header .id 9. are no image"):
        recordio.unpack_img(recordio.pack((0, 0.0, 9, 0), b"hello"))


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


def test_idx_lines_written_in_batches(tmp_path):
    idx, rec = tmp_path / "many.idx", tmp_path / "many.rec"
    writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    for key in range(10000):
        writer.write_idx(key, b"abcd")
    writer.close()
    assert idx.read_text() == "".join(f"{k}\t{12 * k}\n" for k in range(10000))
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    assert reader.read_idx(9999) == b"abcd"


# ---- pickling ---------------------------------------------------------------------


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


def test_mxnet_names():
    # What scripts import from mxnet.recordio.
    for name in ("MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
                 "unpack_img"):
        assert name in recordio.__all__ and hasattr(recordio, name)
    assert recordio.IRHeader._fields == ("flag", "label", "id", "id2")


def test_an_open_writer_does_not_pickle(tmp_path):
    writer = recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    writer.write(b"kept")
    with pytest.raises(TypeError, match="open for writing and does not pickle"):
        pickle.dumps(writer)
    writer.close()
    assert not pickle.loads(pickle.dumps(writer)).is_open
    assert read_all(tmp_path / "w.rec") == [b"kept"]


# ---- Python and herd-rec (C++) ------------------------------------------------------

HERD_REC = os.environ.get("HERD_REC", "")
needs_herd_rec = pytest.mark.skipif(not os.access(HERD_REC, os.X_OK),
                                    reason="herd-rec is not built (HERD_REC unset)")


def herd_rec(*args, check=True):
    result = subprocess.run([HERD_REC, *map(str, args)], capture_output=True, text=True,
                            timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"herd-rec {' '.join(map(str, args))} exited "
                             f"{result.returncode}: {result.stdout}{result.stderr}")
    return result


def write_idx_file(path, magic_type, dims, data, compress):
    """An IDX file as MNIST's: two zero bytes, the element type (0x08: uint8), the
    number of dimensions, each size as a big-endian uint32, then the data."""
    raw = struct.pack(">I", magic_type << 8 | len(dims)) + struct.pack(
        f">{len(dims)}I", *dims) + bytes(data)
    path.write_bytes(gzip.compress(raw) if compress else raw)


@needs_herd_rec
@pytest.mark.parametrize("compress", [False, True])
def test_herd_rec_pack_from_idx_read_by_python(tmp_path, compress):
    rng = np.random.default_rng(5)
    count, rows, cols = 13, 3, 5
    images = rng.integers(0, 256, (count, rows, cols), dtype=np.uint8)
    labels = rng.integers(0, 10, count, dtype=np.uint8)
    suffix = ".gz" if compress else ""
    write_idx_file(tmp_path / f"images{suffix}", 8, (count, rows, cols), images.tobytes(),
                   compress)
    write_idx_file(tmp_path / f"labels{suffix}", 8, (count,), labels.tobytes(), compress)
    herd_rec("pack", "--idx-images", tmp_path / f"images{suffix}", "--idx-labels",
             tmp_path / f"labels{suffix}", "-o", tmp_path / "out.rec")
    reader = recordio.MXIndexedRecordIO(str(tmp_path / "out.idx"), str(tmp_path / "out.rec"), "r")
    assert reader.keys == list(range(count))
    for i in reversed(range(count)):
        record = reader.read_idx(i)
        assert record == struct.pack("<IfQQ", 0, float(labels[i]), i, 0) + images[i].tobytes()
        header, pixels = recordio.unpack(record)
        assert header == recordio.IRHeader(0, float(labels[i]), i, 0)
        assert pixels == images[i].tobytes()


def write_list(tmp_path, entries):
    """im2rec's .lst (index, labels, path, tab-separated) and the files it names."""
    root = tmp_path / "images"
    root.mkdir()
    lines = []
    for index, labels, name, content in entries:
        (root / name).write_bytes(content)
        lines.append("\t".join([str(index)] + [f"{label:f}" for label in labels] + [name]))
    (tmp_path / "list.lst").write_text("\n".join(lines) + "\n")
    return root


LIST_ENTRIES = [
    (4, [1.0, 0.5, -2.25], "a.jpg", b"first image"),
    (0, [3.0, 7.0, 8.0], "b.png", b""),
    (17, [2.5, 1.0, 1.0], "c.raw", MAGIC * 2 + b"escaped magic words"),
]


@needs_herd_rec
@pytest.mark.parametrize("pack_label", [False, True])
def test_herd_rec_pack_from_lst_read_by_python(tmp_path, pack_label):
    root = write_list(tmp_path, LIST_ENTRIES)
    herd_rec("pack", "--lst", tmp_path / "list.lst", "--root", root,
             *(["--pack-label"] if pack_label else []), "-o", tmp_path / "out.rec")
    reader = recordio.MXIndexedRecordIO(str(tmp_path / "out.idx"), str(tmp_path / "out.rec"), "r")
    assert reader.keys == [index for index, *_ in LIST_ENTRIES]
    for index, labels, _, content in LIST_ENTRIES:
        if pack_label:
            expected = (struct.pack("<IfQQ", len(labels), 0.0, index, 0) +
                        np.array(labels, "<f4").tobytes() + content)
        else:  # the first label only, as im2rec without --pack-label
            expected = struct.pack("<IfQQ", 0, labels[0], index, 0) + content
        record = reader.read_idx(index)
        assert record == expected
        header, rest = recordio.unpack(record)
        assert header.id == index and rest == content
        assert (header.label.tolist() if pack_label else [header.label]) == \
            (labels if pack_label else labels[:1])


@needs_herd_rec
def test_python_files_read_by_herd_rec(tmp_path):
    # Image records written by Python: herd-rec verify counts them, herd-rec unpack
    # gives back each payload and its labels, and packing its list again gives the
    # same .rec and .idx, byte for byte.
    idx, rec = tmp_path / "py.idx", tmp_path / "py.rec"
    writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    rng = np.random.default_rng(11)
    expected = {}
    for index in (3, 0, 9, 4, 250):
        labels = [float(v) for v in rng.integers(0, 100, 2)]
        payload = rng.integers(0, 256, index * 5 + 1, dtype=np.uint8).tobytes()
        if index == 9:
            payload = MAGIC + payload + MAGIC  # escaped, then restored by the C++ reader
        writer.write_idx(index, recordio.pack(recordio.IRHeader(0, labels, index, 0), payload))
        expected[index] = (labels, payload)
    writer.close()

    result = herd_rec("verify", rec, "--idx", idx)
    # Record 9's payload starts with the magic at a 4-aligned offset (after 32 bytes of
    # header and labels): the one split record.
    assert result.stdout == (f"{rec}: OK, 5 records (1 split), {rec.stat().st_size} bytes\n"
                             f"{idx}: OK, 5 offsets, each a record's head\n")
    out = tmp_path / "unpacked"
    herd_rec("unpack", rec, "-o", out)
    lists = list(out.glob("*.lst"))
    assert len(lists) == 1
    seen = {}
    for line in lists[0].read_text().splitlines():
        fields = line.split("\t")
        index, labels, name = int(fields[0]), [float(v) for v in fields[1:-1]], fields[-1]
        seen[index] = (labels, (out / name).read_bytes())
    assert seen == expected

    herd_rec("pack", "--lst", lists[0], "--root", out, "--pack-label", "-o", tmp_path / "again.rec")
    assert (tmp_path / "again.rec").read_bytes() == rec.read_bytes()
    assert (tmp_path / "again.idx").read_text() == idx.read_text()


@needs_herd_rec
def test_python_raw_records_read_by_herd_rec(tmp_path):
    records = [b"", b"x", MAGIC, b"ab" + MAGIC + b"cd", bytes(range(256)) * 3]
    write_records(tmp_path / "raw.rec", records)
    result = herd_rec("verify", tmp_path / "raw.rec")
    size = len(b"".join(frame(r) for r in records))
    assert result.stdout == f"{tmp_path / 'raw.rec'}: OK, 5 records (1 split), {size} bytes\n"
    herd_rec("unpack", tmp_path / "raw.rec", "--raw", "-o", tmp_path / "raw")
    lists = list((tmp_path / "raw").glob("*.lst"))
    assert len(lists) == 1
    names = [line.split("\t")[-1] for line in lists[0].read_text().splitlines()]
    assert [(tmp_path / "raw" / name).read_bytes() for name in names] == records


@needs_herd_rec
def test_herd_rec_verify_names_the_offset_python_reports(tmp_path):
    data = bytearray(GOLDEN_BYTES)
    data[48] ^= 0xFF
    (tmp_path / "bad.rec").write_bytes(bytes(data))
    result = herd_rec("verify", tmp_path / "bad.rec", check=False)
    assert result.returncode == 1
    assert f"RecordIO file '{tmp_path / 'bad.rec'}' at byte 48: not a record head" in result.stderr
    reader = recordio.MXRecordIO(str(tmp_path / "bad.rec"), "r")
    assert [reader.read(), reader.read()] == GOLDEN_RECORDS[:2]
    with pytest.raises(herd.Error, match="at byte 48: not a record head"):
        reader.read()
