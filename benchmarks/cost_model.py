#!/usr/bin/python3
"""The alpha-beta-gamma cost model of herd's allreduce algorithms.

  cost_model.py fit [LABEL=]FILE.csv ... [--reduce-gbps G | --fit-gamma]
  cost_model.py predict [--alpha-us 5] [--link-gbits 100] [--reduce-gbps G] ...

Model (docs/design/cost-model.md derives every formula): sending one message of m
bytes over a link costs alpha + m * beta, reducing m bytes costs m * gamma;
all ranks work at once, each link full duplex. n is the buffer in bytes, p the
number of ranks.

  ring                2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma
  recursive doubling  log2(p) (alpha + n beta + n gamma), p a power of two;
                      otherwise + 2 alpha + 2 n beta + n gamma (fold-in/out)
  tree                ceil(log2 p) (2 alpha + 2 n beta + n gamma)
  hierarchical        see hierarchical_shards / hierarchical_leaders

fit: reads herd-bench CSV files measured at two or more rank counts (the rank
count from the label, e.g. np4=run4.csv, else from the file) and fits alpha,
beta (and gamma with --fit-gamma) by least squares on the `ring` rows and the
`herd` rows up to --small-bytes (recursive doubling), printing the values and
the residual of every row, as Markdown.

predict: times and busbw for p = 8 .. 1024 and n = 4 KiB .. 1 GiB on a network
(default 100 Gb/s links, alpha 5 us, gamma from --reduce-gbps), the crossover
size between recursive doubling and the ring, and where hierarchical allreduce
wins, as Markdown tables for docs/performance.md.

Needs python3-numpy for fit; predict needs only the standard library.
"""

import argparse
import math
import os
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_busbw import (BenchCsvError, format_size, parse_input_arg,  # noqa: E402
                        ranks_of, read_bench_csv)

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# herd's settings the fit must mirror (collectives/allreduce.h, src/config.h;
# the threshold is small_allreduce_threshold's at up to 8 ranks).
HERD_SEGMENT_BYTES = 1 * MIB
HERD_SMALL_ALLREDUCE_BYTES = 64 * KIB

# gamma's default: the float32 sum kernel's throughput at 16 MiB on the CPU
# machine of docs/performance.md (its reduce_kernels table, which also shows
# how much it varies); pass --reduce-gbps with your own machine's number.
DEFAULT_REDUCE_GBPS = 15.4


@dataclass(frozen=True)
class Params:
    """alpha: seconds per message; beta: seconds per byte on a link; gamma:
    seconds per byte reduced."""
    alpha: float
    beta: float
    gamma: float


@dataclass(frozen=True)
class Terms:
    """A cost as coefficients: time = a * alpha + b * beta + c * gamma."""
    a: float
    b: float
    c: float

    def time(self, params: Params) -> float:
        return self.a * params.alpha + self.b * params.beta + self.c * params.gamma


# ---------------------------------------------------------------------------
# Flat algorithms: p ranks, each with its own link.


def _log2_exact(p: int) -> int:
    """log2(p) for a power of two p, else -1."""
    return p.bit_length() - 1 if p > 0 and p & (p - 1) == 0 else -1


def ring_terms(n: float, p: int, segment_bytes: Optional[float] = None) -> Terms:
    """Ring allreduce: p - 1 reduce-scatter steps and p - 1 allgather steps,
    each sending one chunk of n/p bytes; the reduce-scatter steps also reduce
    a chunk. With segment_bytes, a chunk goes as ceil(n / (p S)) messages, each
    paying alpha (herd's ring; the textbook formula has one message per step)."""
    if p < 2:
        return Terms(0.0, 0.0, 0.0)
    messages = 1
    if segment_bytes:
        messages = max(1, math.ceil(n / p / segment_bytes))
    steps = 2 * (p - 1)
    return Terms(steps * messages, steps * n / p, (p - 1) * n / p)


def recursive_doubling_terms(n: float, p: int) -> Terms:
    """Recursive doubling: log2(p2) exchanges of the whole buffer, each also
    reducing it, p2 the largest power of two <= p. When p is not a power of
    two, p - p2 ranks first send their buffer to a partner, which reduces it
    (fold-in), and get the result back at the end (fold-out): one more
    message and reduction before, one more message after."""
    if p < 2:
        return Terms(0.0, 0.0, 0.0)
    steps = p.bit_length() - 1  # log2 of the largest power of two <= p
    fold = 0 if _log2_exact(p) >= 0 else 1
    return Terms(steps + 2 * fold, (steps + 2 * fold) * n, (steps + fold) * n)


def tree_terms(n: float, p: int) -> Terms:
    """Binomial-tree reduce to one root, then binomial-tree broadcast: each
    takes ceil(log2 p) rounds of whole-buffer messages; the reduce rounds also
    reduce the buffer."""
    if p < 2:
        return Terms(0.0, 0.0, 0.0)
    rounds = math.ceil(math.log2(p))
    return Terms(2 * rounds, 2 * rounds * n, rounds * n)


FLAT_ALGORITHMS = {
    "ring": lambda n, p: ring_terms(n, p),
    "recursive doubling": recursive_doubling_terms,
    "tree (reduce + broadcast)": tree_terms,
}


def busbw_gbps(n: float, p: int, seconds: float) -> float:
    """herd-bench's allreduce busbw: n / t * 2(p-1)/p, in 10^9 B/s."""
    return n / seconds * 2 * (p - 1) / p / 1e9 if seconds > 0 else 0.0


def crossover_bytes(first: Terms, second: Terms, params: Params) -> Optional[float]:
    """The n where two costs linear in n are equal, given their terms for
    n = 1 byte (so b and c are the per-byte slopes): None when the lines do not
    cross at a positive n."""
    latency_gap = (first.a - second.a) * params.alpha
    slope_gap = (second.b - first.b) * params.beta + (second.c - first.c) * params.gamma
    if slope_gap == 0:
        return None
    n = latency_gap / slope_gap
    return n if n > 0 else None


def rd_ring_crossover(p: int, params: Params) -> Optional[float]:
    """n*(p): the size where recursive doubling and the (unsegmented) ring take
    equally long. Below it recursive doubling is faster. For p a power of two,
    L = log2 p:

        n* = (2(p-1) - L) alpha / (L (beta + gamma) - 2(p-1)/p beta - (p-1)/p gamma)

    None when recursive doubling is never slower (a non-positive denominator)."""
    return crossover_bytes(ring_terms(1.0, p), recursive_doubling_terms(1.0, p), params)


# ---------------------------------------------------------------------------
# A cluster: p = N g ranks on N nodes of g ranks, one network card per node
# (alpha, beta as above, shared by the node's ranks), and an intra-node link
# of its own per rank (alpha_l, beta_l). Ranks are numbered node by node.


@dataclass(frozen=True)
class Cluster:
    local_ranks: int      # g
    intra_alpha: float    # alpha_l
    intra_beta: float     # beta_l


def _nodes(p: int, cluster: Cluster) -> int:
    if p % cluster.local_ranks or p < 2 * cluster.local_ranks:
        raise ValueError(f"{p} ranks is not a whole number (>= 2) of nodes of "
                         f"{cluster.local_ranks} ranks")
    return p // cluster.local_ranks


def hierarchical_shards(n: float, p: int, params: Params, cluster: Cluster) -> float:
    """Intra-node ring reduce-scatter (local rank i ends with shard i of the
    node's sum, n/g bytes); g inter-node ring allreduces, one per shard index
    among the N ranks holding it, all g sharing the node's network card; then
    an intra-node ring allgather of the shards."""
    g, nodes = cluster.local_ranks, _nodes(p, cluster)
    intra = 2 * (g - 1) * cluster.intra_alpha + 2 * (g - 1) / g * n * cluster.intra_beta
    # Each inter-node ring moves 2(N-1)/N of its n/g-byte shard; g of them
    # share the card, so the card carries 2(N-1)/N n bytes.
    inter = 2 * (nodes - 1) * params.alpha + 2 * (nodes - 1) / nodes * n * params.beta
    reduce = ((g - 1) / g + (nodes - 1) / nodes / g) * n * params.gamma  # = (p-1)/p n gamma
    return intra + inter + reduce


def hierarchical_leaders(n: float, p: int, params: Params, cluster: Cluster) -> float:
    """Intra-node reduce to one leader per node (ring reduce-scatter, then a
    gather of the g shards to the leader); ring allreduce of the whole buffer
    among the N leaders; intra-node broadcast (scatter, then ring allgather)."""
    g, nodes = cluster.local_ranks, _nodes(p, cluster)
    intra = 4 * (g - 1) * cluster.intra_alpha + 4 * (g - 1) / g * n * cluster.intra_beta
    inter = 2 * (nodes - 1) * params.alpha + 2 * (nodes - 1) / nodes * n * params.beta
    reduce = ((g - 1) / g + (nodes - 1) / nodes) * n * params.gamma
    return intra + inter + reduce


def cluster_ring(n: float, p: int, params: Params, cluster: Cluster) -> float:
    """The flat ring on the cluster: one ring edge per node leaves it, so every
    step waits for one network message of n/p bytes (the intra-node edges,
    faster, finish first) and the flat formula holds unchanged."""
    _nodes(p, cluster)
    return ring_terms(n, p).time(params)


def cluster_recursive_doubling(n: float, p: int, params: Params, cluster: Cluster) -> float:
    """Recursive doubling on the cluster (p, g powers of two): the first
    log2 g exchanges stay in the node; in each of the log2 N others all g ranks
    of a node send n bytes through its one card at once."""
    g, nodes = cluster.local_ranks, _nodes(p, cluster)
    if _log2_exact(p) < 0 or _log2_exact(g) < 0:
        raise ValueError("cluster recursive doubling is modelled for powers of two only")
    local = _log2_exact(g) * (cluster.intra_alpha + n * cluster.intra_beta + n * params.gamma)
    remote = _log2_exact(nodes) * (params.alpha + g * n * params.beta + n * params.gamma)
    return local + remote


CLUSTER_ALGORITHMS = {
    "ring": cluster_ring,
    "recursive doubling": cluster_recursive_doubling,
    "hierarchical (shards)": hierarchical_shards,
    "hierarchical (leaders)": hierarchical_leaders,
}


def hierarchical_ring_crossover(p: int, params: Params, cluster: Cluster) -> Optional[float]:
    """n_h(p): below it the hierarchical (shards) allreduce beats the flat ring
    on the cluster. ring - hierarchical = 2(g-1) [N alpha - alpha_l
    + n (beta/p - beta_l/g)], so

        n_h = (N alpha - alpha_l) / (beta_l / g - beta / p)

    None when beta_l / g <= beta / p: then hierarchical wins at every size
    (if N alpha > alpha_l)."""
    g, nodes = cluster.local_ranks, _nodes(p, cluster)
    slope = cluster.intra_beta / g - params.beta / p
    if slope <= 0:
        return None
    return (nodes * params.alpha - cluster.intra_alpha) / slope


# ---------------------------------------------------------------------------
# Fit.


@dataclass
class Sample:
    """One measured row: a ring row, or a herd row at most the recursive
    doubling threshold."""
    label: str
    ranks: int
    path: str          # "ring" or "herd"
    size: int
    seconds: float     # what the model explains (less the memcpy row with --subtract-memcpy)
    measured: float    # the row's time as herd-bench printed it


@dataclass
class FitResult:
    params: Params
    herd_overhead: Optional[float]
    errors: Dict[str, float]          # one standard error per fitted parameter
    fitted: List[str]                 # names of the fitted parameters
    predicted: List[float]            # seconds, per sample, same order
    samples: List[Sample]


def samples_from_rows(label: str, ranks: int, rows, small_bytes: int = HERD_SMALL_ALLREDUCE_BYTES,
                      memcpy_correction: bool = False) -> List[Sample]:
    """The rows the fit uses from one file: every `ring` row and the `herd` rows
    up to small_bytes, which run recursive doubling. With memcpy_correction,
    the memcpy row's time at its size is taken off each ring row: for files
    from a herd-bench whose ring path copied input to output before an
    in-place ring (before the ring learned to run out of place)."""
    memcpy = {row.size: row.time_us * 1e-6 for row in rows if row.path == "memcpy"}
    samples = []
    for row in rows:
        measured = row.time_us * 1e-6
        if row.path == "ring":
            seconds = measured - (memcpy.get(row.size, 0.0) if memcpy_correction else 0.0)
            samples.append(Sample(label, ranks, "ring", row.size, max(seconds, 1e-9), measured))
        elif row.path == "herd" and row.size <= small_bytes:
            samples.append(Sample(label, ranks, "herd", row.size, measured, measured))
    return samples


def sample_terms(sample: Sample, segment_bytes: Optional[float]) -> Terms:
    if sample.path == "ring":
        return ring_terms(sample.size, sample.ranks, segment_bytes)
    return recursive_doubling_terms(sample.size, sample.ranks)


def oversubscription(ranks: int, cores: Optional[int]) -> float:
    """How much longer everything takes when `ranks` ranks share `cores` cores
    (each rank runs cores/ranks of the time): ranks / cores, at least 1. None
    cores: no correction."""
    return max(1.0, ranks / cores) if cores else 1.0


def fit(samples: Sequence[Sample], gamma: Optional[float] = None,
        segment_bytes: Optional[float] = HERD_SEGMENT_BYTES,
        herd_overhead: bool = True, cores: Optional[int] = None) -> FitResult:
    """Least squares on relative errors (each row divided by its time, so 1 KiB
    counts as much as 64 MiB). Fits alpha and beta; gamma too when `gamma` is
    None, else moves gamma's known share to the measured side. With
    herd_overhead, herd rows carry one more unknown: a constant per call for
    the runtime's enqueue, negotiation and completion. With `cores`, the model
    of a row at p > cores ranks is stretched by p / cores (oversubscription),
    so alpha, beta and gamma stay those of a rank with a core of its own."""
    import numpy as np

    if not samples:
        raise ValueError("no ring or small herd rows to fit")
    has_herd = any(sample.path == "herd" for sample in samples)
    names = ["alpha", "beta"] + (["gamma"] if gamma is None else [])
    if herd_overhead and has_herd:
        names.append("herd_overhead")
    matrix, target, weights = [], [], []
    for sample in samples:
        terms = sample_terms(sample, segment_bytes)
        stretch = oversubscription(sample.ranks, cores)
        row = [terms.a, terms.b]
        value = sample.seconds
        if gamma is None:
            row.append(terms.c)
        else:
            value -= terms.c * gamma * stretch
        if "herd_overhead" in names:
            row.append(1.0 if sample.path == "herd" else 0.0)
        matrix.append([coefficient * stretch for coefficient in row])
        target.append(value)
        weights.append(1.0 / sample.seconds)
    a = np.array(matrix) * np.array(weights)[:, None]
    y = np.array(target) * np.array(weights)
    # Scale columns to unit norm so the solve is well conditioned (alpha ~1e-6,
    # beta ~1e-10 per byte times n ~1e7).
    norms = np.linalg.norm(a, axis=0)
    norms[norms == 0] = 1.0
    solution, _, rank, _ = np.linalg.lstsq(a / norms, y, rcond=None)
    if rank < len(names):
        raise ValueError(f"the rows do not determine {', '.join(names)} (matrix rank {rank}): "
                         "give rows at two or more rank counts and a range of sizes")
    values = solution / norms
    dof = max(1, len(samples) - len(names))
    residual = y - a @ values
    variance = float(residual @ residual) / dof
    covariance = variance * np.linalg.inv(a.T @ a)
    errors = {name: float(math.sqrt(max(covariance[i, i], 0.0))) for i, name in enumerate(names)}
    fitted = dict(zip(names, (float(v) for v in values)))
    params = Params(fitted["alpha"], fitted["beta"],
                    fitted["gamma"] if gamma is None else gamma)
    overhead = fitted.get("herd_overhead")
    predicted = []
    for sample in samples:
        time = sample_terms(sample, segment_bytes).time(params)
        if sample.path == "herd" and overhead is not None:
            time += overhead
        predicted.append(time * oversubscription(sample.ranks, cores))
    return FitResult(params, overhead, errors, names, predicted, list(samples))


# ---------------------------------------------------------------------------
# Markdown output.


def format_seconds(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def format_size_short(size: Optional[float]) -> str:
    """A byte count with binary units and three significant digits."""
    if size is None:
        return "never"
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    unit = 0
    while size >= 1024 and unit < len(units) - 1:
        size /= 1024
        unit += 1
    return f"{size:.3g} {units[unit]}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]],
                   align_right_from: int = 1) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i < align_right_from else "---:"
                            for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def sizes_between(low: int, high: int, factor: int) -> List[int]:
    sizes, size = [], low
    while size <= high:
        sizes.append(size)
        size *= factor
    return sizes


def parse_bytes(text: str) -> int:
    """"4K" -> 4096, "1G" -> 2^30, "65536" -> 65536 (herd-bench's suffixes)."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    shift = {"K": 10, "M": 20, "G": 30}.get(text[-1:], 0)
    digits = text[:-1] if shift else text
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4K, 1M, 1G)")
    return int(digits) << shift


def print_fit(result: FitResult, gamma_source: str, out=None) -> None:
    out = out or sys.stdout
    p = result.params
    rows = [
        ["α (per message)", format_seconds(p.alpha),
         format_seconds(result.errors["alpha"]) if "alpha" in result.errors else "—"],
        ["β (per byte on a link)", f"{p.beta:.3g} s/B = {1e-9 / p.beta:.3g} GB/s"
         if p.beta > 0 else f"{p.beta:.3g} s/B",
         f"{result.errors['beta']:.2g} s/B"],
        ["γ (per byte reduced)", f"{p.gamma:.3g} s/B = {1e-9 / p.gamma:.3g} GB/s"
         if p.gamma > 0 else f"{p.gamma:.3g} s/B",
         f"{result.errors['gamma']:.2g} s/B" if "gamma" in result.errors else gamma_source],
    ]
    if result.herd_overhead is not None:
        rows.append(["herd runtime overhead per call", format_seconds(result.herd_overhead),
                     format_seconds(result.errors["herd_overhead"])])
    print(markdown_table(["parameter", "fitted value", "standard error"], rows), file=out)
    print(file=out)
    table = []
    for sample, predicted in zip(result.samples, result.predicted):
        model = "ring" if sample.path == "ring" else "rec. doubling"
        table.append([str(sample.ranks), f"{sample.path} ({model})", format_size(sample.size),
                      format_seconds(sample.seconds), format_seconds(predicted),
                      f"{(sample.seconds - predicted) / sample.seconds * 100:+.0f}%"])
    print(markdown_table(["p", "row", "size", "measured", "model", "residual"], table,
                         align_right_from=2), file=out)


def cmd_fit(args) -> int:
    samples: List[Sample] = []
    for arg in args.inputs:
        label, path = parse_input_arg(arg)
        bench = read_bench_csv(path, label)
        ranks = ranks_of(bench)
        if ranks is None:
            raise BenchCsvError(f"{path}: cannot tell the rank count; label it, e.g. np4={path}")
        if ranks < 2:
            raise BenchCsvError(f"{path}: measured at {ranks} rank: nothing to fit")
        found = samples_from_rows(bench.label, ranks, bench.rows, args.small_bytes,
                                  args.subtract_memcpy)
        if not found:
            raise BenchCsvError(f"{path}: no ring rows and no herd rows up to "
                                f"{format_size(args.small_bytes)}")
        samples += found
    if args.fit_gamma:
        gamma, source = None, "fitted"
    else:
        gamma = 1.0 / (args.reduce_gbps * 1e9)
        source = f"fixed: 1 / ({args.reduce_gbps:g} GB/s), herd-kernel-bench"
    segment = None if args.no_segments else args.segment_bytes
    ranks = sorted({s.ranks for s in samples})
    print(f"### Fit to herd-bench rows at p = {', '.join(map(str, ranks))}\n")
    if args.cores:
        print(f"Rows at p > {args.cores} ranks are modelled as p/{args.cores} times slower "
              f"(--cores {args.cores}: more ranks than cores).\n")
    result = fit(samples, gamma, segment, not args.no_herd_overhead, args.cores)
    print_fit(result, source)
    if len(ranks) > 1:
        print("\n### The same fit at each rank count alone\n")
        rows = []
        for count in ranks:
            alone = [s for s in samples if s.ranks == count]
            try:
                part = fit(alone, gamma, segment, not args.no_herd_overhead, args.cores)
            except ValueError as error:
                rows.append([str(count), str(error), "", "", ""])
                continue
            overhead = part.herd_overhead
            rows.append([str(count), format_seconds(part.params.alpha),
                         f"{1e-9 / part.params.beta:.3g} GB/s" if part.params.beta > 0
                         else f"{part.params.beta:.3g} s/B",
                         f"{1e-9 / part.params.gamma:.3g} GB/s" if part.params.gamma > 0
                         else f"{part.params.gamma:.3g} s/B",
                         format_seconds(overhead) if overhead is not None else "—"])
        print(markdown_table(["p", "α", "1/β", "1/γ", "herd overhead"], rows))
    print("\n### Recursive doubling / ring crossover n*(p) for these values\n")
    rows = []
    for count in [2, 4, 8, 16, 32, 64]:
        rows.append([str(count), format_size_short(rd_ring_crossover(count, result.params))])
    print(markdown_table(["p", "n*"], rows))
    return 0


def time_table(sizes, ranks, seconds_of) -> str:
    """A Markdown table, a row per size and a column per rank count, of
    seconds_of(n, p) and, in brackets, the busbw it gives."""
    rows = []
    for n in sizes:
        cells = [format_size(n)]
        for p in ranks:
            seconds = seconds_of(n, p)
            cells.append(f"{format_seconds(seconds)} ({busbw_gbps(n, p, seconds):.3g})")
        rows.append(cells)
    return markdown_table(["n \\ p"] + [str(p) for p in ranks], rows)


def cmd_predict(args) -> int:
    params = Params(args.alpha_us * 1e-6, 8.0 / (args.link_gbits * 1e9),
                    1.0 / (args.reduce_gbps * 1e9))
    cluster = Cluster(args.local_ranks, args.intra_alpha_us * 1e-6,
                      1.0 / (args.intra_gbps * 1e9))
    ranks = [p for p in (2 ** k for k in range(1, 21)) if args.min_ranks <= p <= args.max_ranks]
    sizes = sizes_between(args.min_bytes, args.max_bytes, args.step_factor)

    print("### Assumptions\n")
    print(markdown_table(["parameter", "value"], [
        ["α (network latency per message)", format_seconds(params.alpha)],
        ["β (network, per byte)", f"{params.beta:.3g} s/B ({args.link_gbits:g} Gb/s)"],
        ["γ (reduction, per byte)", f"{params.gamma:.3g} s/B ({args.reduce_gbps:g} GB/s)"],
        ["g (ranks per node, hierarchical)", str(cluster.local_ranks)],
        ["α_l (intra-node latency)", format_seconds(cluster.intra_alpha)],
        ["β_l (intra-node, per byte)", f"{cluster.intra_beta:.3g} s/B ({args.intra_gbps:g} GB/s)"],
    ], align_right_from=2))

    for name, terms_of in FLAT_ALGORITHMS.items():
        print(f"\n### {name[0].upper() + name[1:]}: time (busbw GB/s), one link per rank\n")
        print(time_table(sizes, ranks, lambda n, p, terms_of=terms_of: terms_of(n, p).time(params)))

    print("\n### Recursive doubling / ring crossover n*(p)\n")
    rows = []
    for p in ranks:
        crossing = rd_ring_crossover(p, params)
        ring_time = ring_terms(crossing, p).time(params) if crossing else None
        rows.append([str(p), format_size_short(crossing),
                     format_seconds(ring_time) if ring_time else "—"])
    print(markdown_table(["p", "n* (ring faster above)", "time of either at n*"], rows))

    g = cluster.local_ranks
    cluster_ranks = [p for p in ranks if p >= 2 * g and p % g == 0]
    if not cluster_ranks:
        return 0
    print(f"\n### Hierarchical (shards): time (busbw GB/s), {cluster.local_ranks} ranks per node, "
          "one network card per node\n")
    print(time_table(sizes, cluster_ranks,
                     lambda n, p: hierarchical_shards(n, p, params, cluster)))

    print("\n### Fastest on the cluster: the algorithm and its time\n")
    print("RD: recursive doubling; hier: hierarchical (shards); leaders: hierarchical "
          "(leaders), which moves the same network bytes as shards and twice the intra-node "
          "bytes, so it never comes first in this model.\n")
    short = {"ring": "ring", "recursive doubling": "RD", "hierarchical (shards)": "hier",
             "hierarchical (leaders)": "leaders"}
    rows = []
    for n in sizes:
        cells = [format_size(n)]
        for p in cluster_ranks:
            times = {name: model(n, p, params, cluster)
                     for name, model in CLUSTER_ALGORITHMS.items()}
            best = min(times, key=times.get)
            cells.append(f"{short[best]} {format_seconds(times[best])}")
        rows.append(cells)
    print(markdown_table(["n \\ p"] + [str(p) for p in cluster_ranks], rows))

    print("\n### Where hierarchical (shards) wins on the cluster\n")
    rows = []
    for p in cluster_ranks:
        upper = hierarchical_ring_crossover(p, params, cluster)
        # Recursive doubling on the cluster is linear in n too: A + B n.
        rd0 = cluster_recursive_doubling(0.0, p, params, cluster)
        rd_slope = cluster_recursive_doubling(1.0, p, params, cluster) - rd0
        h0 = hierarchical_shards(0.0, p, params, cluster)
        h_slope = hierarchical_shards(1.0, p, params, cluster) - h0
        lower = (h0 - rd0) / (rd_slope - h_slope) if rd_slope > h_slope else None
        above = format_size_short(lower) if lower is not None else "every size"
        below = format_size_short(upper) if upper is not None else "every size"
        if lower is not None and upper is not None and lower >= upper:
            below += " (never fastest)"
        rows.append([str(p), str(p // cluster.local_ranks), above, below])
    print(markdown_table(["p", "nodes N", "beats RD above", "beats the ring below: n_h"], rows))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Alpha-beta-gamma cost model of herd's allreduce: fit it to herd-bench "
                    "rows, or predict larger runs (docs/performance.md).")
    commands = parser.add_subparsers(dest="command", required=True)

    fit_parser = commands.add_parser("fit", help="fit alpha, beta (gamma) to herd-bench CSVs")
    fit_parser.add_argument("inputs", nargs="+", metavar="[LABEL=]FILE",
                            help="herd-bench allreduce --csv output; the label's number is the "
                                 "rank count (np4=run4.csv)")
    gamma = fit_parser.add_mutually_exclusive_group()
    gamma.add_argument("--reduce-gbps", type=float, default=DEFAULT_REDUCE_GBPS,
                       help="reduce kernel throughput in GB/s (herd-kernel-bench float32); "
                            "gamma = 1 / it (default %(default)s)")
    gamma.add_argument("--fit-gamma", action="store_true",
                       help="fit gamma with alpha and beta (poorly determined, see the doc)")
    fit_parser.add_argument("--segment-bytes", type=parse_bytes, default=HERD_SEGMENT_BYTES,
                            help="herd's ring segment size the rows ran with (default 1M)")
    fit_parser.add_argument("--no-segments", action="store_true",
                            help="model the ring with one message per step")
    fit_parser.add_argument("--small-bytes", type=parse_bytes, default=HERD_SMALL_ALLREDUCE_BYTES,
                            help="herd rows up to this size are recursive doubling (default 64K)")
    fit_parser.add_argument("--no-herd-overhead", action="store_true",
                            help="no constant runtime overhead term for the herd rows")
    fit_parser.add_argument("--subtract-memcpy", action="store_true",
                            help="take the memcpy row's time off each ring row (CSVs from a "
                                 "herd-bench whose ring path copied input to output first)")
    fit_parser.add_argument("--cores", type=int,
                            help="cores of the machine the rows ran on: rows at more ranks "
                                 "than cores are modelled as ranks/cores times slower")
    fit_parser.set_defaults(run=cmd_fit)

    predict = commands.add_parser("predict", help="predict times on a larger network")
    predict.add_argument("--alpha-us", type=float, default=5.0,
                         help="network latency per message in us (default %(default)s)")
    predict.add_argument("--link-gbits", type=float, default=100.0,
                         help="link bandwidth in Gb/s (default %(default)s: beta = 1/12.5e9 s/B)")
    predict.add_argument("--reduce-gbps", type=float, default=DEFAULT_REDUCE_GBPS,
                         help="reduce kernel throughput in GB/s (default %(default)s)")
    predict.add_argument("--local-ranks", type=int, default=8,
                         help="ranks per node for hierarchical allreduce (default %(default)s)")
    predict.add_argument("--intra-gbps", type=float, default=20.0,
                         help="intra-node bandwidth per rank in GB/s (default %(default)s)")
    predict.add_argument("--intra-alpha-us", type=float, default=1.0,
                         help="intra-node latency per message in us (default %(default)s)")
    predict.add_argument("--min-ranks", type=int, default=8)
    predict.add_argument("--max-ranks", type=int, default=1024)
    predict.add_argument("--min-bytes", type=parse_bytes, default=4 * KIB)
    predict.add_argument("--max-bytes", type=parse_bytes, default=GIB)
    predict.add_argument("--step-factor", type=int, default=4)
    predict.set_defaults(run=cmd_predict)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:
        return 1
    except (BenchCsvError, ValueError, OSError) as error:
        print(f"cost_model: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
