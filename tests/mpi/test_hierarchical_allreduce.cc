// The hierarchical allreduce (collectives/hierarchical_allreduce.h) between
// processes, plain MPI, no runtime: each host's ranks share a group made by
// make_node_shm on a communicator of that host, and each local rank reaches
// its peers on the other hosts through an MpiTransport on a communicator of
// that local rank. Across machines (or emulated hosts) the hosts are MPI's
// (host_layout); on one machine ranks {0, 1}, {2, 3}, ... play the hosts.
// Exact float32 sums and averages, int32 maxima, counts from 0 past the
// single-copy and streaming sizes, in place and not; the bits of an
// order-sensitive float sum against the reduction order of all ranks; and
// the hierarchical allgather (collectives/hierarchical_allgather.h) of
// rank-unique bytes, blocks of equal and unequal sizes, in place and not.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../unit/collectives/reduction_order_reference.h"
#include "collectives/hierarchical_allgather.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/mpi/host_layout.h"
#include "collectives/mpi/mpi_transport.h"
#include "collectives/mpi/node_shm.h"
#include "raw_mpi_test_util.h"

namespace herd::collectives {
namespace {

using testing::check_elements;
using testing::Tally;

// Ranks per host when one machine plays the hosts.
constexpr int kPlayedLocalSize = 2;

struct Hosts {
  int host = 0;
  int hosts = 1;
  int local_rank = 0;
  int local_size = 1;
};

// MPI's hosts where the ranks span several, else hosts of kPlayedLocalSize
// consecutive ranks; *usable false where MPI's hosts are not what the
// hierarchical allreduce runs on (uneven, or a host's ranks not consecutive).
Hosts hosts_of(MPI_Comm comm, int rank, int ranks, bool* usable) {
  const HostLayout layout = host_layout(comm);
  *usable = !layout.spans_hosts() || (layout.uniform && layout.contiguous);
  if (layout.spans_hosts()) {
    return {layout.host, layout.hosts, layout.local_rank, layout.local_size};
  }
  return {rank / kPlayedLocalSize, ranks / kPlayedLocalSize, rank % kPlayedLocalSize,
          kPlayedLocalSize};
}

void check_hierarchical(Tally& tally, MPI_Comm comm, int rank, int ranks) {
  bool usable = false;
  const Hosts hosts = hosts_of(comm, rank, ranks, &usable);
  if (!usable) {
    tally.fail("hosts",
               "the hosts' ranks are uneven or not consecutive (launch with --map-by slot)");
    return;
  }
  MPI_Comm host_comm = MPI_COMM_NULL;
  MPI_Comm cross_comm = MPI_COMM_NULL;
  MPI_Comm_split(comm, hosts.host, rank, &host_comm);
  MPI_Comm_split(comm, hosts.local_rank, rank, &cross_comm);
  std::string why_not;
  NodeShmOptions options;
  options.stall_timeout = std::chrono::seconds(60);
  std::unique_ptr<NodeShm> shm = make_node_shm(host_comm, options, &why_not);
  if (!shm) {
    tally.fail("node shm", "no shared-memory group on the host: " + why_not);
  } else {
    MpiTransport cross(cross_comm);
    cross.set_collective_timeout(std::chrono::seconds(60));
    const HierarchicalGroup group{&shm->group(), &cross};
    const int p = ranks;
    for (const bool in_place : {true, false}) {
      for (const int64_t count :
           {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{300000}, int64_t{3} << 20}) {
        const std::string name =
            fmt::format("{} hosts of {}, {} elements, {}", hosts.hosts, hosts.local_size, count,
                        in_place ? "in place" : "out of place");
        const auto size = static_cast<std::size_t>(count);
        // Sum over p ranks of (r + 1) + i % 7: p(p+1)/2 + p(i % 7).
        std::vector<float> input(size);
        for (std::size_t i = 0; i < size; ++i) input[i] = static_cast<float>(rank + 1 + i % 7);
        std::vector<float> output = in_place ? input : std::vector<float>(size, -1.0f);
        Status status =
            hierarchical_allreduce(in_place ? output.data() : input.data(), output.data(), count,
                                   sizeof(float), testing::kFloatSum, group, AllreduceOptions{});
        check_elements(tally, "sum, " + name, status, output, [p](int64_t i) {
          return static_cast<float>(p * (p + 1) / 2 + p * (i % 7));
        });
        // The average: the same sum divided by p once, (p+1)/2 + i % 7.
        output = in_place ? input : std::vector<float>(size, -1.0f);
        const FinishFn divide = [p](void* data, int64_t n) {
          for (int64_t i = 0; i < n; ++i) static_cast<float*>(data)[i] /= static_cast<float>(p);
        };
        status = hierarchical_allreduce(in_place ? output.data() : input.data(), output.data(),
                                        count, sizeof(float), testing::kFloatSum, group,
                                        AllreduceOptions{}, divide);
        check_elements(tally, "average, " + name, status, output, [p](int64_t i) {
          return static_cast<float>((p + 1) / 2.0 + static_cast<double>(i % 7));
        });
        // Rank i % p holds 1000 + i % 100, the others less.
        std::vector<int32_t> values(size);
        for (std::size_t i = 0; i < size; ++i) {
          values[i] = static_cast<int32_t>(static_cast<int>(i % static_cast<std::size_t>(p)) == rank
                                               ? 1000 + static_cast<int>(i % 100)
                                               : rank - static_cast<int>(i % 5) * 100);
        }
        std::vector<int32_t> maxima = in_place ? values : std::vector<int32_t>(size, 0);
        status =
            hierarchical_allreduce(in_place ? maxima.data() : values.data(), maxima.data(), count,
                                   sizeof(int32_t), testing::kInt32Max, group, AllreduceOptions{});
        check_elements(tally, "max, " + name, status, maxima,
                       [](int64_t i) { return static_cast<int32_t>(1000 + i % 100); });
      }
    }
    // Allgathers: rank r's byte at `at` of its block is a closed form of
    // both; blocks of `block` bytes, or (r + 1) * block.
    for (const bool in_place : {true, false}) {
      for (const int64_t block : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{300001}}) {
        for (const bool growing : {false, true}) {
          std::vector<int64_t> bytes;
          std::vector<std::size_t> offsets{0};
          for (int r = 0; r < ranks; ++r) {
            bytes.push_back(growing ? (r + 1) * block : block);
            offsets.push_back(offsets.back() + static_cast<std::size_t>(bytes.back()));
          }
          const auto byte_of = [](std::size_t owner, std::size_t at) {
            return static_cast<uint8_t>(owner * 31 + at * 7 + (at >> 10));
          };
          const auto me = static_cast<std::size_t>(rank);
          std::vector<uint8_t> input(static_cast<std::size_t>(bytes[me]));
          for (std::size_t at = 0; at < input.size(); ++at) input[at] = byte_of(me, at);
          std::vector<uint8_t> output(offsets.back(), 0xee);
          std::copy(input.begin(), input.end(),
                    output.begin() + static_cast<std::ptrdiff_t>(offsets[me]));
          const Status status = hierarchical_allgatherv(
              in_place ? output.data() + offsets[me] : input.data(), output.data(), bytes, group);
          const std::string name =
              fmt::format("allgather of {} bytes{}, {}", block, growing ? " times rank + 1" : "",
                          in_place ? "in place" : "out of place");
          check_elements(tally, name, status, output, [&](int64_t at) {
            std::size_t owner = 0;
            while (offsets[owner + 1] <= static_cast<std::size_t>(at)) ++owner;
            return byte_of(owner, static_cast<std::size_t>(at) - offsets[owner]);
          });
        }
      }
    }
    // Bits: with L a power of two, the reduction order of all p ranks.
    if (hierarchical_keeps_reduction_order(hosts.local_size)) {
      constexpr int64_t kCount = 100003;
      std::vector<float> sums(kCount);
      for (int64_t i = 0; i < kCount; ++i) {
        sums[static_cast<std::size_t>(i)] = testing::order_sensitive_value(rank, i);
      }
      const Status status = hierarchical_allreduce(sums.data(), sums.data(), kCount, sizeof(float),
                                                   testing::kFloatSum, group, AllreduceOptions{});
      if (tally.expect_ok("order-sensitive sums", status)) {
        int64_t differences = 0;
        std::string first;
        for (int64_t i = 0; i < kCount; ++i) {
          const float want = testing::order_sensitive_sum(p, i);
          if (std::memcmp(&want, &sums[static_cast<std::size_t>(i)], sizeof(float)) == 0) continue;
          if (differences++ == 0) {
            first = fmt::format("index {}: expected {:.9g}, actual {:.9g}", i, want,
                                sums[static_cast<std::size_t>(i)]);
          }
        }
        if (differences == 0) {
          tally.pass();
        } else {
          tally.fail("order-sensitive sums",
                     fmt::format("{} ({} of {} elements differ)", first, differences, kCount));
        }
      }
    }
  }
  shm.reset();
  MPI_Comm_free(&cross_comm);
  MPI_Comm_free(&host_comm);
}

}  // namespace
}  // namespace herd::collectives

int main(int argc, char** argv) {
  using namespace herd::collectives;
  return testing::run_raw_mpi_test(
      argc, argv, "test_hierarchical_allreduce", [](testing::Tally& tally, MPI_Comm comm) {
        int rank = 0;
        int ranks = 0;
        MPI_Comm_rank(comm, &rank);
        MPI_Comm_size(comm, &ranks);
        if (ranks % kPlayedLocalSize != 0) {
          tally.fail("ranks",
                     fmt::format("needs a multiple of {} ranks, has {}", kPlayedLocalSize, ranks));
          return;
        }
        check_hierarchical(tally, comm, rank, ranks);
      });
}
