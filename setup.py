"""Builds and installs the herd Python package (herd, herd.numpy, herd.torch).

    python3 -m venv --system-site-packages .venv    # from Debian's /usr/bin/python3
    .venv/bin/pip install --no-build-isolation .

(scripts/install_python.sh does both.) --no-build-isolation makes pip use the
setuptools, wheel and pybind11 that Debian installed instead of fetching them
from PyPI. The compiled part is built by herd's own CMake project: the C++
library and the extension only (no tests, examples or benchmarks), installed
into the package by `cmake --install --component python`, so the installed
package holds _native*.so and the libherd*.so it loads from beside it.
HERD_CMAKE_ARGS adds arguments to the configure step.
"""

import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE_DIR = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    """The extension herd._native, built by CMake rather than by setuptools."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        # The package directory's parent: CMake installs into <prefix>/herd.
        prefix = os.path.abspath(os.path.dirname(os.path.dirname(self.get_ext_fullpath(ext.name))))
        configure = [
            "cmake", "-S", SOURCE_DIR, "-B", build_dir,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DHERD_BUILD_PYTHON=ON",
            "-DHERD_BUILD_TESTS=OFF",
            "-DHERD_BUILD_EXAMPLES=OFF",
            "-DHERD_BUILD_BENCHMARKS=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}",
        ] + shlex.split(os.environ.get("HERD_CMAKE_ARGS", ""))
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            configure += ["-G", "Ninja"] if _has("ninja") else []
        jobs = str(os.cpu_count() or 1)
        for command in (
            configure,
            ["cmake", "--build", build_dir, "--target", "herd_python", "--parallel", jobs],
            ["cmake", "--install", build_dir, "--component", "python", "--prefix", prefix],
        ):
            print(" ".join(command), flush=True)
            subprocess.run(command, check=True)


def _has(program):
    return any(
        os.access(os.path.join(path, program), os.X_OK)
        for path in os.environ.get("PATH", "").split(os.pathsep)
    )


setup(
    name="herd",
    version="0.1.0",
    description="Data-parallel collectives for training jobs launched by mpirun; "
    "herd.torch is a drop-in for horovod.torch",
    package_dir={"": "bindings/python"},
    packages=["herd", "herd.torch", "herd.torch.elastic"],
    ext_modules=[CMakeExtension("herd._native")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["numpy", "cloudpickle"],
    zip_safe=False,
)
