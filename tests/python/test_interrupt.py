# SPDX-License-Identifier: Apache-2.0
"""Ctrl-C while a Loader works (issue 29): a real SIGINT, whose KeyboardInterrupt Python
raises at its next check for signals, which may come after the library has handed a batch
out but before the binding has wrapped it. After such an interrupt the loop goes on: the
interrupted batch is delivered by the next call (a new ``for`` loop continues the epoch),
``position`` and ``state_dict()`` do not count it until then, and ``set_epoch`` and
``load_state_dict`` work. Over any number of interrupts the batches delivered are exactly
those of an uninterrupted run, in its order.

The loader is slowed down (one worker decoding JPEGs) so that the consumer waits in the
library most of the time, where a signal lands most often."""
import io
import os
import random
import signal
import threading
import time

import numpy as np
import pytest

import stoker

N = 96


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """96 distinct 400x300 JPEGs (about 1.5 ms each to decode and resize here)."""
    from PIL import Image
    path = str(tmp_path_factory.mktemp("interrupt") / "jpegs")
    y, x = np.mgrid[0:300, 0:400]
    with stoker.Writer(path, kind="jpeg", fsync=False) as w:
        for i in range(N):
            img = np.stack([(x * (i % 7 + 1) + y * i) % 256, (x ^ (y + i)) % 256,
                            (y * 5 + i) % 256], -1)
            buf = io.BytesIO()
            Image.fromarray(img.astype(np.uint8)).save(buf, "JPEG", quality=90)
            w.add(buf.getvalue(), i % 5)
    return path


def make(path, batch_size=4, **kw):
    return stoker.Loader(path, batch_size, threads=1, transform="eval", size=32,
                         device="cpu", seed=5, **kw)


def batches(loader, epochs):
    """(epoch, position, ids) of every batch of `epochs` epochs from epoch 0."""
    out = []
    for e in range(epochs):
        loader.set_epoch(e)
        out += [(b.epoch, b.position, b.indices.tolist()) for b in loader]
    return out


def reference(path, epochs, **kw):
    with make(path, **kw) as loader:
        return batches(loader, epochs)


@pytest.fixture
def main_thread():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are handled in the main thread only")
    old = signal.getsignal(signal.SIGINT)
    yield threading.main_thread().ident
    signal.signal(signal.SIGINT, old)


def interrupt_during(call, ident, delay):
    """Calls call() while a SIGINT reaches thread `ident` (the main thread) after `delay`
    seconds. Returns (result, True) when the interrupt stopped call, else (result, False)
    after the interrupt has landed elsewhere (the call returned first)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    go = threading.Event()
    t = threading.Thread(target=lambda: (go.wait(), time.sleep(delay),
                                         signal.pthread_kill(ident, signal.SIGINT)))
    result, started, stopped = None, False, False
    t.start()
    try:
        go.set()
        started = True
        result = call()
        while t.is_alive():  # the signal lands here
            t.join(0.01)
        time.sleep(0.05)
    except KeyboardInterrupt:
        stopped = started and result is None
    t.join()
    return result, stopped


def test_interrupt_while_waiting_delivers_that_batch_next(jpegs, main_thread):
    """One SIGINT while next() waits for a slow batch (48 JPEGs on one worker): the
    KeyboardInterrupt goes through, nothing is counted as delivered, and the next call
    delivers that very batch; then the same with set_epoch and load_state_dict after the
    interrupt, which release the batch the interrupted call got."""
    ref = reference(jpegs, 2, batch_size=N // 2)
    with make(jpegs, batch_size=N // 2) as loader:
        got, stopped = interrupt_during(lambda: next(iter(loader)), main_thread, 0.015)
        assert stopped, "the first batch came before the signal: the loader is too quick"
        assert (loader.epoch, loader.position) == (0, 0)
        saved = loader.state_dict()
        assert (saved["epoch"], saved["position"]) == (0, 0)
        b = next(iter(loader))  # a new loop goes on with the interrupted batch
        assert (b.epoch, b.position, b.indices.tolist()) == ref[0]
        assert loader.position == 1
        del b

        # interrupted again (set_epoch drops what was read ahead, so next() waits), then
        # set_epoch: the batch the library handed out is let go
        loader.set_epoch(0)
        got, stopped = interrupt_during(lambda: next(iter(loader)), main_thread, 0.015)
        assert stopped and got is None
        assert loader.position == 0 and loader.state_dict()["position"] == 0
        loader.set_epoch(1)
        b = next(iter(loader))
        assert (b.epoch, b.position, b.indices.tolist()) == ref[2]
        del b

        # interrupted again, then load_state_dict: back to the state saved above
        loader.set_epoch(1)
        got, stopped = interrupt_during(lambda: next(iter(loader)), main_thread, 0.015)
        assert stopped and got is None
        loader.load_state_dict(saved)
        assert [(b.epoch, b.position, b.indices.tolist()) for b in loader] == ref[:2]
        assert [(b.epoch, b.position, b.indices.tolist()) for b in loader] == ref[2:]


class Interrupter:
    """Sends SIGINT at random moments (0 to 2 x `gap` seconds apart) until stopped: to the
    main thread (pthread_kill), or to the process (kill: the kernel picks the thread, which
    may be one of the loader's). The handler raises KeyboardInterrupt, as Python's own
    does, while `armed`; the test disarms it in its own bookkeeping, where an interrupt
    would only stop the test."""

    def __init__(self, ident, gap, seed, to_process):
        self.ident, self.gap, self.rng, self.to_process = ident, gap, random.Random(seed), to_process
        self.armed = [False]
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _handler(self, signum, frame):
        if self.armed[0]:
            raise KeyboardInterrupt

    def _run(self):
        while not self.stop.wait(self.rng.uniform(0, 2 * self.gap)):
            if self.to_process:
                os.kill(os.getpid(), signal.SIGINT)
            else:
                signal.pthread_kill(self.ident, signal.SIGINT)
            self.sent += 1

    def __enter__(self):
        signal.signal(signal.SIGINT, self._handler)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.armed[0] = False
        self.stop.set()
        self.thread.join()


def run_interrupted(loader, epochs, intr):
    """Every batch of `epochs` epochs, going on after each KeyboardInterrupt with a new
    loop; returns the (epoch, position, ids) delivered, the number of interrupts, and the
    state_dict() taken after some of them, by the number of batches delivered before."""
    got, states, interrupts = [], {}, 0
    armed = intr.armed
    for epoch in range(epochs):
        while True:
            try:
                armed[0] = True
                loader.set_epoch(epoch)  # a no-op once the previous epoch has ended
                break
            except KeyboardInterrupt:
                armed[0] = False
        while True:
            try:
                armed[0] = True
                for batch in loader:
                    got.append((batch.epoch, batch.position, batch.indices))
                armed[0] = False
                break
            except KeyboardInterrupt:
                armed[0] = False
                interrupts += 1
                if len(states) < 6 and len(got) not in states:
                    states[len(got)] = loader.state_dict()
    return [(e, p, ids.tolist()) for e, p, ids in got], interrupts, states


@pytest.mark.parametrize("target", ["main thread", "process"])
def test_random_interrupts_change_nothing_delivered(jpegs, main_thread, target):
    """SIGINTs at random moments over four epochs: after each the loop is started again.
    The batches delivered are the uninterrupted run's, in order; a state_dict() taken after
    an interrupt resumes exactly; set_epoch works at the end (no slot was left held)."""
    epochs = 4
    ref = reference(jpegs, epochs)
    with make(jpegs) as loader:
        with Interrupter(main_thread, 0.004, 7, target == "process") as intr:
            got, interrupts, states = run_interrupted(loader, epochs, intr)
        assert intr.sent >= 20 and interrupts >= 10, (intr.sent, interrupts)
        assert [g[:2] for g in got] == [r[:2] for r in ref]
        assert got == ref
        loader.set_epoch(0)
        assert [(b.epoch, b.position, b.indices.tolist()) for b in loader] == \
            ref[:len(loader)]
    assert states
    for n, state in states.items():
        with make(jpegs) as resumed:
            resumed.load_state_dict(state)
            following = []
            while len(following) < 2 and n + len(following) < len(ref):
                try:
                    b = next(resumed)
                except StopIteration:  # saved at an epoch's end: the next call goes on
                    continue
                following.append((b.epoch, b.position, b.indices.tolist()))
                del b
            assert following == ref[n:n + 2], n


def test_an_interrupt_on_either_side_of_the_library_call(jpegs, monkeypatch):
    """KeyboardInterrupt raised just before the library's take runs, and just after it
    returns (a batch, or the epoch's end), at the points a signal may land: the next call
    goes on as if nothing had happened, and meanwhile position and state_dict() stand where
    they stood before the interrupted call."""
    import stoker.loader as sl
    real = sl._TAKE
    ref = reference(jpegs, 2)
    per_epoch = len(ref) // 2

    def before(*args):
        raise KeyboardInterrupt

    def after(*args):
        real(*args)
        raise KeyboardInterrupt

    got = []
    with make(jpegs) as loader:
        it = iter(loader)
        for k in range(per_epoch):
            mode = (before, after, None)[k % 3]
            if mode is not None:
                pos, state = loader.position, loader.state_dict()
                monkeypatch.setattr(sl, "_TAKE", mode)
                with pytest.raises(KeyboardInterrupt):
                    next(it)
                monkeypatch.setattr(sl, "_TAKE", real)
                assert (loader.position, loader.state_dict()) == (pos, state), k
                it = iter(loader)  # the interrupted loop is over; a new one goes on
            b = next(it)
            got.append((b.epoch, b.position, b.indices.tolist()))
            del b
        # the epoch's end, interrupted after the call: the next call reports it
        monkeypatch.setattr(sl, "_TAKE", after)
        with pytest.raises(KeyboardInterrupt):
            next(it)
        monkeypatch.setattr(sl, "_TAKE", real)
        assert list(iter(loader)) == []
        # the next epoch's first call interrupted before it ran: not taken for an end
        monkeypatch.setattr(sl, "_TAKE", before)
        with pytest.raises(KeyboardInterrupt):
            next(iter(loader))
        monkeypatch.setattr(sl, "_TAKE", real)
        got += [(b.epoch, b.position, b.indices.tolist()) for b in loader]
    assert got == ref
