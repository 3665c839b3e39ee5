// Reads the eager limit through MPI_T and agrees on a piece size; see
// eager_limit.h.
#include "collectives/mpi/eager_limit.h"

#include <array>
#include <cstring>

#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/mpi_transport.h"

namespace herd::collectives {
namespace {

// The value of the integer control variable `wanted`, or 0 when the library
// has no such variable or will not say.
std::size_t read_size_cvar(const char* wanted) {
  int num_cvars = 0;
  if (MPI_T_cvar_get_num(&num_cvars) != MPI_SUCCESS) return 0;
  for (int index = 0; index < num_cvars; ++index) {
    std::array<char, 256> name{};
    int name_length = static_cast<int>(name.size());
    int verbosity = 0;
    int binding = 0;
    int scope = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype = MPI_T_ENUM_NULL;
    if (MPI_T_cvar_get_info(index, name.data(), &name_length, &verbosity, &type, &enumtype, nullptr,
                            nullptr, &binding, &scope) != MPI_SUCCESS ||
        std::strcmp(name.data(), wanted) != 0 || binding != MPI_T_BIND_NO_OBJECT) {
      continue;
    }
    int type_size = 0;
    if (MPI_Type_size(type, &type_size) != MPI_SUCCESS || (type_size != 4 && type_size != 8)) {
      return 0;
    }
    MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return 0;
    // Room for one value of either width; the limits are non-negative.
    std::array<unsigned char, 8> value{};
    const bool read = count == 1 && MPI_T_cvar_read(handle, value.data()) == MPI_SUCCESS;
    HERD_MPI_WARN_IF_ERROR(MPI_T_cvar_handle_free(&handle));
    if (!read) return 0;
    if (type_size == 4) {
      uint32_t narrow = 0;
      std::memcpy(&narrow, value.data(), sizeof narrow);
      return narrow;
    }
    uint64_t wide = 0;
    std::memcpy(&wide, value.data(), sizeof wide);
    return static_cast<std::size_t>(wide);
  }
  return 0;
}

std::size_t read_shared_memory_eager_limit() {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return 0;
  std::size_t limit = 0;
  for (const char* name : {"btl_vader_eager_limit", "btl_sm_eager_limit"}) {
    limit = read_size_cvar(name);
    if (limit > 0) break;
  }
  HERD_MPI_WARN_IF_ERROR(MPI_T_finalize());
  return limit;
}

}  // namespace

std::size_t shared_memory_eager_limit() {
  // Open MPI's first MPI_T_init_thread registers every component's variables,
  // about 0.2 s here; the limit does not change while the process runs.
  static const std::size_t limit = read_shared_memory_eager_limit();
  return limit;
}

std::size_t agree_eager_piece_bytes(MPI_Comm comm, int64_t configured) {
  // Every member makes the same collective calls whatever its own setting: a
  // member with a number must still take part in the machine count that the
  // members left at auto make, or the calls would cross.
  int size = 0;
  HERD_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int node_size = ranks_on_this_machine(comm);
  uint64_t mine = 0;
  if (configured >= 0) {
    mine = static_cast<uint64_t>(configured);
  } else {
    // One rank sends no messages: no reason to pay for reading the limit.
    const std::size_t limit = size > 1 && node_size == size ? shared_memory_eager_limit() : 0;
    mine = limit > 2 * kEagerHeaderAllowance ? limit - kEagerHeaderAllowance : 0;
  }
  uint64_t agreed = 0;
  HERD_MPI_CHECK(MPI_Allreduce(&mine, &agreed, 1, MPI_UINT64_T, MPI_MIN, comm));
  return static_cast<std::size_t>(agreed);
}

}  // namespace herd::collectives
