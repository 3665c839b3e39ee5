// Rank 0's negotiation table and the construction of one Response from every
// rank's Request. Runs on rank 0's background thread; no MPI.
#include "src/coordinator.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "common/enforce.h"

namespace herd::detail {
namespace {

// How each compared field reads in a mismatch clause.
std::string show(CollectiveType type) { return to_string(type); }
std::string show(DataType dtype) { return to_string(dtype); }
std::string show(ReduceOp op) { return to_string(op); }
std::string show(const std::vector<int64_t>& shape) { return shape_to_string(shape); }
std::string show(const Device& device) { return device.type == DeviceType::kCPU ? "cpu" : "gpu"; }
std::string show(int32_t root) { return std::to_string(root); }
std::string show(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<std::string> parts;
  for (const auto& shape : shapes) parts.push_back(shape_to_string(shape));
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}
// fmt's "{}" prints a double in its shortest round-trip form, so two scales
// that differ only in the last bit still print differently.
std::string show(double scale) { return fmt::format("{}", scale); }

// Adds "<field> mismatch: rank 0 <v0>, rank 1 <v1>, ..." to *clauses when some
// rank's value differs from rank 0's. Every rank's value is listed, not just
// the odd one out: with several ranks the user cannot otherwise tell which
// side is the majority, or whether there even is one.
int label_of(const std::vector<int>& labels, std::size_t rank) {
  return labels.empty() ? static_cast<int>(rank) : labels[rank];
}

// `Owner` is Request or its base CollectiveArguments, whichever declares the field.
template <typename T, typename Owner>
void check_field(const char* field, T Owner::*member, const std::vector<Request>& requests,
                 const std::vector<int>& labels, std::vector<std::string>* clauses) {
  const T& first = requests[0].*member;
  bool differs = false;
  for (const Request& r : requests) differs = differs || !(r.*member == first);
  if (!differs) return;
  std::string clause = fmt::format("{} mismatch: ", field);
  for (std::size_t rank = 0; rank < requests.size(); ++rank) {
    if (rank > 0) clause += ", ";
    clause += fmt::format("rank {} {}", label_of(labels, rank), show(requests[rank].*member));
  }
  clauses->push_back(std::move(clause));
}

// For allgather and alltoall, where ranks may differ in the first dimension:
// the number of dimensions and every extent after the first must agree.
void check_trailing_shape(const std::vector<Request>& requests, const std::vector<int>& labels,
                          std::vector<std::string>* clauses) {
  auto trailing_equal = [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    return a.size() == b.size() && (a.empty() || std::equal(a.begin() + 1, a.end(), b.begin() + 1));
  };
  bool differs = false;
  for (const Request& r : requests)
    differs = differs || !trailing_equal(r.shape, requests[0].shape);
  if (!differs) return;
  std::string clause = "shape mismatch beyond the first dimension: ";
  for (std::size_t rank = 0; rank < requests.size(); ++rank) {
    if (rank > 0) clause += ", ";
    clause +=
        fmt::format("rank {} {}", label_of(labels, rank), shape_to_string(requests[rank].shape));
  }
  clauses->push_back(std::move(clause));
}

// For allgather and alltoall, whose output concatenates rows from every
// rank: each rank's shape passed the overflow checks at submission, but the
// output's rows (allgather: every rank's first dimension summed; alltoall:
// the rows each rank receives) times the bytes of a row must fit in int64 as
// well, or the buffers would be sized from a wrapped-around count.
void check_output_size(const std::vector<Request>& requests, const std::vector<int>& labels,
                       std::vector<std::string>* clauses) {
  const Request& first = requests[0];
  int64_t row_bytes = static_cast<int64_t>(element_size(first.dtype));
  for (std::size_t d = 1; d < first.shape.size(); ++d) {
    if (first.shape[d] == 0) return;  // no bytes at all, whatever the row count
    row_bytes *= first.shape[d];      // within a shape checked at submission
  }
  const bool allgather = first.type == CollectiveType::kAllgather;
  const auto rows_sent = [&](std::size_t sender, std::size_t receiver) -> int64_t {
    const Request& r = requests[sender];
    if (allgather) return r.shape.empty() ? 0 : r.shape[0];
    return receiver < r.splits.size() ? r.splits[receiver] : 0;
  };
  const std::size_t ranks = requests.size();
  // Allgather's output is the same on every rank: one receiver says it.
  const std::size_t receivers = allgather ? 1 : ranks;
  for (std::size_t receiver = 0; receiver < receivers; ++receiver) {
    int64_t rows = 0;
    int64_t bytes = 0;
    bool overflows = false;
    for (std::size_t sender = 0; sender < ranks && !overflows; ++sender) {
      overflows = __builtin_add_overflow(rows, rows_sent(sender, receiver), &rows) ||
                  __builtin_mul_overflow(rows, row_bytes, &bytes);
    }
    if (!overflows) continue;
    std::vector<std::string> parts;
    for (std::size_t sender = 0; sender < ranks; ++sender) {
      parts.push_back(
          fmt::format("rank {} {}", label_of(labels, sender), rows_sent(sender, receiver)));
    }
    const std::string whose =
        allgather ? std::string("the output's first dimension")
                  : fmt::format("the rows rank {} receives", label_of(labels, receiver));
    clauses->push_back(fmt::format("{}, the sum of {}, times {} bytes per row exceeds 2^63-1 bytes",
                                   whose, fmt::join(parts, ", "), row_bytes));
    return;  // one clause says it
  }
}

}  // namespace

Response build_response(const std::vector<Request>& requests_by_rank,
                        const std::vector<int>& rank_labels) {
  HERD_ENFORCE(!requests_by_rank.empty());
  const Request& first = requests_by_rank[0];

  // Field order is fixed so that the same disagreement always reads the same.
  // Other fields mean nothing across different collectives, so a collective
  // mismatch is reported alone.
  std::vector<std::string> clauses;
  check_field("collective", &Request::type, requests_by_rank, rank_labels, &clauses);
  if (clauses.empty()) {
    const CollectiveType type = first.type;
    const bool reduces = type == CollectiveType::kAllreduce ||
                         type == CollectiveType::kReducescatter ||
                         type == CollectiveType::kGroupedAllreduce;
    check_field("dtype", &Request::dtype, requests_by_rank, rank_labels, &clauses);
    if (reduces) check_field("op", &Request::op, requests_by_rank, rank_labels, &clauses);
    if (type == CollectiveType::kAllgather || type == CollectiveType::kAlltoall) {
      check_trailing_shape(requests_by_rank, rank_labels, &clauses);
      if (clauses.empty()) check_output_size(requests_by_rank, rank_labels, &clauses);
    } else if (type == CollectiveType::kGroupedAllreduce) {
      check_field("shapes", &Request::group_shapes, requests_by_rank, rank_labels, &clauses);
    } else {
      check_field("shape", &Request::shape, requests_by_rank, rank_labels, &clauses);
    }
    if (type == CollectiveType::kBroadcast)
      check_field("root", &Request::root, requests_by_rank, rank_labels, &clauses);
    if (reduces) {
      check_field("prescale", &Request::prescale, requests_by_rank, rank_labels, &clauses);
      check_field("postscale", &Request::postscale, requests_by_rank, rank_labels, &clauses);
    }
    check_field("device", &Request::device, requests_by_rank, rank_labels, &clauses);
  }

  Response response;
  response.collective = first.type;
  response.name = first.name;
  response.dtype = first.dtype;
  response.op = first.op;
  response.prescale = first.prescale;
  response.postscale = first.postscale;
  response.device = first.device;
  response.shape = first.shape;
  response.root = first.root;
  response.group_shapes = first.group_shapes;
  if (clauses.empty() && first.type == CollectiveType::kAllgather) {
    for (const Request& r : requests_by_rank)
      response.rank_extents.push_back(r.shape.empty() ? 0 : r.shape[0]);
  }
  if (clauses.empty() && first.type == CollectiveType::kAlltoall) {
    for (const Request& r : requests_by_rank) {
      response.rank_extents.insert(response.rank_extents.end(), r.splits.begin(), r.splits.end());
    }
  }
  if (clauses.empty()) {
    response.type = ResponseType::kExecute;
  } else {
    response.type = ResponseType::kError;
    response.error_message =
        fmt::format("{} '{}': {}", to_string(first.type), first.name, fmt::join(clauses, "; "));
  }
  return response;
}

Coordinator::Coordinator(int num_ranks, std::vector<int> rank_labels)
    : num_ranks_(num_ranks), rank_labels_(std::move(rank_labels)) {
  HERD_ENFORCE_GE(num_ranks, 1);
  HERD_ENFORCE(rank_labels_.empty() || rank_labels_.size() == static_cast<std::size_t>(num_ranks));
}

Status Coordinator::add(const Request& request) {
  if (request.rank < 0 || request.rank >= num_ranks_) {
    return Status::error(fmt::format("request for '{}' from rank {}, but the job has {} ranks",
                                     request.name, request.rank, num_ranks_));
  }
  Entry& entry = table_[request.name];
  if (entry.by_rank.empty()) {
    entry.by_rank.resize(static_cast<std::size_t>(num_ranks_));
    entry.present.resize(static_cast<std::size_t>(num_ranks_), false);
  }
  const auto rank = static_cast<std::size_t>(request.rank);
  if (entry.present[rank]) {
    return Status::error(
        fmt::format("rank {} requested '{}' again before the previous request for it completed",
                    request.rank, request.name));
  }
  entry.by_rank[rank] = request;
  entry.present[rank] = true;
  ++entry.count;
  mark_if_complete(request.name, entry);
  return Status::ok();
}

bool Coordinator::is_joined(int rank) const {
  return std::binary_search(joined_.begin(), joined_.end(), rank);
}

namespace {

bool runs_while_joined(CollectiveType type) {
  return type == CollectiveType::kAllreduce || type == CollectiveType::kGroupedAllreduce;
}

const Request& first_present(const std::vector<Request>& by_rank,
                             const std::vector<bool>& present) {
  const auto at = std::find(present.begin(), present.end(), true);
  HERD_ENFORCE(at != present.end());
  return by_rank[static_cast<std::size_t>(at - present.begin())];
}

}  // namespace

void Coordinator::mark_if_complete(const std::string& name, Entry& entry) {
  if (entry.complete) return;
  // While ranks are joined only allreduces run. Any other collective is
  // refused as soon as one rank asks for it, without waiting for the other
  // ranks that have not joined: they may never ask for the same name (their
  // unnamed counters differ when they took turns joining), and each that asks
  // later is refused the same way.
  const bool refused =
      !joined_.empty() && !runs_while_joined(first_present(entry.by_rank, entry.present).type);
  for (int rank = 0; rank < num_ranks_ && !refused; ++rank) {
    if (!entry.present[static_cast<std::size_t>(rank)] && !is_joined(rank)) return;
  }
  entry.complete = true;
  completed_.push_back(name);
}

void Coordinator::set_joined(std::vector<int> joined_ranks) {
  std::sort(joined_ranks.begin(), joined_ranks.end());
  joined_ = std::move(joined_ranks);
  // Names that waited only for ranks that have now joined are complete. Only
  // rank 0 coordinates and it broadcasts the order, so the table's name order
  // serves.
  for (auto& [name, entry] : table_) mark_if_complete(name, entry);
}

Response Coordinator::response_for(const Entry& entry) const {
  if (entry.count == num_ranks_) return build_response(entry.by_rank, rank_labels_);
  // Some ranks have joined: agree among the ranks that asked.
  std::vector<Request> present;
  std::vector<int> labels;
  std::vector<int> joined_labels;
  for (int rank = 0; rank < num_ranks_; ++rank) {
    if (entry.present[static_cast<std::size_t>(rank)]) {
      present.push_back(entry.by_rank[static_cast<std::size_t>(rank)]);
      labels.push_back(label(rank));
    } else if (is_joined(rank)) {
      joined_labels.push_back(label(rank));
    }
  }
  Response response = build_response(present, labels);
  const CollectiveType type = present.front().type;
  if (response.type != ResponseType::kError && !runs_while_joined(type)) {
    response.type = ResponseType::kError;
    response.error_message = fmt::format(
        "{} '{}': ranks [{}] have joined (herd::join); only allreduce and grouped allreduce run "
        "while ranks are joined",
        to_string(type), present.front().name, fmt::join(joined_labels, ", "));
  }
  return response;
}

std::vector<Response> Coordinator::take_ready() {
  std::vector<Response> responses;
  responses.reserve(completed_.size());
  for (const std::string& name : completed_) {
    auto it = table_.find(name);
    HERD_ENFORCE(it != table_.end());
    responses.push_back(response_for(it->second));
    table_.erase(it);
  }
  completed_.clear();
  return responses;
}

std::size_t Coordinator::num_pending() const { return table_.size() - completed_.size(); }

}  // namespace herd::detail
