"""The host half of JAX's input pipeline (backends/jax/loader.py: numpy and Pillow, no jax), on
tiny JPEGs in this process: batch assembly, the endless shuffled order, the same batches for
any number of threads, a file that does not decode skipped and counted."""
import numpy as np
import pytest
from PIL import Image

from backends.jax.loader import HostLoader, sample_numbers

SIZE, BATCH = 16, 4


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """8 JPEGs of 40x30, each a flat colour of its own, labels 0..3 (two files a class)."""
    root = tmp_path_factory.mktemp("jpegs")
    out = []
    for i in range(8):
        path = root / "{}.JPEG".format(i)
        Image.new("RGB", (40, 30), (30 * i, 255 - 30 * i, 100)).save(path, quality=95)
        out.append((str(path), i // 2))
    return out


def _batches(files, workers, count, ahead=2):
    loader = HostLoader(files, BATCH, SIZE, seed=5, workers=workers, ahead=ahead)
    try:
        return [loader.next() for _ in range(count)]
    finally:
        loader.close()


def test_sample_numbers_are_endless_reshuffled_epochs():
    it = sample_numbers(5, seed=3)
    first, second = [next(it) for _ in range(5)], [next(it) for _ in range(5)]
    assert sorted(first) == [0, 1, 2, 3, 4] and sorted(second) == [5, 6, 7, 8, 9]
    assert [n - 5 for n in second] != first  # each epoch its own order
    again = sample_numbers(5, seed=3)
    assert [next(again) for _ in range(5)] == first


def test_batches_are_uint8_nhwc_with_each_files_label_and_an_epoch_covers_every_file(files):
    batches = _batches(files, workers=2, count=4)  # 2 epochs of 8 files
    for images, labels, skipped in batches:
        assert (images.shape, images.dtype, labels.shape, labels.dtype, skipped) == (
            (BATCH, SIZE, SIZE, 3), np.uint8, (BATCH,), np.int32, 0)
    colours = {tuple(img[SIZE // 2, SIZE // 2]) for b in batches[:2] for img in b[0]}
    assert len(colours) == 8  # one flat colour per file: every file once in the first epoch
    for images, labels, _ in batches:
        for img, label in zip(images, labels):
            i = next(k for k, (path, _) in enumerate(files)
                     if np.abs(img[SIZE // 2, SIZE // 2].astype(int) - (30 * k, 255 - 30 * k, 100)).max() < 8)
            assert label == files[i][1]


def test_the_batches_do_not_depend_on_the_number_of_threads(files):
    one = _batches(files, workers=1, count=3, ahead=1)
    three = _batches(files, workers=3, count=3, ahead=3)
    for (a, la, _), (b, lb, _) in zip(one, three):
        assert np.array_equal(a, b) and np.array_equal(la, lb)


def test_a_file_that_does_not_decode_is_skipped_and_counted(files, tmp_path):
    bad = tmp_path / "bad.JPEG"
    bad.write_bytes(b"\xff\xd8 not really a JPEG")
    shard = [(str(bad), 0), files[7]]  # its place is taken by the next file, label and all
    images, labels, skipped = _batches(shard, workers=1, count=1)[0]
    assert skipped == 2 and labels.tolist() == [3, 3, 3, 3]  # 2 of the 4 draws hit the bad file
    assert np.abs(images[:, SIZE // 2, SIZE // 2].astype(int) - (210, 45, 100)).max() < 8
