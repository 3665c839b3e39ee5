// herd-shm-steps-bench: what the hierarchical allreduce's steps inside a
// host cost against the flat shared-memory allreduce, on one machine.
//
// Every rank of the launch must run on this machine: one shared-memory group
// (make_node_shm) holds them all. Per buffer size, one repetition runs each
// variant once, in turn, so that a slower phase of the machine weighs on all
// of them alike:
//   flat:      ShmAllreduceGroup::allreduce of the buffer (input -> output),
//              the flat allreduce on one machine, and step 1 of the
//              hierarchical allreduce;
//   steps1+3:  reduce_scatter of the buffer into the L shards
//              (hierarchical_shard), then allgather_in_place of them: what
//              a host's ranks spend besides the network in the hierarchical
//              allreduce;
//   reduce-scatter, allgather: each of those alone;
//   hier-LxH:  hierarchical_allreduce with ranks {0..L-1}, {L..2L-1}, ...
//              playing hosts of --local-size ranks (each a shared-memory
//              group of its own), step 2 over MPI between processes of this
//              machine: not a network, so only a check that the steps run
//              together at the expected cost.
// A variant's time in a repetition is the slowest rank's (each rank times
// from a barrier to its own return); the table gives each variant's median
// over the repetitions and the median over the repetitions of flat's time
// over the variant's (> 1: faster than flat). Results are checked against
// closed forms once per size; a wrong element makes the program exit 1.
//
// Usage: mpirun -np 4 herd-shm-steps-bench [--sizes 1M,4M,16M,64M]
//        [--reps 15] [--local-size 2]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "benchmarks/hierarchical/bench_util.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/mpi/mpi_transport.h"
#include "collectives/mpi/node_shm.h"
#include "ops/reduce.h"

namespace herd::bench {
namespace {

using collectives::FinishFn;

struct Options {
  std::vector<int64_t> sizes{1 << 20, 4 << 20, 16 << 20, 64 << 20};
  int reps = 15;
  int local_size = 2;
};

Options parse_options(int argc, char** argv) {
  Options options;
  parse_flags(argc, argv, &options.sizes, &options.reps,
              [&options](const std::string& flag, const std::string& value) {
                if (flag != "--local-size") return false;
                options.local_size = std::stoi(value);
                return true;
              });
  return options;
}

// Elements of `data` that differ from expected(i), summed over ranks.
int64_t wrong_elements(MPI_Comm comm, const std::vector<float>& data,
                       const std::function<float(int64_t i)>& expected) {
  int64_t wrong = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    wrong += data[i] != expected(static_cast<int64_t>(i)) ? 1 : 0;
  }
  return sum_over_ranks(comm, wrong);
}

int run(const Options& options, MPI_Comm comm) {
  int rank = 0;
  int ranks = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  const int local_size = options.local_size;
  if (local_size < 1 || ranks % local_size != 0) {
    throw std::invalid_argument(
        fmt::format("--local-size {} does not divide the {} ranks", local_size, ranks));
  }
  std::string why_not;
  const std::unique_ptr<collectives::NodeShm> shm =
      collectives::make_node_shm(comm, collectives::NodeShmOptions{}, &why_not);
  if (!shm) throw std::runtime_error("no shared-memory group over every rank: " + why_not);
  collectives::ShmAllreduceGroup& flat = shm->group();

  // The played hosts: shared memory inside, MPI between local rank peers.
  MPI_Comm host_comm = MPI_COMM_NULL;
  MPI_Comm cross_comm = MPI_COMM_NULL;
  MPI_Comm_split(comm, rank / local_size, rank, &host_comm);
  MPI_Comm_split(comm, rank % local_size, rank, &cross_comm);
  std::unique_ptr<collectives::NodeShm> host_shm;
  collectives::ShmAllreduceGroup* host_group = nullptr;
  if (local_size > 1) {
    host_shm = collectives::make_node_shm(host_comm, collectives::NodeShmOptions{}, &why_not);
    if (!host_shm) throw std::runtime_error("no shared-memory group on a played host: " + why_not);
    host_group = &host_shm->group();
  }
  std::unique_ptr<collectives::MpiTransport> cross;
  if (host_group != nullptr) cross = std::make_unique<collectives::MpiTransport>(cross_comm);

  const ops::ReduceFn sum = ops::make_reduce_fn(DataType::kFloat32, ReduceOp::kSum);
  const int hosts = ranks / local_size;
  const std::string hier_name = fmt::format("hier-{}x{}", hosts, local_size);
  if (rank == 0) {
    std::printf(
        "# herd-shm-steps-bench: %d ranks on one machine, float32 sum, %d repetitions, "
        "median of the slowest rank's time; ratio = flat / variant\n",
        ranks, options.reps);
    std::printf("%-8s %10s %10s %6s %10s %6s %10s %6s %10s %6s\n", "size", "flat_us", "steps13_us",
                "ratio", "rscat_us", "ratio", "allgath_us", "ratio", (hier_name + "_us").c_str(),
                "ratio");
  }
  int64_t wrong = 0;
  for (const int64_t size : options.sizes) {
    const int64_t count = size / static_cast<int64_t>(sizeof(float));
    const auto elements = static_cast<std::size_t>(count);
    // Rank r's value at i: r + 1 + i % 7, summing to p(p+1)/2 + p (i % 7).
    std::vector<float> input(elements);
    for (std::size_t i = 0; i < elements; ++i) input[i] = static_cast<float>(rank + 1 + i % 7);
    std::vector<float> output(elements);
    std::vector<std::size_t> offsets(static_cast<std::size_t>(ranks) + 1);
    for (int j = 0; j < ranks; ++j) {
      int64_t begin = 0;
      int64_t end = 0;
      collectives::hierarchical_shard(count, j, ranks, &begin, &end);
      offsets[static_cast<std::size_t>(j)] = static_cast<std::size_t>(begin) * sizeof(float);
    }
    offsets.back() = elements * sizeof(float);
    const auto run_flat = [&] {
      require_ok(flat.allreduce(input.data(), output.data(), count, sizeof(float), sum),
                 "flat shm allreduce");
    };
    const auto run_reduce_scatter = [&] {
      require_ok(
          flat.reduce_scatter(input.data(), output.data(), sizeof(float), sum, offsets.data()),
          "shm reduce-scatter");
    };
    const auto run_allgather = [&] {
      require_ok(flat.allgather_in_place(output.data(), offsets.data()), "shm allgather");
    };
    const auto run_hier = [&] {
      if (host_group == nullptr) return;
      require_ok(collectives::hierarchical_allreduce(
                     input.data(), output.data(), count, sizeof(float), sum,
                     collectives::HierarchicalGroup{host_group, cross.get()},
                     collectives::AllreduceOptions{}),
                 "hierarchical allreduce");
    };
    const auto sum_at = [ranks](int64_t i) {
      return static_cast<float>(ranks * (ranks + 1) / 2 + ranks * (i % 7));
    };
    run_flat();
    wrong += wrong_elements(comm, output, sum_at);
    std::fill(output.begin(), output.end(), 0.0f);
    run_reduce_scatter();
    run_allgather();
    wrong += wrong_elements(comm, output, sum_at);
    std::fill(output.begin(), output.end(), 0.0f);
    run_hier();
    if (host_group != nullptr) wrong += wrong_elements(comm, output, sum_at);

    std::vector<double> flat_times;
    std::vector<double> steps_times;
    std::vector<double> reduce_scatter_times;
    std::vector<double> allgather_times;
    std::vector<double> hier_times;
    for (int rep = 0; rep < options.reps; ++rep) {
      flat_times.push_back(timed(comm, run_flat));
      steps_times.push_back(timed(comm, [&] {
        run_reduce_scatter();
        run_allgather();
      }));
      reduce_scatter_times.push_back(timed(comm, run_reduce_scatter));
      allgather_times.push_back(timed(comm, run_allgather));
      if (host_group != nullptr) hier_times.push_back(timed(comm, run_hier));
    }
    if (rank == 0) {
      const double flat_us = median(flat_times) * 1e6;
      const auto column = [&flat_times](const std::vector<double>& times) {
        return ratio_column(times, flat_times);
      };
      std::printf("%-8s %10.1f %s %s %s %s\n", fmt::format("{}K", size >> 10).c_str(), flat_us,
                  column(steps_times).c_str(), column(reduce_scatter_times).c_str(),
                  column(allgather_times).c_str(), column(hier_times).c_str());
      std::fflush(stdout);
    }
  }
  cross.reset();
  host_shm.reset();
  MPI_Comm_free(&cross_comm);
  MPI_Comm_free(&host_comm);
  if (rank == 0 && wrong > 0)
    std::fprintf(stderr, "%lld elements wrong\n", static_cast<long long>(wrong));
  return wrong > 0 ? 1 : 0;
}

}  // namespace
}  // namespace herd::bench

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    code = herd::bench::run(herd::bench::parse_options(argc, argv), MPI_COMM_WORLD);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "herd-shm-steps-bench: %s\n", error.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return code;
}
