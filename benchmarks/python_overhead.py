#!/usr/bin/python3
"""What a Horovod-style Python module adds to an allreduce.

Times float32 allreduces per call, in one process per rank, through the Python
API a training script uses: ``hvd.allreduce`` (a new output tensor, the
autograd node, the handle), ``hvd.allreduce_`` (in place) and
``hvd.allreduce_async_`` followed by ``hvd.synchronize``. With
``--module herd.torch`` (the default) it also times the C++ runtime with no
Python layer on top, ``herd._native.allreduce_async(...).wait()``: ``native``
from the same input into one output buffer kept across calls, ``native_`` in
place; each row gets its ratio to the one that does what it does (out of
place or in place). ``--module horovod.torch`` times the same rows through
Horovod, so that two launches compare the two modules call for call.

Sizes run from 4 KiB to 64 MiB in steps of 4 (``--sizes`` for others). Each
size runs its rows in short turns of a few calls each (``--turn``), so that a
change in the machine's load during the run affects every row alike; a row's figure is the median of
all its calls on a rank, then the largest of those medians over the ranks.
Rank 0 prints the table; ``--csv FILE`` and ``--json FILE`` also write it.

    mpirun -np 2 /usr/bin/python3 benchmarks/python_overhead.py
    mpirun -np 2 /usr/bin/python3 benchmarks/python_overhead.py --module horovod.torch
"""

import argparse
import csv
import importlib
import json
import statistics
import sys
import time

import torch

# Each row of herd.torch and the native call it is compared with.
BASELINE = {"allreduce": "native", "allreduce_": "native_", "async_+synchronize": "native_",
            "native": "native", "native_": "native_"}


def default_sizes():
    sizes, size = [], 4 << 10
    while size <= 64 << 20:
        sizes.append(size)
        size *= 4
    return sizes


def timed_calls(size, budget_bytes, least, most):
    """Timed calls per row: about ``budget_bytes`` reduced, within [least, most]. The same on
    every rank (it depends on the arguments alone)."""
    return max(least, min(most, budget_bytes // size))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", default="herd.torch",
                        help="module with horovod.torch's API to time (herd.torch, horovod.torch)")
    parser.add_argument("--sizes", type=int, nargs="+", default=default_sizes(),
                        help="bytes per tensor (default 4 KiB to 64 MiB, steps of 4)")
    parser.add_argument("--op", choices=("sum", "average"), default="sum",
                        help="reduction of every row (default sum)")
    parser.add_argument("--turn", type=int, default=10,
                        help="timed calls of one row before the next row's turn (default 10)")
    parser.add_argument("--budget-mib", type=int, default=1024,
                        help="MiB reduced per row and size, which sets the number of timed "
                             "calls (default 1024, within --min-calls and --max-calls)")
    parser.add_argument("--min-calls", type=int, default=40,
                        help="fewest timed calls per row and size (default 40)")
    parser.add_argument("--max-calls", type=int, default=1000,
                        help="most timed calls per row and size (default 1000)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed calls at the start of each turn (default 1)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads (default 1, one core per rank)")
    parser.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    return parser.parse_args(argv)


class Rows:
    """The timed calls of one size: each takes no argument and reduces one tensor."""

    def __init__(self, hvd, native, size, op):
        count = size // 4
        self.hvd = hvd
        self.op = op
        self.input = torch.arange(count, dtype=torch.float32) % 97
        # Zeros stay zeros under every op, however often a row reduces them in place.
        self.inplace = torch.zeros(count, dtype=torch.float32)
        self.output = torch.empty_like(self.input)
        self.inplace_native = torch.zeros(count, dtype=torch.float32)
        self.calls = {
            "allreduce": self.out_of_place,
            "allreduce_": self.in_place,
            "async_+synchronize": self.async_in_place,
        }
        if native is not None:
            self.native_module = native
            self.native_op = native.ReduceOp.SUM if op == hvd.Sum else native.ReduceOp.AVERAGE
            self.count = count
            self.calls["native"] = self.native
            self.calls["native_"] = self.native_in_place
        self.size = size

    def out_of_place(self):
        self.hvd.allreduce(self.input, name=f"po.out.{self.size}", op=self.op)

    def in_place(self):
        self.hvd.allreduce_(self.inplace, name=f"po.in.{self.size}", op=self.op)

    def async_in_place(self):
        self.hvd.synchronize(
            self.hvd.allreduce_async_(self.inplace, name=f"po.async.{self.size}", op=self.op))

    def native(self):
        self.native_module.allreduce_async(
            f"po.native.{self.size}", self.input.data_ptr(), self.output.data_ptr(), "float32",
            [self.count], self.native_op).wait()

    def native_in_place(self):
        address = self.inplace_native.data_ptr()
        self.native_module.allreduce_async(
            f"po.native_.{self.size}", address, address, "float32", [self.count],
            self.native_op).wait()


def barrier(hvd):
    hvd.allreduce_(torch.zeros(1), name="po.barrier", op=hvd.Sum)


def max_over_ranks(hvd, values, tag):
    reduced = hvd.allreduce(torch.tensor(values, dtype=torch.float64), name=f"po.max.{tag}",
                            op=hvd.Max)
    return reduced.tolist()


def time_size(hvd, rows, args):
    """{row: max over ranks of the median µs per call}."""
    names = list(rows.calls)
    times = {name: [] for name in names}
    calls = timed_calls(rows.size, args.budget_mib << 20, args.min_calls, args.max_calls)
    turns = (calls + args.turn - 1) // args.turn
    for turn in range(turns):
        # A different row leads each round of turns: none always runs right after the setup.
        order = names[turn % len(names):] + names[:turn % len(names)]
        for name in order:
            call = rows.calls[name]
            for _ in range(args.warmup):
                call()
            barrier(hvd)
            for _ in range(min(args.turn, calls - turn * args.turn)):
                started = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - started)
    medians = [statistics.median(times[name]) * 1e6 for name in names]
    return dict(zip(names, max_over_ranks(hvd, medians, rows.size))), calls


def format_size(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def table_records(results, module, ranks, op):
    records = []
    for size, calls, medians in results:
        for name, median in medians.items():
            base = medians.get(BASELINE[name])
            records.append({
                "module": module, "ranks": ranks, "op": op, "bytes": size, "row": name,
                "calls": calls, "median_us": round(median, 2),
                "baseline": BASELINE[name] if base else None,
                "over_native": round(median / base, 3) if base else None,
                "extra_us": round(median - base, 2) if base else None,
            })
    return records


def print_table(records, module, ranks, op, turn):
    print(f"# {module}: float32 {op} allreduce, {ranks} ranks, per call: median over each "
          f"rank's calls (rows in turns of {turn} calls), max over ranks")
    has_native = any(r["over_native"] is not None for r in records)
    header = f"{'size':>8} {'row':<20} {'calls':>6} {'median_us':>11}"
    if has_native:
        header += f" {'baseline':>9} {'ratio':>7} {'+us':>9}"
    print(header)
    for r in records:
        line = (f"{format_size(r['bytes']):>8} {r['row']:<20} {r['calls']:>6} "
                f"{r['median_us']:>11.1f}")
        if has_native:
            line += f" {r['baseline']:>9} {r['over_native']:>7.3f} {r['extra_us']:>9.1f}"
        print(line)
    sys.stdout.flush()


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    hvd = importlib.import_module(args.module)
    native = None
    if args.module.split(".")[0] == "herd":
        native = importlib.import_module("herd._native")
    hvd.init()
    op = hvd.Sum if args.op == "sum" else hvd.Average
    results = []
    for size in args.sizes:
        if size % 4 or size <= 0:
            raise SystemExit(f"python_overhead: {size} bytes is not a whole number of float32s")
        medians, calls = time_size(hvd, Rows(hvd, native, size, op), args)
        results.append((size, calls, medians))
    records = table_records(results, args.module, hvd.size(), args.op)
    if hvd.rank() == 0:
        print_table(records, args.module, hvd.size(), args.op, args.turn)
        if args.csv:
            with open(args.csv, "w", newline="") as out:
                writer = csv.DictWriter(out, fieldnames=list(records[0]))
                writer.writeheader()
                writer.writerows(records)
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"module": args.module, "ranks": hvd.size(), "op": args.op,
                           "turn": args.turn, "rows": records}, out, indent=1)
    hvd.shutdown()


if __name__ == "__main__":
    main()
