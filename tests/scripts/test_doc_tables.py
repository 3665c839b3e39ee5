"""Tests of benchmarks/doc_tables.py: docs/performance.md's tables against benchmarks/results/.

Run with /usr/bin/python3 -m pytest -q tests/scripts (ctest runs the directory as
bench_scripts, and doc_tables.py check on the real doc as perf_doc_tables). Every expected
table is written out by hand.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BENCHMARKS = os.path.join(ROOT, "benchmarks")
sys.path.insert(0, BENCHMARKS)

import bench_median  # noqa: E402
import doc_tables  # noqa: E402

DOC = os.path.join(ROOT, "docs", "performance.md")
RESULTS = os.path.join(BENCHMARKS, "results")

# A sweep of two sizes, two runs, in bench_median.py's --json form (only the fields its table
# shows).
SWEEP = {
    "kind": "sweep", "date": "2026-01-02", "machine": "a test machine",
    "command": "mpirun -np 2 herd-bench allreduce -b 4K -e 64K -f 16",
    "summary": {
        "kind": "sweep", "runs": 2, "baseline": "mpi", "against": "herd",
        "paths": ["herd", "mpi", "memcpy"],
        "rows": [
            {"size": 4096, "runs": 2,
             "paths": {"herd": {"time_us": 10.0, "busbw_gbps": 0.4096},
                       "mpi": {"time_us": 5.0, "busbw_gbps": 0.8192},
                       "memcpy": {"time_us": 0.25, "algbw_gbps": 16.384}},
             "speedup": {"median": 0.5, "min": 0.25, "max": 0.75, "runs": 2},
             "busbw_over_memcpy": {"median": 0.025, "runs": 2}},
            {"size": 65536, "runs": 1,
             "paths": {"herd": {"time_us": 123.4, "busbw_gbps": 0.531},
                       "mpi": None,
                       "memcpy": {"time_us": 2.0, "algbw_gbps": 32.768}},
             "speedup": None, "busbw_over_memcpy": {"median": 0.0162, "runs": 1}},
        ]}}
SWEEP_LINES = [
    "_2026-01-02, a test machine: `mpirun -np 2 herd-bench allreduce -b 4K -e 64K -f 16`_",
    "",
    "2 runs; medians; ratios are per-run (same run) then median",
    "",
    "| size | herd µs | herd GB/s | mpi µs | mpi GB/s | memcpy µs | memcpy GB/s | herd/mpi "
    "| min–max | herd busbw / memcpy |",
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    # 0.4096 -> 0.410 (three digits below 1); a ratio below 0.1 keeps three decimals.
    "| 4 KiB | 10.0 | 0.410 | 5.00 | 0.819 | 0.250 | 16.4 | 0.50× | 0.25–0.75 | 0.025 |",
    # One run of two, no mpi row: dashes, and the row says how many runs it had.
    "| 64 KiB (1 runs) | 123 | 0.531 | – | – | 2.00 | 32.8 | – | – | 0.016 |",
    "",
    "herd/mpi: mpi time / herd time in the same run (>1: herd faster); memcpy GB/s: algbw of one "
    "memcpy of the buffer, the ceiling; herd busbw / memcpy: in the same run.",
]
TABLE = {"kind": "table", "date": "2026-01-03", "machine": "a GPU", "command": "herd-bench fusion",
         "columns": ["case", "pack µs", "pack / d2d"], "align": "lrr",
         "rows": [["64 × 1 MiB", "37.0", "0.94"], ["16384 × 4 KiB", "799", "0.04"]]}
TABLE_LINES = [
    "_2026-01-03, a GPU: `herd-bench fusion`_",
    "",
    "| case | pack µs | pack / d2d |",
    "|---|--:|--:|",
    "| 64 × 1 MiB | 37.0 | 0.94 |",
    "| 16384 × 4 KiB | 799 | 0.04 |",
]


def write_results(tmp_path, **tables):
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    for name, data in tables.items():
        (results / f"{name}.json").write_text(json.dumps(data, ensure_ascii=False))
    return str(results)


def write_doc(tmp_path, text):
    doc = tmp_path / "doc.md"
    doc.write_text(text)
    return str(doc)


def region(name, lines):
    return "\n".join([f"<!-- table:{name} -->", ""] + lines + ["", "<!-- /table -->"])


def test_render_sweep_by_hand(tmp_path):
    results = write_results(tmp_path, sweep=SWEEP)
    assert doc_tables.render(results, "sweep") == SWEEP_LINES


def test_render_table_by_hand(tmp_path):
    results = write_results(tmp_path, fusion=TABLE)
    assert doc_tables.render(results, "fusion") == TABLE_LINES


def test_check_accepts_a_matching_doc(tmp_path):
    results = write_results(tmp_path, sweep=SWEEP, fusion=TABLE)
    doc = write_doc(tmp_path, "# t\n\ntext\n\n" + region("sweep", SWEEP_LINES) + "\n\nmore\n\n"
                    + region("fusion", TABLE_LINES) + "\n")
    assert doc_tables.check(doc, results) == []


def test_check_names_a_changed_figure(tmp_path):
    results = write_results(tmp_path, fusion=TABLE)
    tampered = [line.replace("| 799 |", "| 798 |") for line in TABLE_LINES]
    doc = write_doc(tmp_path, "intro\n" + region("fusion", tampered) + "\n")
    problems = doc_tables.check(doc, results)
    assert len(problems) == 1
    assert problems[0].startswith(f"{doc}:2: table 'fusion' differs from ")
    assert "-| 16384 × 4 KiB | 798 | 0.04 |" in problems[0]
    assert "+| 16384 × 4 KiB | 799 | 0.04 |" in problems[0]


def test_check_finds_missing_data_unused_data_and_bad_markers(tmp_path):
    results = write_results(tmp_path, fusion=TABLE, sweep=SWEEP)
    doc = write_doc(tmp_path, region("fusion", TABLE_LINES) + "\n" + region("nothing", []) + "\n")
    problems = doc_tables.check(doc, results)
    assert len(problems) == 2
    assert "no data file" in problems[0] and "'nothing'" in problems[0]
    assert problems[1].endswith(f"no <!-- table:sweep --> in {doc} shows it")
    for text, message in [
        ("<!-- table:a -->\n", "table 'a' has no <!-- /table -->"),
        ("<!-- table:a -->\n<!-- table:b -->\n", "opens inside table 'a'"),
        ("<!-- /table -->\n", "without a table marker"),
        ("<!-- table: a b -->\n", "not a table marker"),
        (region("fusion", TABLE_LINES) + "\n" + region("fusion", TABLE_LINES), "appears 2 times"),
    ]:
        with pytest.raises(doc_tables.TableError, match=message):
            doc_tables.check(write_doc(tmp_path, text), results)


def test_load_refuses_incomplete_data(tmp_path):
    no_date = {key: value for key, value in TABLE.items() if key != "date"}
    results = write_results(tmp_path, a=no_date, b={"kind": "plot"},
                            c=dict(TABLE, align="lr"))
    with pytest.raises(doc_tables.TableError, match="a table file needs date"):
        doc_tables.render(results, "a")
    with pytest.raises(doc_tables.TableError, match="kind is 'plot'"):
        doc_tables.render(results, "b")
    with pytest.raises(doc_tables.TableError, match="one l or r per column"):
        doc_tables.render(results, "c")


def test_update_rewrites_the_regions_only(tmp_path):
    results = write_results(tmp_path, fusion=TABLE)
    doc = write_doc(tmp_path, "before\n<!-- table:fusion -->\nstale\n<!-- /table -->\nafter\n")
    assert doc_tables.update(doc, results) == 1
    with open(doc, encoding="utf-8") as handle:
        assert handle.read() == "before\n" + region("fusion", TABLE_LINES) + "\nafter\n"
    assert doc_tables.check(doc, results) == []
    assert doc_tables.update(doc, results) == 0


def test_predict_tables_follow_the_model(tmp_path):
    section = "Recursive doubling / ring crossover n*(p)"
    results = write_results(tmp_path, crossover={"kind": "predict", "section": section})
    lines = doc_tables.render(results, "crossover")
    # predict's defaults: alpha 5 us, beta 8e-11 s/B, gamma 1 / 15.4e9 = 6.4935e-11 s/B. At
    # p = 8 (L = 3): n* = 11 alpha / (3 (beta + gamma) - 1.75 beta - 0.875 gamma)
    # = 5.5e-5 / 2.37987e-10 = 231107 B = 225.7 KiB; either time there,
    # 3 (alpha + n* (beta + gamma)) = 3 (5e-6 + 3.3495e-5) = 115.5 us.
    assert lines[:3] == ["| p | n* (ring faster above) | time of either at n* |",
                         "|---|---:|---:|", "| 8 | 226 KiB | 115 µs |"]
    doc = write_doc(tmp_path, region("crossover", [line.replace("226 KiB", "225 KiB")
                                                   for line in lines]))
    assert "table 'crossover' differs" in doc_tables.check(doc, results)[0]
    results = write_results(tmp_path, crossover={"kind": "predict", "section": "No such"})
    with pytest.raises(doc_tables.TableError, match="has no section 'No such'"):
        doc_tables.render(results, "crossover")


def test_record_makes_a_data_file_of_a_summary(tmp_path, capsys):
    header = "size,count,type,redop,path,time_us,algbw_gbps,busbw_gbps,wrong"
    runs = []
    for i, (herd, mpi) in enumerate([(10.0, 20.0), (30.0, 30.0), (20.0, 80.0)]):
        path = tmp_path / f"run{i}.csv"
        path.write_text(f"{header}\n4096,1024,float32,sum,herd,{herd},1,1,0\n"
                        f"4096,1024,float32,sum,mpi,{mpi},1,1,0\n")
        runs.append(str(path))
    summary = str(tmp_path / "summary.json")
    assert bench_median.main([*runs, "--json", summary]) == 0
    printed = capsys.readouterr().out.splitlines()
    out = str(tmp_path / "results" / "allreduce.json")
    os.makedirs(os.path.dirname(out))
    assert doc_tables.main(["record", summary, "--command", "herd-bench allreduce",
                            "--machine", "m", "--date", "2026-02-03", "-o", out]) == 0
    lines = doc_tables.render(str(tmp_path / "results"), "allreduce")
    assert lines[:2] == ["_2026-02-03, m: `herd-bench allreduce`_", ""]
    assert lines[2:] == printed
    # Median time 20 us; per-run ratios 2, 1, 4: median 2.
    assert "| 4 KiB | 20.0 | 1.00 | 30.0 | 1.00 | 2.00× | 1.00–4.00 |" in lines
    not_a_summary = tmp_path / "table.json"
    not_a_summary.write_text(json.dumps(TABLE, ensure_ascii=False))
    with pytest.raises(doc_tables.TableError, match="not a bench_median.py --json summary"):
        doc_tables.record(str(not_a_summary), "c", "m", None)


def test_record_and_render_a_step_with_in_place_rows_and_the_floor(tmp_path, capsys):
    header = ("model,ranks,tensors,bytes,backward_ms,path,median_ms,mean_ms,algbw_gbps,"
              "busbw_gbps,speedup,floor_ratio,over_mpi_ms,wrong")
    runs = []
    # One run: best MPI row mpi-per-tensor-inplace (30 ms); herd 20 -> 1.5, herd-inplace 15
    # -> 2.0; floor 10 -> herd 2.0, herd-inplace 1.5.
    for i in range(2):
        path = tmp_path / f"step{i}.csv"
        rows = [("herd", 20), ("herd-inplace", 15), ("mpi-per-tensor", 40),
                ("mpi-per-tensor-inplace", 30), ("floor", 10)]
        path.write_text(header + "\n" + "\n".join(
            f"resnet50,2,161,102228128,0,{name},{ms},{ms},1,1,,,,0" for name, ms in rows) + "\n")
        runs.append(str(path))
    summary = str(tmp_path / "summary.json")
    assert bench_median.main([*runs, "--json", summary]) == 0
    printed = capsys.readouterr().out.splitlines()
    out = str(tmp_path / "results" / "step.json")
    os.makedirs(os.path.dirname(out))
    assert doc_tables.main(["record", summary, "--command", "herd-bench step", "--machine", "m",
                            "--date", "2026-02-03", "-o", out]) == 0
    lines = doc_tables.render(str(tmp_path / "results"), "step")
    assert lines[2:] == printed
    assert "| herd-inplace | 15.0 | 15.0–15.0 | 1.00 | 2.00× | 2.00–2.00 | 1.50× |" in lines
    assert lines[-1] == (
        "herd speedup over the better MPI baseline: 1.50× (median of 2 runs, range 1.50–1.50); "
        "the fastest MPI row: mpi-per-tensor-inplace in 2 of 2 runs; herd-inplace: 2.00× "
        "(median of 2 runs, range 2.00–2.00); herd / floor: 2.00× (range 2.00–2.00); "
        "herd-inplace / floor: 1.50× (range 1.50–1.50)")


def test_the_performance_doc_matches_its_data():
    assert doc_tables.check(DOC, RESULTS) == []


def test_a_tampered_performance_doc_fails_the_command(tmp_path):
    with open(DOC, encoding="utf-8") as handle:
        text = handle.read()
    figure = "| 64 MiB | 15157 | 4.43 |"  # the 2-rank allreduce table's herd time at 64 MiB
    assert text.count(figure) == 1
    doc = write_doc(tmp_path, text.replace(figure, "| 64 MiB | 14157 | 4.43 |"))
    script = os.path.join(BENCHMARKS, "doc_tables.py")
    done = subprocess.run([sys.executable, script, "check", "--doc", doc], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert "table 'allreduce_np2' differs" in done.stderr
    assert "+| 64 MiB | 15157 | 4.43 |" in done.stderr
    # A changed data file fails it as well.
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    data = json.loads((results / "gpu_fusion.json").read_text())
    data["rows"][0][2] = "57.4"
    (results / "gpu_fusion.json").write_text(json.dumps(data, ensure_ascii=False))
    done = subprocess.run([sys.executable, script, "check", "--results", str(results)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "table 'gpu_fusion' differs" in done.stderr
    done = subprocess.run([sys.executable, script, "check"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
