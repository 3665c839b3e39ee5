"""Tests of benchmarks/compare_modules.py: herd.torch against Horovod from paired launches.

Every expected cell is worked out by hand from the files the test writes.
"""

import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import compare_modules  # noqa: E402


def write(folder, name, data):
    with open(os.path.join(folder, name), "w") as out:
        json.dump(data, out)


def calls(rows):
    return {"rows": [{"bytes": size, "row": row, "median_us": us} for size, row, us in rows]}


def test_calls_take_the_fastest_horovod_setting_of_each_run(tmp_path):
    folder = str(tmp_path)
    # Run 1: the 0.1 ms cycle is Horovod's fastest; run 2: its defaults are.
    write(folder, "calls_np2_herd_run1.json", calls([(4096, "allreduce", 10.0)]))
    write(folder, "calls_np2_horovod-default_run1.json", calls([(4096, "allreduce", 1000.0)]))
    write(folder, "calls_np2_horovod-cycle0.1_run1.json", calls([(4096, "allreduce", 40.0)]))
    write(folder, "calls_np2_herd_run2.json", calls([(4096, "allreduce", 20.0)]))
    write(folder, "calls_np2_horovod-default_run2.json", calls([(4096, "allreduce", 30.0)]))
    write(folder, "calls_np2_horovod-cycle0.1_run2.json", calls([(4096, "allreduce", 50.0)]))
    table = compare_modules.calls_table(folder, 2)
    assert table["runs"] == 2
    # herd median of 10 and 20; Horovod's fastest 40 and 30; ratios 4.0 and 1.5.
    assert table["rows"] == [["4 KiB", "15", "35", "2.75× (1.50–4.00)", "–", "–", "–",
                              "–", "–", "–"]]
    assert "`HOROVOD_CYCLE_TIME=0.1` in 1 of 2" in table["note"]
    assert "defaults in 1 of 2" in table["note"]
    assert compare_modules.calls_table(folder, 4) is None


def test_step_rows_are_against_the_fastest_horovod_row_of_the_same_run(tmp_path):
    folder = str(tmp_path)
    for run, (plain, shared, default, nofusion) in enumerate(((30.0, 20.0, 80.0, 40.0),
                                                               (36.0, 24.0, 60.0, 72.0)), 1):
        for name, ms in (("herd-plain", plain), ("herd-shared", shared),
                         ("horovod-default", default), ("horovod-fusion0", nofusion)):
            write(folder, f"step_np2_{name}_run{run}.json", {"median_ms": ms, "wrong": 0})
    table = compare_modules.step_table(folder, 2)
    # Horovod's fastest: 40 in run 1, 60 in run 2.
    assert table["rows"] == [
        ["herd.torch, a tensor per gradient", "33", "30–36", "1.50× (1.33–1.67)", "0"],
        ["herd.torch, gradients in one shared arena (`shared_zeros`)", "22", "20–24",
         "2.25× (2.00–2.50)", "0"],
        ["Horovod, defaults", "70", "60–80", "0.75× (0.50–1.00)", "0"],
        ["Horovod, `HOROVOD_FUSION_THRESHOLD=0`", "56", "40–72", "0.92× (0.83–1.00)", "0"],
    ]


def test_a_run_missing_a_launch_is_left_out(tmp_path):
    folder = str(tmp_path)
    write(folder, "step_np2_herd-plain_run1.json", {"median_ms": 30.0, "wrong": 0})
    write(folder, "step_np2_horovod-default_run1.json", {"median_ms": 60.0, "wrong": 0})
    write(folder, "step_np2_herd-plain_run2.json", {"median_ms": 10.0, "wrong": 0})
    table = compare_modules.step_table(folder, 2)
    assert table["runs"] == 1
    assert table["rows"][0][1:4] == ["30", "30–30", "2.00× (2.00–2.00)"]
