"""Tests of scripts/check_layers.py: it passes a tree whose includes stay within
their layers and fails, naming file and line, on each kind of crossing.

Run with /usr/bin/python3 -m pytest -q tests/scripts/test_check_layers.py
(ctest runs it as check_layers). Each case builds a small source tree in a
temporary directory and runs the script on it as scripts/test.sh does.
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "check_layers.py")

# A tree in which every include is allowed: each layer includes its own
# headers and those below it, the public value types come through the API,
# and a test reaches into the runtime.
LAWFUL = {
    "common/status.h": "#pragma once\n#include <string>\n",
    "include/herd/types.h": "#pragma once\n",
    "include/herd/handle.h": "#pragma once\n",
    "include/herd/herd.h": '#pragma once\n#include "herd/handle.h"\n#include "herd/types.h"\n',
    "include/herd/train/optimizer.h": '#pragma once\n#include "herd/types.h"\n',
    "common/logging.cc": '#include "common/status.h"\n#include "herd/types.h"\n',
    "ops/reduce.h": '#pragma once\n#include "common/status.h"\n',
    "collectives/allreduce.h": '#pragma once\n#include "ops/reduce.h"\n',
    "src/runtime.h": '#pragma once\n#include "collectives/allreduce.h"\n#include "herd/handle.h"\n',
    "src/api.cc": '#include "herd/herd.h"\n#include "src/runtime.h"\n',
    "train/sgd.cc": '#include "herd/herd.h"\n#include "herd/train/optimizer.h"\n',
    "examples/herd_train/mlp.h": '#pragma once\n#include "herd/train/optimizer.h"\n',
    "examples/herd_train/mlp.cc": '#include "herd_train/mlp.h"\n#include <vector>\n',
    "tests/unit/core/test_runtime.cc": '#include "src/runtime.h"\n#include "helper.h"\n',
    "tests/unit/core/helper.h": "#pragma once\n",
}


def make_tree(tmp_path, files):
    for path, text in files.items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return tmp_path


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


def test_lawful_tree_passes(tmp_path):
    result = run("--root", str(make_tree(tmp_path, LAWFUL)))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize(
    "path, text, message",
    [
        # A lower layer includes the runtime.
        ("common/bad.cc", '#include "src/runtime.h"\n',
         "common/bad.cc:1: layer common includes src/runtime.h, a header of layer core"),
        # The same through a relative path, which the include roots do not stop.
        ("ops/bad.cc", '#include <vector>\n#include "../src/runtime.h"\n',
         "ops/bad.cc:2: layer ops includes ../src/runtime.h, a header of layer core"),
        # The runtime includes the API's entry points.
        ("src/bad.h", '#pragma once\n#include <herd/herd.h>\n',
         "src/bad.h:2: layer core includes herd/herd.h, a header of layer api"),
        # The training library reaches below the API.
        ("train/bad.cc", '#include "ops/reduce.h"\n',
         "train/bad.cc:1: layer train includes ops/reduce.h, a header of layer ops"),
        # The communication API includes the training library.
        ("include/herd/bad.h", '#pragma once\n#include "herd/train/optimizer.h"\n',
         "include/herd/bad.h:2: layer api includes herd/train/optimizer.h, a header of layer "
         "train"),
        # A public value type of common/ includes the runtime's handle.
        ("include/herd/types.h", '#pragma once\n#include "herd/handle.h"\n',
         "include/herd/types.h:2: layer common includes herd/handle.h, a header of layer "
         "api/core"),
        # A file outside every layer.
        ("extras/thing.cc", "#include <cstdio>\n", "extras/thing.cc: in no layer"),
    ],
)
def test_crossing_fails(tmp_path, path, text, message):
    files = dict(LAWFUL)
    files[path] = text
    result = run("--root", str(make_tree(tmp_path, files)))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if ": " in line]
    problems = [line for line in lines if not line.startswith("check_layers: 1 include")]
    assert len(problems) == 1, result.stderr
    assert problems[0].startswith("check_layers: " + message), result.stderr


def test_every_crossing_is_reported(tmp_path):
    files = dict(LAWFUL)
    files["common/bad.cc"] = '#include "src/runtime.h"\n#include "collectives/allreduce.h"\n'
    result = run("--root", str(make_tree(tmp_path, files)))
    assert result.returncode == 1
    assert "common/bad.cc:1: " in result.stderr
    assert "common/bad.cc:2: " in result.stderr
    assert "check_layers: 2 include(s) cross a layer" in result.stderr


def test_build_folders_are_skipped(tmp_path):
    files = dict(LAWFUL)
    files["build/layer_include/x.cc"] = '#include "src/runtime.h"\n'
    result = run("--root", str(make_tree(tmp_path, files)))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_prints_usage_only(tmp_path, flag):
    result = subprocess.run([sys.executable, SCRIPT, flag], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: check_layers.py")
    assert list(tmp_path.iterdir()) == []


def test_this_repository_passes():
    result = run("--root", ROOT)
    assert result.returncode == 0, result.stderr
