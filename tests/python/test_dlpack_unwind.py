# SPDX-License-Identifier: Apache-2.0
"""DLPack deleters called while an exception propagates, from threads without the GIL, and
when the deleter itself fails.

A consumer frees a tensor from C (torch's or numpy's deallocator, a C++ destructor), often
while the interpreter unwinds an exception: a tensor on the evaluation stack of a frame an
exception leaves is freed then. The deleter must leave that exception as it was (same type,
same message, no SystemError, no crash), print nothing, and still give the batch's slot back
(or free its detached memory). Each scenario runs in its own interpreter, since the failure
it guards against may be a crash.
"""
import pytest

from test_binding_shutdown import run_script as shutdown_run_script

PRELUDE = """
import gc, signal, sys, threading
import numpy as np
import stoker
from stoker import loader as stoker_loader
PATH = sys.argv[1]


def consume(*args):
    pass


def check_freed(loader):
    gc.collect()
    assert loader._core.outstanding == 0, loader._core.outstanding
    assert stoker_loader._Memory.live == 0, stoker_loader._Memory.live


def consumed(cap):
    # the managed tensor's address in capsule `cap`, which is then renamed "used_dltensor"
    # as a consumer (torch) does: its deleter is the caller's to call
    import ctypes
    get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi))
    rename = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_SetName", ctypes.pythonapi))
    addr = get(cap, b"dltensor")
    assert rename(cap, b"used_dltensor") == 0
    return addr
"""

# name -> script body; each ends by printing "ok" once every check held.
SCENARIOS = {
    # Over several epochs, more batches than the ring holds: a slot not given back (or
    # memory not freed) shows in the counts, and a lost exception in the handler.
    "torch_tensor_on_the_stack_in_a_loop": ("""
        loader = stoker.Loader(PATH, 8, depth=2, device="cpu", shuffle=False)
        for epoch in range(3):
            loader.set_epoch(epoch)
            for step in range(6):
                try:
                    for b in loader:
                        x, y = b  # unpacked too: the labels' array holds the batch as well
                        consume(torch.from_dlpack(b.data), {}["missing %d.%d" % (epoch, step)])
                except KeyError as e:
                    assert type(e) is KeyError and e.args == ("missing %d.%d" % (epoch, step),), e
                    assert e.__context__ is None and e.__cause__ is None, repr(e.__context__)
            del b, x, y
        check_freed(loader)
        print("ok")
        """, True),
    "torch_tensor_exception_leaves_the_function": ("""
        loader = stoker.Loader(PATH, 8, depth=2, device="cpu", shuffle=False)

        def step(b):
            consume(torch.from_dlpack(b.data), {}["raised in step"])

        for i, b in enumerate(loader):
            try:
                step(b)
            except KeyError as e:
                assert e.args == ("raised in step",) and e.__context__ is None, repr(e)
            else:
                raise AssertionError("no exception")
        del b
        check_freed(loader)
        print("ok")
        """, True),
    "unconsumed_capsule_on_the_stack": ("""
        loader = stoker.Loader(PATH, 8, depth=2, device="cpu", shuffle=False)
        for b in loader:
            try:
                consume(b.data.__dlpack__(), {}["raised with a capsule"])
            except KeyError as e:
                assert e.args == ("raised with a capsule",) and e.__context__ is None, repr(e)
        del b
        check_freed(loader)
        print("ok")
        """, False),
    "keyboard_interrupt_while_tensors_are_dropped": ("""
        loader = stoker.Loader(PATH, 8, depth=2, device="cpu", shuffle=False)
        caught = 0
        for b in loader:
            try:
                consume(torch.from_dlpack(b.data), np.from_dlpack(b.data),
                        signal.raise_signal(signal.SIGINT), [0] * 1000)
            except KeyboardInterrupt as e:
                assert type(e) is KeyboardInterrupt and e.__context__ is None, repr(e)
                caught += 1
        assert caught == 13, caught
        del b
        check_freed(loader)
        print("ok")
        """, True),
    # torch may free a tensor from a thread of its own, which holds no GIL and has no
    # Python thread state: the deleter, started as a thread's routine with pthread_create.
    "deleter_from_a_foreign_thread": ("""
        import ctypes
        from stoker import _dlpack
        libc = ctypes.CDLL(None, use_errno=True)
        loader = stoker.Loader(PATH, 8, depth=2, device="cpu", shuffle=False)
        kept = []
        for b in loader:
            kept.append(consumed(b.data.__dlpack__()))  # the deleter called later
        del b
        assert _dlpack.live_exports() == 13
        for addr in kept:
            m = _dlpack.DLManagedTensor.from_address(addr)
            tid = ctypes.c_ulong()
            # pthread_create's routine returns a pointer; the deleter's return is ignored
            rc = libc.pthread_create(ctypes.byref(tid), None, ctypes.c_void_p(m.deleter),
                                     ctypes.c_void_p(addr))
            assert rc == 0, rc
            del m
            assert libc.pthread_join(tid, None) == 0  # ctypes releases the GIL meanwhile
        assert _dlpack.live_exports() == 0
        check_freed(loader)
        print("ok")
        """, False),
    # A deleter whose release fails raises nothing into the consumer's freeing code and
    # prints nothing, even while the consumer's own exception propagates.
    "release_fails_inside_the_deleter": ("""
        from stoker import _dlpack

        class Owner:
            def acquire(self):
                pass

            def release(self):
                raise RuntimeError("release failed on purpose")

        data = np.arange(6, dtype=np.uint8)
        try:
            consume(torch.from_dlpack(_dlpack.export(Owner(), data.ctypes.data, (6,),
                                                     stoker.loader._lib.DTYPE["uint8"], -1)),
                    {}["raised with a failing release"])
        except KeyError as e:
            assert e.args == ("raised with a failing release",) and e.__context__ is None
        t = torch.from_dlpack(_dlpack.export(Owner(), data.ctypes.data, (6,),
                                             stoker.loader._lib.DTYPE["uint8"], -1))
        assert t.tolist() == list(range(6))
        del t
        assert _dlpack.live_exports() == 0
        print("ok")
        """, True),
    # Ctrl-C that lands inside the deleter's own Python (here: a release that raises
    # KeyboardInterrupt, as a signal handler run there would) is not lost: the main thread
    # sees it at its next check, once the deleter is done. Freed from the main thread and
    # from a thread without the GIL alike.
    "keyboard_interrupt_inside_the_deleter_reaches_the_main_thread": ("""
        import ctypes, time
        from stoker import _dlpack

        class Owner:
            def acquire(self):
                pass

            def release(self):
                raise KeyboardInterrupt

        signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignored
        data = np.arange(6, dtype=np.uint8)
        dt = stoker.loader._lib.DTYPE["uint8"]
        t = torch.from_dlpack(_dlpack.export(Owner(), data.ctypes.data, (6,), dt, -1))
        try:
            del t
            for _ in range(1000):  # the interrupt is raised at one of these checks
                time.sleep(0.001)
            raise AssertionError("no KeyboardInterrupt after the deleter")
        except KeyboardInterrupt:
            pass
        addr = consumed(_dlpack.export(Owner(), data.ctypes.data, (6,), dt, -1))
        m = _dlpack.DLManagedTensor.from_address(addr)
        fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(m.deleter)
        del m
        th = threading.Thread(target=fn, args=(addr,))
        try:
            th.start()
            th.join()
            for _ in range(1000):
                time.sleep(0.001)
            raise AssertionError("no KeyboardInterrupt after the thread's deleter")
        except KeyboardInterrupt:
            th.join()
        assert _dlpack.live_exports() == 0
        print("ok")
        """, True),
}


def run_script(tmp_path, body, ds, with_torch):
    return shutdown_run_script(tmp_path, PRELUDE + ("import torch\n" if with_torch else ""),
                               body, ds)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_deleter_keeps_the_pending_exception(tmp_path, raw_ds, name):
    body, with_torch = SCENARIOS[name]
    if with_torch:
        pytest.importorskip("torch")
    proc = run_script(tmp_path, body, raw_ds, with_torch)
    assert proc.returncode == 0 and proc.stdout == "ok\n", (
        "status %d (a negative status is a signal)\nstdout:\n%s\nstderr:\n%s"
        % (proc.returncode, proc.stdout, proc.stderr))
    assert proc.stderr == "", proc.stderr
