"""The Python packages of the tools (matplotlib, h5py, numpy, pyarrow) come from the build tree's Python,
build/python, which `make` (or `make deps` alone) sets up with scripts/install-deps.sh. A tool started by
another python3 that lacks one re-runs itself with build/python/bin/python3; where there is none, or it lacks
the package too, the tool stops with one line saying what to run.

    import build_python  # tools/build_python.py, before the packages
    build_python.require("matplotlib")
"""

import importlib.util
import os
import shlex
import sys

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_PYTHON_DIR = os.path.join(REPOSITORY, "build", "python")
BUILD_PYTHON = os.path.join(BUILD_PYTHON_DIR, "bin", "python3")


def is_build_python():
    """Whether this interpreter is build/python's (by the path it was started as, not through its links: the
    venv's python3 is a link to the system's, which lacks the venv's packages)."""
    return (os.path.abspath(sys.executable) == BUILD_PYTHON
            or os.path.realpath(sys.prefix) == os.path.realpath(BUILD_PYTHON_DIR))


def shown(path):
    """`path` as the user would type it from here: relative when under the working directory."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def require(*modules):
    """Returns when every module can be imported; otherwise runs the same command with build/python/bin/python3
    (this process is replaced), or exits 1 with one line saying what to run."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if not missing:
        return
    script = sys.argv[0]
    can_rerun = script.endswith(".py") and os.path.isfile(script)
    if can_rerun and not is_build_python() and os.access(BUILD_PYTHON, os.X_OK):
        os.execv(BUILD_PYTHON, [BUILD_PYTHON, script, *sys.argv[1:]])
    command = shlex.join([shown(BUILD_PYTHON), shown(script), *sys.argv[1:]])
    needs = " and ".join(missing)
    if is_build_python():
        sys.exit(f"{shown(script)} needs {needs}, which {shown(BUILD_PYTHON)} lacks: "
                 f"{shown(os.path.join(BUILD_PYTHON_DIR, 'bin', 'pip'))} install {' '.join(missing)}")
    if os.access(BUILD_PYTHON, os.X_OK):
        sys.exit(f"{shown(script)} needs {needs}, which {sys.executable} lacks: run {command}")
    sys.exit(f"{shown(script)} needs {needs}, which {sys.executable} lacks: run `make deps` (it sets up "
             f"{shown(BUILD_PYTHON_DIR)} with the tools' packages), then {command}")
