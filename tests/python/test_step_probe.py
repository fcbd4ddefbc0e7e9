# SPDX-License-Identifier: Apache-2.0
"""bench/step_probe.py's reading of a profiler trace (device_time), on traces made here:
the model's stream found by its kernels' time, its gaps, the time other streams ran beside
it and how much longer its kernels ran then."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench"))
import step_probe  # noqa: E402


def ev(cat, name, stream, ts, dur):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur,
            "args": {"stream": stream}}


def test_model_stream_gaps_and_slowdown():
    events = [
        # the model's stream (7): conv alone at 0 and 100, beside a copy at 200 (15 us
        # against 10 alone), relu alone at 20 and 120; the step's span 0..215
        ev("kernel", "conv", 7, 0, 10), ev("kernel", "relu", 7, 20, 5),
        ev("kernel", "conv", 7, 100, 10), ev("kernel", "relu", 7, 120, 5),
        ev("kernel", "conv", 7, 200, 15),
        # another stream: a copy over conv's third run, a short kernel in a gap
        ev("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 30, 198, 20),
        ev("kernel", "transform", 31, 50, 8),
        # not device work: ignored
        {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "ts": 0, "dur": 500},
        {"ph": "i", "cat": "kernel", "name": "marker", "ts": 5},
    ]
    d = step_probe.device_time(events, steps=1)
    assert d["model_ms"] == 0.045  # 10 + 5 + 10 + 5 + 15 us
    assert d["span_ms"] == 0.215
    assert abs(d["gaps"] - (1 - 45 / 215)) < 1e-4
    assert abs(d["beside"] - 15 / 45) < 1e-4  # conv's third run, all of it
    assert d["beside_kernels"] == 1
    assert d["beside_slowdown"] == 1.5
    assert d["others"] == {"Memcpy DtoD": {"count_per_step": 1.0, "ms_per_step": 0.02},
                           "kernels": {"count_per_step": 1.0, "ms_per_step": 0.008}}


def test_partial_overlap_counts_time_not_the_kernel():
    events = [ev("kernel", "k", 1, 0, 100), ev("kernel", "k", 1, 200, 100),
              ev("kernel", "x", 2, 250, 20), ev("kernel", "x", 2, 260, 30)]
    d = step_probe.device_time(events, steps=2)
    # 40 us of k's second run had x beside it (250..290, two overlapping spans merged):
    # under half of the run, so it counts as beside time but not as a kernel run beside
    assert abs(d["beside"] - 40 / 200) < 1e-4
    assert d["beside_kernels"] == 0 and d["beside_slowdown"] is None
    assert d["model_ms"] == 0.1 and d["span_ms"] == 0.15
    assert d["others"]["kernels"]["count_per_step"] == 1.0


def test_no_kernels():
    assert step_probe.device_time([], steps=3) is None
    assert step_probe.device_time([ev("gpu_memcpy", "Memcpy HtoD", 1, 0, 5)], 3) is None
