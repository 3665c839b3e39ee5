"""herd.recordio: MXNet's RecordIO files from Python, a drop-in for mxnet.recordio.

    from herd import recordio          # was: from mxnet import recordio

    record = recordio.MXIndexedRecordIO("train.idx", "train.rec", "w")
    record.write_idx(0, recordio.pack(recordio.IRHeader(0, 3.0, 0, 0), image_bytes))
    record.close()

The .rec framing is herd's C++ data library (herd::data, through herd._native),
byte for byte what dmlc-core writes; the .idx text file and the image-record
header are handled here, as MXNet does. Needs no herd.init() and no mpirun.
Reading a broken file raises herd.Error naming the file and the byte offset; a
bad .idx line raises ValueError naming the file and the line. docs/data.md
describes the module and where it differs from MXNet's.
"""

import io
import numbers
import os
import struct
from collections import namedtuple
from multiprocessing import current_process

import numpy as np

from herd import _native

__all__ = [
    "IRHeader", "MXIndexedRecordIO", "MXRecordIO", "pack", "pack_img", "unpack", "unpack_img",
]

_native_recordio = _native.recordio


class MXRecordIO:
    """Reads or writes the records of one .rec file in order.

    flag 'r' reads (read() returns each record's bytes, then None), flag 'w'
    creates or truncates the file and appends with write(). The object pickles
    as MXNet's does: an open reader comes back open, at the first record. An
    open writer does not pickle (the copy would truncate the file being
    written); close it first.
    """

    def __init__(self, uri, flag):
        self.uri = os.fspath(uri)
        self.flag = flag
        self.handle = None
        self.writable = None
        self.pid = None
        self.is_open = False
        self.open()

    def open(self):
        """Opens the file: for 'w' a new, empty one; for 'r' at its first record."""
        if self.flag == "w":
            handle = _native_recordio.Writer(self.uri)
            self.writable = True
        elif self.flag == "r":
            handle = _native_recordio.Reader(self.uri)
            self.writable = False
        else:
            raise ValueError(
                f"herd.recordio: {self.uri}: the flag is 'r' or 'w', not {self.flag!r}")
        self.handle = handle
        self.pid = current_process().pid
        self.is_open = True

    def close(self):
        """Closes the file (a writer flushes first); closing twice does nothing."""
        if not self.is_open:
            return
        self.is_open = False
        handle, self.handle = self.handle, None
        inherited = self.pid != current_process().pid
        self.pid = None
        if self.writable and inherited:
            # A copy made by fork: what it holds unwritten is the opening process's
            # to write, and writing it here too would repeat those records.
            handle.abandon()
        else:
            handle.close()

    def reset(self):
        """Back to the first record; for a writer this truncates the file to empty."""
        self.close()
        self.open()

    def __del__(self):
        # A half-built object (open() raised) has no handle to close.
        if getattr(self, "is_open", False):
            try:
                self.close()
            except Exception:  # the interpreter may be shutting down
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __getstate__(self):
        if self.is_open and self.writable:
            raise TypeError(f"herd.recordio: {self.uri} is open for writing and does not pickle "
                            "(the copy would truncate it); close it first")
        state = dict(self.__dict__)
        state["handle"] = None
        state["pid"] = None
        return state

    def __setstate__(self, state):
        was_open = state["is_open"]
        self.__dict__.update(state)
        self.is_open = False
        if was_open:
            self.open()

    def _check_pid(self, allow_reset):
        """A handle opened by another process (inherited across fork) carries that
        process's place in the file: reopened where the caller moves to a place of its
        own (seek), refused where it would go on from the other process's place."""
        if self.pid == current_process().pid:
            return
        if allow_reset:
            self.reset()
        else:
            raise RuntimeError(f"herd.recordio: {self.uri} was opened by process {self.pid}; "
                               "reopen it (reset()) in this process before reading or writing")

    def _check_open(self, writing):
        if not self.is_open:
            raise ValueError(f"herd.recordio: {self.uri} is closed")
        if writing and not self.writable:
            raise OSError(f"herd.recordio: {self.uri} is open for reading (flag 'r'); "
                          "writing needs flag 'w'")
        if not writing and self.writable:
            raise OSError(f"herd.recordio: {self.uri} is open for writing (flag 'w'); "
                          "reading needs flag 'r'")

    def write(self, buf):
        """Appends one record: bytes, or any contiguous bytes-like object."""
        self._check_open(writing=True)
        self._check_pid(allow_reset=False)
        self.handle.write(buf)

    def read(self):
        """The next record as bytes, or None after the last one. Raises herd.Error
        naming the file and the byte offset where the framing is broken."""
        self._check_open(writing=False)
        self._check_pid(allow_reset=False)
        return self.handle.read()

    def tell(self):
        """The byte offset of the next record's head (what an .idx line records)."""
        if not self.is_open:
            raise ValueError(f"herd.recordio: {self.uri} is closed")
        return self.handle.tell()


class MXIndexedRecordIO(MXRecordIO):
    """A .rec file with its .idx: records written and read by key.

    The .idx holds one line per record, "key<TAB>offset". key_type converts
    the keys read from it (int by default; str or any type whose str() it
    turns back into the key). `keys` lists them in the file's order, `idx`
    maps each to its offset.
    """

    def __init__(self, idx_path, uri, flag, key_type=int):
        self.idx_path = os.fspath(idx_path)
        self.idx = {}
        self.keys = []
        self.key_type = key_type
        self.fidx = None
        # The .idx lines not yet written: kept here rather than in a buffered file so
        # that a copy of the object made by fork can drop them (see close()).
        self._idx_lines = []
        super().__init__(uri, flag)

    def open(self):
        super().open()
        self.idx = {}
        self.keys = []
        self._idx_lines = []
        try:
            if self.writable:
                self.fidx = open(self.idx_path, "wb", buffering=0)
            else:
                self._read_index()
        except BaseException:
            super().close()
            raise

    def _write_idx_lines(self, fidx):
        lines, self._idx_lines = self._idx_lines, []
        left = memoryview("".join(lines).encode("utf-8"))
        while left:  # an unbuffered file may take part of it
            left = left[fidx.write(left):]

    def _read_index(self):
        """Parses the .idx as MXNet's reader does (key, whitespace, offset), and also
        refuses what would read the wrong record later: a key given twice, an offset
        past the end of the .rec."""
        rec_size = self.handle.size
        with open(self.idx_path, "r", encoding="utf-8") as fidx:
            for number, line in enumerate(fidx, start=1):
                if not line.strip():
                    continue
                fields = line.rsplit(None, 1)
                where = f"RecordIO index '{self.idx_path}' line {number}"
                if len(fields) != 2:
                    raise ValueError(f"{where}: expected 'key<TAB>offset', got {line.rstrip()!r}")
                try:
                    key = self.key_type(fields[0].strip())
                    offset = int(fields[1])
                except ValueError as error:
                    raise ValueError(f"{where}: expected 'key<TAB>offset' with a "
                                     f"{getattr(self.key_type, '__name__', self.key_type)} key "
                                     f"and an integer offset, got {line.rstrip()!r} "
                                     f"({error})") from None
                # A record takes 8 bytes at least: none begins at the end of the file.
                if offset < 0 or offset >= rec_size:
                    raise ValueError(f"{where}: the offset {offset} of key {key!r} lies outside "
                                     f"{self.uri}, which has {rec_size} bytes")
                if key in self.idx:
                    raise ValueError(f"{where}: key {key!r} is given twice (first at offset "
                                     f"{self.idx[key]}, again at {offset})")
                self.idx[key] = offset
                self.keys.append(key)

    def close(self):
        if not self.is_open:
            return
        inherited = self.pid != current_process().pid
        try:
            super().close()
        finally:
            if self.fidx is not None:
                fidx, self.fidx = self.fidx, None
                try:
                    if not inherited:
                        self._write_idx_lines(fidx)
                finally:
                    self._idx_lines = []
                    fidx.close()

    def __getstate__(self):
        state = super().__getstate__()
        state["fidx"] = None
        state["_idx_lines"] = []
        return state

    def _offset(self, idx):
        self._check_open(writing=False)
        self._check_pid(allow_reset=True)
        try:
            return self.idx[idx]
        except KeyError:
            raise KeyError(f"RecordIO index '{self.idx_path}' has no key {idx!r}") from None

    def seek(self, idx):
        """Moves to the record of key `idx`: the next read() returns it."""
        offset = self._offset(idx)  # first: it may reopen the handle
        self.handle.seek(offset)

    def read_idx(self, idx):
        """The record of key `idx` (seek, then read, in one step: threads may share
        the reader); read() goes on with the record after it."""
        offset = self._offset(idx)  # first: it may reopen the handle
        try:
            return self.handle.read_at(offset)
        except _native.Error as error:
            # As the C++ IndexedRecordReader's: the key and the .idx, then the .rec's error.
            raise type(error)(f"key {idx!r} of RecordIO index '{self.idx_path}': {error}") from None

    def write_idx(self, idx, buf):
        """Appends the record `buf` under key `idx` and its line to the .idx."""
        self._check_open(writing=True)
        key = self.key_type(idx)
        if key in self.idx:
            raise ValueError(f"RecordIO index '{self.idx_path}': key {key!r} is written already "
                             f"(at offset {self.idx[key]})")
        offset = self.tell()
        self.write(buf)
        self._idx_lines.append(f"{key}\t{offset}\n")
        if len(self._idx_lines) >= 4096:
            self._write_idx_lines(self.fidx)
        self.idx[key] = offset
        self.keys.append(key)


IRHeader = namedtuple("IRHeader", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """The image-record header (MXNet's ImageRecordIO::Header).

flag: 0 for one label in `label`; k > 0 for k float32 labels after the header.
label: a number, or (from unpack with flag > 0) a numpy float32 array.
id: the image's id (im2rec: its index in the .lst). id2: reserved, 0.
"""

# uint32 flag, float32 label, uint64 id, uint64 id2: 24 bytes, little-endian as
# every file MXNet wrote.
_IR_FORMAT = "<IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)


def pack(header, s):
    """An image record: the header, then (for an array label) the labels as
    float32, then `s`. A number label goes in the header with flag 0; an array
    (or list) label sets flag to its size and label to 0, as MXNet's pack does."""
    header = IRHeader(*header)
    if not isinstance(s, bytes):
        s = memoryview(s).tobytes()
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        labels = np.asarray(header.label, dtype=np.float32)
        header = header._replace(flag=labels.size, label=0)
        s = labels.astype("<f4", copy=False).tobytes() + s
    return struct.pack(_IR_FORMAT, *header) + s


def unpack(s):
    """The header and the rest of an image record. With flag > 0 the header's
    label is a numpy float32 array of the flag labels (a read-only view of `s`),
    and the rest follows them. Raises ValueError for a record shorter than its
    header or than the labels its flag counts."""
    if len(s) < _IR_SIZE:
        raise ValueError(f"herd.recordio.unpack: the record has {len(s)} bytes, fewer than "
                         f"the {_IR_SIZE}-byte image-record header")
    header = IRHeader(*struct.unpack_from(_IR_FORMAT, s))
    if header.flag > 0:
        end = _IR_SIZE + 4 * header.flag
        if end > len(s):
            raise ValueError(f"herd.recordio.unpack: the header's flag counts {header.flag} "
                             f"float32 labels ({4 * header.flag} bytes) but the record has "
                             f"{len(s) - _IR_SIZE} bytes after its {_IR_SIZE}-byte header")
        labels = np.frombuffer(s, dtype="<f4", count=header.flag, offset=_IR_SIZE)
        header = header._replace(label=labels.astype(np.float32, copy=False))
        return header, s[end:]
    return header, s[_IR_SIZE:]


# pack_img and unpack_img encode with Pillow (Debian's python3-pil) where MXNet
# uses OpenCV, keeping OpenCV's conventions: colour arrays are BGR (BGRA with
# alpha), grey ones two-dimensional.
_IMAGE_FORMATS = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG"}


def _pillow():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("herd.recordio.pack_img and unpack_img need Pillow "
                          "(Debian: apt-get install python3-pil)") from None
    return Image


def pack_img(header, img, quality=95, img_fmt=".jpg"):
    """An image record holding `img` encoded as JPEG (quality 0-100) or PNG
    (`quality` is then the zlib level, clamped to 0-9 as OpenCV does).
    `img` is a uint8 array: height x width (grey), or height x width x 3 in
    BGR order, or x 4 in BGRA order (PNG only), as OpenCV's arrays."""
    Image = _pillow()
    pil_format = _IMAGE_FORMATS.get(str(img_fmt).lower())
    if pil_format is None:
        raise ValueError(f"herd.recordio.pack_img: img_fmt is one of {sorted(_IMAGE_FORMATS)}, "
                         f"not {img_fmt!r}")
    img = np.asarray(img)
    if img.dtype != np.uint8:
        raise TypeError(f"herd.recordio.pack_img: the image is uint8, not {img.dtype}")
    if img.ndim == 3 and img.shape[2] == 1:
        img = img[:, :, 0]
    if img.ndim == 3 and img.shape[2] in (3, 4):
        channels = [2, 1, 0, 3][:img.shape[2]]
        img = np.ascontiguousarray(img[:, :, channels])
    elif img.ndim != 2:
        raise ValueError(f"herd.recordio.pack_img: the image is height x width or height x "
                         f"width x 1, 3 or 4, not {img.shape}")
    if pil_format == "JPEG" and img.ndim == 3 and img.shape[2] == 4:
        raise ValueError("herd.recordio.pack_img: JPEG has no alpha channel; use img_fmt='.png'")
    options = {"quality": int(quality)} if pil_format == "JPEG" else {
        "compress_level": min(max(int(quality), 0), 9)}
    encoded = io.BytesIO()
    Image.fromarray(img).save(encoded, format=pil_format, **options)
    return pack(header, encoded.getvalue())


def unpack_img(s, iscolor=-1):
    """The header and the decoded image of an image record: iscolor -1 as
    stored (grey 2-D, colour BGR, with alpha BGRA), 0 grey, 1 colour BGR.
    Raises ValueError where the bytes after the header are no image Pillow reads."""
    Image = _pillow()
    header, encoded = unpack(s)
    try:
        image = Image.open(io.BytesIO(encoded))
        image.load()
    except Exception as error:
        raise ValueError(f"herd.recordio.unpack_img: the {len(encoded)} bytes after the header "
                         f"(id {header.id}) are no image Pillow can read: {error}") from None
    if iscolor == 0:
        image = image.convert("L")
    elif iscolor > 0 or image.mode not in ("L", "RGB", "RGBA", "I;16"):
        image = image.convert("RGBA" if iscolor < 0 and "A" in image.mode else "RGB")
    img = np.asarray(image)
    if img.ndim == 3:
        img = np.ascontiguousarray(img[:, :, [2, 1, 0, 3][:img.shape[2]]])
    return header, img
