"""What the herd.recordio tests share: the reference's golden bytes, frame() (a
separate implementation of dmlc-core's framing rules, written from the format
description, that expected bytes are computed with) and short ways to write and
read a whole file. Imported by the test_recordio*.py files, which pytest runs
with this folder on sys.path."""

import struct

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
