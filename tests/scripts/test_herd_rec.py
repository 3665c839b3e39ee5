"""herd-rec against an independent reading of the RecordIO format.

Run by ctest as herd_rec (HERD_REC names the program), or by hand:
    HERD_REC=build/tools/herd_rec/herd-rec \
        /usr/bin/python3 -m pytest -q tests/scripts/test_herd_rec.py
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
    i = payload.find(MAGIC)
    while i >= 0:
        if i % 4 == 0:
            pieces.append(payload[start:i])
            start = i + 4
        i = payload.find(MAGIC, i + 1)
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
    frames, idx, offset = [], [], 0
    for key, record in keyed_records:
        idx.append("%d\t%d\n" % (key, offset))
        frames.append(frame(record))
        offset += len(frames[-1])
    return b"".join(frames), "".join(idx)


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


FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.path.isfile(os.path.join(FASHION_MNIST, "t10k-labels-idx1-ubyte.gz")),
                    reason="Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)")
def test_pack_idx_of_the_fashion_mnist_test_set(tmp_path):
    images_path = os.path.join(FASHION_MNIST, "t10k-images-idx3-ubyte.gz")
    labels_path = os.path.join(FASHION_MNIST, "t10k-labels-idx1-ubyte.gz")
    result = herd_rec("pack", "--idx-images", images_path, "--idx-labels", labels_path,
                      "-o", tmp_path / "test.rec")
    assert result.returncode == 0, result.stderr
    images = gzip.decompress(read(images_path))[16:]
    labels = gzip.decompress(read(labels_path))[8:]
    rec, idx = rec_and_idx(
        (i, image_record(float(labels[i]), i, images[i * 784:(i + 1) * 784]))
        for i in range(10000))
    assert read(tmp_path / "test.rec") == rec
    assert read(tmp_path / "test.idx").decode() == idx
    info = herd_rec("info", tmp_path / "test.rec")
    assert info.returncode == 0, info.stderr
    assert "records: 10000\n" in info.stdout
    assert "payload bytes: 7840000 (min 784, max 784, mean 784.0)\n" in info.stdout
    for label in range(10):
        assert "label %d: 1000\n" % label in info.stdout
    verify = herd_rec("verify", tmp_path / "test.rec", "--idx", tmp_path / "test.idx")
    assert verify.returncode == 0, verify.stderr


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
    # Nothing is left behind: a bad line stops pack before it writes, an unreadable file
    # removes what it began.
    assert not os.path.exists(tmp_path / "out.rec")
    assert not os.path.exists(tmp_path / "out.idx")


# --- info ----------------------------------------------------------------------------------------

def test_info_counts_records_splits_payloads_and_labels(tmp_path):
    write(tmp_path / "images", idx_file([5, 3, 4], b"".join(IMAGES)))
    write(tmp_path / "labels", idx_file([5], bytes([3, 9, 3, 3, 0])))
    assert herd_rec("pack", "--idx-images", tmp_path / "images", "--idx-labels",
                    tmp_path / "labels", "-o", tmp_path / "a.rec").returncode == 0
    result = herd_rec("info", tmp_path / "a.rec")
    assert result.returncode == 0, result.stderr
    # 5 records of 24 + 12 bytes; image 1's two aligned magic words split its record.
    size = len(read(tmp_path / "a.rec"))
    assert size == 4 * (8 + 36) + (8 + 24) + (8 + 4) + 8
    assert result.stdout == (
        "file: %s\n" % (tmp_path / "a.rec") +
        "bytes: %d\n" % size +
        "records: 5\n"
        "split records: 1 (2 magic words escaped)\n"
        "payload bytes: 60 (min 12, max 12, mean 12.0)\n"
        "label 0: 1\n"
        "label 3: 3\n"
        "label 9: 1\n")


def test_info_lists_several_labels_by_count_and_raw_records_whole(tmp_path):
    records = [image_record(0.5, 1, b"x" * 10), image_record(0, 2, b"", [1.0, 2.0, 3.0]),
               image_record(0, 3, b"yy", [4.0, 5.0, 6.0]), image_record(0, 4, b"z", [7.0, 8.0]),
               image_record(float("nan"), 5, MAGIC * 2)]
    write(tmp_path / "m.rec", b"".join(frame(r) for r in records))
    result = herd_rec("info", tmp_path / "m.rec")
    assert result.returncode == 0, result.stderr
    sizes = [10, 0, 2, 1, 8]
    assert result.stdout.split("\n")[3:] == [
        "split records: 1 (2 magic words escaped)",
        "payload bytes: 21 (min 0, max 10, mean 4.2)",
        "label 0.5: 1",
        "label nan: 1",
        "labels per record 2: 1",
        "labels per record 3: 2",
        ""]
    assert sum(sizes) == 21
    raw = herd_rec("info", "--raw", tmp_path / "m.rec")
    assert raw.returncode == 0, raw.stderr
    lengths = [len(r) for r in records]
    assert raw.stdout.split("\n")[2:] == [
        "records: 5",
        "split records: 1 (2 magic words escaped)",
        "record bytes: %d (min %d, max %d, mean %.1f)" % (
            sum(lengths), min(lengths), max(lengths), sum(lengths) / 5),
        ""]


def test_info_without_image_headers_needs_raw(tmp_path):
    write(tmp_path / "raw.rec", frame(b"\x00" * 24) + frame(b"short"))
    result = herd_rec("info", tmp_path / "raw.rec")
    assert result.returncode == 1
    assert "record at byte 32" in result.stderr and "--raw" in result.stderr
    result = herd_rec("info", "--raw", tmp_path / "raw.rec")
    assert result.returncode == 0
    assert "records: 2\n" in result.stdout
    assert "record bytes: 29 (min 5, max 24, mean 14.5)\n" in result.stdout
    empty = herd_rec("info", write(tmp_path / "empty.rec", b""))
    assert empty.returncode == 0
    assert "records: 0\n" in empty.stdout and "payload bytes: 0\n" in empty.stdout


# --- verify ---------------------------------------------------------------------------------------

RAW_RECORDS = [b"abc", MAGIC + b"wxyz" + MAGIC + b"q", b"", b"0123456789"]


def raw_file():
    frames = [frame(r) for r in RAW_RECORDS]
    heads = [sum(len(f) for f in frames[:i]) for i in range(len(frames))]
    return b"".join(frames), heads


def lrec(cflag, length):
    return struct.pack("<I", (cflag << 29) | length)


def test_verify_counts_a_good_file_and_checks_its_idx(tmp_path):
    good, heads = raw_file()
    rec = write(tmp_path / "good.rec", good)
    result = herd_rec("verify", rec)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "%s: OK, 4 records (1 split), %d bytes\n" % (rec, len(good))
    idx = write(tmp_path / "good.idx", "".join(
        "%d\t%d\n" % (key, head) for key, head in zip([10, 3, 7, 1], heads)).encode())
    result = herd_rec("verify", rec, "--idx", idx)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("%s: OK, 4 offsets, each a record's head\n" % idx)
    empty = herd_rec("verify", write(tmp_path / "empty.rec", b""))
    assert empty.returncode == 0
    assert "OK, 0 records (0 split), 0 bytes" in empty.stdout


# Each corruption of the file of RAW_RECORDS (heads at 0, 12, 44, 52; 72 bytes) and the offset
# of the part at fault: head 1 is a split record, its middle part at byte 20.
def corruptions():
    good, heads = raw_file()
    assert heads == [0, 12, 44, 52] and len(good) == 72

    def put(offset, data):
        return good[:offset] + data + good[offset + len(data):]

    return [
        ("cut in a part header", good[:heads[2] + 5], heads[2], "truncated"),
        ("cut in a part's data", good[:heads[3] + 11], heads[3], "past the end"),
        ("a length past the end", put(heads[3] + 4, lrec(0, (1 << 29) - 1)), heads[3],
         "past the end"),
        ("another word for the magic", put(heads[1], b"XXXX"), heads[1], "magic"),
        ("a split record's part broken", put(heads[1] + 8, b"XXXX"), heads[1] + 8, "magic"),
        ("a first part marked whole", put(heads[1] + 4, lrec(0, 0)), heads[1] + 8, "cflag 2"),
        ("a last part alone", put(heads[2] + 4, lrec(3, 0)), heads[2], "cflag 3"),
        ("a whole part inside a split record", put(heads[1] + 12, lrec(0, 4)), heads[1] + 8,
         "out of order"),
        ("3 bytes after the last record", good + b"abc", len(good), "truncated"),
        ("8 zero bytes after the last record", good + bytes(8), len(good), "magic"),
    ]


@pytest.mark.parametrize("name, data, offset, why", corruptions(),
                         ids=[c[0] for c in corruptions()])
def test_verify_names_the_first_bad_offset(tmp_path, name, data, offset, why):
    rec = write(tmp_path / "bad.rec", data)
    result = herd_rec("verify", rec)
    assert result.returncode == 1, result.stdout
    assert result.stdout == ""
    assert str(rec) in result.stderr
    assert "at byte %d:" % offset in result.stderr
    assert why in result.stderr


@pytest.mark.parametrize("idx, message", [
    ("0\t0\n1\t16\n", "key 1's offset 16 is not a record head of {rec} (the record around "
                        "it begins at byte 12)"),
    ("0\t0\n5\t20\n", "key 5's offset 20 is not a record head"),
    ("0\t0\n9\t72\n", "key 9's offset 72 is past the end of {rec} (72 bytes)"),
    ("0\t0\n1\t12 extra\n", "line 2"),
    ("0\t0\n\n0\t12\n", "line 3"),
])
def test_verify_idx_names_the_bad_entry(tmp_path, idx, message):
    good, _ = raw_file()
    rec = write(tmp_path / "good.rec", good)
    idx_path = write(tmp_path / "bad.idx", idx.encode())
    result = herd_rec("verify", rec, "--idx", idx_path)
    assert result.returncode == 1, result.stdout
    assert str(idx_path) in result.stderr
    assert message.format(rec=rec) in result.stderr


# --- unpack ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("pack_label", [False, True])
def test_pack_lst_unpack_pack_gives_the_same_file(tmp_path, pack_label):
    images, payloads, lines, text = make_lst_tree(tmp_path)
    lst = write(images / "list.lst", text.encode())
    flag = ["--pack-label"] if pack_label else []
    assert herd_rec("pack", "--lst", lst, *flag, "-o", tmp_path / "first.rec").returncode == 0
    result = herd_rec("unpack", tmp_path / "first.rec", "-o", tmp_path / "out" / "dir")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out" / "dir"
    names = ["00000000.jpg", "00000001.png", "00000002.bin", "00000003.bin"]
    assert sorted(os.listdir(out)) == names + ["first.lst"]
    for name, (_, _, path) in zip(names, lines):
        assert read(out / name) == payloads[path]
    expected_lst = "".join(
        "%d\t%s\t%s\n" % (index, "\t".join("%.9g" % x for x in
                                          (labels if pack_label and len(labels) > 1
                                           else labels[:1])), name)
        for (index, labels, _), name in zip(lines, names))
    assert read(out / "first.lst").decode() == expected_lst
    assert herd_rec("pack", "--lst", out / "first.lst", *flag,
                    "-o", tmp_path / "second.rec").returncode == 0
    assert read(tmp_path / "second.rec") == read(tmp_path / "first.rec")
    assert read(tmp_path / "second.idx") == read(tmp_path / "first.idx")


def test_unpack_of_an_idx_pack_packs_back_the_same(tmp_path):
    write(tmp_path / "images", idx_file([5, 3, 4], b"".join(IMAGES)))
    write(tmp_path / "labels", idx_file([5], LABELS))
    assert herd_rec("pack", "--idx-images", tmp_path / "images", "--idx-labels",
                    tmp_path / "labels", "-o", tmp_path / "a.rec").returncode == 0
    assert herd_rec("unpack", tmp_path / "a.rec", "-o", tmp_path / "u").returncode == 0
    for i in range(5):
        assert read(tmp_path / "u" / ("%08d.bin" % i)) == IMAGES[i]
    assert herd_rec("pack", "--lst", tmp_path / "u" / "a.lst", "-o",
                    tmp_path / "b.rec").returncode == 0
    assert read(tmp_path / "b.rec") == read(tmp_path / "a.rec")
    assert read(tmp_path / "b.idx") == read(tmp_path / "a.idx")


def test_unpack_raw_writes_whole_records(tmp_path):
    good, _ = raw_file()
    write(tmp_path / "r.rec", good)
    result = herd_rec("unpack", "--raw", tmp_path / "r.rec", "-o", tmp_path / "u")
    assert result.returncode == 0, result.stderr
    assert "unpacked 4 records" in result.stdout
    for i, record in enumerate(RAW_RECORDS):
        assert read(tmp_path / "u" / ("%08d.bin" % i)) == record
    assert read(tmp_path / "u" / "r.lst").decode() == "".join(
        "%d\t0\t%08d.bin\n" % (i, i) for i in range(4))


def test_unpack_stops_at_a_bad_record(tmp_path):
    good, heads = raw_file()
    write(tmp_path / "r.rec", good)
    result = herd_rec("unpack", tmp_path / "r.rec", "-o", tmp_path / "u")
    assert result.returncode == 1
    assert "record at byte 0" in result.stderr and str(tmp_path / "r.rec") in result.stderr
    write(tmp_path / "cut.rec", good[:heads[3] + 11])
    result = herd_rec("unpack", "--raw", tmp_path / "cut.rec", "-o", tmp_path / "v")
    assert result.returncode == 1
    assert "at byte %d:" % heads[3] in result.stderr
    write(tmp_path / "file", b"")
    result = herd_rec("unpack", tmp_path / "r.rec", "-o", tmp_path / "file")
    assert result.returncode == 1
    assert str(tmp_path / "file") in result.stderr


@pytest.mark.parametrize("args", [
    [],
    ["pack"],
    ["pack", "-o", "x.rec"],
    ["pack", "--idx-images", "i", "-o", "x.rec"],
    ["pack", "--idx-images", "i", "--idx-labels", "l", "--lst", "x.lst", "-o", "x.rec"],
    ["pack", "--lst", "x.lst", "--pack-label"],
    ["pack", "--idx-images", "i", "--idx-labels", "l", "--root", "r", "-o", "x.rec"],
    ["frobnicate"],
    ["info"],
    ["verify"],
    ["verify", "a.rec", "b.rec"],
    ["unpack", "a.rec"],
])
def test_a_wrong_command_line_exits_2(tmp_path, args):
    result = herd_rec(*args, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert os.listdir(tmp_path) == []


def test_help_exits_0():
    result = herd_rec("--help")
    assert result.returncode == 0 and "pack" in result.stdout
    for command in ("pack", "info", "verify", "unpack"):
        result = herd_rec(command, "--help")
        assert result.returncode == 0 and command in result.stdout
