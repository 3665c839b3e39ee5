// MPI point-to-point transport; see mpi_transport.h.
//
// Used by one thread at a time (the runtime's background thread). A transfer
// of `bytes` bytes goes as pieces of at most max_message_bytes, each its own
// MPI_Isend / MPI_Irecv of MPI_BYTE with the same peer and tag; MPI keeps
// messages of one (source, tag, communicator) in order, so piece i of a send
// matches piece i of the receive. A zero-byte transfer is one empty piece, so
// that it is still delivered. Every MPI return code is checked and turned
// into a Status naming the call.
#include "collectives/mpi/mpi_transport.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/enforce.h"

namespace herd::collectives {

namespace {

enum class Direction {
  kSend,
  kReceive,
};

// The pieces of one send or receive. wait() completes them all with
// MPI_Waitall and, for a receive, checks that every piece got exactly the
// bytes it was posted for.
class MpiTransfer final : public PendingTransfer {
 public:
  MpiTransfer(Direction direction, std::size_t bytes, int rank, int peer, int tag)
      : direction_(direction), bytes_(bytes), rank_(rank), peer_(peer), tag_(tag) {}

  ~MpiTransfer() override {
    if (!waited_) (void)wait();
  }

  // Records a posted piece of `piece_bytes` bytes.
  void add_piece(MPI_Request request, std::size_t piece_bytes) {
    requests_.push_back(request);
    piece_bytes_.push_back(piece_bytes);
  }

  // Records a failure to post a piece; wait() still completes the pieces
  // posted before it, then returns this failure.
  void fail_to_post(const char* call, int code) {
    post_status_ = Status::error(describe() + mpi_error_string(call, code));
  }

  Status wait() override {
    if (waited_) return status_;
    waited_ = true;
    status_ = complete();
    if (status_.is_ok()) status_ = post_status_;
    return status_;
  }

 private:
  // "MPI recv of 12 bytes from rank 1 to rank 0 with tag 5: "
  std::string describe() const {
    return direction_ == Direction::kSend
               ? fmt::format("MPI send of {} bytes from rank {} to rank {} with tag {}: ", bytes_,
                             rank_, peer_, tag_)
               : fmt::format("MPI recv of {} bytes from rank {} to rank {} with tag {}: ", bytes_,
                             peer_, rank_, tag_);
  }

  Status complete() {
    if (requests_.empty()) return Status::ok();
    HERD_ENFORCE_LE(requests_.size(), static_cast<std::size_t>(INT_MAX));
    const int num_pieces = static_cast<int>(requests_.size());
    std::vector<MPI_Status> statuses(requests_.size());
    const int code = MPI_Waitall(num_pieces, requests_.data(), statuses.data());
    if (code == MPI_ERR_IN_STATUS) {
      for (int i = 0; i < num_pieces; ++i) {
        const int piece_code = statuses[static_cast<std::size_t>(i)].MPI_ERROR;
        if (piece_code != MPI_SUCCESS && piece_code != MPI_ERR_PENDING) {
          return Status::error(describe() +
                               fmt::format("piece {} of {} ({} bytes): ", i, num_pieces,
                                           piece_bytes_[static_cast<std::size_t>(i)]) +
                               mpi_error_string("MPI_Waitall", piece_code));
        }
      }
    }
    if (code != MPI_SUCCESS) {
      return Status::error(describe() + mpi_error_string("MPI_Waitall", code));
    }
    if (direction_ == Direction::kReceive) return check_received(statuses);
    return Status::ok();
  }

  // A sender's message of another length shows up as a piece whose received
  // count differs from the count it was posted for.
  Status check_received(std::vector<MPI_Status>& statuses) const {
    for (std::size_t i = 0; i < statuses.size(); ++i) {
      int received = 0;
      const int code = MPI_Get_count(&statuses[i], MPI_BYTE, &received);
      if (code != MPI_SUCCESS) {
        return Status::error(describe() + mpi_error_string("MPI_Get_count", code));
      }
      if (received == MPI_UNDEFINED || static_cast<std::size_t>(received) != piece_bytes_[i]) {
        return Status::error(describe() +
                             fmt::format("expected {} bytes but piece {} of {} got {} bytes "
                                         "instead of {} (a message of another length)",
                                         bytes_, i, statuses.size(), received, piece_bytes_[i]));
      }
    }
    return Status::ok();
  }

  const Direction direction_;
  const std::size_t bytes_;
  const int rank_;
  const int peer_;
  const int tag_;
  std::vector<MPI_Request> requests_;
  std::vector<std::size_t> piece_bytes_;  // by piece, as posted
  Status post_status_;
  bool waited_ = false;
  Status status_;
};

// Posts `bytes` bytes as pieces of at most max_message_bytes, front to back,
// and at least one (an empty one for zero bytes): post(offset, piece_bytes,
// &request) is MPI_Isend or MPI_Irecv of one piece. Stops at the first
// failure to post, which the transfer's wait() returns.
template <typename Post>
std::unique_ptr<PendingTransfer> post_pieces(std::unique_ptr<MpiTransfer> transfer,
                                             std::size_t bytes, std::size_t max_message_bytes,
                                             const char* call, const Post& post) {
  std::size_t offset = 0;
  do {
    const std::size_t piece_bytes = std::min(max_message_bytes, bytes - offset);
    MPI_Request request = MPI_REQUEST_NULL;
    const int code = post(offset, static_cast<int>(piece_bytes), &request);
    if (code != MPI_SUCCESS) {
      transfer->fail_to_post(call, code);
      break;
    }
    transfer->add_piece(request, piece_bytes);
    offset += piece_bytes;
  } while (offset < bytes);
  return transfer;
}

// Setup calls on the caller's communicator: a failure there is the caller's
// bug (an invalid communicator), not a transfer error.
void check_setup(const char* call, int code) {
  if (code != MPI_SUCCESS) {
    detail::throw_internal_error(__FILE__, __LINE__, mpi_error_string(call, code));
  }
}

}  // namespace

MpiTransport::MpiTransport(MPI_Comm comm, std::size_t max_message_bytes)
    : comm_(comm), max_message_bytes_(max_message_bytes) {
  HERD_ENFORCE_GE(max_message_bytes_, std::size_t{1});
  HERD_ENFORCE_LE(max_message_bytes_, kMaxMpiMessageBytes);
  check_setup("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  check_setup("MPI_Comm_rank", MPI_Comm_rank(comm_, &rank_));
  check_setup("MPI_Comm_size", MPI_Comm_size(comm_, &size_));
}

std::unique_ptr<PendingTransfer> MpiTransport::isend(const void* data, std::size_t bytes, int peer,
                                                     int tag) {
  const auto* first = static_cast<const unsigned char*>(data);
  return post_pieces(
      std::make_unique<MpiTransfer>(Direction::kSend, bytes, rank_, peer, tag), bytes,
      max_message_bytes_, "MPI_Isend", [&](std::size_t offset, int piece_bytes, MPI_Request* request) {
        return MPI_Isend(first + offset, piece_bytes, MPI_BYTE, peer, tag, comm_, request);
      });
}

std::unique_ptr<PendingTransfer> MpiTransport::irecv(void* data, std::size_t bytes, int peer,
                                                     int tag) {
  auto* first = static_cast<unsigned char*>(data);
  return post_pieces(
      std::make_unique<MpiTransfer>(Direction::kReceive, bytes, rank_, peer, tag), bytes,
      max_message_bytes_, "MPI_Irecv", [&](std::size_t offset, int piece_bytes, MPI_Request* request) {
        return MPI_Irecv(first + offset, piece_bytes, MPI_BYTE, peer, tag, comm_, request);
      });
}

std::string mpi_error_string(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return fmt::format("{}: unknown MPI error code {}", call, code);
  }
  return fmt::format("{}: {}", call, std::string(text, static_cast<std::size_t>(length)));
}

}  // namespace herd::collectives
