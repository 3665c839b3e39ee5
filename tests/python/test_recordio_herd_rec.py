"""Files crossing between herd.recordio (Python) and herd-rec (C++): files written
by Python read by herd-rec verify and unpack, files written by herd-rec pack (from
IDX and from an im2rec list) read by Python, and the same offset named for a
broken file by both. HERD_REC is herd-rec's path; without it the tests skip."""

import gzip
import os
import struct
import subprocess

import numpy as np
import pytest

import herd
from herd import recordio
from recordio_files import GOLDEN_BYTES, GOLDEN_RECORDS, MAGIC, frame, write_records


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
