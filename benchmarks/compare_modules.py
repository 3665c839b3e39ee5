#!/usr/bin/python3
"""herd.torch against horovod.torch, from launches taken in turns.

Reads the JSON files of ``python_overhead.py --json`` and ``python_step.py --json``
that ``compare_horovod.sh`` writes (OUT/calls_np{N}_{variant}_run{i}.json and
OUT/step_np{N}_{variant}_run{i}.json, a variant being ``herd``, ``herd-plain``,
``herd-shared`` or ``horovod-<settings>``) and pairs the launches of one run,
which ran back to back. A ratio is the fastest Horovod setting's time over
herd's within a run (above 1: herd is faster); the table gives the median over
the runs and its range.
``--record FILE`` writes the tables as doc_tables.py "table" files
(``--command`` names the command that measured them).

    benchmarks/compare_modules.py OUT [--record-prefix benchmarks/results/torch_vs_horovod]
"""

import argparse
import datetime
import glob
import json
import os
import re
import statistics
import sys

ROWS = ("allreduce", "allreduce_", "async_+synchronize")


def format_size(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def figure(value):
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def ratio_cell(ratios):
    middle = statistics.median(ratios)
    return f"{middle:.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"


def runs_of(out, prefix):
    """{variant: {run index: parsed JSON}} for the files OUT/PREFIX<variant>_run<i>.json."""
    found = {}
    regex = re.compile(re.escape(prefix) + r"(.*)_run(\d+)\.json$")
    for path in glob.glob(os.path.join(out, prefix + "*_run*.json")):
        match = regex.match(os.path.basename(path))
        if match:
            with open(path) as source:
                found.setdefault(match.group(1), {})[int(match.group(2))] = json.load(source)
    return found


def horovod_label(variant):
    """'horovod-fusion0-cycle0.1' -> 'HOROVOD_FUSION_THRESHOLD=0, HOROVOD_CYCLE_TIME=0.1'."""
    words = variant.split("-")[1:]
    if words == ["default"]:
        return "defaults"
    names = {"fusion": "HOROVOD_FUSION_THRESHOLD", "cycle": "HOROVOD_CYCLE_TIME"}
    labels = []
    for word in words:
        key = re.match(r"[a-z]+", word).group(0)
        labels.append(f"`{names.get(key, key)}={word[len(key):]}`")
    return ", ".join(labels)


def calls_table(out, ranks):
    found = runs_of(out, f"calls_np{ranks}_")
    herd = found.pop("herd", {})
    horovod = {name: runs for name, runs in found.items() if name.startswith("horovod-")}
    runs = sorted(set(herd).intersection(*(set(r) for r in horovod.values()))) if horovod else []
    if not runs:
        return None
    cells = {}  # (size, row) -> {"herd": [..], "horovod": [..], "ratio": [..], "best": [..]}
    for run in runs:
        herd_rows = {(r["bytes"], r["row"]): r["median_us"] for r in herd[run]["rows"]}
        for key, herd_us in herd_rows.items():
            if key[1] not in ROWS:
                continue
            times = {}
            for name, variant_runs in horovod.items():
                for r in variant_runs[run]["rows"]:
                    if (r["bytes"], r["row"]) == key:
                        times[name] = r["median_us"]
            if not times:
                continue
            best = min(times, key=times.get)
            cell = cells.setdefault(key, {"herd": [], "horovod": [], "ratio": [], "best": []})
            cell["herd"].append(herd_us)
            cell["horovod"].append(times[best])
            cell["ratio"].append(times[best] / herd_us)
            cell["best"].append(best)
    sizes = sorted({size for size, _ in cells})
    columns = ["size"]
    for row in ROWS:
        columns += [f"herd `{row}` µs", "Horovod µs", "Horovod / herd (range)"]
    rows = []
    for size in sizes:
        line = [format_size(size)]
        for row in ROWS:
            cell = cells.get((size, row))
            if cell is None:
                line += ["–", "–", "–"]
            else:
                line += [figure(statistics.median(cell["herd"])),
                         figure(statistics.median(cell["horovod"])), ratio_cell(cell["ratio"])]
        rows.append(line)
    fastest = {}
    for cell in cells.values():
        for name in cell["best"]:
            fastest[name] = fastest.get(name, 0) + 1
    note = "; ".join(f"{horovod_label(name)} in {count} of {sum(fastest.values())}"
                     for name, count in sorted(fastest.items(), key=lambda item: -item[1]))
    return {"columns": columns, "align": "l" + "rrr" * len(ROWS), "rows": rows,
            "runs": len(runs), "note": f"Horovod's fastest setting per size and row: {note}"}


def step_table(out, ranks):
    found = runs_of(out, f"step_np{ranks}_")
    herd = [name for name in ("herd-plain", "herd-shared") if name in found]
    horovod = sorted(name for name in found if name.startswith("horovod-"))
    if not herd or not horovod:
        return None
    runs = sorted(set.intersection(*(set(found[name]) for name in herd + horovod)))
    if not runs:
        return None
    best_horovod = [min(found[name][i]["median_ms"] for name in horovod) for i in runs]
    labels = {"herd-plain": "herd.torch, a tensor per gradient",
              "herd-shared": "herd.torch, gradients in one shared arena (`shared_zeros`)"}
    rows = []
    for name in herd + horovod:
        times = [found[name][i]["median_ms"] for i in runs]
        wrong = sum(found[name][i]["wrong"] for i in runs)
        ratios = [best / own for best, own in zip(best_horovod, times)]
        label = labels.get(name) or f"Horovod, {horovod_label(name)}"
        rows.append([label, figure(statistics.median(times)),
                     f"{figure(min(times))}–{figure(max(times))}", ratio_cell(ratios),
                     str(wrong)])
    columns = ["path", "median ms", "min–max ms", "Horovod's fastest / path (range)", "wrong"]
    return {"columns": columns, "align": "lrrrr", "rows": rows, "runs": len(runs),
            "note": "Horovod's fastest: the fastest Horovod row of the same run"}


def markdown(table):
    lines = ["| " + " | ".join(table["columns"]) + " |",
             "|" + "|".join("--:" if a == "r" else "---" for a in table["align"]) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in table["rows"]]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="compare_horovod.sh's output folder")
    parser.add_argument("--record-prefix", help="write PREFIX_calls_npN.json and "
                        "PREFIX_step_npN.json for doc_tables.py")
    parser.add_argument("--command", default="benchmarks/compare_horovod.sh HOROVOD_SRC OUT",
                        help="the command recorded with the tables")
    parser.add_argument("--machine", default="2 cores of an AMD EPYC (VM), Open MPI 4.1.4",
                        help="the machine recorded with the tables")
    args = parser.parse_args(argv)
    status = 0
    for ranks in (2, 4):
        for kind, make in (("calls", calls_table), ("step", step_table)):
            table = make(args.out, ranks)
            if table is None:
                continue
            print(f"## {kind}, {ranks} ranks ({table['runs']} runs)\n\n{markdown(table)}\n\n"
                  f"{table['note']}\n")
            if args.record_prefix:
                record = {"kind": "table", "date": datetime.date.today().isoformat(),
                          "machine": args.machine, "command": args.command,
                          "columns": table["columns"], "align": table["align"],
                          "rows": table["rows"]}
                with open(f"{args.record_prefix}_{kind}_np{ranks}.json", "w") as target:
                    json.dump(record, target, indent=1, ensure_ascii=False)
                    target.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
