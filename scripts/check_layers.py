#!/usr/bin/env python3
"""Checks that no #include of herd's C++ sources crosses a layer upward.

Every C++ file (.h, .cc, .cu, .cuh) belongs to one layer, found from its path
in the table LAYERS below; a layer may include its own headers and those of
the layers it sees: the ones whose include roots its CMake targets get from
their link dependencies (cmake/layers.cmake, which gives each target the same
view through its include directories). An include is resolved the way the compiler does: next to the
including file for "quoted" names, then under the repository's include roots;
names that resolve to no file of the tree (the standard library, MPI, Eigen)
are not checked. A file in no layer is an error too, so a new directory gets a
row in the table.

Prints one line per crossing, as file:line, and exits 1 when there is any.

usage: scripts/check_layers.py [--root DIR]
"""

import argparse
import fnmatch
import os
import re
import sys

# name: (what it owns: directories ending in "/", or files, which may hold
#        shell-style wildcards, relative to the root; the layers whose headers
#        it may include besides its own). The most specific entry wins.
# Mirrors the CMake targets: herd_common, herd_ops, herd_collectives,
# herd_core, herd (the shared library, src/api*.cc, which links the layers
# below PRIVATE, so its users see only include/herd/), herd_train, the
# Python extension, the examples, the benchmarks and the tests.
LAYERS = {
    "common": (["common/", "include/herd/types.h", "include/herd/error.h",
                "include/herd/tensor.h"], []),
    # RecordIO and IDX files: beside the communication layers, seeing only
    # herd::Error of common's public headers.
    "data": (["data/", "include/herd/data/", "include/herd/recordio.h"], ["common"]),
    "ops": (["ops/"], ["common"]),
    "collectives": (["collectives/"], ["ops", "common"]),
    "core": (["src/", "include/herd/handle.h", "include/herd/process_set.h",
              "include/herd/parameter_server.h", "include/herd/stats.h"],
             ["collectives", "ops", "common"]),
    "api": (["src/api*.cc", "include/herd/"],
            ["core", "collectives", "ops", "common"]),
    "train": (["train/", "include/herd/train/", "include/herd/train.h"], ["api", "common"]),
    "kvstore": (["kvstore/", "include/herd/kvstore.h", "include/herd/kvstore/"],
                ["train", "api", "common"]),
    "bindings": (["bindings/"], ["data", "kvstore", "train", "api"]),
    "examples": (["examples/"], ["data", "kvstore", "train", "api"]),
    "benchmarks": (["benchmarks/"], ["data", "kvstore", "train", "api", "collectives", "ops", "common"]),
    # herdrun: links no herd library, so it sees no layer but its own.
    "launcher": (["launcher/"], []),
    # herd-timeline: reads timeline files only, links no herd library.
    "tools": (["tools/"], []),
    # herd-rec: packs, checks and unpacks RecordIO files with herd::data.
    "herd_rec": (["tools/herd_rec/"], ["data", "common"]),
    "tests": (["tests/"], ["launcher", "tools", "herd_rec", "data", "benchmarks", "examples", "bindings", "kvstore", "train", "api", "core",
                           "collectives", "ops", "common"]),
}

# The public headers under include/herd/ that a lower layer owns are part of
# the API as well: herd (layer api) publishes every header of include/herd/
# that belongs to a layer it sees, so that a user of the API includes
# "herd/types.h" without seeing common/.
REPUBLISHED = {"api": "include/herd/"}

# Directories a non-relative include name is looked up in, in order, as the
# targets' include roots spell them: "src/x.h", "herd/x.h",
# "herd_train/x.h" (examples/herd_train), "native/x.h" (bindings/native).
INCLUDE_ROOTS = ["", "include", "examples", "bindings"]

SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")
SKIPPED_DIRS = {".git", ".venv", "__pycache__"}
INCLUDE_LINE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def owner(path):
    """The layer that owns `path` (relative, '/'-separated): the longest match."""
    best, best_len = None, -1
    for name, (owned, _) in LAYERS.items():
        for entry in owned:
            if entry.endswith("/"):
                matches = path.startswith(entry)
            else:
                matches = fnmatch.fnmatchcase(path, entry)
            if matches and len(entry) > best_len:
                best, best_len = name, len(entry)
    return best


def visible(layer):
    return {layer, *LAYERS[layer][1]}


def offered_by(header):
    """The layers through which `header` can be included."""
    layer = owner(header)
    layers = {layer}
    for publisher, prefix in REPUBLISHED.items():
        if header.startswith(prefix) and layer in visible(publisher):
            layers.add(publisher)
    return layers


def sources(root):
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("build"))
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/")


def resolve(root, including, quote, name):
    """The included file relative to root, or None outside the tree."""
    candidates = []
    if quote == '"':
        candidates.append(os.path.join(os.path.dirname(including), name))
    candidates += [os.path.join(base, name) for base in INCLUDE_ROOTS]
    for candidate in candidates:
        path = os.path.normpath(candidate).replace(os.sep, "/")
        if not path.startswith("../") and os.path.isfile(os.path.join(root, path)):
            return path
    return None


def check(root):
    """Returns the messages, one per crossing or unowned file."""
    problems = []
    for path in sources(root):
        layer = owner(path)
        if layer is None:
            problems.append(f"{path}: in no layer; add its directory to LAYERS in "
                            "scripts/check_layers.py")
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as source:
            for number, line in enumerate(source, 1):
                match = INCLUDE_LINE.match(line)
                if not match:
                    continue
                quote, name = match.groups()
                header = resolve(root, path, quote, name)
                if header is None:
                    continue
                offered = offered_by(header)
                if None in offered:
                    problems.append(f"{path}:{number}: includes {name} ({header}), which is in no "
                                    "layer")
                elif not offered & visible(layer):
                    problems.append(
                        f"{path}:{number}: layer {layer} includes {name}, a header of layer "
                        f"{'/'.join(sorted(offered))}; {layer} sees only "
                        f"{', '.join(sorted(visible(layer)))}")
    return problems


def main():
    parser = argparse.ArgumentParser(
        description="Fails on an #include that crosses one of herd's layers upward "
        "(or reaches below the API from above it).")
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."),
                        help="the source tree to check (default: this repository)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    problems = check(root)
    for problem in problems:
        print(f"check_layers: {problem}", file=sys.stderr)
    if problems:
        print(f"check_layers: {len(problems)} include(s) cross a layer "
              "(the table is in scripts/check_layers.py)", file=sys.stderr)
        return 1
    print(f"check_layers: every #include under {root} stays within its layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
