# SPDX-License-Identifier: Apache-2.0
"""What a Loader runs with, as the library resolved it (stoker_loader_get_int): its
properties agree with the batches it delivers and with its statistics, also after a state
with other options was restored; the names its options take are the library's, in any
case and with the library's aliases."""
import pytest

import stoker
from test_loader import write_patterns


def test_resolved_options_of_an_image_loader(tmp_path):
    path = write_patterns(tmp_path)
    with stoker.Loader(path, 2, device="cpu", threads=2, transform="eval", size=48,
                       mean=(0.5, 0.25, 0.125), std=(2.0, 1.0, 0.5)) as loader:
        b = next(iter(loader))
        st = loader.stats()
        assert (loader.threads, loader.depth, loader.backend, loader.simd) == \
            (st["threads"], st["depth"], st["backend"], st["simd"])
        assert loader.device == "cpu" == b.data.device
        assert (loader.transform, loader.size, loader.layout) == ("eval", 48, "nchw")
        assert b.shape == (2, 3, 48, 48) and loader.dtype == b.dtype
        assert loader.resize == round(48 * 256 / 224)  # the documented default
        assert (loader.mean, loader.std) == ((0.5, 0.25, 0.125), (2.0, 1.0, 0.5))
        assert (loader.batch_size, loader.seed, loader.shuffle, loader.drop_last) == \
            (2, 0, True, False)
        assert (loader.order, loader.on_corrupt, loader.rank, loader.world_size) == \
            ("records", "error", 0, 1)
        for name in ("dct", "antialias", "resampler", "dct_scale"):
            assert isinstance(getattr(loader, name), str), name
        del b
    with stoker.Loader(path, 2, device="cpu", size=40, resize=50, layout="NHWC",
                       dtype="float32") as loader:
        b = next(iter(loader))
        assert (loader.transform, loader.size, loader.resize, loader.layout) == \
            ("train", 40, 50, "nhwc")
        assert b.shape == (2, 40, 40, 3) and loader.dtype == b.dtype == "float32"
        del b


def test_resolved_options_of_raw_records(raw_ds):
    with stoker.Loader(raw_ds, 8, device="cpu", seed=2 ** 64 - 1, shuffle=False,
                       drop_last=True, order="blocks", on_corrupt="skip") as loader:
        b = next(iter(loader))
        assert loader.transform == "none" and loader.dtype == b.dtype == "uint8"
        for name in ("size", "resize", "layout", "dct", "antialias", "resampler", "dct_scale",
                     "mean", "std"):
            assert getattr(loader, name) is None, name  # no image pipeline runs
        assert (loader.seed, loader.shuffle, loader.drop_last, loader.order) == \
            (2 ** 64 - 1, False, True, "blocks")
        assert loader.on_corrupt == "skip"
        del b
    loader.close()
    for name in ("seed", "size", "dtype", "device", "threads"):
        with pytest.raises(ValueError, match="closed"):
            getattr(loader, name)
    assert loader.batch_size == 8 and loader.depth >= 1  # kept from create


def test_option_names_are_the_librarys(tmp_path, raw_ds):
    path = write_patterns(tmp_path)
    for given, name in (("islow", "islow"), ("ISLOW", "islow"), ("accurate", "islow"),
                        ("fast", "ifast"), ("IFast", "ifast")):
        with stoker.Loader(path, 2, device="cpu", dct=given) as loader:
            assert loader.dct == name, given
    for given, name in (("NCHW", "nchw"), ("nhwc", "nhwc")):
        with stoker.Loader(path, 2, device="cpu", layout=given) as loader:
            assert loader.layout == name
    with stoker.Loader(path, 2, device="cpu", dtype="half") as loader:
        assert loader.dtype == "float16"
    with stoker.Loader(raw_ds, 8, device="cpu", backend="PREAD") as loader:
        assert loader.backend == loader.stats()["backend"] == "pread"
    # "hdf5" names a back-end that is only ever reported: not one to ask for
    with pytest.raises(ValueError, match="backend must be one of auto, io_uring, pread"):
        stoker.Loader(raw_ds, 8, device="cpu", backend="hdf5")
    with pytest.raises(ValueError, match="dct must be one of ifast, islow, got 'slow'"):
        stoker.Loader(path, 2, device="cpu", dct="slow")



@pytest.mark.parametrize("layout", ["fletcher32", "vlen", "userblock", "contiguous"])
def test_backend_is_the_one_in_use(tmp_path, layout):
    """loader.backend is the back-end that reads the records, as stats() says: "hdf5" where
    libhdf5 reads them (fletcher32 chunks, variable-length records, a file with a user
    block), the reader's own where stoker maps the file, whatever the reader would be."""
    h5py = pytest.importorskip("h5py")
    import numpy as np
    if not stoker.capabilities()["hdf5"]:
        pytest.skip("library built without HDF5")
    path = str(tmp_path / (layout + ".h5"))
    imgs = np.arange(8 * 4 * 4 * 3, dtype=np.uint8).reshape(8, 4, 4, 3)
    with h5py.File(path, "w", userblock_size=1024 if layout == "userblock" else 0) as f:
        if layout == "fletcher32":
            f.create_dataset("images", data=imgs, chunks=(2, 4, 4, 3), fletcher32=True)
        elif layout == "vlen":
            d = f.create_dataset("images", (8,), dtype=h5py.vlen_dtype(np.uint8))
            for i in range(8):
                d[i] = imgs[i].reshape(-1)[:i + 1]
        else:
            f.create_dataset("images", data=imgs)
    with stoker.Loader(path, 4, device="cpu", threads=1) as loader:
        want = "hdf5" if layout != "contiguous" else loader.stats()["backend"]
        assert loader.backend == loader.stats()["backend"] == want
        assert len(next(iter(loader))) == 4  # and so it stays while batches flow
        assert loader.backend == loader.stats()["backend"] == want
    if layout == "contiguous":
        assert want in ("io_uring", "pread")


def test_state_dict_after_restore_reports_the_restored_state(raw_ds):
    with stoker.Loader(raw_ds, 8, device="cpu", seed=11, shuffle=False,
                       drop_last=True) as a:
        next(iter(a))
        saved = a.state_dict()
    with stoker.Loader(raw_ds, 8, device="cpu", seed=999) as b:
        b.load_state_dict(saved)  # adopts the state's seed, shuffle and drop_last
        again = b.state_dict()
        assert again == saved
        assert (b.seed, b.shuffle, b.drop_last) == (11, False, True)
        b.load_state_dict(again)
        with pytest.raises(ValueError, match="seed"):
            b.load_state_dict(dict(again, seed=999))
        assert b.state_dict() == saved  # a refused state_dict leaves the loader as it was


def test_max_cache_bounds_the_page_cache_and_reads_back(raw_ds):
    # 103 records of 192 bytes: a bound of 4 KiB makes the data set "larger than the cache",
    # read dropping its pages behind the reader
    with stoker.Loader(raw_ds, 8, device="cpu", max_cache=4096) as loader:
        assert loader.max_cache == 4096
        assert sum(len(b) for b in loader) == 103  # one epoch
        assert loader.stats()["dropped_bytes"] > 0
    # the default: half the memory available, far more than this data set
    with stoker.Loader(raw_ds, 8, device="cpu") as loader:
        assert loader.max_cache > 103 * 192
        assert sum(len(b) for b in loader) == 103
        assert loader.stats()["dropped_bytes"] == 0
    # 0 is the default, as the options table says; below it the table's range is named
    with stoker.Loader(raw_ds, 8, device="cpu", max_cache=0) as loader:
        assert loader.max_cache > 103 * 192
    with pytest.raises(ValueError, match="option max_cache = -1 is out of range: 0.."):
        stoker.Loader(raw_ds, 8, device="cpu", max_cache=-1)
    with pytest.raises(TypeError, match="max_cache must be an int"):
        stoker.Loader(raw_ds, 8, device="cpu", max_cache=True)


@pytest.mark.parametrize("name, value, want", [
    ("threads", 10000, "option threads = 10000 is out of range: 0..1024"),
    ("batch_size", 2 ** 25, "option batch_size = 33554432 is out of range: 1..16777216"),
    ("size", 70000, "option size = 70000 is out of range: 0..65535"),
])
def test_an_option_out_of_range_names_the_range(raw_ds, name, value, want):
    with pytest.raises(ValueError) as e:
        stoker.Loader(raw_ds, **{"batch_size": 8, "device": "cpu", name: value})
    assert want in str(e.value)


def test_zero_is_the_default_where_the_table_says_so(raw_ds):
    with stoker.Dataset(raw_ds, block_size=0, fetch_transfers=0) as ds:
        assert len(ds) > 0


def test_image_option_errors_give_names_and_the_reason(raw_ds):
    with pytest.raises(stoker.StokerError) as e:
        stoker.Loader(raw_ds, 8, device="cpu", transform="eval")
    msg = str(e.value)
    assert "raw records take no image transform (eval)" in msg, msg
    assert "not supported by this build or host" not in msg, msg


def test_the_binding_takes_the_tables_ranges_as_stoker_bench_does(raw_ds):
    # threads 0 is the default (the table's range starts at 0), as --threads 0 is
    with stoker.Loader(raw_ds, 8, device="cpu", threads=0) as loader:
        assert loader.threads >= 1
    # the seed is 64 bits, 0 to 2**64 - 1, as --seed takes it; a negative one is refused
    with stoker.Loader(raw_ds, 8, device="cpu", seed=2 ** 64 - 1) as loader:
        assert loader.seed == 2 ** 64 - 1
    with pytest.raises(ValueError, match="seed must be >= 0"):
        stoker.Loader(raw_ds, 8, device="cpu", seed=-1)
