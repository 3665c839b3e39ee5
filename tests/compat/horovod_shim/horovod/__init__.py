"""``horovod`` resolved to herd, for running Horovod's own test files against herd.torch.

Only for tests/compat/run_horovod_torch_suite.sh: ``import horovod.torch as hvd``
gives ``herd.torch`` itself (the same module object), so the tests exercise
exactly what a user gets from ``import herd.torch as hvd``.
"""

import sys

import herd.torch as _herd_torch

sys.modules[__name__ + ".torch"] = _herd_torch
torch = _herd_torch
