# SPDX-License-Identifier: Apache-2.0
"""Arrays and tensors made from batches that are still alive when the interpreter exits.

Each scenario runs in its own interpreter: the DLPack deleter is then called during
shutdown, after module globals were set to None, in whatever order the garbage collector
finalises the objects. The interpreter must exit with the script's own status and print
nothing but what the script printed (no crash, no "Exception ignored" message).
"""
import os
import subprocess
import sys
import textwrap

import pytest

import conftest as h

# A function makes the script's globals a reference cycle, as in most programs: they are
# then freed by the garbage collector, in the same pass as the binding's modules.
PRELUDE = """
import gc, sys
import numpy as np
import stoker
PATH = sys.argv[1]


def first(loader):
    return next(iter(loader))
"""

TORCH_PRELUDE = PRELUDE + "import torch\n"

# name -> (script body, the status the interpreter must exit with)
SCENARIOS = {
    "array_in_cycle_loader_closed": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        cycle = [np.from_dlpack(b.data)]
        cycle.append(cycle)
        del b
        loader.close()
        """, 0),
    "array_in_cycle_loader_open": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        cycle = [b.numpy()]
        cycle.append(cycle)
        del b
        """, 0),
    "loader_batch_array_one_cycle": ("""
        loader = stoker.Loader(PATH, 8, device="cpu", depth=3)
        it = iter(loader)
        b = next(it)
        cycle = [loader, it, b, b.numpy(), np.from_dlpack(next(it).data)]
        cycle.append(cycle)
        del loader, it, b, cycle
        """, 0),
    "array_as_global": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        ARRAY = first(loader).numpy()
        VIEW = ARRAY[2:5]
        """, 0),
    "array_as_global_loader_closed": ("""
        with stoker.Loader(PATH, 8, device="cpu") as loader:
            ARRAY = np.from_dlpack(first(loader).data)
        """, 0),
    "batch_in_cycle": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        b.self = b
        b.data.owner = b
        """, 0),
    "unconsumed_capsule_in_cycle": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        cycle = [b.data.__dlpack__(), b.data.__dlpack__()]
        cycle.append(cycle)
        del b
        loader.close()
        """, 0),
    "arrays_in_a_class_cycle": ("""
        class Holder:
            pass
        loader = stoker.Loader(PATH, 8, device="cpu", depth=4)
        holders = []
        for b in loader:
            x = Holder()
            x.arr, x.me = b.numpy(), x
            holders.append(x)
            if len(holders) == 3:
                break
        del b, x, holders
        gc.disable()
        """, 0),
    "sys_exit": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        cycle = [b.numpy(), b]
        cycle.append(cycle)
        sys.exit(0)
        """, 0),
    "sys_exit_status": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        cycle = [b.numpy()]
        cycle.append(cycle)
        del b
        loader.close()
        sys.exit(3)
        """, 3),
    "exception_at_exit": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        cycle = [np.from_dlpack(b.data), b]
        cycle.append(cycle)
        raise KeyError("raised on purpose at the end")
        """, 1),
    # freed while the program's own exception propagates out of it
    "capsule_freed_as_exception_ends_the_program": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        print(b.data.__dlpack__(), {}["raised on purpose at the end"])
        """, 1),
    "atexit_handler_holds_array": ("""
        import atexit
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        kept = [b.numpy()]
        kept.append(kept)
        atexit.register(lambda: kept)
        del b
        """, 0),
    # kept past the depth: their memory detached from the slots, freed at exit
    "detached_arrays_in_cycle_loader_open": ("""
        loader = stoker.Loader(PATH, 8, device="cpu", depth=2)
        cycle = [np.from_dlpack(b.data) for b in loader] + [loader]
        cycle.append(cycle)
        """, 0),
    "detached_arrays_as_global_loader_closed": ("""
        loader = stoker.Loader(PATH, 8, device="cpu", depth=2)
        KEPT = [x for x, y in loader]
        loader.close()
        """, 0),
}

TORCH_SCENARIOS = {
    "tensor_in_cycle_loader_closed": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        cycle = [torch.from_dlpack(b.data)]
        cycle.append(cycle)
        del b
        loader.close()
        """, 0),
    "tensor_in_cycle_loader_open": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        cycle = [b.torch(), b]
        cycle.append(cycle)
        """, 0),
    "tensor_as_global": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        TENSOR = torch.from_dlpack(first(loader).data)
        """, 0),
    "tensor_sys_exit": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        cycle = [torch.from_dlpack(b.data), b.numpy()]
        cycle.append(cycle)
        sys.exit(0)
        """, 0),
    "detached_tensors_in_cycle": ("""
        loader = stoker.Loader(PATH, 8, device="cpu", depth=2)
        cycle = [torch.from_dlpack(b.data) for b in loader] + [loader]
        cycle.append(cycle)
        """, 0),
    "tensor_exception_at_exit": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        cycle = [b.torch()]
        cycle.append(cycle)
        raise KeyError("raised on purpose at the end")
        """, 1),
    "tensor_freed_as_exception_ends_the_program": ("""
        loader = stoker.Loader(PATH, 8, device="cpu")
        b = first(loader)
        print(torch.from_dlpack(b.data), {}["raised on purpose at the end"])
        """, 1),
}

# Batches in GPU memory (where a GPU is usable): the deleter then gives the batch back with
# the consumer's stream, while CUDA itself is about to shut down.
CUDA_SCENARIOS = {
    "cuda_tensor_in_cycle_loader_closed": ("""
        loader = stoker.Loader(PATH, 8, device="cuda:0")
        b = first(loader)
        cycle = [torch.from_dlpack(b.data)]
        cycle.append(cycle)
        del b
        loader.close()
        """, 0),
    "cuda_tensor_and_batch_in_cycle_loader_open": ("""
        loader = stoker.Loader(PATH, 8, device="cuda:0")
        b = first(loader)
        t = torch.from_dlpack(b.data)
        cycle = [t, b, loader, t * 2]
        cycle.append(cycle)
        """, 0),
    "cuda_detached_tensors_in_cycle": ("""
        loader = stoker.Loader(PATH, 8, device="cuda:0", depth=2)
        cycle = [torch.from_dlpack(b.data) for b in loader] + [loader]  # past the buffers
        cycle.append(cycle)
        """, 0),
    "cuda_tensor_sys_exit": ("""
        loader = stoker.Loader(PATH, 8, device="cuda:0")
        b = first(loader)
        cycle = [torch.from_dlpack(b.data), b]
        cycle.append(cycle)
        sys.exit(0)
        """, 0),
}


def run_script(tmp_path, prelude, body, ds):
    script = tmp_path / "scenario.py"
    script.write_text(prelude + textwrap.dedent(body))
    env = dict(os.environ)
    env["STOKER_LIBRARY"] = h._library()
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(h.ROOT, "python")] +
                                        [p for p in [env.get("PYTHONPATH")] if p])
    env["PYTHONFAULTHANDLER"] = "1"  # a crash prints "Fatal Python error" and the stacks
    return subprocess.run([sys.executable, str(script), ds], env=env, capture_output=True,
                          text=True, timeout=120)


def check_exit(proc, status):
    assert proc.returncode == status, (
        "the interpreter exited with %d instead of %d (a negative status is a signal)\n%s"
        % (proc.returncode, status, proc.stderr))
    assert "Fatal Python error" not in proc.stderr, proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr
    if status == 1:  # the script's own exception, and only it
        assert proc.stderr.count("Traceback") == 1, proc.stderr
        assert proc.stderr.rstrip().endswith("KeyError: 'raised on purpose at the end'"), \
            proc.stderr
    else:
        assert proc.stderr == "", proc.stderr


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_numpy_exports_alive_at_exit(tmp_path, raw_ds, name):
    body, status = SCENARIOS[name]
    check_exit(run_script(tmp_path, PRELUDE, body, raw_ds), status)


@pytest.mark.parametrize("name", sorted(TORCH_SCENARIOS))
def test_torch_exports_alive_at_exit(tmp_path, raw_ds, name):
    pytest.importorskip("torch")
    body, status = TORCH_SCENARIOS[name]
    check_exit(run_script(tmp_path, TORCH_PRELUDE, body, raw_ds), status)


@pytest.mark.parametrize("name", sorted(CUDA_SCENARIOS))
def test_cuda_exports_alive_at_exit(tmp_path, raw_ds, name):
    torch = pytest.importorskip("torch")
    import stoker
    if not torch.cuda.is_available() or stoker.capabilities()["cuda_devices"] == 0:
        pytest.skip("no usable CUDA device")
    body, status = CUDA_SCENARIOS[name]
    check_exit(run_script(tmp_path, TORCH_PRELUDE, body, raw_ds), status)
