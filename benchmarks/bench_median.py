#!/usr/bin/python3
"""Summarizes repeated herd-bench runs into medians, as Markdown for docs/performance.md.

Usage:
  bench_median.py [--baseline mpi] [--against herd] [--title TEXT] [--json OUT]
                  [--median-csv OUT] FILE.csv ...

Each FILE is the stdout of one run of `herd-bench ... --csv`, of one of two kinds
(told apart by the header line):

  sweep (allreduce, allgather, ...): size,count,type,redop,path,time_us,
      algbw_gbps,busbw_gbps,wrong -- one row per (size, path); the memcpy row
      has no redop, busbw or wrong.
  step: model,ranks,tensors,bytes,backward_ms,path,median_ms,mean_ms,
      algbw_gbps,busbw_gbps,speedup,floor_ratio,over_mpi_ms,wrong -- one row per
      path. speedup and floor_ratio are not read (the summary takes its ratios
      from median_ms), so runs from before the floor row, without floor_ratio,
      are read as well.

All files must be of one kind and one configuration: the same type and redop
(and rank count, where a "# ... N ranks" note says it) for sweeps, the same
model, ranks and backward_ms for steps; else it exits 2 naming the file. Blank
lines and lines starting with '#' are ignored.

Sweep output: one row per size with, for each path, the median time (µs) and
median busbw (GB/s; for memcpy its algbw, the ceiling of one pass over the
buffer), then AGAINST/BASELINE: the median over runs of the per-run ratio
BASELINE time / AGAINST time (>1: AGAINST is faster), with its min–max, where
BASELINE time is the fastest of the BASELINE and BASELINE-* paths (mpi and
mpi-inplace) in that run; the same for AGAINST-inplace where the runs have it;
and the median per-run ratio of AGAINST's busbw to memcpy's algbw (herd-bench's
memcpy row: every rank copies its buffer at once, the memory-traffic floor).

Step output: one row per path with the median over runs of median_ms, its
min–max, the median busbw and the median over runs of the per-run speedup (best
BASELINE-* path's median_ms in that run / this path's median_ms), and, where
the runs have a `floor` row (every rank copying its gradients at once), the
median per-run /floor (this path's median_ms / the floor's); then a line with
AGAINST's speedup over the better BASELINE path, which BASELINE path was the
fastest in how many runs, AGAINST-inplace's speedup and both paths' /floor.

Ratios are always taken within one run (one file) and then the median over
runs: the runs are noisy, and the ratio of two paths measured side by side is
steadier than the ratio of their medians. The median of an even count is the
mean of the two middle values.

A run with wrong elements (nonzero `wrong`) gets a warning on stderr naming
file, size, path and count, and the exit status is 1 (after the table), so a
wrong run is never summarized silently. --json OUT also writes the summary
(kind, runs, rows) as JSON; --median-csv OUT (sweeps) writes the medians as one
herd-bench CSV, which plot_busbw.py draws. Standard library only; run it with /usr/bin/python3.
"""

import argparse
import csv
import json
import statistics
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from plot_busbw import (HERD_BENCH_HEADER, BenchCsvError, BenchFile, csv_records,  # noqa: E402
                        format_size, read_bench_csv, read_lines)

PROG = "bench_median"
RUNS_LINE = "{} runs; medians; ratios are per-run (same run) then median"
STEP_HEADER = ("model,ranks,tensors,bytes,backward_ms,path,median_ms,mean_ms,algbw_gbps,"
               "busbw_gbps,speedup,floor_ratio,over_mpi_ms,wrong")
STEP_REQUIRED = ("model", "ranks", "bytes", "backward_ms", "path", "median_ms", "busbw_gbps",
                 "wrong")


class UsageError(Exception):
    """Input that cannot be summarized (exit status 2)."""


@dataclass
class StepRow:
    model: str
    ranks: int
    bytes: int
    backward_ms: float
    path: str
    median_ms: float
    busbw_gbps: float
    wrong: int


@dataclass
class StepFile:
    path: str
    rows: List[StepRow]


# --- reading -----------------------------------------------------------------


def _data_lines(path: str) -> List[tuple]:
    """(line number, text) of the lines that are neither blank nor '#' notes."""
    return read_lines(path, UsageError)[0]


def detect_kind(path: str) -> str:
    """"sweep" or "step", from the file's header line."""
    lines = _data_lines(path)
    if not lines:
        raise UsageError(f"{path}: empty (no header, no rows)")
    number, header_line = lines[0]
    header = {name.strip() for name in next(csv.reader([header_line]))}
    if {"model", "median_ms"} <= header:
        return "step"
    if {"size", "time_us"} <= header:
        return "sweep"
    raise UsageError(f"{path}:{number}: not a herd-bench CSV (header is '{header_line.strip()}'; "
                     f"herd-bench --csv writes 'size,count,type,...' for a sweep or "
                     f"'model,ranks,...' for step)")


def _number(text: str, kind, where: str, column: str):
    try:
        return kind(text.strip())
    except ValueError:
        raise UsageError(f"{where}: column '{column}' is not a number: '{text.strip()}'") from None


def read_step_csv(path: str) -> StepFile:
    lines = _data_lines(path)
    rows = []
    for where, field in csv_records(path, lines, STEP_REQUIRED, STEP_HEADER, UsageError):
        rows.append(StepRow(
            model=field("model").strip(),
            ranks=_number(field("ranks"), int, where, "ranks"),
            bytes=_number(field("bytes"), int, where, "bytes"),
            backward_ms=_number(field("backward_ms"), float, where, "backward_ms"),
            path=field("path").strip(),
            median_ms=_number(field("median_ms"), float, where, "median_ms"),
            busbw_gbps=_number(field("busbw_gbps"), float, where, "busbw_gbps"),
            wrong=_number(field("wrong"), int, where, "wrong"),
        ))
    if not rows:
        raise UsageError(f"{path}: a header but no data rows")
    return StepFile(path=path, rows=rows)


# --- arithmetic --------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    """The middle value; of an even count, the mean of the two middle ones."""
    return statistics.median(values)


def ratio_summary(values: Sequence[float]) -> Optional[dict]:
    if not values:
        return None
    return {"median": median(values), "min": min(values), "max": max(values),
            "runs": len(values)}


def _fmt(value: Optional[float]) -> str:
    """About three significant digits, never in exponent form."""
    if value is None:
        return "–"
    size = abs(value)
    if size >= 100:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _ratio(value: float) -> str:
    """Two decimals; three below 0.1, so that a small ratio keeps a digit."""
    return f"{value:.2f}" if abs(value) >= 0.1 else f"{value:.3f}"


def _range(summary: Optional[dict]) -> str:
    return "–" if summary is None else f"{_ratio(summary['min'])}–{_ratio(summary['max'])}"


def _times(summary: Optional[dict]) -> str:
    return "–" if summary is None else f"{_ratio(summary['median'])}×"


def _markdown_table(header: List[str], rows: List[List[str]]) -> List[str]:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "--:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# --- sweep -------------------------------------------------------------------


def _sweep_config(bench: BenchFile) -> tuple:
    kinds = sorted({(row.dtype, row.redop) for row in bench.rows if row.path != "memcpy"})
    if len(kinds) > 1:
        listed = ", ".join(f"{dtype} {redop}".strip() for dtype, redop in kinds)
        raise UsageError(f"{bench.path}: mixes several type/redop ({listed}); "
                         f"run herd-bench with one type and one op per file")
    return kinds[0] if kinds else ("", "")


def check_sweeps(files: Sequence[BenchFile]) -> None:
    first = files[0]
    first_config = _sweep_config(first)
    for bench in files:
        config = _sweep_config(bench)
        if config != first_config:
            raise UsageError(
                f"{bench.path}: type/redop '{' '.join(config).strip()}' differs from "
                f"'{' '.join(first_config).strip()}' in {first.path}; summarize one "
                f"configuration at a time")
        if (bench.ranks_note is not None and first.ranks_note is not None
                and bench.ranks_note != first.ranks_note):
            raise UsageError(f"{bench.path}: {bench.ranks_note} ranks, but {first.path} has "
                             f"{first.ranks_note}; summarize one configuration at a time")
        seen = set()
        for row in bench.rows:
            if (row.size, row.path) in seen:
                raise UsageError(f"{bench.path}: two rows for {row.path} at "
                                 f"{format_size(row.size)}; give one run per file")
            seen.add((row.size, row.path))


def sweep_wrong(files: Sequence[BenchFile]) -> List[str]:
    return [f"{PROG}: warning: {bench.path}: {row.path} at {format_size(row.size)} had "
            f"{row.wrong} wrong element(s)"
            for bench in files for row in bench.rows if row.wrong]


def paths_in_order(files) -> List[str]:
    """Every path of the files' rows, in the order of first appearance."""
    paths: List[str] = []
    for run in files:
        for row in run.rows:
            if row.path not in paths:
                paths.append(row.path)
    return paths


def _fastest(rows: Sequence) -> Optional[object]:
    """The row with the smallest time_us (the first of equal ones), or None."""
    present = [row for row in rows if row is not None]
    return min(present, key=lambda row: row.time_us) if present else None


def summarize_sweep(files: Sequence[BenchFile], baseline: str, against: str) -> dict:
    paths = paths_in_order(files)
    for wanted, option in ((baseline, "--baseline"), (against, "--against")):
        if wanted not in paths:
            raise UsageError(f"no '{wanted}' rows in any file ({option}); the paths are "
                             f"{', '.join(paths)}")
    baselines = [path for path in paths if _is_baseline(path, baseline)]
    in_place = against + "-inplace"
    runs = [{(row.size, row.path): row for row in bench.rows} for bench in files]
    sizes = sorted({row.size for bench in files for row in bench.rows})
    rows = []
    for size in sizes:
        present = [run for run in runs if any(key[0] == size for key in run)]
        by_path = {}
        for path in paths:
            found = [run[(size, path)] for run in runs if (size, path) in run]
            if not found:
                by_path[path] = None
                continue
            busbw = [row.busbw_gbps for row in found if row.busbw_gbps is not None]
            by_path[path] = {
                "runs": len(found),
                "time_us": median([row.time_us for row in found]),
                "algbw_gbps": median([row.algbw_gbps for row in found]),
                "busbw_gbps": median(busbw) if busbw else None,
            }
        speedups, in_place_speedups, of_memcpy = [], [], []
        for run in runs:
            base = _fastest([run.get((size, path)) for path in baselines])
            mine, memcpy = run.get((size, against)), run.get((size, "memcpy"))
            if base is not None and mine is not None and mine.time_us > 0:
                speedups.append(base.time_us / mine.time_us)
            mine_in_place = run.get((size, in_place))
            if base is not None and mine_in_place is not None and mine_in_place.time_us > 0:
                in_place_speedups.append(base.time_us / mine_in_place.time_us)
            if (mine is not None and memcpy is not None and mine.busbw_gbps is not None
                    and memcpy.algbw_gbps > 0):
                of_memcpy.append(mine.busbw_gbps / memcpy.algbw_gbps)
        entry = {"size": size, "runs": len(present), "paths": by_path,
                 "speedup": ratio_summary(speedups),
                 "busbw_over_memcpy": ratio_summary(of_memcpy)}
        if in_place in paths:
            entry["inplace_speedup"] = ratio_summary(in_place_speedups)
        rows.append(entry)
    # "baselines" and "memcpy_floor" say how this summary was taken: the
    # fastest of these paths per run, and a memcpy row in which every rank
    # copies at once (herd-bench's floor); a summary without them (older data)
    # compared with the one baseline path and a memcpy of rank 0 alone.
    return {"kind": "sweep", "runs": len(files), "files": [bench.path for bench in files],
            "type": _sweep_config(files[0])[0], "redop": _sweep_config(files[0])[1],
            "baseline": baseline, "against": against, "baselines": baselines,
            "memcpy_floor": "memcpy" in paths, "paths": paths, "rows": rows}


def write_median_csv(summary: dict, files: Sequence[BenchFile], out) -> None:
    """The sweep's medians as one herd-bench CSV, for plot_busbw.py: type and
    redop from the first run that has the row, count left empty; wrong is the
    largest count of any run."""
    firsts = {}
    worst = {}
    for bench in files:
        for row in bench.rows:
            firsts.setdefault((row.size, row.path), row)
            if row.wrong is not None:
                key = (row.size, row.path)
                worst[key] = max(worst.get(key, 0), row.wrong)
    out.write(HERD_BENCH_HEADER + "\n")
    for entry in summary["rows"]:
        for path in summary["paths"]:
            medians = entry["paths"].get(path)
            if medians is None:
                continue
            first = firsts[(entry["size"], path)]
            busbw = "" if medians["busbw_gbps"] is None else f"{medians['busbw_gbps']:.3f}"
            wrong = worst.get((entry["size"], path))
            out.write(f"{entry['size']},,{first.dtype},{first.redop},{path},"
                      f"{medians['time_us']:.2f},{medians['algbw_gbps']:.3f},{busbw},"
                      f"{'' if wrong is None else wrong}\n")


def format_sweep(summary: dict) -> List[str]:
    baseline, against, paths = summary["baseline"], summary["against"], summary["paths"]
    baselines = summary.get("baselines", [baseline])
    in_place = against + "-inplace"
    has_in_place = any("inplace_speedup" in row for row in summary["rows"])
    has_memcpy = "memcpy" in paths
    header = ["size"]
    for path in paths:
        header += [f"{path} µs", f"{path} GB/s"]
    header += [f"{against}/{baseline}", "min–max"]
    if has_in_place:
        header += [f"{in_place}/{baseline}", "min–max"]
    if has_memcpy:
        header.append(f"{against} busbw / memcpy")
    table = []
    for row in summary["rows"]:
        size = format_size(row["size"])
        if row["runs"] != summary["runs"]:
            size += f" ({row['runs']} runs)"
        cells = [size]
        for path in paths:
            stats = row["paths"][path]
            if stats is None:
                cells += ["–", "–"]
                continue
            bandwidth = stats["algbw_gbps"] if path == "memcpy" else stats["busbw_gbps"]
            cells += [_fmt(stats["time_us"]), _fmt(bandwidth)]
        cells += [_times(row["speedup"]), _range(row["speedup"])]
        if has_in_place:
            cells += [_times(row.get("inplace_speedup")), _range(row.get("inplace_speedup"))]
        if has_memcpy:
            ratio = row["busbw_over_memcpy"]
            cells.append("–" if ratio is None else _ratio(ratio["median"]))
        table.append(cells)
    if len(baselines) > 1:
        legend = (f"{against}/{baseline}: the faster of {', '.join(baselines)}'s times / "
                  f"{against} time in the same run (>1: {against} faster)")
    else:
        legend = (f"{against}/{baseline}: {baseline} time / {against} time in the same run "
                  f"(>1: {against} faster)")
    if has_in_place:
        legend += f"; {in_place}/{baseline}: the same for {in_place}"
    if has_memcpy and summary.get("memcpy_floor"):
        legend += (f"; memcpy: every rank copies its buffer at the same time, the "
                   f"memory-traffic floor (memcpy GB/s: its algbw); {against} busbw / memcpy: "
                   f"in the same run")
    elif has_memcpy:
        legend += (f"; memcpy GB/s: algbw of one memcpy of the buffer, the ceiling; "
                   f"{against} busbw / memcpy: in the same run")
    return [RUNS_LINE.format(summary["runs"]), ""] + _markdown_table(header, table) + [
        "", legend + "."]


# --- step --------------------------------------------------------------------


def _is_baseline(path: str, baseline: str) -> bool:
    return path == baseline or path.startswith(baseline + "-")


def check_steps(files: Sequence[StepFile], baseline: str, against: str) -> None:
    first = files[0]
    first_config = (first.rows[0].model, first.rows[0].ranks, first.rows[0].backward_ms)

    def describe(config):
        return f"{config[0]}, {config[1]} ranks, backward {config[2]:g} ms"

    for step in files:
        seen = set()
        for row in step.rows:
            config = (row.model, row.ranks, row.backward_ms)
            if config != first_config:
                raise UsageError(f"{step.path}: {describe(config)} differs from "
                                 f"{describe(first_config)} in {first.path}; summarize one "
                                 f"configuration at a time")
            if row.path in seen:
                raise UsageError(f"{step.path}: two rows for {row.path}; give one run per file")
            seen.add(row.path)
        if against not in seen:
            raise UsageError(f"{step.path}: no '{against}' row (--against); the paths are "
                             f"{', '.join(sorted(seen))}")
        if not any(_is_baseline(path, baseline) for path in seen):
            raise UsageError(f"{step.path}: no '{baseline}' or '{baseline}-*' row (--baseline); "
                             f"the paths are {', '.join(sorted(seen))}")


def step_wrong(files: Sequence[StepFile]) -> List[str]:
    return [f"{PROG}: warning: {step.path}: {row.path} at {format_size(row.bytes)} "
            f"({row.model}) had {row.wrong} wrong element(s)"
            for step in files for row in step.rows if row.wrong]


FLOOR = "floor"


def summarize_step(files: Sequence[StepFile], baseline: str, against: str) -> dict:
    paths = paths_in_order(files)
    runs = []
    fastest: Dict[str, int] = {}
    for step in files:
        by_path = {row.path: row for row in step.rows}
        best_row = min((row for row in step.rows if _is_baseline(row.path, baseline)),
                       key=lambda row: row.median_ms)
        fastest[best_row.path] = fastest.get(best_row.path, 0) + 1
        floor = by_path.get(FLOOR)
        runs.append((by_path, best_row.median_ms, floor.median_ms if floor else None))
    has_floor = any(floor is not None for _, _, floor in runs)
    rows = []
    for path in paths:
        found = [(by_path[path], best, floor) for by_path, best, floor in runs if path in by_path]
        times = [row.median_ms for row, _, _ in found]
        speedups = [best / row.median_ms for row, best, _ in found if row.median_ms > 0]
        entry = {"path": path, "runs": len(found), "median_ms": median(times),
                 "min_ms": min(times), "max_ms": max(times),
                 "busbw_gbps": median([row.busbw_gbps for row, _, _ in found]),
                 "speedup": ratio_summary(speedups)}
        if has_floor:
            entry["over_floor"] = ratio_summary([row.median_ms / floor for row, _, floor in found
                                                 if floor is not None and floor > 0])
        rows.append(entry)
    first = files[0].rows[0]
    by_name = {row["path"]: row for row in rows}
    summary = {"kind": "step", "runs": len(files), "files": [step.path for step in files],
               "model": first.model, "ranks": first.ranks, "bytes": first.bytes,
               "backward_ms": first.backward_ms, "baseline": baseline, "against": against,
               "paths": paths, "rows": rows, "headline": by_name[against]["speedup"],
               # How often each baseline path was the fastest of its run, most often first.
               "fastest_baseline": sorted(fastest.items(), key=lambda item: -item[1])}
    in_place = against + "-inplace"
    if in_place in by_name:
        summary["inplace_headline"] = by_name[in_place]["speedup"]
    return summary


def _headline(figure: Optional[dict]) -> str:
    if figure is None:
        return "– (no run with a nonzero time)"
    return f"{_ratio(figure['median'])}× (median of {figure['runs']} runs, range {_range(figure)})"


def format_step(summary: dict) -> List[str]:
    has_floor = any("over_floor" in row for row in summary["rows"])
    header = ["path", "median ms", "min–max ms", "busbw GB/s", "speedup", "speedup min–max"]
    if has_floor:
        header.append("/floor")
    table = []
    for row in summary["rows"]:
        path = row["path"]
        if row["runs"] != summary["runs"]:
            path += f" ({row['runs']} runs)"
        cells = [path, _fmt(row["median_ms"]), f"{_fmt(row['min_ms'])}–{_fmt(row['max_ms'])}",
                 _fmt(row["busbw_gbps"]), _times(row["speedup"]), _range(row["speedup"])]
        if has_floor:
            cells.append(_times(row.get("over_floor")))
        table.append(cells)
    baseline = "MPI" if summary["baseline"] == "mpi" else summary["baseline"]
    against = summary["against"]
    legend = (f"speedup: best {summary['baseline']}-* median_ms / this path's median_ms, in the "
              f"same run.")
    if has_floor:
        legend += (f" /floor: this path's median_ms / the floor's (every rank copies all its "
                   f"gradients at the same time), in the same run.")
    lines = [RUNS_LINE.format(summary["runs"]), ""] + _markdown_table(header, table) + [
        "", legend, ""]
    headline = f"{against} speedup over the better {baseline} baseline: " + _headline(
        summary["headline"])
    fastest = summary.get("fastest_baseline")
    if fastest:
        named = ", ".join(f"{path} in {count} of {summary['runs']} runs"
                          for path, count in fastest)
        headline += f"; the fastest {baseline} row: {named}"
    in_place = against + "-inplace"
    if "inplace_headline" in summary:
        headline += f"; {in_place}: " + _headline(summary["inplace_headline"])
    if has_floor:
        by_name = {row["path"]: row for row in summary["rows"]}
        for path in (against, in_place):
            figure = by_name.get(path, {}).get("over_floor")
            if figure is not None:
                headline += (f"; {path} / floor: {_ratio(figure['median'])}× "
                             f"(range {_range(figure)})")
    lines.append(headline)
    return lines


# --- command line ------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench_median.py",
        description="Summarize repeated herd-bench --csv runs (sweep or step) into medians, "
                    "as Markdown.")
    parser.add_argument("inputs", nargs="+", metavar="FILE.csv",
                        help="herd-bench --csv output, one run per file, all of one kind")
    parser.add_argument("--baseline", default="mpi",
                        help="path to compare against, with the BASELINE-* paths (the fastest "
                             "of them per run); default mpi")
    parser.add_argument("--against", default="herd",
                        help="path whose speedup over the baseline is reported; default herd")
    parser.add_argument("--title", help="a '### TITLE' heading above the table")
    parser.add_argument("--json", metavar="OUT", help="also write the summary as JSON to OUT")
    parser.add_argument("--median-csv", metavar="OUT",
                        help="sweeps: also write the medians as one herd-bench CSV to OUT "
                             "(for plot_busbw.py)")
    args = parser.parse_args(argv)
    try:
        kinds = [(path, detect_kind(path)) for path in args.inputs]
        first_path, kind = kinds[0]
        for path, other in kinds[1:]:
            if other != kind:
                raise UsageError(f"{path}: a {other} CSV, but {first_path} is a {kind} CSV; "
                                 f"summarize one kind at a time")
        if kind == "sweep":
            try:
                files = [read_bench_csv(path) for path in args.inputs]
            except BenchCsvError as error:
                raise UsageError(str(error)) from None
            check_sweeps(files)
            summary = summarize_sweep(files, args.baseline, args.against)
            warnings = sweep_wrong(files)
            lines = format_sweep(summary)
            if args.median_csv:
                with open(args.median_csv, "w", encoding="utf-8") as handle:
                    write_median_csv(summary, files, handle)
        else:
            steps = [read_step_csv(path) for path in args.inputs]
            check_steps(steps, args.baseline, args.against)
            summary = summarize_step(steps, args.baseline, args.against)
            warnings = step_wrong(steps)
            lines = format_step(summary)
    except (UsageError, OSError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    for warning in warnings:
        print(warning, file=sys.stderr)
    if args.title:
        lines = [f"### {args.title}", ""] + lines
    print("\n".join(lines))
    summary["wrong"] = len(warnings)
    if args.json:
        try:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump(summary, handle, indent=1, ensure_ascii=False)
                handle.write("\n")
        except OSError as error:
            print(f"{PROG}: error: {error}", file=sys.stderr)
            return 2
    if warnings:
        print(f"{PROG}: error: {len(warnings)} row(s) with wrong elements; the medians above "
              f"include a wrong run", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
