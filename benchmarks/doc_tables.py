#!/usr/bin/python3
"""The tables of figures in docs/performance.md, kept as data and checked against it.

Usage:
  doc_tables.py check  [--doc DOC] [--results DIR]
  doc_tables.py update [--doc DOC] [--results DIR]
  doc_tables.py render NAME [--results DIR]
  doc_tables.py record SUMMARY.json --command CMD [--machine TEXT] [--date YYYY-MM-DD] -o OUT.json

Every table of figures the doc quotes lies between two marker lines,

  <!-- table:NAME -->
  ...
  <!-- /table -->

and is rendered from DIR/NAME.json (DIR: benchmarks/results), one file per table, of one of
these kinds:

  sweep, step: a measurement summarized by bench_median.py. Keys: date, machine, command and
      summary (bench_median.py's --json output; a file may hold only the fields its table
      shows). Rendered as bench_median.py prints it.
  table: figures that no script here recomputes (another machine's tool, a fit). Keys: date,
      machine, command, columns, align (one letter per column: l or r) and rows (lists of
      cells, as text).
  predict: a table of the cost model's defaults, no measurement. Key: section, the title of
      the section of `cost_model.py predict`'s output to show; it is recomputed every time.

Measured kinds start with a line naming the date, the machine and the command.

check exits 1, naming the doc's line and showing a diff, when a table differs from its
rendering, and also for a marker without an end or a data file and for a data file that no
marker names; update rewrites the regions from the data. record turns one bench_median.py
--json summary into a data file (benchmarks/run_report.sh calls it for every table it
measures; copy the files into benchmarks/results/ and run update to take a new measurement
into the doc). Standard library only; run it with /usr/bin/python3.
"""

import argparse
import contextlib
import datetime
import difflib
import io
import json
import os
import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCHMARKS)

import bench_median  # noqa: E402
import cost_model  # noqa: E402

PROG = "doc_tables"
DEFAULT_DOC = os.path.normpath(os.path.join(BENCHMARKS, "..", "docs", "performance.md"))
DEFAULT_RESULTS = os.path.join(BENCHMARKS, "results")
OPEN = re.compile(r"^<!-- table:([A-Za-z0-9_.-]+) -->$")
CLOSE = "<!-- /table -->"
MEASURED_KINDS = ("sweep", "step", "table")


class TableError(Exception):
    """A data file or doc that cannot be rendered or checked (exit status 2)."""


# --- data --------------------------------------------------------------------


def load(results: str, name: str) -> dict:
    path = os.path.join(results, name + ".json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise TableError(f"no data file {path} for table '{name}'") from None
    except (OSError, ValueError) as error:
        raise TableError(f"{path}: {error}") from None
    kind = data.get("kind")
    required = {"sweep": ("summary",), "step": ("summary",),
                "table": ("columns", "align", "rows"), "predict": ("section",)}.get(kind)
    if required is None:
        raise TableError(f"{path}: kind is '{kind}', not one of sweep, step, table, predict")
    if kind in MEASURED_KINDS:
        required = ("date", "machine", "command") + required
    missing = [key for key in required if key not in data]
    if missing:
        raise TableError(f"{path}: a {kind} file needs {', '.join(missing)}")
    return data


def _source_line(data: dict) -> str:
    return f"_{data['date']}, {data['machine']}: `{data['command']}`_"


def _markdown_table(data: dict, where: str) -> List[str]:
    columns, align, rows = data["columns"], data["align"], data["rows"]
    if len(align) != len(columns) or set(align) - {"l", "r"}:
        raise TableError(f"{where}: align must be one l or r per column ({len(columns)})")
    for number, row in enumerate(rows, 1):
        if len(row) != len(columns):
            raise TableError(f"{where}: row {number} has {len(row)} cells, the table "
                             f"{len(columns)} columns")
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "|".join("---" if a == "l" else "--:" for a in align) + "|"]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def predict_sections() -> Dict[str, List[str]]:
    """`cost_model.py predict`'s output, by section title ('### TITLE')."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        cost_model.main(["predict"])
    sections: Dict[str, List[str]] = {}
    title = None
    for line in output.getvalue().splitlines():
        if line.startswith("### "):
            title = line[4:].strip()
            sections[title] = []
        elif title is not None:
            sections[title].append(line)
    return {title: _trim(lines) for title, lines in sections.items()}


def _trim(lines: List[str]) -> List[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def render(results: str, name: str, predicted: Optional[Dict[str, List[str]]] = None) -> List[str]:
    """The lines of table `name`, as they stand between its markers."""
    data = load(results, name)
    where = os.path.join(results, name + ".json")
    kind = data["kind"]
    if kind == "sweep":
        body = bench_median.format_sweep(data["summary"])
    elif kind == "step":
        body = bench_median.format_step(data["summary"])
    elif kind == "table":
        body = _markdown_table(data, where)
    else:
        sections = predicted if predicted is not None else predict_sections()
        if data["section"] not in sections:
            raise TableError(f"{where}: `cost_model.py predict` has no section "
                             f"'{data['section']}'; it has: {', '.join(sections)}")
        return sections[data["section"]]
    return [_source_line(data), ""] + body


# --- the doc -----------------------------------------------------------------


def regions(lines: Sequence[str], doc: str) -> List[Tuple[str, int, int]]:
    """(name, index of the open marker, index of the close marker) of every table."""
    found, open_at, name = [], None, None
    for index, line in enumerate(lines):
        match = OPEN.match(line.strip())
        if match:
            if open_at is not None:
                raise TableError(f"{doc}:{index + 1}: table '{match.group(1)}' opens inside "
                                 f"table '{name}' (line {open_at + 1}), which has no {CLOSE}")
            open_at, name = index, match.group(1)
        elif line.strip() == CLOSE:
            if open_at is None:
                raise TableError(f"{doc}:{index + 1}: {CLOSE} without a table marker before it")
            found.append((name, open_at, index))
            open_at = None
        elif line.strip().startswith("<!-- table"):
            raise TableError(f"{doc}:{index + 1}: not a table marker: '{line.strip()}' "
                             f"(write <!-- table:NAME --> with a name of letters, digits, "
                             f"_ . -)")
    if open_at is not None:
        raise TableError(f"{doc}:{open_at + 1}: table '{name}' has no {CLOSE}")
    names = [entry[0] for entry in found]
    for entry in found:
        if names.count(entry[0]) > 1:
            raise TableError(f"{doc}:{entry[1] + 1}: table '{entry[0]}' appears "
                             f"{names.count(entry[0])} times")
    return found


def read_doc(doc: str) -> List[str]:
    try:
        with open(doc, encoding="utf-8") as handle:
            return handle.read().split("\n")
    except OSError as error:
        raise TableError(str(error)) from None


def _region_body(rendered: List[str]) -> List[str]:
    return [""] + rendered + [""]


def check(doc: str, results: str) -> List[str]:
    """One message per problem; empty when the doc matches the data."""
    lines = read_doc(doc)
    problems = []
    predicted = None
    found = regions(lines, doc)
    for name, start, end in found:
        try:
            if predicted is None and load(results, name)["kind"] == "predict":
                predicted = predict_sections()
            wanted = _region_body(render(results, name, predicted))
        except TableError as error:
            problems.append(f"{doc}:{start + 1}: {error}")
            continue
        present = lines[start + 1:end]
        if present != wanted:
            diff = difflib.unified_diff(present, wanted, f"{doc} (table {name})",
                                        f"{name}.json rendered", lineterm="", n=1)
            problems.append(f"{doc}:{start + 1}: table '{name}' differs from "
                            f"{os.path.join(results, name + '.json')}:\n" + "\n".join(diff))
    used = {name for name, _, _ in found}
    for entry in sorted(os.listdir(results)):
        if entry.endswith(".json") and entry[:-5] not in used:
            problems.append(f"{os.path.join(results, entry)}: no <!-- table:{entry[:-5]} --> "
                            f"in {doc} shows it")
    return problems


def update(doc: str, results: str) -> int:
    """Rewrites every region from its data; returns how many changed."""
    lines = read_doc(doc)
    changed = 0
    for name, start, end in reversed(regions(lines, doc)):
        wanted = _region_body(render(results, name))
        if lines[start + 1:end] != wanted:
            lines[start + 1:end] = wanted
            changed += 1
    with open(doc, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines))
    return changed


# --- record ------------------------------------------------------------------


def this_machine() -> str:
    model = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model or 'unknown CPU'}, {os.cpu_count()} cores"


def record(summary_path: str, command: str, machine: Optional[str], date: Optional[str]) -> dict:
    try:
        with open(summary_path, encoding="utf-8") as handle:
            summary = json.load(handle)
    except (OSError, ValueError) as error:
        raise TableError(f"{summary_path}: {error}") from None
    kind = summary.get("kind") if isinstance(summary, dict) else None
    if kind not in ("sweep", "step"):
        raise TableError(f"{summary_path}: not a bench_median.py --json summary (kind "
                         f"'{kind}')")
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    return {"kind": kind, "date": date or today,
            "machine": machine or this_machine(), "command": command, "summary": summary}


# --- command line ------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="doc_tables.py",
        description="Render docs/performance.md's tables of figures from benchmarks/results/ "
                    "and check that the doc matches them.")
    sub = parser.add_subparsers(dest="mode", required=True)
    for mode, text in (("check", "exit 1 when a table of the doc differs from its data"),
                       ("update", "rewrite the doc's tables from their data")):
        command = sub.add_parser(mode, help=text)
        command.add_argument("--doc", default=DEFAULT_DOC)
        command.add_argument("--results", default=DEFAULT_RESULTS)
    command = sub.add_parser("render", help="print one table as Markdown")
    command.add_argument("name")
    command.add_argument("--results", default=DEFAULT_RESULTS)
    command = sub.add_parser("record", help="make a data file of a bench_median.py --json summary")
    command.add_argument("summary", metavar="SUMMARY.json")
    command.add_argument("--command", required=True, help="the measurement's command line")
    command.add_argument("--machine", help="the machine, in words (default: CPU model and cores)")
    command.add_argument("--date", help="YYYY-MM-DD (default: today, UTC)")
    command.add_argument("-o", "--output", required=True, metavar="OUT.json")
    args = parser.parse_args(argv)
    try:
        if args.mode == "check":
            problems = check(args.doc, args.results)
            for problem in problems:
                print(f"{PROG}: {problem}", file=sys.stderr)
            if problems:
                print(f"{PROG}: {len(problems)} problem(s); where the data is right, run "
                      f"benchmarks/doc_tables.py update", file=sys.stderr)
                return 1
            count = len(regions(read_doc(args.doc), args.doc))
            print(f"{PROG}: {count} tables of {args.doc} match {args.results}")
        elif args.mode == "update":
            changed = update(args.doc, args.results)
            print(f"{PROG}: rewrote {changed} table(s) of {args.doc}")
        elif args.mode == "render":
            print("\n".join(render(args.results, args.name)))
        else:
            data = record(args.summary, args.command, args.machine, args.date)
            with open(args.output, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1, ensure_ascii=False)
                handle.write("\n")
    except (TableError, OSError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
