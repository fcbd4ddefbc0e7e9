# SPDX-License-Identifier: Apache-2.0
"""Builds libstoker, stoker-pack and stoker-bench with CMake and puts them inside the package.

`pip install ./python` (from the repository; `--no-build-isolation` where no package index is
reachable) runs this: CMake configures the repository's root in a build folder of its own
(never the source tree's `build/`), builds the shared library and the two tools, and copies
them into `stoker/` and `stoker/bin/`. The binding finds the library there before any other
(`stoker/_lib.py`), so nothing needs an environment variable, an `ldconfig` or a build tree
once installed.

The wheel holds a native library, so it is tagged for this platform (`py3-none-<platform>`):
ctypes loads it, so it does not depend on the Python ABI.

Settings from the environment, all optional:
  STOKER_CMAKE_ARGS   more arguments for CMake's configure step (split like a shell's words)
  STOKER_BUILD_JOBS   parallel build jobs (default: the CPUs this process may use)
"""
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Command, setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: an sdist or a direct install still works
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOOLS = ("stoker-pack", "stoker-bench")


def _jobs():
    env = os.environ.get("STOKER_BUILD_JOBS")
    if env:
        return env
    try:
        return str(max(1, len(os.sched_getaffinity(0))))
    except AttributeError:
        return str(os.cpu_count() or 1)


class build_native(Command):
    """Configures and builds libstoker and its tools with CMake into the package."""

    description = "build libstoker, stoker-pack and stoker-bench with CMake"
    user_options = []

    def initialize_options(self):
        self.build_temp = None
        self.outputs = []
        self.tools = []

    def finalize_options(self):
        self.set_undefined_options("build", ("build_temp", "build_temp"))

    def run(self):
        if not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
            raise RuntimeError("stoker: the package builds from the repository (its "
                               "CMakeLists.txt is not in %s)" % ROOT)
        if shutil.which("cmake") is None:
            raise RuntimeError("stoker: building the package needs cmake (Debian: apt-get "
                               "install cmake; scripts/install-deps.sh installs everything)")
        build = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(build, exist_ok=True)
        configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                     "-DSTOKER_BUILD_TESTS=OFF", "-DSTOKER_BUILD_TOOLS=ON",
                     # the tools find the library in the package: stoker/bin/..
                     "-DCMAKE_BUILD_RPATH=$ORIGIN/.."]
        configure += shlex.split(os.environ.get("STOKER_CMAKE_ARGS", ""))
        self.announce("configuring: %s" % " ".join(configure), level=2)
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", build, "-j", _jobs(), "--target", "stoker",
                               *TOOLS])
        self.outputs = [os.path.join(build, "libstoker.so")]
        self.tools = [os.path.join(build, t) for t in TOOLS]


class build_py_native(build_py):
    """The pure-Python files, then the native library and tools copied beside them."""

    def run(self):
        super().run()
        self.run_command("build_native")
        native = self.get_finalized_command("build_native")
        pkg = os.path.join(self.build_lib, "stoker")
        # real files, not the link chain (a wheel keeps no symbolic links): libstoker.so for
        # the binding, libstoker.so.0 (the library's soname) for the tools
        for name in ("libstoker.so", "libstoker.so.0"):
            shutil.copyfile(native.outputs[0], os.path.join(pkg, name))
        bindir = os.path.join(pkg, "bin")
        os.makedirs(bindir, exist_ok=True)
        for tool in native.tools:
            dest = os.path.join(bindir, os.path.basename(tool))
            shutil.copyfile(tool, dest)
            os.chmod(dest, 0o755)


cmdclass = {"build_native": build_native, "build_py": build_py_native}

if bdist_wheel is not None:
    class bdist_wheel_platform(bdist_wheel):
        """A wheel for this platform: it holds libstoker.so, loaded through ctypes."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = bdist_wheel_platform

setup(cmdclass=cmdclass)
