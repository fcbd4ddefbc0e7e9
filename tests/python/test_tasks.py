# SPDX-License-Identifier: Apache-2.0
"""bench/tasks.py: its feed texts, the ragged fields' split into per-image targets, the
DataLoader's collate, and a CPU run of the three tasks' steps on the synthetic feed."""
import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, BENCH)
import tasks  # noqa: E402

torch = pytest.importorskip("torch")


def test_feeds():
    feeds = tasks.parse_feeds("stoker,synthetic,dataloader:workers=4,pipeline=float,"
                              "stoker:decoder=cpu,threads=3")
    assert [f["id"] for f in feeds] == ["stoker", "synthetic",
                                        "dataloader:workers=4,pipeline=float",
                                        "stoker:decoder=cpu,threads=3"]
    assert feeds[2]["kw"] == {"workers": 4, "pipeline": "float"}
    assert feeds[3]["kw"] == {"decoder": "cpu", "threads": 3}
    for bad, word in (("synthetic:threads=2", "synthetic"), ("dataloader:pipeline=pil",
                                                             "pipeline"),
                      ("dataloader:decoder=cpu", "takes"), ("stoker:fields=image", "fields"),
                      ("torch", "unknown"), ("stoker,stoker", "twice"), ("a=1", "follows")):
        with pytest.raises(ValueError, match=word):
            tasks.parse_feeds(bad)


class Ragged:
    """A ragged field as the binding describes it: .values and .offsets support DLPack."""

    def __init__(self, values, offsets, host=False):
        self.values, self.offsets = values, offsets
        if host:
            self.host_offsets = offsets.numpy()


@pytest.mark.parametrize("host", [False, True])
def test_split_by_offsets(host):
    off = torch.tensor([0, 2, 2, 5], dtype=torch.int64)
    info = {}
    assert tasks.ragged_host_offsets(torch, Ragged(torch.zeros(5, 4), off, host), info) == \
        [0, 2, 2, 5]
    assert ("no wait" in info["offsets_from"]) == host


def test_collate_tokens_give_embedding_bag_offsets():
    items = [(torch.zeros(3, 4, 4), torch.tensor([1, 3, 4, 2])),
             (torch.ones(3, 4, 4), torch.tensor([1, 2])),
             (torch.ones(3, 4, 4), torch.tensor([1, 3, 5, 14, 3, 6, 15, 2]))]
    x, (values, offsets) = tasks.Collate("contrastive")(items)
    assert x.shape == (3, 3, 4, 4)
    assert offsets.tolist() == [0, 4, 6, 14] and values.shape == (14,)
    bag = torch.nn.EmbeddingBag(20, 2, mode="sum", include_last_offset=True)
    with torch.no_grad():
        bag.weight.copy_(torch.arange(40, dtype=torch.float32).view(20, 2))
    out = bag(values, offsets)
    for i, (_, t) in enumerate(items):
        assert torch.equal(out[i], bag.weight[t].sum(0))
    x, targets = tasks.Collate("detection")([(torch.zeros(3, 4, 4), ("b", "c"))] * 2)
    assert targets == [("b", "c"), ("b", "c")]


def test_dataloader_feed_says_what_it_needs():
    try:
        from torchvision.transforms import v2  # noqa: F401
        from torchvision import tv_tensors  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="transforms.v2 and torchvision.tv_tensors"):
            tasks.need_v2(torch)
    else:
        assert tasks.need_v2(torch)[0] is v2


def test_cpu_run_of_every_task(tmp_path):
    pytest.importorskip("torchvision")
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, os.path.join(BENCH, "tasks.py"), "--device", "cpu",
                        "--feeds", "synthetic", "--size", "48", "--batch-size", "2",
                        "--steps", "1", "--warmup", "1", "--classes", "5", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(out.read_text())
    assert [(x["task"], x["feed"]) for x in r["rows"]] == [
        ("segmentation", "synthetic"), ("detection", "synthetic"),
        ("contrastive", "synthetic")]
    for run in r["runs"]:
        assert run["status"] == "ok" and run["samples"] == 2 and run["samples_per_s"] > 0
        assert run["input"]["shape"] == [2, 3, 48, 48]
        assert run["loss_first"] == run["loss_first"]  # not NaN
    det = next(x for x in r["runs"] if x["task"] == "detection")
    assert 1 <= det["rows_per_sample"] <= 8
    assert r["rows"][0]["x_synthetic"] == 1.0


def test_other_segmentation_and_detection_models(tmp_path):
    pytest.importorskip("torchvision")
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, os.path.join(BENCH, "tasks.py"), "--device", "cpu",
                        "--tasks", "segmentation,detection", "--feeds", "synthetic",
                        "--seg-model", "lraspp_mobilenet_v3_large",
                        "--det-model", "fasterrcnn_mobilenet_v3_large_320_fpn",
                        "--size", "48", "--batch-size", "2", "--steps", "1", "--warmup", "1",
                        "--classes", "5", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(out.read_text())
    assert all(run["status"] == "ok" for run in r["runs"]), r["runs"]
    assert "lraspp_mobilenet_v3_large" in r["meta"]["step"]
    assert "fasterrcnn_mobilenet_v3_large_320_fpn" in r["meta"]["step"]
