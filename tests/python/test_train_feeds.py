# SPDX-License-Identifier: Apache-2.0
"""bench/train.py's feed texts: a synthetic feed with env.NAME keys (the script's
TRAIN_CUDA_SCHED), refused keywords, titles that tell two synthetic feeds apart."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench"))
import train  # noqa: E402


def test_synthetic_takes_env_keys():
    feeds = train.parse_feeds(["synthetic,synthetic:env.TRAIN_CUDA_SCHED=yield,"
                               "default,stoker:env.TRAIN_CUDA_SCHED=yield,env.STOKER_X=1"])
    assert [f["id"] for f in feeds] == [
        "synthetic", "synthetic:env.TRAIN_CUDA_SCHED=yield", "default",
        "stoker:env.TRAIN_CUDA_SCHED=yield,env.STOKER_X=1"]
    assert feeds[1]["kind"] == "synthetic" and feeds[1]["kw"] == {}
    assert feeds[1]["env"] == {"TRAIN_CUDA_SCHED": "yield"}
    assert feeds[3]["env"] == {"TRAIN_CUDA_SCHED": "yield", "STOKER_X": "1"}
    titles = [train.feed_title(f, 16) for f in feeds]
    assert len(set(titles)) == len(titles), titles
    assert titles[1] == "synthetic (one batch on the device) (env.TRAIN_CUDA_SCHED=yield)"


@pytest.mark.parametrize("text", ["synthetic:threads=3", "synthetic,threads=3",
                                  "synthetic:env.A=1,decoder=cpu"])
def test_synthetic_refuses_loader_keywords(text):
    with pytest.raises(ValueError, match="synthetic"):
        train.parse_feeds([text])


def test_cuda_sched_names():
    assert sorted(train.CUDA_SCHED) == ["auto", "blocking", "spin", "yield"]
    with pytest.raises(ValueError, match="TRAIN_CUDA_SCHED=fast"):
        train.set_cuda_sched(None, None, "fast")  # refused before any CUDA call
