"""Tests of benchmarks/plot_busbw.py, benchmarks/cost_model.py and benchmarks/bench_median.py.

Run with /usr/bin/python3 -m pytest -q tests/scripts/test_bench_scripts.py (ctest runs it as
bench_scripts). Every expected value is computed by hand in the comments.
"""

import json
import math
import os
import subprocess
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")
sys.path.insert(0, os.path.abspath(BENCHMARKS))

import bench_median  # noqa: E402
import cost_model  # noqa: E402
import plot_busbw  # noqa: E402
from cost_model import Cluster, Params, Sample  # noqa: E402

HEADER = "size,count,type,redop,path,time_us,algbw_gbps,busbw_gbps,wrong"
# Two sizes at 4 ranks (busbw = 1.5 algbw), every path.
SMALL_CSV = "\n".join([
    HEADER,
    "4096,1024,float32,sum,herd,20.00,0.205,0.307,0",
    "4096,1024,float32,sum,ring,10.00,0.410,0.614,0",
    "4096,1024,float32,sum,mpi,5.00,0.819,1.229,0",
    "4096,1024,float32,,memcpy,0.10,40.960,,",
    "65536,16384,float32,sum,herd,40.00,1.638,2.458,0",
    "65536,16384,float32,sum,ring,30.00,2.185,3.277,0",
    "65536,16384,float32,sum,mpi,25.00,2.621,3.932,0",
    "65536,16384,float32,,memcpy,2.00,32.768,,",
]) + "\n"

ALPHA, BETA, GAMMA = 1e-6, 1e-9, 2e-9
PARAMS = Params(ALPHA, BETA, GAMMA)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- plot_busbw ------------------------------------------------------------


def test_plot_writes_png(tmp_path):
    csv_path = write(tmp_path, "np4.csv", SMALL_CSV)
    png = str(tmp_path / "out.png")
    assert plot_busbw.main([f"np4={csv_path}", csv_path, "-o", png, "--title", "t"]) == 0
    with open(png, "rb") as handle:
        data = handle.read()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 10_000


def test_plot_command_line(tmp_path):
    csv_path = write(tmp_path, "run.csv", SMALL_CSV)
    png = tmp_path / "cli.png"
    script = os.path.join(BENCHMARKS, "plot_busbw.py")
    done = subprocess.run([sys.executable, script, csv_path, "-o", str(png), "--linear"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert png.stat().st_size > 0


@pytest.mark.parametrize("text, message", [
    ("size,path,time_us\n4096,ring,1.0\n", "missing column(s) algbw_gbps, busbw_gbps"),
    (HEADER + "\n", "no data rows"),
    ("", "empty"),
    (HEADER + "\n4096,1024,float32,sum,ring,fast,0.4,0.6,0\n", "'time_us' is not a number: 'fast'"),
    (HEADER + "\n4096,1024,float32\n", "3 fields, the header has 9"),
])
def test_plot_rejects_bad_csv(tmp_path, capsys, text, message):
    csv_path = write(tmp_path, "bad.csv", text)
    png = tmp_path / "bad.png"
    assert plot_busbw.main([csv_path, "-o", str(png)]) == 2
    error = capsys.readouterr().err
    assert "plot_busbw: error:" in error and message in error and "bad.csv" in error
    assert not png.exists()


def test_plot_rejects_missing_file(tmp_path, capsys):
    missing = str(tmp_path / "nope.csv")
    assert plot_busbw.main([f"np2={missing}", "-o", str(tmp_path / "x.png")]) == 2
    assert f"{missing}: no such file" in capsys.readouterr().err


def test_labels_and_rank_counts(tmp_path):
    assert plot_busbw.parse_input_arg("np2=a.csv") == ("np2", "a.csv")
    assert plot_busbw.parse_input_arg("a.csv") == (None, "a.csv")
    plain = write(tmp_path, "run.csv", SMALL_CSV)
    # From the label, then from a "# N ranks" note, then from busbw/algbw = 1.5 -> p = 4.
    assert plot_busbw.ranks_of(plot_busbw.read_bench_csv(plain, "np8")) == 8
    noted = write(tmp_path, "noted.csv", "# herd-bench allreduce: 16 ranks, float32\n" + SMALL_CSV)
    bench = plot_busbw.read_bench_csv(noted)
    assert bench.label == "np16" and plot_busbw.ranks_of(bench) == 16
    bench = plot_busbw.read_bench_csv(plain)
    assert bench.label == "run" and plot_busbw.ranks_of(bench) == 4
    assert plot_busbw.format_size(4096) == "4 KiB"
    assert plot_busbw.format_size(1536) == "1.5 KiB"
    assert plot_busbw.format_size(64 << 20) == "64 MiB"


# --- cost_model: formulas ----------------------------------------------------


def test_ring_by_hand():
    n = 1000
    # p = 2: 2 alpha + n beta + n/2 gamma = 2 + 1 + 1 us.
    assert cost_model.ring_terms(n, 2).time(PARAMS) == pytest.approx(4e-6)
    # p = 4: 6 alpha + 1.5 n beta + 0.75 n gamma = 6 + 1.5 + 1.5 us.
    assert cost_model.ring_terms(n, 4).time(PARAMS) == pytest.approx(9e-6)
    # Segments of 100 B: a chunk of 250 B is 3 messages, so 18 alpha.
    assert cost_model.ring_terms(n, 4, 100).time(PARAMS) == pytest.approx(21e-6)


def test_recursive_doubling_and_tree_by_hand():
    n = 1000
    # p = 4: 2 (alpha + n beta + n gamma) = 2 (1 + 1 + 2) us.
    assert cost_model.recursive_doubling_terms(n, 4).time(PARAMS) == pytest.approx(8e-6)
    # p = 3: one exchange (4 us) + fold-in (alpha + n beta + n gamma = 4 us)
    # + fold-out (alpha + n beta = 2 us).
    assert cost_model.recursive_doubling_terms(n, 3).time(PARAMS) == pytest.approx(10e-6)
    # Tree at p = 4: 2 rounds of reduce (4 us each) + 2 of broadcast (2 us each).
    assert cost_model.tree_terms(n, 4).time(PARAMS) == pytest.approx(12e-6)
    # One rank: nothing to do.
    assert cost_model.ring_terms(n, 1).time(PARAMS) == 0.0


def test_busbw():
    # 1 GB in 1 s on 4 ranks: algbw 1 GB/s, busbw 1.5 GB/s.
    assert cost_model.busbw_gbps(1e9, 4, 1.0) == pytest.approx(1.5)


@pytest.mark.parametrize("p", [2, 3, 4, 8, 16, 100, 1024])
def test_crossover_equalizes_the_two_times(p):
    params = Params(5e-6, 8e-11, 7e-11)
    n = cost_model.rd_ring_crossover(p, params)
    assert n is not None and n > 0
    ring = cost_model.ring_terms(n, p).time(params)
    doubling = cost_model.recursive_doubling_terms(n, p).time(params)
    assert ring == pytest.approx(doubling, rel=1e-9)
    # Below n* recursive doubling is faster, above it the ring.
    assert (cost_model.recursive_doubling_terms(n / 2, p).time(params)
            < cost_model.ring_terms(n / 2, p).time(params))
    assert (cost_model.recursive_doubling_terms(2 * n, p).time(params)
            > cost_model.ring_terms(2 * n, p).time(params))


def test_crossover_closed_forms():
    # p = 2: the beta terms are equal, so n* = 2 alpha / gamma = 1000 B.
    assert cost_model.rd_ring_crossover(2, PARAMS) == pytest.approx(2 * ALPHA / GAMMA)
    # p = 8, L = 3: n* = 11 alpha / (3 (beta + gamma) - 1.75 beta - 0.875 gamma).
    expected = 11 * ALPHA / (3 * (BETA + GAMMA) - 1.75 * BETA - 0.875 * GAMMA)
    assert cost_model.rd_ring_crossover(8, PARAMS) == pytest.approx(expected)
    # p = 2 without a reduction cost: recursive doubling is never slower.
    assert cost_model.rd_ring_crossover(2, Params(ALPHA, BETA, 0.0)) is None


def test_hierarchical_by_hand():
    cluster = Cluster(local_ranks=8, intra_alpha=0.5e-6, intra_beta=0.25e-9)
    n, p = 8000, 16  # N = 2 nodes
    # intra: 2*7*0.5 us + 2*(7/8)*8000*0.25 ns = 7 + 3.5 us
    # inter: 2*1*1 us + 2*(1/2)*8000*1 ns = 2 + 8 us
    # reduce: (p-1)/p n gamma = 15/16 * 16 us = 15 us
    assert cost_model.hierarchical_shards(n, p, PARAMS, cluster) == pytest.approx(35.5e-6)
    # leaders: intra doubled (21 us), same inter (10 us), reduce (7/8 + 1/2) 16 us = 22 us.
    assert cost_model.hierarchical_leaders(n, p, PARAMS, cluster) == pytest.approx(53e-6)
    # beta_l / g = 3.1e-11 < beta / p = 6.25e-11: hierarchical beats the ring at every size.
    assert cost_model.hierarchical_ring_crossover(p, PARAMS, cluster) is None
    # A slower intra-node link (beta_l = beta): n_h = (N alpha - alpha_l) / (beta_l/g - beta/p)
    # = 1.5 us / (1.25e-10 - 6.25e-11) = 24000 B, where both take equally long.
    slow = Cluster(local_ranks=8, intra_alpha=0.5e-6, intra_beta=1e-9)
    n_h = cost_model.hierarchical_ring_crossover(p, PARAMS, slow)
    assert n_h == pytest.approx(24000)
    assert (cost_model.hierarchical_shards(n_h, p, PARAMS, slow)
            == pytest.approx(cost_model.cluster_ring(n_h, p, PARAMS, slow)))
    assert (cost_model.hierarchical_shards(2 * n_h, p, PARAMS, slow)
            > cost_model.cluster_ring(2 * n_h, p, PARAMS, slow))
    with pytest.raises(ValueError):
        cost_model.hierarchical_shards(n, 12, PARAMS, cluster)


# --- cost_model: fit --------------------------------------------------------


def synthetic_samples(params, overhead, segment_bytes, sizes):
    samples = []
    for p in (2, 4):
        for n in sizes:
            ring = cost_model.ring_terms(n, p, segment_bytes).time(params)
            samples.append(Sample("np%d" % p, p, "ring", n, ring, ring))
            if n <= cost_model.HERD_SMALL_ALLREDUCE_BYTES:
                herd = cost_model.recursive_doubling_terms(n, p).time(params) + overhead
                samples.append(Sample("np%d" % p, p, "herd", n, herd, herd))
    return samples


SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB


def test_fit_recovers_alpha_and_beta():
    truth = Params(3e-6, 2.5e-10, 7e-11)
    samples = synthetic_samples(truth, 15e-6, cost_model.MIB, SIZES)
    result = cost_model.fit(samples, gamma=truth.gamma)
    assert result.params.alpha == pytest.approx(truth.alpha, rel=1e-6)
    assert result.params.beta == pytest.approx(truth.beta, rel=1e-6)
    assert result.herd_overhead == pytest.approx(15e-6, rel=1e-6)
    assert max(abs(m - s.seconds) / s.seconds
               for m, s in zip(result.predicted, result.samples)) < 1e-6


def test_fit_recovers_gamma_from_exact_rows():
    # Ring rows give (p-1)/p (2 beta + gamma), recursive doubling log2(p) (beta + gamma):
    # without noise the two combinations separate beta and gamma.
    truth = Params(3e-6, 2.5e-10, 7e-11)
    result = cost_model.fit(synthetic_samples(truth, 15e-6, cost_model.MIB, SIZES), gamma=None)
    assert result.params.beta == pytest.approx(truth.beta, rel=1e-5)
    assert result.params.gamma == pytest.approx(truth.gamma, rel=1e-5)


def test_fit_with_oversubscription():
    # Rows at 4 ranks on 2 cores take twice the model's time.
    truth = Params(2e-6, 3e-10, 7e-11)
    samples = synthetic_samples(truth, 0.0, None, SIZES)
    for sample in samples:
        if sample.ranks == 4:
            sample.seconds *= 2
    result = cost_model.fit(samples, gamma=truth.gamma, segment_bytes=None, herd_overhead=False,
                            cores=2)
    assert result.params.alpha == pytest.approx(truth.alpha, rel=1e-6)
    assert result.params.beta == pytest.approx(truth.beta, rel=1e-6)


def test_fit_command_on_csv_files(tmp_path, capsys):
    truth = Params(4e-6, 5e-10, 1e-10)  # gamma = 1 / (10 GB/s)
    paths = []
    for p in (2, 4):
        lines = [HEADER]
        for n in SIZES:
            ring = cost_model.ring_terms(n, p, cost_model.MIB).time(truth)
            lines.append(f"{n},{n // 4},float32,sum,ring,{ring * 1e6:.6f},1,1,0")
            lines.append(f"{n},{n // 4},float32,,memcpy,0.000000,1,,")
            herd = cost_model.recursive_doubling_terms(n, p).time(truth) + 10e-6
            lines.append(f"{n},{n // 4},float32,sum,herd,{herd * 1e6:.6f},1,1,0")
        paths.append(f"np{p}=" + write(tmp_path, f"np{p}.csv", "\n".join(lines) + "\n"))
    assert cost_model.main(["fit", *paths, "--reduce-gbps", "10"]) == 0
    out = capsys.readouterr().out
    assert "| α (per message) | 4 µs |" in out
    assert "5e-10 s/B = 2 GB/s" in out
    assert "| herd runtime overhead per call | 10 µs |" in out
    assert "+0%" in out and "| 2 |" in out


def test_fit_command_needs_rank_count(tmp_path, capsys):
    # No label, no note and no busbw to infer it from: the file must say.
    text = HEADER + "\n4096,1024,float32,sum,ring,10.0,0.4,,0\n"
    path = write(tmp_path, "run.csv", text)
    assert cost_model.main(["fit", path]) == 2
    assert "cannot tell the rank count; label it, e.g. np4=" in capsys.readouterr().err
    # busbw 0 is herd-bench's one-rank row.
    path = write(tmp_path, "one.csv", HEADER + "\n4096,1024,float32,sum,ring,1.0,4.0,0.000,0\n")
    assert cost_model.main(["fit", path]) == 2
    assert "measured at 1 rank: nothing to fit" in capsys.readouterr().err


def test_predict_prints_markdown(capsys):
    assert cost_model.main(["predict", "--max-ranks", "64", "--max-bytes", "1M"]) == 0
    out = capsys.readouterr().out
    assert "### Ring: time (busbw GB/s)" in out
    assert "| n \\ p | 8 | 16 | 32 | 64 |" in out
    assert "### Recursive doubling / ring crossover n*(p)" in out
    assert "beats the ring below: n_h" in out
    # p = 8 ring at 4 KiB: 14 alpha = 70 us plus 1.75 * 4096 * 8e-11 + 0.875 * 4096 gamma.
    gamma = 1 / (cost_model.DEFAULT_REDUCE_GBPS * 1e9)
    expected = 14 * 5e-6 + 1.75 * 4096 * 8e-11 + 0.875 * 4096 * gamma
    assert f"| 4 KiB | {expected * 1e6:.3g} µs" in out
    assert not math.isnan(expected)


# --- bench_median -------------------------------------------------------------

STEP_HEADER = ("model,ranks,tensors,bytes,backward_ms,path,median_ms,mean_ms,algbw_gbps,"
               "busbw_gbps,speedup,over_mpi_ms,wrong")


def sweep_run(herd_us, mpi_us, herd_busbw, mpi_busbw, memcpy_algbw, wrong=0, extra=""):
    """One sweep run: 1 MiB rows first (sizes come out ascending anyway), then 4 KiB."""
    return "\n".join([
        HEADER,
        "1048576,262144,float32,sum,herd,100.0,10.0,10.0,0",
        "1048576,262144,float32,sum,mpi,200.0,5.0,5.0,0",
        "1048576,262144,float32,,memcpy,50.0,20.0,,",
        extra,
        f"4096,1024,float32,sum,herd,{herd_us},{herd_busbw},{herd_busbw},{wrong}",
        f"4096,1024,float32,sum,mpi,{mpi_us},{mpi_busbw},{mpi_busbw},0",
        f"4096,1024,float32,,memcpy,1.0,{memcpy_algbw},,",
    ]) + "\n"


def step_run(herd, nofusion, fused, per_tensor, herd_busbw=2.0, model="resnet50", wrong=0):
    rows = [("herd", herd, herd_busbw, wrong), ("herd-nofusion", nofusion, 1.0, 0),
            ("mpi-fused", fused, 0.5, 0), ("mpi-per-tensor", per_tensor, 0.75, 0)]
    return "\n".join([STEP_HEADER] + [
        f"{model},2,161,102228128,0,{path},{ms},{ms},{busbw},{busbw},1.000,0.000,{bad}"
        for path, ms, busbw, bad in rows]) + "\n"


def three_sweep_runs(tmp_path, wrong=0):
    # 4 KiB: herd 10, 20, 5 us; mpi 20, 60, 50 us -> per-run mpi/herd 2, 3, 10: median 3.0,
    # where the ratio of the medians would be 50 / 10 = 5.0.
    # herd busbw 1, 2, 4 over memcpy algbw 10, 40, 8 -> 0.1, 0.05, 0.5: median 0.1,
    # where the ratio of the medians would be 2 / 10 = 0.2.
    return [write(tmp_path, "run1.csv", sweep_run(10, 20, 1.0, 1.0, 10)),
            write(tmp_path, "run2.csv", sweep_run(20, 60, 2.0, 3.0, 40, wrong=wrong)),
            write(tmp_path, "run3.csv", sweep_run(5, 50, 4.0, 5.0, 8))]


def test_median_of_odd_and_even_counts():
    assert bench_median.median([5, 1, 3]) == 3
    assert bench_median.median([10, 1, 3, 2]) == 2.5  # (2 + 3) / 2


def test_median_sweep_per_run_ratios(tmp_path, capsys):
    files = three_sweep_runs(tmp_path)
    out_json = str(tmp_path / "sweep.json")
    assert bench_median.main([*files, "--title", "allreduce", "--json", out_json]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "### allreduce"
    assert "3 runs; medians; ratios are per-run (same run) then median" in lines
    assert ("| size | herd µs | herd GB/s | mpi µs | mpi GB/s | memcpy µs | memcpy GB/s "
            "| herd/mpi | min–max | herd busbw / memcpy |") in lines
    # herd: median 10 us, busbw 2; mpi: 50 us, busbw 3; memcpy 1 us, algbw 10;
    # mpi/herd 3.00 (2..10); herd busbw / memcpy 0.10.
    assert "| 4 KiB | 10.0 | 2.00 | 50.0 | 3.00 | 1.00 | 10.0 | 3.00× | 2.00–10.00 | 0.10 |" in lines
    # 1 MiB, the same in every run: 200 / 100 = 2, 10 / 20 = 0.5.
    assert "| 1 MiB | 100 | 10.0 | 200 | 5.00 | 50.0 | 20.0 | 2.00× | 2.00–2.00 | 0.50 |" in lines
    assert out.index("| 4 KiB |") < out.index("| 1 MiB |")
    with open(out_json, encoding="utf-8") as handle:
        summary = json.load(handle)
    assert summary["kind"] == "sweep" and summary["runs"] == 3
    small = summary["rows"][0]
    assert small["size"] == 4096
    assert small["speedup"] == {"median": 3.0, "min": 2.0, "max": 10.0, "runs": 3}
    assert small["busbw_over_memcpy"]["median"] == pytest.approx(0.1)
    assert small["paths"]["herd"]["time_us"] == 10.0
    assert small["paths"]["mpi"]["time_us"] == 50.0


def test_median_sweep_even_count(tmp_path):
    # herd 1, 2, 4, 8 us against mpi 8 us: per-run ratios 8, 4, 2, 1 -> median (2 + 4) / 2 = 3;
    # herd's median time is (2 + 4) / 2 = 3 us, so the ratio of the medians would be 8 / 3.
    files = [write(tmp_path, f"run{i}.csv", sweep_run(herd, 8, 1.0, 1.0, 10))
             for i, herd in enumerate([1, 2, 4, 8])]
    out_json = str(tmp_path / "even.json")
    assert bench_median.main([*files, "--json", out_json]) == 0
    with open(out_json, encoding="utf-8") as handle:
        small = json.load(handle)["rows"][0]
    assert small["paths"]["herd"]["time_us"] == 3.0
    assert small["speedup"] == {"median": 3.0, "min": 1.0, "max": 8.0, "runs": 4}


def test_median_step_speedup(tmp_path, capsys):
    # Best MPI per run: min(100, 80) = 80, min(70, 90) = 70, min(120, 110) = 110.
    # herd 50, 40, 100 ms -> speedups 1.6, 1.75, 1.1: median 1.6 (ratio of medians: 90 / 50 = 1.8).
    # mpi-fused 100, 70, 120 -> 0.8, 1.0, 0.9167: median 0.92.
    files = [write(tmp_path, "s1.csv", step_run(50, 60, 100, 80, herd_busbw=2.0)),
             write(tmp_path, "s2.csv", step_run(40, 60, 70, 90, herd_busbw=2.5)),
             write(tmp_path, "s3.csv", step_run(100, 60, 120, 110, herd_busbw=1.0))]
    out_json = str(tmp_path / "step.json")
    assert bench_median.main([*files, "--json", out_json]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "3 runs; medians; ratios are per-run (same run) then median"
    assert "| herd | 50.0 | 40.0–100 | 2.00 | 1.60× | 1.10–1.75 |" in lines
    assert "| mpi-fused | 100 | 70.0–120 | 0.500 | 0.92× | 0.80–1.00 |" in lines
    # herd-nofusion 60 ms each run: 80/60, 70/60, 110/60 = 1.33, 1.17, 1.83 -> median 1.33.
    assert "| herd-nofusion | 60.0 | 60.0–60.0 | 1.00 | 1.33× | 1.17–1.83 |" in lines
    # mpi-per-tensor was the faster MPI row in runs 1 and 3, mpi-fused in run 2.
    assert lines[-1] == ("herd speedup over the better MPI baseline: 1.60× "
                         "(median of 3 runs, range 1.10–1.75); the fastest MPI row: "
                         "mpi-per-tensor in 2 of 3 runs, mpi-fused in 1 of 3 runs")
    assert not any("/floor" in line for line in lines)  # no floor row, no column
    with open(out_json, encoding="utf-8") as handle:
        summary = json.load(handle)
    assert summary["kind"] == "step" and summary["runs"] == 3
    herd = summary["rows"][0]
    assert herd["path"] == "herd" and herd["median_ms"] == 50.0
    assert herd["speedup"]["median"] == pytest.approx(1.6)
    assert herd["speedup"]["min"] == pytest.approx(1.1)


def in_place_sweep_run(herd_us, herd_in_place_us, mpi_us, mpi_in_place_us, memcpy_algbw):
    """One sweep run at 4 KiB, 2 ranks, with every allreduce row herd-bench prints."""
    rows = [("herd", herd_us), ("herd-inplace", herd_in_place_us), ("ring", 30.0),
            ("mpi", mpi_us), ("mpi-inplace", mpi_in_place_us)]
    return "\n".join([HEADER] + [
        f"4096,1024,float32,sum,{path},{us},{4096 / us / 1e3:.4f},{4096 / us / 1e3:.4f},0"
        for path, us in rows] + [f"4096,1024,float32,,memcpy,1.0,{memcpy_algbw},,"]) + "\n"


def test_median_sweep_against_the_faster_mpi_row(tmp_path, capsys):
    # Run 1: mpi 40, mpi-inplace 20 -> 20; herd 10 -> 2.0; herd-inplace 5 -> 4.0.
    # Run 2: mpi 30, mpi-inplace 60 -> 30; herd 10 -> 3.0; herd-inplace 10 -> 3.0.
    # Run 3: mpi 8, mpi-inplace 16 -> 8; herd 16 -> 0.5; herd-inplace 4 -> 2.0.
    # herd/mpi: 2.0, 3.0, 0.5 -> median 2.0 (against mpi alone: 4, 3, 0.5 -> 3.0);
    # herd-inplace/mpi: 4.0, 3.0, 2.0 -> 3.0.
    files = [write(tmp_path, "r1.csv", in_place_sweep_run(10, 5, 40, 20, 10)),
             write(tmp_path, "r2.csv", in_place_sweep_run(10, 10, 30, 60, 10)),
             write(tmp_path, "r3.csv", in_place_sweep_run(16, 4, 8, 16, 10))]
    out_json = str(tmp_path / "inplace.json")
    assert bench_median.main([*files, "--json", out_json]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ("| size | herd µs | herd GB/s | herd-inplace µs | herd-inplace GB/s | ring µs "
            "| ring GB/s | mpi µs | mpi GB/s | mpi-inplace µs | mpi-inplace GB/s | memcpy µs "
            "| memcpy GB/s | herd/mpi | min–max | herd-inplace/mpi | min–max "
            "| herd busbw / memcpy |") in lines
    row = next(line for line in lines if line.startswith("| 4 KiB |"))
    # herd busbw 4096/10/1e3 = 0.4096, 0.4096, 0.256 over memcpy 10 -> median 0.041.
    assert row.endswith("| 2.00× | 0.50–3.00 | 3.00× | 2.00–4.00 | 0.041 |")
    assert lines[-1] == (
        "herd/mpi: the faster of mpi, mpi-inplace's times / herd time in the same run "
        "(>1: herd faster); herd-inplace/mpi: the same for herd-inplace; memcpy: every rank "
        "copies its buffer at the same time, the memory-traffic floor (memcpy GB/s: its algbw); "
        "herd busbw / memcpy: in the same run.")
    with open(out_json, encoding="utf-8") as handle:
        summary = json.load(handle)
    assert summary["baselines"] == ["mpi", "mpi-inplace"] and summary["memcpy_floor"] is True
    small = summary["rows"][0]
    assert small["speedup"] == {"median": 2.0, "min": 0.5, "max": 3.0, "runs": 3}
    assert small["inplace_speedup"] == {"median": 3.0, "min": 2.0, "max": 4.0, "runs": 3}


def floor_step_run(rows):
    """A step run of the CPU rows herd-bench prints: (path, median ms) pairs."""
    return "\n".join([STEP_HEADER] + [
        f"resnet50,2,161,102228128,0,{path},{ms},{ms},1.0,1.0,,,0" for path, ms in rows]) + "\n"


def test_median_step_best_mpi_row_and_floor(tmp_path, capsys):
    # Run 1: MPI rows 100 (fused), 60 (per-tensor), 40 (in place) -> best 40, mpi-per-tensor-inplace.
    #   herd 20 -> 2.0; herd-inplace 16 -> 2.5; floor 10: herd 2.0, herd-inplace 1.6.
    # Run 2: MPI rows 90, 30, 45 -> best 30, mpi-per-tensor. herd 30 -> 1.0; herd-inplace 20
    #   -> 1.5; floor 12: herd 2.5, herd-inplace 5/3.
    # Run 3: MPI rows 80, 64, 48 -> best 48, mpi-per-tensor-inplace. herd 16 -> 3.0;
    #   herd-inplace 12 -> 4.0; floor 8: herd 2.0, herd-inplace 1.5.
    runs = [(20, 16, 100, 60, 40, 10), (30, 20, 90, 30, 45, 12), (16, 12, 80, 64, 48, 8)]
    files = [write(tmp_path, f"s{i}.csv", floor_step_run(
        [("herd", herd), ("herd-inplace", in_place), ("herd-nofusion", 50), ("mpi-fused", fused),
         ("mpi-per-tensor", per_tensor), ("mpi-per-tensor-inplace", per_tensor_in_place),
         ("floor", floor)]))
        for i, (herd, in_place, fused, per_tensor, per_tensor_in_place, floor) in enumerate(runs)]
    out_json = str(tmp_path / "floor.json")
    assert bench_median.main([*files, "--json", out_json]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "| path | median ms | min–max ms | busbw GB/s | speedup | speedup min–max | /floor |" in lines
    # herd: speedups 2.0, 1.0, 3.0 -> 2.0; /floor 2.0, 2.5, 2.0 -> 2.0.
    assert "| herd | 20.0 | 16.0–30.0 | 1.00 | 2.00× | 1.00–3.00 | 2.00× |" in lines
    # floor: speedups 4.0, 2.5, 6.0 -> 4.0; /floor 1 in every run.
    assert "| floor | 10.0 | 8.00–12.0 | 1.00 | 4.00× | 2.50–6.00 | 1.00× |" in lines
    assert lines[-1] == (
        "herd speedup over the better MPI baseline: 2.00× (median of 3 runs, range 1.00–3.00); "
        "the fastest MPI row: mpi-per-tensor-inplace in 2 of 3 runs, mpi-per-tensor in 1 of 3 "
        "runs; herd-inplace: 2.50× (median of 3 runs, range 1.50–4.00); herd / floor: 2.00× "
        "(range 2.00–2.50); herd-inplace / floor: 1.60× (range 1.50–1.67)")
    with open(out_json, encoding="utf-8") as handle:
        summary = json.load(handle)
    assert summary["fastest_baseline"] == [["mpi-per-tensor-inplace", 2], ["mpi-per-tensor", 1]]
    assert summary["inplace_headline"]["median"] == 2.5
    in_place = next(row for row in summary["rows"] if row["path"] == "herd-inplace")
    assert in_place["over_floor"]["median"] == 1.6
    assert in_place["over_floor"]["max"] == pytest.approx(5 / 3)


def test_median_wrong_run_exits_1(tmp_path, capsys):
    files = three_sweep_runs(tmp_path, wrong=3)
    assert bench_median.main(files) == 1
    captured = capsys.readouterr()
    assert f"bench_median: warning: {files[1]}: herd at 4 KiB had 3 wrong element(s)" in captured.err
    assert "| 4 KiB | 10.0 |" in captured.out  # the table is still printed
    steps = [write(tmp_path, "s1.csv", step_run(50, 60, 100, 80)),
             write(tmp_path, "s2.csv", step_run(40, 60, 70, 90, wrong=7))]
    assert bench_median.main(steps) == 1
    assert (f"{steps[1]}: herd at 97.5 MiB (resnet50) had 7 wrong element(s)"
            in capsys.readouterr().err)


def test_median_rejects_mixed_inputs(tmp_path, capsys):
    sweep = write(tmp_path, "sweep.csv", sweep_run(10, 20, 1.0, 1.0, 10))
    step = write(tmp_path, "step.csv", step_run(50, 60, 100, 80))
    assert bench_median.main([sweep, step]) == 2
    error = capsys.readouterr().err
    assert f"bench_median: error: {step}: a step CSV, but {sweep} is a sweep CSV" in error
    other = write(tmp_path, "max.csv", sweep_run(10, 20, 1.0, 1.0, 10).replace(",sum,", ",max,"))
    assert bench_median.main([sweep, other]) == 2
    assert f"{other}: type/redop 'float32 max' differs from 'float32 sum'" in capsys.readouterr().err
    vgg = write(tmp_path, "vgg.csv", step_run(50, 60, 100, 80, model="vgg16"))
    assert bench_median.main([step, vgg]) == 2
    assert f"{vgg}: vgg16, 2 ranks, backward 0 ms differs from" in capsys.readouterr().err
    assert bench_median.main([sweep, str(tmp_path / "nope.csv")]) == 2
    assert "nope.csv: no such file" in capsys.readouterr().err


def test_median_ignores_comments_and_blank_lines(tmp_path, capsys):
    files = three_sweep_runs(tmp_path)
    assert bench_median.main(files) == 0
    plain = capsys.readouterr().out
    noted = [write(tmp_path, "noted1.csv", "# herd-bench allreduce: 2 ranks\n\n"
                   + sweep_run(10, 20, 1.0, 1.0, 10, extra="# 4096,1024,float32,sum,herd,1,1,1,9")),
             *files[1:]]
    assert bench_median.main(noted) == 0
    assert capsys.readouterr().out == plain
    step_text = step_run(50, 60, 100, 80)
    commented = "# herd-bench step: resnet50\n" + step_text.replace("\nresnet50,2,161,102228128,0,herd-",
                                                                   "\n\n# note\nresnet50,2,161,102228128,0,herd-")
    assert commented != step_text
    a = write(tmp_path, "a.csv", step_text)
    b = write(tmp_path, "b.csv", commented)
    assert bench_median.main([a, a]) == 0
    plain = capsys.readouterr().out
    assert bench_median.main([b, b]) == 0
    assert capsys.readouterr().out == plain and "| herd | 50.0 |" in plain


def test_median_command_line(tmp_path):
    files = three_sweep_runs(tmp_path)
    script = os.path.join(BENCHMARKS, "bench_median.py")
    done = subprocess.run([sys.executable, script, "--baseline", "herd", "--against", "mpi",
                           *files], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # Swapped: herd/mpi time per run 0.5, 0.333, 0.1 -> median 0.33; mpi busbw / memcpy
    # 0.1, 0.075, 0.625 -> 0.10.
    assert "| mpi/herd | min–max | mpi busbw / memcpy |" in done.stdout
    assert "| 0.33× | 0.10–0.50 | 0.10 |" in done.stdout


def test_median_csv_feeds_the_plot(tmp_path, capsys):
    files = three_sweep_runs(tmp_path, wrong=0)
    median_csv = str(tmp_path / "median.csv")
    assert bench_median.main([*files, "--median-csv", median_csv]) == 0
    capsys.readouterr()
    with open(median_csv, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    assert lines[0] == HEADER
    # 4 KiB herd: times 10, 20, 5 -> 10; busbw 1, 2, 4 -> 2. mpi: 20, 60, 50 -> 50; 1, 3, 5 -> 3.
    assert "4096,,float32,sum,herd,10.00,2.000,2.000,0" in lines
    assert "4096,,float32,sum,mpi,50.00,3.000,3.000,0" in lines
    # memcpy: 1 us each run, algbw 10, 40, 8 -> 10; no busbw, no check.
    assert "4096,,float32,,memcpy,1.00,10.000,," in lines
    assert lines.index("4096,,float32,sum,herd,10.00,2.000,2.000,0") < lines.index(
        "1048576,,float32,sum,herd,100.00,10.000,10.000,0")
    rows = plot_busbw.read_bench_csv(median_csv).rows
    assert {(row.size, row.path) for row in rows} == {
        (size, path) for size in (4096, 1048576) for path in ("herd", "mpi", "memcpy")}


def test_median_csv_feeds_the_fit(tmp_path, capsys):
    # run_report.sh's allreduce_np{2,4}_median.csv: count left empty, no "# N ranks" note.
    # Three identical runs per rank count of exact model rows (alpha 4 us, beta 5e-10 s/B,
    # gamma 1e-10 s/B, herd overhead 10 us): the medians are the rows, and the fit on the
    # median files, unlabelled (the rank count from the file name), gives the values back.
    truth = Params(4e-6, 5e-10, 1e-10)
    medians = []
    for p in (2, 4):
        lines = [HEADER]
        for n in SIZES:
            ring = cost_model.ring_terms(n, p, cost_model.MIB).time(truth) * 1e6
            herd = (cost_model.recursive_doubling_terms(n, p).time(truth) + 10e-6) * 1e6
            for path, us in (("herd", herd), ("ring", ring), ("mpi", ring)):
                algbw = n / us / 1e3
                lines.append(f"{n},{n // 4},float32,sum,{path},{us:.2f},{algbw:.3f},"
                             f"{algbw * 2 * (p - 1) / p:.3f},0")
            lines.append(f"{n},{n // 4},float32,,memcpy,1.00,{n / 1e3:.3f},,")
        text = "\n".join(lines) + "\n"
        runs = [write(tmp_path, f"allreduce_np{p}_run{i}.csv", text) for i in (1, 2, 3)]
        median_csv = str(tmp_path / f"allreduce_np{p}_median.csv")
        assert bench_median.main([*runs, "--median-csv", median_csv]) == 0
        with open(median_csv, encoding="utf-8") as handle:
            assert "4096,,float32,sum,ring," in handle.read()
        medians.append(median_csv)
    capsys.readouterr()
    assert cost_model.main(["fit", *medians, "--reduce-gbps", "10"]) == 0
    out = capsys.readouterr().out
    assert "### Fit to herd-bench rows at p = 2, 4" in out
    assert "| α (per message) | 4 µs |" in out
    assert "5e-10 s/B = 2 GB/s" in out
    assert "| herd runtime overhead per call | 10 µs |" in out


# --- multihost_report.sh ---------------------------------------------------

MULTIHOST_REPORT = os.path.join(os.path.abspath(BENCHMARKS), "multihost_report.sh")


def multihost_report(tmp_path, *args, **env):
    """Runs the report script with `args` and the environment plus `env`; its build folder is
    an empty one of tmp_path's unless env names another."""
    environment = dict(os.environ, HERD_BUILD_DIR=str(tmp_path / "no-build"))
    environment.pop("HERD_REPORT_MAX_BYTES", None)
    environment.update(env)
    return subprocess.run(["bash", MULTIHOST_REPORT, *args], capture_output=True, text=True,
                          env=environment, timeout=60)


@pytest.mark.parametrize("args", [
    [],                       # no OUT_DIR
    ["{out}", "2", "extra"],  # too many
    ["-o"],                   # an option where OUT_DIR goes
    ["--runs"],
    ["{out}", "0"],           # RUNS must be positive
    ["{out}", "x"],
    ["{out}", "-1"],
    ["{out}", "1.5"],
])
def test_multihost_report_refuses_bad_arguments(tmp_path, args):
    out = tmp_path / "out"
    done = multihost_report(tmp_path, *[a.format(out=out) for a in args])
    assert done.returncode == 2
    assert done.stderr.startswith("usage: benchmarks/multihost_report.sh OUT_DIR [RUNS]")
    assert done.stdout == ""
    assert not out.exists()


@pytest.mark.parametrize("size", ["16MB", "0", "1T", "-4K", "4 K", "04K"])
def test_multihost_report_refuses_a_bad_max_size(tmp_path, size):
    out = tmp_path / "out"
    done = multihost_report(tmp_path, str(out), HERD_REPORT_MAX_BYTES=size)
    assert done.returncode == 2
    assert done.stderr == (f"multihost_report: HERD_REPORT_MAX_BYTES='{size}': expected a size "
                           "such as 16M\n")
    assert not out.exists()


@pytest.mark.parametrize("args", [["{out}"], ["{out}", "3"]])
def test_multihost_report_needs_the_build(tmp_path, args):
    # Accepted arguments, and a size that passes, get as far as the missing herd-bench.
    out = tmp_path / "out"
    done = multihost_report(tmp_path, *[a.format(out=out) for a in args],
                            HERD_REPORT_MAX_BYTES="16M")
    assert done.returncode == 2
    missing = tmp_path / "no-build" / "benchmarks" / "herd-bench"
    assert done.stderr == (f"multihost_report: {missing} is missing; run scripts/build.sh "
                           "first\n")
    assert not out.exists()
