# SPDX-License-Identifier: Apache-2.0
"""`python -m stoker pack|bench|info ...`, and the `stoker-pack` / `stoker-bench` commands.

`pack` and `bench` run the stoker-pack and stoker-bench programs that `pip install` built
into the package (stoker/bin/), with the arguments as given; `info` prints the library's
version, path and what this build and host can do.
"""
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_TOOLS = {"pack": "stoker-pack", "bench": "stoker-bench"}
_USAGE = ("usage: python -m stoker {pack,bench,info} [ARGS...]\n"
          "  pack   stoker-pack ARGS (stoker-pack --help)\n"
          "  bench  stoker-bench ARGS (stoker-bench --help)\n"
          "  info   the library's version, path and capabilities, as JSON\n")


def tool_path(name):
    """The path of a tool built into the package ("stoker-pack", "stoker-bench"), or None."""
    path = os.path.join(_HERE, "bin", name)
    return path if os.access(path, os.X_OK) else None


def _exec(name, args):
    path = tool_path(name)
    if path is None:
        sys.stderr.write("stoker: %s is not in this package (%s); it comes with `pip install "
                         "./python`, or from a CMake build's folder\n"
                         % (name, os.path.join(_HERE, "bin")))
        return 127
    os.execv(path, [name] + list(args))
    return 127  # not reached


def pack():
    """The `stoker-pack` command."""
    return _exec("stoker-pack", sys.argv[1:])


def bench():
    """The `stoker-bench` command."""
    return _exec("stoker-bench", sys.argv[1:])


def info():
    import stoker
    print(json.dumps({"version": stoker.version(), "library": stoker.library_path,
                      "capabilities": stoker.capabilities(),
                      "tools": {n: tool_path(n) for n in _TOOLS.values()}}, indent=2))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(_USAGE)
        return 0 if argv else 2
    cmd, args = argv[0], argv[1:]
    if cmd in _TOOLS:
        return _exec(_TOOLS[cmd], args)
    if cmd == "info":
        return info()
    sys.stderr.write("stoker: unknown command %r\n%s" % (cmd, _USAGE))
    return 2


if __name__ == "__main__":
    sys.exit(main())
