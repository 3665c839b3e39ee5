#!/usr/bin/env bash
# The README's set-up for Python, checked end to end: a fresh virtual
# environment over /usr/bin/python3, `pip install --no-build-isolation` of the
# source tree (setup.py drives CMake; nothing from PyPI), then a 2-rank job run
# from outside the source tree, so the installed package is what it imports.
# Usage: pip_install_test.sh <source dir> <scratch dir> <mpiexec> [mpiexec flags...]
# (-h or --help: this text, and nothing else).
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,${/^#/!q;s/^# \{0,1\}//;p}' "$0"
  exit 0
fi
if [[ $# -lt 3 ]]; then
  echo "usage: pip_install_test.sh <source dir> <scratch dir> <mpiexec> [mpiexec flags...]" >&2
  exit 2
fi
source_dir="$1"
scratch="$2"
shift 2

rm -rf "$scratch"
mkdir -p "$scratch"
/usr/bin/python3 -m venv --system-site-packages "$scratch/venv"
"$scratch/venv/bin/python" -m pip install --no-build-isolation --no-index \
  --disable-pip-version-check --quiet "$source_dir"

cat >"$scratch/check.py" <<'PY'
import os

import numpy as np
import torch

import herd.kvstore as hkv
import herd.numpy as hn
import herd.torch as hvd

hvd.init()
assert os.path.dirname(hvd.__file__).startswith(os.environ["VENV"]), hvd.__file__
rank, size = hvd.rank(), hvd.size()
summed = hvd.allreduce(torch.full((5,), float(rank + 1)), op=hvd.Sum, name="check.torch")
assert torch.equal(summed, torch.full((5,), size * (size + 1) / 2)), summed
gathered = hn.allgather(np.array([rank], dtype=np.int64), name="check.numpy")
assert gathered.tolist() == list(range(size)), gathered
kv = hkv.create("dist_sync")  # the KVStore library, loaded from the package too
kv.init(0, np.zeros(3, np.float32))
pushed = np.full(3, rank + 1, np.float32)
kv.pushpull(0, pushed)
assert pushed.tolist() == [size * (size + 1) / 2] * 3, pushed
from herd import recordio  # the data library, loaded from the package too
path = os.path.join(os.environ["VENV"], f"check.{rank}.rec")
writer = recordio.MXRecordIO(path, "w")
writer.write(recordio.pack(recordio.IRHeader(0, float(rank), rank, 0), b"pixels"))
writer.close()
header, rest = recordio.unpack(recordio.MXRecordIO(path, "r").read())
assert (header.label, header.id, rest) == (rank, rank, b"pixels"), (header, rest)
print(f"rank {rank}: installed herd works ({hvd.__file__})")
hvd.shutdown()
PY
cd "$scratch"
VENV="$scratch/venv" "$@" -np 2 "$scratch/venv/bin/python" "$scratch/check.py"
