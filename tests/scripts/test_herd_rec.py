"""herd-rec against an independent reading of the RecordIO format.

Run by ctest as herd_rec (HERD_REC names the program), or by hand:
    HERD_REC=build/tools/herd_rec/herd-rec /usr/bin/python3 -m pytest -q tests/scripts/test_herd_rec.py
The expected bytes come from this file's own writer of dmlc's framing and MXNet's image header
(struct 'IfQQ'), which first reproduces the format's published 76 golden bytes; the tool's
output must equal them byte for byte.
"""

import gzip
import os
import struct
import subprocess

import pytest

HERD_REC = os.environ.get("HERD_REC", "")
MAGIC = struct.pack("<I", 0xCED7230A)

pytestmark = pytest.mark.skipif(not os.path.isfile(HERD_REC),
                                reason="HERD_REC does not name the herd-rec program")


# --- the reference: dmlc's framing, MXNet's header, the .idx and IDX files -----------------------

def frame(payload):
    """One record as dmlc's RecordIOWriter lays it out: cut at each 4-aligned magic word."""
    pieces, start = [], 0
    for i in range(0, len(payload) - 3, 4):
        if payload[i:i + 4] == MAGIC:
            pieces.append(payload[start:i])
            start = i + 4
    pieces.append(payload[start:])
    out = b""
    for k, piece in enumerate(pieces):
        if len(pieces) == 1:
            cflag = 0
        else:
            cflag = 1 if k == 0 else 3 if k == len(pieces) - 1 else 2
        out += MAGIC + struct.pack("<I", (cflag << 29) | len(piece)) + piece
        out += b"\0" * (-len(piece) % 4)
    return out


def image_record(label, ident, payload, labels=None):
    """MXNet's recordio.pack(IRHeader(flag, label, id, 0), payload)."""
    if labels:
        return struct.pack("<IfQQ", len(labels), 0.0, ident, 0) + struct.pack(
            "<%df" % len(labels), *labels) + payload
    return struct.pack("<IfQQ", 0, label, ident, 0) + payload


def rec_and_idx(keyed_records):
    rec, idx = b"", ""
    for key, record in keyed_records:
        idx += "%d\t%d\n" % (key, len(rec))
        rec += frame(record)
    return rec, idx


def idx_file(dims, data):
    return struct.pack(">I", 0x800 | len(dims)) + struct.pack(">%dI" % len(dims), *dims) + data


def test_the_reference_writes_the_golden_bytes():
    records = [b"ab" + MAGIC + b"cd", MAGIC + b"wxyz" + MAGIC + b"q", b"", b"abcd" + MAGIC]
    golden = bytes.fromhex(
        "0a23d7ce08000000" "61620a23d7ce6364"
        "0a23d7ce00000020"
        "0a23d7ce04000040" "7778797a"
        "0a23d7ce01000060" "71000000"
        "0a23d7ce00000000"
        "0a23d7ce04000020" "61626364"
        "0a23d7ce00000060")
    assert b"".join(frame(r) for r in records) == golden
    assert len(golden) == 76


# --- running the tool ----------------------------------------------------------------------------

def herd_rec(*args, cwd=None):
    return subprocess.run([HERD_REC, *[str(a) for a in args]], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


# Five 3x4 images; image 1 holds the magic word at the record's offsets 24 and 32 (aligned:
# escaped, the record split in three), image 3 at offset 26 (unaligned: left as it is).
IMAGES = [bytes((i * 12 + j) * 7 % 256 for j in range(12)) for i in range(5)]
IMAGES[1] = MAGIC + b"\x01\x02\x03\x04" + MAGIC
IMAGES[3] = b"\x09\x08" + MAGIC + b"\x07\x06\x05\x04\x03\x02"
LABELS = bytes([9, 0, 255, 3, 7])


@pytest.mark.parametrize("gzipped", [False, True])
def test_pack_idx_writes_one_image_record_per_image(tmp_path, gzipped):
    images = idx_file([5, 3, 4], b"".join(IMAGES))
    labels = idx_file([5], LABELS)
    opener = gzip.compress if gzipped else bytes
    suffix = ".gz" if gzipped else ""
    images_path = write(tmp_path / ("images" + suffix), opener(images))
    labels_path = write(tmp_path / ("labels" + suffix), opener(labels))
    result = herd_rec("pack", "--idx-images", images_path, "--idx-labels", labels_path,
                      "-o", tmp_path / "out.rec")
    assert result.returncode == 0, result.stderr
    rec, idx = rec_and_idx(
        (i, image_record(float(LABELS[i]), i, IMAGES[i])) for i in range(5))
    assert read(tmp_path / "out.rec") == rec
    assert read(tmp_path / "out.idx").decode() == idx
    assert "packed 5 records" in result.stdout
    assert str(tmp_path / "out.idx") in result.stdout


def test_pack_idx_takes_images_of_any_shape_and_an_empty_set(tmp_path):
    # 2 images of 2x2x3 (4 dimensions in all), then 0 images.
    pixels = bytes(range(24))
    write(tmp_path / "images", idx_file([2, 2, 2, 3], pixels))
    write(tmp_path / "labels", idx_file([2], b"\x04\x05"))
    assert herd_rec("pack", "--idx-images", tmp_path / "images", "--idx-labels",
                    tmp_path / "labels", "-o", tmp_path / "a.rec").returncode == 0
    rec, idx = rec_and_idx([(0, image_record(4.0, 0, pixels[:12])),
                            (1, image_record(5.0, 1, pixels[12:]))])
    assert read(tmp_path / "a.rec") == rec
    assert read(tmp_path / "a.idx").decode() == idx

    write(tmp_path / "none", idx_file([0, 28, 28], b""))
    write(tmp_path / "nolabels", idx_file([0], b""))
    result = herd_rec("pack", "--idx-images", tmp_path / "none", "--idx-labels",
                      tmp_path / "nolabels", "-o", tmp_path / "empty")
    assert result.returncode == 0, result.stderr
    assert read(tmp_path / "empty") == b""
    assert read(tmp_path / "empty.idx") == b""


def test_pack_idx_refuses_bad_files_naming_them(tmp_path):
    images = write(tmp_path / "images", idx_file([2, 2, 2], bytes(8)))
    labels = write(tmp_path / "labels", idx_file([3], b"\x01\x02\x03"))
    out = tmp_path / "out.rec"
    result = herd_rec("pack", "--idx-images", images, "--idx-labels", labels, "-o", out)
    assert result.returncode == 1
    assert "has 2 images" in result.stderr and "has 3 labels" in result.stderr
    assert str(images) in result.stderr and str(labels) in result.stderr

    result = herd_rec("pack", "--idx-images", labels, "--idx-labels", labels, "-o", out)
    assert result.returncode == 1
    assert str(labels) in result.stderr and "1 dimension" in result.stderr

    result = herd_rec("pack", "--idx-images", images, "--idx-labels", images, "-o", out)
    assert result.returncode == 1
    assert "magic number is 2051" in result.stderr and "expected 2049" in result.stderr

    truncated = write(tmp_path / "cut", idx_file([2, 2, 2], bytes(7)))
    result = herd_rec("pack", "--idx-images", truncated, "--idx-labels", labels, "-o", out)
    assert result.returncode == 1
    assert str(truncated) in result.stderr and "truncated" in result.stderr

    missing = tmp_path / "missing.gz"
    result = herd_rec("pack", "--idx-images", missing, "--idx-labels", labels, "-o", out)
    assert result.returncode == 1
    assert str(missing) in result.stderr and "does not exist" in result.stderr

    result = herd_rec("pack", "--idx-images", images, "--idx-labels", images,
                      "-o", tmp_path / "no" / "such" / "dir.rec")
    assert result.returncode == 1


def make_lst_tree(tmp_path):
    """Image files (one holding aligned magic words) and an .lst with one or several labels."""
    images = tmp_path / "images"
    (images / "sub").mkdir(parents=True)
    payloads = {
        "a.jpg": b"\xff\xd8\xff\xe0" + bytes(range(50)),
        "sub/b.png": b"\x89PNG" + MAGIC + b"xyz",
        "c.bin": b"",
        "sub/d e.bin": MAGIC * 3,
    }
    for name, data in payloads.items():
        write(images / name, data)
    lines = [(7, [1.0], "a.jpg"), (2, [0.5, 3.0, -2.25], "sub/b.png"), (10, [4.0], "c.bin"),
             (0, [2.0, 8.0], "sub/d e.bin")]
    text = "".join("%d\t%s\t%s\n" % (i, "\t".join(repr(x) for x in labels), path)
                   for i, labels, path in lines)
    return images, payloads, lines, text


@pytest.mark.parametrize("pack_label", [False, True])
def test_pack_lst_packs_each_file_in_list_order(tmp_path, pack_label):
    images, payloads, lines, text = make_lst_tree(tmp_path)
    lst = write(tmp_path / "list.lst", text.encode())
    args = ["pack", "--lst", lst, "--root", images, "-o", tmp_path / "out.rec"]
    result = herd_rec(*args, *(["--pack-label"] if pack_label else []))
    assert result.returncode == 0, result.stderr
    expected = []
    for index, labels, path in lines:
        several = labels if pack_label and len(labels) > 1 else None
        expected.append((index, image_record(labels[0], index, payloads[path], several)))
    rec, idx = rec_and_idx(expected)
    assert read(tmp_path / "out.rec") == rec
    assert read(tmp_path / "out.idx").decode() == idx


def test_pack_lst_finds_relative_paths_beside_the_list_by_default(tmp_path):
    images, payloads, lines, text = make_lst_tree(tmp_path)
    lst = write(images / "list.lst", text.encode())
    result = herd_rec("pack", "--lst", lst, "-o", tmp_path / "out.rec")
    assert result.returncode == 0, result.stderr
    rec, _ = rec_and_idx((i, image_record(labels[0], i, payloads[p])) for i, labels, p in lines)
    assert read(tmp_path / "out.rec") == rec
    # Absolute paths are taken as they are; fields are trimmed; blank lines skipped.
    absolute = " 5 \t 6.5 \t%s\r\n\n" % (images / "a.jpg")
    lst2 = write(tmp_path / "abs.lst", absolute.encode())
    assert herd_rec("pack", "--lst", lst2, "-o", tmp_path / "abs.rec").returncode == 0
    assert read(tmp_path / "abs.rec") == frame(image_record(6.5, 5, payloads["a.jpg"]))
    assert read(tmp_path / "abs.idx") == b"5\t0\n"


@pytest.mark.parametrize("line, message", [
    ("1\tx.bin\n", "line 2: has 2 tab-separated field(s)"),
    ("one\t1\tx.bin\n", "line 2: index 'one' is not a non-negative integer"),
    ("-3\t1\tx.bin\n", "line 2: index '-3' is not a non-negative integer"),
    ("3\t1.5x\tx.bin\n", "line 2: label 1 '1.5x' is not a number"),
    ("0\t1\tx.bin\n", "line 2: index 0 is given twice (first on line 1)"),
    ("4\t1\tmissing.bin\n", "line 2: "),
])
def test_pack_lst_refuses_a_bad_line_naming_it(tmp_path, line, message):
    write(tmp_path / "x.bin", b"12345")
    lst = write(tmp_path / "bad.lst", ("0\t1\tx.bin\n" + line).encode())
    result = herd_rec("pack", "--lst", lst, "-o", tmp_path / "out.rec")
    assert result.returncode == 1
    assert str(lst) + " " + message in result.stderr
    if "missing" in line:
        assert str(tmp_path / "missing.bin") in result.stderr


@pytest.mark.parametrize("args", [
    [],
    ["pack"],
    ["pack", "-o", "x.rec"],
    ["pack", "--idx-images", "i", "-o", "x.rec"],
    ["pack", "--idx-images", "i", "--idx-labels", "l", "--lst", "x.lst", "-o", "x.rec"],
    ["pack", "--lst", "x.lst", "--pack-label"],
    ["pack", "--idx-images", "i", "--idx-labels", "l", "--root", "r", "-o", "x.rec"],
    ["frobnicate"],
])
def test_a_wrong_command_line_exits_2(tmp_path, args):
    result = herd_rec(*args, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert os.listdir(tmp_path) == []


def test_help_exits_0():
    result = herd_rec("--help")
    assert result.returncode == 0 and "pack" in result.stdout
    result = herd_rec("pack", "--help")
    assert result.returncode == 0 and "--idx-images" in result.stdout
