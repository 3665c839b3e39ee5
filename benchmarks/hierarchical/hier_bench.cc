// herd-hier-bench: the hierarchical allgather and allreduce against the flat
// ones, across hosts (real ones, or scripts/emulated_hosts.py's).
//
// The hosts are MPI's (host_layout): each must hold the same number of
// ranks, consecutive in MPI_COMM_WORLD. Per size (the output's bytes, float32
// elements for the allreduce, equal blocks for the allgather), one
// repetition runs each variant once, in turn:
//   ring-allgather:  ring_allgatherv over an MpiTransport of every rank;
//   mpi-allgather:   MPI_Allgather of the same blocks;
//   hier-allgather:  hierarchical_allgatherv (shared memory inside each
//                    host, MpiTransport between local rank peers);
//   allreduce:       collectives::allreduce (ring or recursive doubling as
//                    its threshold picks) over every rank, float32 sum;
//   mpi-allreduce:   MPI_Allreduce of the same buffers;
//   hier-allreduce:  hierarchical_allreduce.
// A variant's time in a repetition is the slowest rank's. The table gives
// each variant's median over the repetitions and the median of the
// repetitions' ratios against the faster of the two flat baselines of its
// collective in that repetition (> 1: faster than it). Every result is
// checked once per size against closed forms; a wrong byte or element
// makes the program exit 1.
//
// Usage: scripts/emulated_hosts.py run --hosts 2 --ranks-per-host 2 --
//        --allow-run-as-root --oversubscribe build/benchmarks/herd-hier-bench
//        [--sizes 1M,4M,16M,64M] [--reps 7]
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "benchmarks/hierarchical/bench_util.h"
#include "collectives/allgather.h"
#include "collectives/hierarchical_allgather.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/mpi/host_layout.h"
#include "collectives/mpi/mpi_transport.h"
#include "collectives/mpi/node_shm.h"
#include "ops/reduce.h"

namespace herd::bench {
namespace {

struct Options {
  std::vector<int64_t> sizes{1 << 20, 4 << 20, 16 << 20, 64 << 20};
  int reps = 7;
};

Options parse_options(int argc, char** argv) {
  Options options;
  parse_flags(argc, argv, &options.sizes, &options.reps);
  return options;
}

// The faster of two baselines in each repetition.
std::vector<double> faster_of(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> best;
  for (std::size_t i = 0; i < a.size(); ++i) best.push_back(std::min(a[i], b[i]));
  return best;
}

int run(const Options& options, MPI_Comm comm) {
  int rank = 0;
  int ranks = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  const collectives::HostLayout layout = collectives::host_layout(comm);
  if (!layout.spans_hosts() || !layout.uniform || !layout.contiguous) {
    throw std::runtime_error(fmt::format(
        "needs several hosts of equal rank counts, each host's ranks consecutive (has {} hosts, "
        "uniform {}, contiguous {})",
        layout.hosts, layout.uniform, layout.contiguous));
  }
  MPI_Comm flat_comm = MPI_COMM_NULL;
  MPI_Comm host_comm = MPI_COMM_NULL;
  MPI_Comm cross_comm = MPI_COMM_NULL;
  MPI_Comm_dup(comm, &flat_comm);
  MPI_Comm_split(comm, layout.host, rank, &host_comm);
  MPI_Comm_split(comm, layout.local_rank, rank, &cross_comm);
  std::string why_not;
  std::unique_ptr<collectives::NodeShm> shm;
  if (layout.local_size > 1) {
    shm = collectives::make_node_shm(host_comm, collectives::NodeShmOptions{}, &why_not);
    if (!shm) throw std::runtime_error("no shared-memory group on a host: " + why_not);
  }
  auto flat = std::make_unique<collectives::MpiTransport>(flat_comm);
  auto cross = std::make_unique<collectives::MpiTransport>(cross_comm);
  const collectives::HierarchicalGroup group{shm ? &shm->group() : nullptr, cross.get()};
  const bool hierarchical = shm != nullptr;
  const ops::ReduceFn sum = ops::make_reduce_fn(DataType::kFloat32, ReduceOp::kSum);

  if (rank == 0) {
    std::printf(
        "# herd-hier-bench: %d hosts of %d ranks, %d repetitions, median of the slowest "
        "rank's time; ratio = the faster flat baseline's time / the variant's\n",
        layout.hosts, layout.local_size, options.reps);
    std::printf("%-8s %10s %6s %10s %6s %10s %6s | %10s %6s %10s %6s %10s %6s\n", "size",
                "ring_ag_us", "ratio", "mpi_ag_us", "ratio", "hier_ag_us", "ratio", "ar_us",
                "ratio", "mpi_ar_us", "ratio", "hier_ar_us", "ratio");
  }
  int64_t wrong = 0;
  for (const int64_t size : options.sizes) {
    const int64_t block = size / ranks;
    const std::vector<int64_t> bytes_per_rank(static_cast<std::size_t>(ranks), block);
    const auto total = static_cast<std::size_t>(block * ranks);
    std::vector<uint8_t> mine(static_cast<std::size_t>(block));
    for (std::size_t at = 0; at < mine.size(); ++at) {
      mine[at] = static_cast<uint8_t>(rank * 31 + at * 7 + (at >> 10));
    }
    std::vector<uint8_t> gathered(total);
    const auto gather_wrong = [&] {
      int64_t bad = 0;
      for (std::size_t at = 0; at < total; ++at) {
        const std::size_t owner = at / static_cast<std::size_t>(block);
        const std::size_t in = at % static_cast<std::size_t>(block);
        bad += gathered[at] != static_cast<uint8_t>(owner * 31 + in * 7 + (in >> 10)) ? 1 : 0;
      }
      std::fill(gathered.begin(), gathered.end(), 0);
      return bad;
    };
    const auto ring_allgather = [&] {
      require_ok(collectives::ring_allgatherv(mine.data(), gathered.data(), bytes_per_rank, *flat),
                 "ring allgatherv");
    };
    const auto mpi_allgather = [&] {
      MPI_Allgather(mine.data(), static_cast<int>(block), MPI_BYTE, gathered.data(),
                    static_cast<int>(block), MPI_BYTE, flat_comm);
    };
    const auto hier_allgather = [&] {
      require_ok(
          collectives::hierarchical_allgatherv(mine.data(), gathered.data(), bytes_per_rank, group),
          "hierarchical allgatherv");
    };
    const int64_t count = size / static_cast<int64_t>(sizeof(float));
    std::vector<float> input(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(rank + 1 + i % 7);
    std::vector<float> output(input.size());
    const auto reduce_wrong = [&] {
      int64_t bad = 0;
      for (std::size_t i = 0; i < output.size(); ++i) {
        bad += output[i] != static_cast<float>(ranks * (ranks + 1) / 2 + ranks * (i % 7)) ? 1 : 0;
      }
      std::fill(output.begin(), output.end(), 0.0f);
      return bad;
    };
    const auto allreduce = [&] {
      require_ok(collectives::allreduce(input.data(), output.data(), count, sizeof(float), sum,
                                        *flat, collectives::AllreduceOptions{}),
                 "allreduce");
    };
    const auto mpi_allreduce = [&] {
      MPI_Allreduce(input.data(), output.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    flat_comm);
    };
    const auto hier_allreduce = [&] {
      require_ok(
          collectives::hierarchical_allreduce(input.data(), output.data(), count, sizeof(float),
                                              sum, group, collectives::AllreduceOptions{}),
          "hierarchical allreduce");
    };
    ring_allgather();
    wrong += sum_over_ranks(comm, gather_wrong());
    mpi_allgather();
    wrong += sum_over_ranks(comm, gather_wrong());
    allreduce();
    wrong += sum_over_ranks(comm, reduce_wrong());
    mpi_allreduce();
    wrong += sum_over_ranks(comm, reduce_wrong());
    if (hierarchical) {
      hier_allgather();
      wrong += sum_over_ranks(comm, gather_wrong());
      hier_allreduce();
      wrong += sum_over_ranks(comm, reduce_wrong());
    }

    std::vector<double> ring_ag, mpi_ag, hier_ag, ar, mpi_ar, hier_ar;
    for (int rep = 0; rep < options.reps; ++rep) {
      ring_ag.push_back(timed(comm, ring_allgather));
      mpi_ag.push_back(timed(comm, mpi_allgather));
      if (hierarchical) hier_ag.push_back(timed(comm, hier_allgather));
      ar.push_back(timed(comm, allreduce));
      mpi_ar.push_back(timed(comm, mpi_allreduce));
      if (hierarchical) hier_ar.push_back(timed(comm, hier_allreduce));
    }
    if (rank == 0) {
      const std::vector<double> ag_base = faster_of(ring_ag, mpi_ag);
      const std::vector<double> ar_base = faster_of(ar, mpi_ar);
      std::printf("%-8s %s %s %s | %s %s %s\n", fmt::format("{}K", size >> 10).c_str(),
                  ratio_column(ring_ag, ag_base).c_str(), ratio_column(mpi_ag, ag_base).c_str(),
                  ratio_column(hier_ag, ag_base).c_str(), ratio_column(ar, ar_base).c_str(),
                  ratio_column(mpi_ar, ar_base).c_str(), ratio_column(hier_ar, ar_base).c_str());
      std::fflush(stdout);
    }
  }
  cross.reset();
  flat.reset();
  shm.reset();
  MPI_Comm_free(&cross_comm);
  MPI_Comm_free(&host_comm);
  MPI_Comm_free(&flat_comm);
  if (rank == 0 && wrong > 0) {
    std::fprintf(stderr, "herd-hier-bench: %lld elements wrong\n", static_cast<long long>(wrong));
  }
  return wrong > 0 ? 1 : 0;
}

}  // namespace
}  // namespace herd::bench

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int code = 0;
  try {
    code = herd::bench::run(herd::bench::parse_options(argc, argv), MPI_COMM_WORLD);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "herd-hier-bench: %s\n", error.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return code;
}
