#!/usr/bin/python3
"""Plots bus bandwidth against size from herd-bench CSV files.

Usage:
  plot_busbw.py [LABEL=]FILE.csv ... -o busbw.png [--title TEXT] [--linear]

Each FILE is the stdout of `herd-bench <collective> ... --csv` (columns size,
count, type, redop, path, time_us, algbw_gbps, busbw_gbps, wrong). LABEL names
the file in the legend, e.g. `np2=run2.csv np4=run4.csv`; without one, the
label is taken from a `# ... N ranks` note in the file (present only when
stderr was captured too, since herd-bench prints its notes there) and else
from the file name.

One line per (file, path): busbw in GB/s against size on a log2 axis. Colour
tells the files apart and line style the paths (herd solid, ring dashed, mpi
dash-dot); the memcpy row has no busbw, so it is drawn dotted from its algbw,
as the ceiling of one pass over the buffer. Rows with wrong elements get a red
cross and a warning.

The CSV reading (read_bench_csv, parse_input_arg, ranks_of) is also used by
cost_model.py. Needs python3-matplotlib (Agg backend, no display); run it with
/usr/bin/python3.
"""

import argparse
import csv
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

HERD_BENCH_HEADER = "size,count,type,redop,path,time_us,algbw_gbps,busbw_gbps,wrong"
REQUIRED_COLUMNS = ("size", "path", "time_us", "algbw_gbps", "busbw_gbps")

# Line style and marker per path; other paths (from future subcommands) get
# the fallback styles in turn.
PATH_STYLES = {
    "herd": ("-", "o"),
    "ring": ("--", "s"),
    "shm": ((0, (3, 1, 1, 1, 1, 1)), "D"),
    "mpi": ("-.", "^"),
    "memcpy": (":", None),
}
FALLBACK_STYLES = [((0, (5, 1, 1, 1)), "D"), ((0, (1, 2)), "v"), ((0, (8, 2)), "P")]
PATH_ORDER = ["herd", "ring", "shm", "mpi"]


class BenchCsvError(Exception):
    """A CSV file that cannot be read as herd-bench output."""


@dataclass
class Row:
    size: int
    path: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: Optional[float]  # None for memcpy
    dtype: str = ""
    redop: str = ""
    wrong: Optional[int] = None


@dataclass
class BenchFile:
    path: str
    label: str
    rows: List[Row]
    ranks_note: Optional[int]  # from a "# ... N ranks" line, if the file has one


def parse_input_arg(arg: str) -> Tuple[Optional[str], str]:
    """Splits "LABEL=FILE" into (LABEL, FILE); a plain FILE gives (None, FILE).

    A FILE that itself contains "=" is taken whole when it exists.
    """
    if "=" in arg and not os.path.exists(arg):
        label, _, path = arg.partition("=")
        if label and path:
            return label, path
    return None, arg


def _parse_number(text: str, kind, where: str, column: str, allow_empty: bool):
    text = text.strip()
    if text == "":
        if allow_empty:
            return None
        raise BenchCsvError(f"{where}: column '{column}' is empty")
    try:
        return kind(text)
    except ValueError:
        raise BenchCsvError(f"{where}: column '{column}' is not a number: '{text}'") from None


def read_lines(path: str, error: type) -> Tuple[List[Tuple[int, str]], List[str]]:
    """The (line number, text) pairs of a CSV file's data lines, and its '#'
    note lines; blank lines are dropped. Raises `error` for a missing file or
    a directory."""
    if not os.path.exists(path):
        raise error(f"{path}: no such file")
    if os.path.isdir(path):
        raise error(f"{path}: is a directory, not a CSV file")
    with open(path, newline="", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    notes = [line for line in lines if line.lstrip().startswith("#")]
    data = [(number, line) for number, line in enumerate(lines, start=1)
            if line.strip() and not line.lstrip().startswith("#")]
    return data, notes


def csv_records(path: str, data_lines: Sequence[Tuple[int, str]], required: Sequence[str],
                expected_header: str, error: type = None):
    """Yields (where, field) for each row after the header among data_lines
    ((line number, text) pairs, notes and blank lines already dropped): where
    is "path:line" for messages, field(name) the raw text of
    column `name` ("" for a column the header lacks). Raises `error` (default
    BenchCsvError) for no header, a missing required column or a row whose
    field count differs from the header's."""
    error = error or BenchCsvError
    if not data_lines:
        raise error(f"{path}: empty (no header, no rows)")
    header_number, header_line = data_lines[0]
    header = [name.strip() for name in next(csv.reader([header_line]))]
    missing = [name for name in required if name not in header]
    if missing:
        raise error(f"{path}:{header_number}: missing column(s) {', '.join(missing)} (header is "
                    f"'{header_line.strip()}'; herd-bench --csv writes '{expected_header}')")
    index = {name: header.index(name) for name in header}
    for number, line in data_lines[1:]:
        fields = next(csv.reader([line]))
        where = f"{path}:{number}"
        if len(fields) != len(header):
            raise error(f"{where}: {len(fields)} fields, the header has {len(header)}")
        yield where, (lambda name, fields=fields: fields[index[name]] if name in index else "")


def read_bench_csv(path: str, label: Optional[str] = None) -> BenchFile:
    """Reads one herd-bench CSV file; raises BenchCsvError saying what is wrong."""
    data_lines, notes = read_lines(path, BenchCsvError)
    ranks_note = None
    for line in notes:
        match = re.search(r"(\d+) ranks?\b", line)
        if match:
            ranks_note = int(match.group(1))
            break
    rows = []
    for where, field in csv_records(path, data_lines, REQUIRED_COLUMNS, HERD_BENCH_HEADER,
                                    BenchCsvError):
        rows.append(Row(
            size=_parse_number(field("size"), int, where, "size", False),
            path=field("path").strip(),
            time_us=_parse_number(field("time_us"), float, where, "time_us", False),
            algbw_gbps=_parse_number(field("algbw_gbps"), float, where, "algbw_gbps", False),
            busbw_gbps=_parse_number(field("busbw_gbps"), float, where, "busbw_gbps", True),
            dtype=field("type").strip(),
            redop=field("redop").strip(),
            wrong=_parse_number(field("wrong"), int, where, "wrong", True),
        ))
    if not rows:
        raise BenchCsvError(f"{path}: a header but no data rows")
    if label is None:
        label = (f"np{ranks_note}" if ranks_note is not None
                 else os.path.splitext(os.path.basename(path))[0])
    return BenchFile(path=path, label=label, rows=rows, ranks_note=ranks_note)


def ranks_of(bench: BenchFile) -> Optional[int]:
    """The rank count a file was measured at: from its label's number ("np4",
    "4"), else its "# N ranks" note, else from busbw/algbw = 2(p-1)/p of the
    allreduce rows (p = 2 / (2 - ratio)), else None."""
    match = re.fullmatch(r"\D*(\d+)\D*", bench.label)
    if match:
        return int(match.group(1))
    if bench.ranks_note is not None:
        return bench.ranks_note
    best = max((row for row in bench.rows if row.busbw_gbps is not None),
               key=lambda row: row.algbw_gbps, default=None)
    if best is None or best.algbw_gbps <= 0:
        return None
    ratio = best.busbw_gbps / best.algbw_gbps
    if ratio >= 1.99:
        return None
    ranks = 2.0 / (2.0 - ratio)
    return int(round(ranks)) if abs(ranks - round(ranks)) < 0.1 else None


def format_size(size: float) -> str:
    """4096 -> "4 KiB", 1536 -> "1.5 KiB", 100 -> "100 B"."""
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    unit = 0
    while size >= 1024 and unit < len(units) - 1:
        size /= 1024
        unit += 1
    text = f"{size:.0f}" if float(size).is_integer() else f"{size:.1f}"
    return f"{text} {units[unit]}"


def _series(bench: BenchFile) -> Dict[str, List[Row]]:
    """The file's rows by legend key: the path, plus type/redop when a file
    mixes several."""
    kinds = {(row.dtype, row.redop) for row in bench.rows if row.path != "memcpy"}
    series: Dict[str, List[Row]] = {}
    for row in bench.rows:
        key = row.path
        if len(kinds) > 1 and row.path != "memcpy":
            key = f"{row.path} {row.dtype} {row.redop}".strip()
        series.setdefault(key, []).append(row)
    for rows in series.values():
        rows.sort(key=lambda row: row.size)
    return series


def _path_order(key: str) -> Tuple[int, str]:
    path = key.split()[0]
    if path == "memcpy":
        return (len(PATH_ORDER) + 1, key)
    return (PATH_ORDER.index(path) if path in PATH_ORDER else len(PATH_ORDER), key)


def _default_title(files: Sequence[BenchFile]) -> str:
    kinds = {(row.dtype, row.redop) for bench in files for row in bench.rows
             if row.path != "memcpy" and row.dtype}
    title = "herd-bench: bus bandwidth by size"
    if len(kinds) == 1:
        dtype, redop = next(iter(kinds))
        title += f" ({dtype}, {redop})" if redop else f" ({dtype})"
    return title


def plot(files: Sequence[BenchFile], output: str, title: Optional[str] = None,
         linear: bool = False) -> int:
    """Draws the files into a PNG at `output`; returns how many rows had wrong
    elements."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fallback: Dict[str, Tuple] = {}
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=120)
    sizes = set()
    wrong_rows = 0
    for file_index, bench in enumerate(files):
        color = colors[file_index % len(colors)]
        for key, rows in sorted(_series(bench).items(), key=lambda item: _path_order(item[0])):
            path = key.split()[0]
            if path not in PATH_STYLES and path not in fallback:
                fallback[path] = FALLBACK_STYLES[len(fallback) % len(FALLBACK_STYLES)]
            linestyle, marker = PATH_STYLES.get(path) or fallback[path]
            is_memcpy = path == "memcpy"
            points = [(row.size, row.algbw_gbps if is_memcpy else row.busbw_gbps) for row in rows]
            points = [(x, y) for x, y in points if y is not None and (linear or y > 0)]
            if not points:
                continue
            sizes.update(x for x, _ in points)
            name = f"{key} (algbw ceiling)" if is_memcpy else key
            label = f"{bench.label}: {name}" if len(files) > 1 else name
            ax.plot([x for x, _ in points], [y for _, y in points], color=color,
                    linestyle=linestyle, marker=marker, markersize=4,
                    linewidth=1.2 if is_memcpy else 1.6, alpha=0.75 if is_memcpy else 1.0,
                    label=label)
            bad = [row for row in rows if row.wrong and (linear or (row.busbw_gbps or 0) > 0)]
            for row in bad:
                print(f"plot_busbw: warning: {bench.path}: {row.path} at {format_size(row.size)} "
                      f"had {row.wrong} wrong element(s)", file=sys.stderr)
            wrong_rows += len(bad)
            if bad:
                ax.plot([row.size for row in bad], [row.busbw_gbps for row in bad], "x",
                        color="red", markersize=9, markeredgewidth=2)
    if not sizes:
        plt.close(fig)
        raise BenchCsvError("nothing to plot: no row has a positive bandwidth")

    ax.set_xscale("log", base=2)
    low, high = math.log2(min(sizes)), math.log2(max(sizes))
    first, last = math.floor(low), math.ceil(high)
    step = max(1, math.ceil((last - first + 1) / 12))
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** e for e in range(first, last + 1, step)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_size(x)))
    if min(sizes) == max(sizes):
        ax.set_xlim(min(sizes) / 2, max(sizes) * 2)
    if not linear:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.set_xlabel("size per rank (log2 scale)")
    ax.set_ylabel("busbw (GB/s)" + ("" if linear else ", log scale"))
    ax.set_title(title or _default_title(files))
    ax.grid(True, which="major", linestyle=":", linewidth=0.6, alpha=0.7)
    ax.legend(fontsize=8, loc="best", ncol=2 if len(files) > 2 else 1)
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(output, format="png")
    plt.close(fig)
    return wrong_rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Plot busbw (GB/s) against size from herd-bench CSV files.")
    parser.add_argument("inputs", nargs="+", metavar="[LABEL=]FILE",
                        help="herd-bench --csv output, optionally labelled, e.g. np2=run2.csv")
    parser.add_argument("-o", "--output", required=True, help="PNG file to write")
    parser.add_argument("--title", help="plot title (default: from the data)")
    parser.add_argument("--linear", action="store_true", help="linear busbw axis (default: log)")
    args = parser.parse_args(argv)
    try:
        files = [read_bench_csv(path, label)
                 for label, path in (parse_input_arg(arg) for arg in args.inputs)]
        plot(files, args.output, args.title, args.linear)
    except BenchCsvError as error:
        print(f"plot_busbw: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"plot_busbw: error: {error}", file=sys.stderr)
        return 2
    print(f"plot_busbw: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
