# SPDX-License-Identifier: Apache-2.0
"""torch.from_dlpack on stoker batches (skipped where PyTorch is not installed)."""
import gc

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import conftest as h  # noqa: E402
import stoker  # noqa: E402


def test_cpu_zero_copy(raw_ds):
    with stoker.Loader(raw_ds, 10, seed=2, device="cpu") as loader:
        for b in loader:
            t = torch.from_dlpack(b.data)
            assert t.device.type == "cpu" and t.dtype == torch.uint8
            assert t.data_ptr() == b.data.data_ptr()
            assert tuple(t.shape) == (b.count,) + h.RECORD_SHAPE
            assert list(h.record_id(t.numpy())) == list(b.indices)
            t2 = b.torch()
            assert t2.data_ptr() == t.data_ptr()
            del t, t2, b


@pytest.mark.parametrize("dtype, torch_dtype", [("float16", torch.float16),
                                                ("bfloat16", torch.bfloat16),
                                                ("float32", torch.float32),
                                                ("int64", torch.int64)])
def test_dtypes(tmp_path, dtype, torch_dtype):
    ref = torch.arange(30 * 5, dtype=torch.float32).reshape(30, 5).sub(70).div(4).to(torch_dtype)
    path = str(tmp_path / dtype)
    with stoker.Writer(path, kind="raw", dtype=dtype, shape=(5,), fsync=False) as w:
        for i in range(30):
            w.add(ref[i].view(torch.uint8).numpy(), i)
    with stoker.Loader(path, 8, seed=3, device="cpu") as loader:
        assert loader.stats()["device"] == -1
        for b in loader:
            t = torch.from_dlpack(b.data)
            assert t.dtype == torch_dtype
            assert torch.equal(t, ref[torch.from_numpy(b.indices)])


def test_tensors_keep_batches_alive(raw_ds):
    """Tensors from 3 batches kept across an epoch with depth 4; then all released."""
    with stoker.Loader(raw_ds, 8, depth=4, seed=9, device="cpu") as loader:
        window = []
        for epoch in range(2):
            for b in loader:
                window = (window + [(torch.from_dlpack(b.data), b.indices.copy())])[-3:]
                del b
                for t, ids in window:
                    assert list(h.record_id(t.numpy())) == list(ids)
        del window, t
        gc.collect()
        loader.set_epoch(0)


def test_default_rank_from_torch_distributed(raw_ds, tmp_path):
    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group("gloo", init_method="file://%s" % (tmp_path / "pg"), rank=0,
                            world_size=1)
    try:
        with stoker.Loader(raw_ds, 8, device="cpu") as loader:
            assert (loader.rank, loader.world_size) == (0, 1)
    finally:
        dist.destroy_process_group()


def cuda_usable():
    return torch.cuda.is_available() and stoker.capabilities()["cuda_devices"] > 0


@pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA device")
def test_cuda_batches(raw_ds):
    with stoker.Loader(raw_ds, 10, seed=1, device="cuda:0") as loader:
        b = next(iter(loader))
        if b.device < 0:
            pytest.skip("this build delivers host batches only")
        assert b.data.__dlpack_device__() == (2, 0)
        t = torch.from_dlpack(b.data)
        assert t.is_cuda and t.device.index == 0
        assert t.data_ptr() == b.data.data_ptr()
        got = t.cpu().numpy()
        for j, i in enumerate(b.indices):
            assert np.array_equal(got[j], h.record_array(int(i)))
        with pytest.raises(TypeError):
            b.numpy()
        del t, b
        seen = []
        loader.set_epoch(1)
        for b in loader:
            t = torch.from_dlpack(b.data)
            seen += [int(x) for x in h.record_id(t.cpu().numpy())]
            assert seen[-b.count:] == [int(x) for x in b.indices]
        assert sorted(seen) == list(range(103))


@pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA device")
def test_cuda_gpu_normalize_jpeg(tmp_path):
    """The JPEG pipeline normalised on the GPU (only uint8 crosses PCIe) equals the CPU one."""
    from PIL import Image
    path = str(tmp_path / "jpegs")
    rng = np.random.default_rng(3)
    with stoker.Writer(path, kind="jpeg", fsync=False) as w:
        for i in range(40):
            hh, ww = 40 + 5 * (i % 9), 60 + 7 * (i % 5)
            base = np.linspace(0, 255, ww, dtype=np.float32)[None, :, None]
            img = (base + rng.normal(0, 30, (hh, ww, 3))).clip(0, 255).astype(np.uint8)
            f = tmp_path / ("%d.jpg" % i)
            Image.fromarray(img).save(f, quality=90)
            w.add(f.read_bytes(), label=i % 3)
    # the normalisation is compared bit for bit: both sides decode on the CPU
    kw = dict(batch_size=8, seed=5, size=32, dtype="float16", decoder="cpu")
    with stoker.Loader(path, device="cpu", **kw) as cpu, \
            stoker.Loader(path, device="cuda:0", gpu_normalize=True, **kw) as gpu:
        n = 0
        for a, b in zip(cpu, gpu):
            assert b.device == 0
            ta, tb = torch.from_dlpack(a.data), torch.from_dlpack(b.data)
            assert tb.is_cuda and tb.dtype == torch.float16 and tb.shape == ta.shape
            assert list(a.indices) == list(b.indices)
            diff = (tb.cpu().float() - ta.float()).abs()
            assert float(diff.max()) <= 2 ** -8 * (1 + float(ta.float().abs().max()))
            n += a.count
        assert n == 40


def test_batch_unpacks_as_tensors(raw_ds):
    with stoker.Loader(raw_ds, 10, seed=2, device="cpu") as loader:
        for x, y in loader:
            assert isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
            assert x.dtype == torch.uint8 and y.dtype == torch.int64
            ids = h.record_id(x.numpy())
            assert y.tolist() == [h.label_of(int(i)) for i in ids]
        b = next(iter(loader))
        x, y = b
        assert x.data_ptr() == b.data.data_ptr()  # zero copy


def test_dataloader_over_the_adapter(raw_ds):
    """DataLoader(LoaderDataset(loader), batch_size=None): len, epochs in order (each
    iteration the next epoch, set_epoch to choose), the loader's records, state_dict."""
    import stoker.torch as st
    with stoker.Loader(raw_ds, 8, seed=9, device="cpu") as ref:
        want = [[list(b.indices) for b in ref] for _ in range(3)]
    with stoker.Loader(raw_ds, 8, seed=9, device="cpu") as loader:
        data = st.LoaderDataset(loader)
        assert isinstance(data, torch.utils.data.IterableDataset)
        dl = torch.utils.data.DataLoader(data, batch_size=None)
        assert len(dl) == len(data) == 13
        got = []
        for epoch in range(2):  # no set_epoch: each iteration is the next epoch
            seen = []
            for x, y in dl:
                assert isinstance(x, torch.Tensor) and x.shape[1:] == h.RECORD_SHAPE
                ids = [int(i) for i in h.record_id(x.numpy())]
                assert y.tolist() == [h.label_of(i) for i in ids]
                seen.append(ids)
            got.append(seen)
        assert got == want[:2]
        del x, y  # the comprehensions below keep their own: these would hold a slot
        data.set_epoch(0)
        assert [[int(i) for i in h.record_id(x.numpy())] for x, _ in dl] == want[0]
        # resume mid-epoch through the adapter's state
        data.set_epoch(2)
        it = iter(dl)
        for _ in range(4):
            next(it)
        del it
        ck = data.state_dict()
    with stoker.Loader(raw_ds, 8, seed=9, device="cpu") as loader:
        data = st.LoaderDataset(loader)
        data.load_state_dict(ck)
        data.set_epoch(2)
        dl = torch.utils.data.DataLoader(data, batch_size=None)
        assert [[int(i) for i in h.record_id(x.numpy())] for x, _ in dl] == want[2][4:]


def test_dataloader_over_the_adapter_with_fields(tmp_path):
    """A data set of several fields: the adapter yields every field in schema order, as the
    loader unpacks it, a ragged field as a TensorPair."""
    import stoker.torch as st
    fields = {"img": {"kind": "raw", "dtype": "uint8", "shape": (2, 3)},
              "tokens": {"kind": "array", "dtype": "int64", "shape": (None,)},
              "weight": "float32", "label": "int64"}
    with stoker.Writer(tmp_path / "f", fields=fields, fsync=False) as w:
        for i in range(10):
            w.add({"img": np.full((2, 3), i, np.uint8), "tokens": np.arange(i % 4) + 10 * i,
                   "weight": i / 4, "label": 100 + i})
    with stoker.Loader(tmp_path / "f", 4, device="cpu", shuffle=False) as loader:
        dl = torch.utils.data.DataLoader(st.LoaderDataset(loader), batch_size=None)
        seen = []
        for img, tokens, weight, label in dl:
            assert isinstance(tokens, stoker.TensorPair)
            ids = img[:, 0, 0].tolist()
            seen += ids
            assert label.tolist() == [100 + i for i in ids]
            assert weight.tolist() == [i / 4 for i in ids]
            assert [t.tolist() for t in tokens.split()] == \
                [list(range(10 * i, 10 * i + i % 4)) for i in ids]
        assert seen == list(range(10))


def test_dataloader_workers_are_refused(raw_ds):
    import stoker.torch as st
    with stoker.Loader(raw_ds, 8, device="cpu") as loader:
        dl = torch.utils.data.DataLoader(st.LoaderDataset(loader), batch_size=None,
                                         num_workers=1)
        with pytest.raises(RuntimeError, match="num_workers=0"):
            next(iter(dl))
    with pytest.raises(TypeError, match="stoker.Loader"):
        st.LoaderDataset(raw_ds)
