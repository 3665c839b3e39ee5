"""herd.recordio's image records in one process: IRHeader, pack/unpack with one
label or many (MXNet's multi-label test, exact float32), and pack_img/unpack_img
(PNG exact, BGR order, JPEG close). Expected bytes are built with struct from the
header layout, expected pixels from the arrays the test encoded."""

import pickle
import struct

import numpy as np
import pytest

from herd import recordio


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
