#include "src/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/mpi/fault_notice.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/peer_identity.h"
#include "common/logging.h"
#include "herd/error.h"
#include "src/handle_state.h"
#include "src/operation_stats.h"
#include "src/ps_link.h"
#include "src/request_validation.h"
#include "src/timeline.h"

namespace herd::detail {
namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

// Settings that decide message layouts or algorithms must be equal on every
// rank, or the ranks would disagree on the agreement vector's length, on
// fusion groups or on the algorithm, and hang; the settings table (config_settings.cc)
// marks them. Every rank sees the same gathered values, so every rank throws
// the same error.
void check_settings_agree(const Config& config, int size) {
  const std::vector<AgreedSetting> shared = settings_that_must_agree(config);
  const int count = static_cast<int>(shared.size());
  std::vector<int64_t> mine;
  for (const AgreedSetting& setting : shared) mine.push_back(setting.value);
  std::vector<int64_t> all(static_cast<std::size_t>(count) * size);
  throw_if_failed(HERD_MPI_STATUS(MPI_Allgather(mine.data(), count, MPI_INT64_T, all.data(), count,
                                                MPI_INT64_T, MPI_COMM_WORLD))
                      .with_context("herd::init, comparing settings across ranks: "));
  std::vector<std::string> clauses;
  for (int i = 0; i < count; ++i) {
    bool equal = true;
    std::vector<std::string> values;
    for (int r = 0; r < size; ++r) {
      equal = equal && all[r * count + i] == all[i];
      values.push_back(fmt::format("rank {} {}", r, shared[i].text(all[r * count + i])));
    }
    if (!equal)
      clauses.push_back(
          fmt::format("{} differs across ranks: {}", shared[i].variable, fmt::join(values, ", ")));
  }
  if (!clauses.empty()) {
    throw Error(fmt::format("herd::init: {}; every rank must use the same value",
                            fmt::join(clauses, "; ")));
  }
}

// Every rank's `mine`, gathered on `comm`.
std::vector<std::string> allgather_strings(const std::string& mine, MPI_Comm comm, int size) {
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size));
  HERD_MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  std::vector<int> displacements(static_cast<std::size_t>(size));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displacements[r] = total;
    total += lengths[r];
  }
  std::vector<char> all(static_cast<std::size_t>(total));
  HERD_MPI_CHECK(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                                displacements.data(), MPI_CHAR, comm));
  std::vector<std::string> strings;
  for (int r = 0; r < size; ++r) {
    strings.emplace_back(all.data() + displacements[r], static_cast<std::size_t>(lengths[r]));
  }
  return strings;
}

// A rank that found a problem before taking part in init's collectives (a
// bad setting, too low an MPI thread level) must not leave alone: the others
// would wait for it in those collectives, and it alone would say why. Every
// rank passes its problem ("" for none) and every rank throws the same
// message, naming each rank with a problem, unless none has one.
void fail_if_any_rank_has_a_problem(const std::string& problem, int size) {
  const std::vector<std::string> problems = allgather_strings(problem, MPI_COMM_WORLD, size);
  std::vector<std::string> clauses;
  for (int r = 0; r < size; ++r) {
    if (!problems[r].empty()) clauses.push_back(fmt::format("on rank {}, {}", r, problems[r]));
  }
  if (!clauses.empty()) throw Error(fmt::format("herd::init: {}", fmt::join(clauses, "; ")));
}

// Logs each warning once per process, however often herd::init runs.
void warn_once(const std::vector<std::string>& warnings) {
  static std::set<std::string> given;
  for (const std::string& warning : warnings) {
    if (given.insert(warning).second) HERD_LOG(kWarning, "herd::init: {}", warning);
  }
}

// Every rank's list, gathered on the registry communicator.
std::vector<std::vector<int>> allgather_lists(const std::vector<int>& mine, MPI_Comm comm,
                                              int size) {
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(size));
  HERD_MPI_CHECK(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm));
  std::vector<int> displacements(static_cast<std::size_t>(size));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displacements[r] = total;
    total += counts[r];
  }
  std::vector<int> all(static_cast<std::size_t>(total));
  HERD_MPI_CHECK(MPI_Allgatherv(mine.data(), count, MPI_INT, all.data(), counts.data(),
                                displacements.data(), MPI_INT, comm));
  std::vector<std::vector<int>> lists;
  for (int r = 0; r < size; ++r) {
    lists.emplace_back(all.begin() + displacements[r], all.begin() + displacements[r] + counts[r]);
  }
  return lists;
}

// Throws on every rank, the same message, unless every rank passed `mine`.
void require_same_on_every_rank(const char* call, const std::vector<int>& mine, MPI_Comm comm,
                                int size) {
  const std::vector<std::vector<int>> lists = allgather_lists(mine, comm, size);
  bool same = true;
  std::vector<std::string> values;
  for (int r = 0; r < size; ++r) {
    same = same && lists[r] == lists[0];
    values.push_back(fmt::format("rank {} [{}]", r, fmt::join(lists[r], ",")));
  }
  if (!same) {
    throw Error(
        fmt::format("herd::{}: ranks passed different arguments: {}; every rank must pass "
                    "the same, in the same order of calls",
                    call, fmt::join(values, ", ")));
  }
}

}  // namespace

std::unique_ptr<Runtime> Runtime::start(const Config& config, const Status& config_read,
                                        const std::vector<std::string>& config_warnings,
                                        const std::vector<std::string>& config_choices) {
  if (const std::optional<std::string> fault = collectives::known_fault()) {
    throw Error(fmt::format(
        "herd::init: herd stopped after a fatal failure in this process and left MPI as it was; "
        "it cannot start again ({})",
        *fault));
  }
  int finalized = 0;
  HERD_MPI_CHECK(MPI_Finalized(&finalized));
  if (finalized) {
    throw Error(
        "herd::init: MPI has already been finalized (by herd::shutdown or the program); "
        "herd cannot start again in this process");
  }
  std::unique_ptr<Runtime> runtime(new Runtime());
  runtime->config_ = config;
  // herd::stats() counts this job's operations from here on.
  process_stats().clear();

  int initialized = 0;
  HERD_MPI_CHECK(MPI_Initialized(&initialized));
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    HERD_MPI_CHECK(MPI_Query_thread(&provided));
  } else {
    HERD_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    runtime->owns_mpi_ = true;
  }
  runtime->thread_level_ = provided;
  HERD_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &runtime->rank_));
  HERD_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &runtime->size_));
  logging::set_rank(runtime->rank_);
  logging::set_level(config.log_level);
  warn_once(config_warnings);
  for (const std::string& choice : config_choices) HERD_LOG(kInfo, "herd::init: {}", choice);

  std::vector<std::string> problems;
  if (!config_read.is_ok()) problems.push_back(config_read.message());
  if (provided < MPI_THREAD_MULTIPLE) {
    problems.push_back(fmt::format(
        "MPI provides {}, but herd's background thread calls MPI while the program runs: "
        "initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or let herd::init do "
        "it",
        thread_level_name(provided)));
  }
  if (!config.timeline_path.empty()) {
    // A file that cannot be written fails init on every rank, like a bad
    // setting; ~Runtime finishes one that was opened.
    const Status started =
        process_timeline().start(config.timeline_path, config.timeline_mark_cycles, runtime->rank_);
    if (!started.is_ok()) {
      problems.push_back(
          fmt::format("HERD_TIMELINE='{}': {}", config.timeline_path, started.message()));
    }
  }
  const std::string problem = fmt::format("{}", fmt::join(problems, "; "));
  // ~Runtime finalizes MPI if herd started it.
  fail_if_any_rank_has_a_problem(problem, runtime->size_);
  check_settings_agree(config, runtime->size_);
  // The settings agree, so every rank throws the same here.
  const int world_rank = runtime->rank_;
  const int world_size = runtime->size_;
  if (config.num_servers >= world_size) {
    throw Error(fmt::format(
        "herd::init: HERD_NUM_SERVERS={} leaves no worker among the job's {} ranks; at most {} of "
        "them can be parameter servers",
        config.num_servers, world_size, world_size - 1));
  }
  runtime->layout_.num_servers = static_cast<int>(config.num_servers);
  runtime->layout_.num_workers = world_size - runtime->layout_.num_servers;
  runtime->layout_.bigarray_bound = config.kvstore_bigarray_bound;
  runtime->is_server_ = world_rank >= runtime->layout_.num_workers;
  if (runtime->layout_.num_servers > 0) {
    fail_if_any_rank_has_a_problem(
        runtime->is_server_ && registered_request_handler_factory() == nullptr
            ? fmt::format("rank {} is a parameter server (HERD_NUM_SERVERS={}), but this program "
                          "has no server loop: it does not link herd's KVStore library "
                          "(herd::kvstore), which serves dist_async stores",
                          world_rank, runtime->layout_.num_servers)
            : std::string(),
        world_size);
  }
  // Peers are named, and fault notices reach, every rank of the job,
  // servers included; all else below is among the workers.
  collectives::record_peer_identities(MPI_COMM_WORLD);
  collectives::open_fault_notices();
  MPI_Comm workers = MPI_COMM_WORLD;
  if (runtime->layout_.num_servers > 0) {
    MPI_Comm link = MPI_COMM_NULL;
    HERD_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &link));
    HERD_MPI_CHECK(MPI_Comm_set_errhandler(link, MPI_ERRORS_RETURN));
    HERD_MPI_CHECK(
        MPI_Comm_split(MPI_COMM_WORLD, runtime->is_server_ ? 1 : 0, world_rank, &workers));
    runtime->role_comm_ = workers;
    if (runtime->is_server_) {
      runtime->server_comm_ = link;
      HERD_LOG(kInfo, "started as parameter server {} of {}",
               world_rank - runtime->layout_.num_workers, runtime->layout_.num_servers);
      runtime->started_ = true;
      return runtime;
    }
    runtime->link_ =
        std::make_unique<WorkerLink>(link, runtime->layout_, config.collective_timeout_seconds);
    runtime->size_ = runtime->layout_.num_workers;
  }
  MPI_Comm local_comm;
  HERD_MPI_CHECK(MPI_Comm_split_type(workers, MPI_COMM_TYPE_SHARED, runtime->rank_, MPI_INFO_NULL,
                                     &local_comm));
  HERD_MPI_CHECK(MPI_Comm_rank(local_comm, &runtime->local_rank_));
  HERD_MPI_CHECK(MPI_Comm_size(local_comm, &runtime->local_size_));
  HERD_MPI_CHECK(MPI_Comm_free(&local_comm));
  // The ranks with the same local rank, one per machine, ordered by rank.
  MPI_Comm cross_comm;
  HERD_MPI_CHECK(MPI_Comm_split(workers, runtime->local_rank_, runtime->rank_, &cross_comm));
  HERD_MPI_CHECK(MPI_Comm_rank(cross_comm, &runtime->cross_rank_));
  HERD_MPI_CHECK(MPI_Comm_size(cross_comm, &runtime->cross_size_));
  HERD_MPI_CHECK(MPI_Comm_free(&cross_comm));
  // Every machine runs as many ranks when the smallest count is the largest.
  int local_size_bounds[2] = {-runtime->local_size_, runtime->local_size_};
  HERD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, local_size_bounds, 2, MPI_INT, MPI_MAX, workers));
  runtime->homogeneous_ = -local_size_bounds[0] == local_size_bounds[1];

  HERD_MPI_CHECK(MPI_Comm_dup(workers, &runtime->registry_comm_));

  std::vector<int> everyone(static_cast<std::size_t>(runtime->size_));
  std::iota(everyone.begin(), everyone.end(), 0);
  runtime->set_ranks_[0] = everyone;
  runtime->gpu_support_ = make_gpu_support(config, runtime->rank_, runtime->local_rank_);
  runtime->member_sets_[0] =
      std::make_unique<ProcessSetState>(0, everyone, workers, config, runtime->gpu_support_.get());
  // The sets are made one add_process_set at a time, which every rank must
  // call equally often: agree on the count before the first one.
  const std::vector<std::vector<int>> counts = allgather_lists(
      {static_cast<int>(config.process_sets.size())}, runtime->registry_comm_, runtime->size_);
  if (std::any_of(counts.begin(), counts.end(), [&](const auto& c) { return c != counts[0]; })) {
    std::vector<std::string> values;
    for (int r = 0; r < runtime->size_; ++r)
      values.push_back(fmt::format("rank {} {}", r, counts[r][0]));
    throw Error(fmt::format(
        "herd::init: HERD_PROCESS_SETS names different numbers of sets across ranks: {}; every "
        "rank must name the same sets",
        fmt::join(values, ", ")));
  }
  for (const std::vector<int>& ranks : config.process_sets) {
    try {
      runtime->add_process_set(ranks);
    } catch (const Error& error) {
      throw Error(std::string("herd::init: HERD_PROCESS_SETS: ") + error.what());
    }
  }
  HERD_LOG(kInfo,
           "started: rank {} of {}, local rank {} of {}, cross rank {} of {}, fusion threshold {} "
           "bytes, cycle {} ms",
           runtime->rank_, runtime->size_, runtime->local_rank_, runtime->local_size_,
           runtime->cross_rank_, runtime->cross_size_, config.fusion_threshold_bytes,
           config.cycle_time_ms);
  runtime->started_ = true;
  return runtime;
}

void Runtime::shutdown(ShutdownCause cause) {
  if (stopped_) return;
  stopped_ = true;
  if (cause == ShutdownCause::kExit && started_ && !is_server_ && size_ + layout_.num_servers > 1) {
    collectives::announce_exit_without_shutdown();
  }
  // Also reached from a start() that failed halfway: release what exists.
  // Later sets first, the global set last. After a fault every set's waits
  // end at once, so this returns promptly.
  for (auto it = member_sets_.rbegin(); it != member_sets_.rend(); ++it) it->second->stop();
  member_sets_.clear();
  // After the sets: their last records (what failed at the stop) are written.
  process_timeline().stop();
  if (config_.print_stats && started_ && !is_server_) {
    // Every rank its own table, in one write so that the ranks' tables do
    // not interleave: no communication, which after a failure may not work.
    const std::string table = format_stats(rank_, process_stats().snapshot());
    std::fwrite(table.data(), 1, table.size(), stderr);
    std::fflush(stderr);
  }
  // Reached from ~Runtime too, so failures are logged, not thrown.
  if (registry_comm_ != MPI_COMM_NULL) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&registry_comm_));
  // The servers end once every worker has said goodbye, at its shutdown or
  // at the end of its process.
  if (link_) {
    link_->say_goodbye();
    link_.reset();
  }
  if (server_comm_ != MPI_COMM_NULL && !collectives::fault_known())
    HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&server_comm_));
  if (role_comm_ != MPI_COMM_NULL) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&role_comm_));
  const std::optional<std::string> fault = collectives::known_fault();
  if (!fault) collectives::close_fault_notices();
  if (owns_mpi_ && fault) {
    // MPI_Finalize waits for every rank, a frozen or lost one too.
    HERD_LOG(kWarning,
             "not finalizing MPI after a fatal failure ({}); the process ends without "
             "MPI_Finalize",
             *fault);
  } else if (owns_mpi_) {
    HERD_MPI_WARN_IF_ERROR(MPI_Finalize());
  }
  HERD_LOG(kInfo, "shut down");
}

void Runtime::fail(const std::string& reason) {
  const std::string fault = collectives::announce_fault(reason);
  HERD_LOG(kError, "herd::fail: {}", fault);
  shutdown(ShutdownCause::kCall);
}

Runtime::~Runtime() { shutdown(ShutdownCause::kExit); }

void Runtime::serve_and_exit() {
  int exit_status = 0;
  bool clean = false;
  try {
    const ps::RequestHandlerFactory factory = registered_request_handler_factory();
    std::unique_ptr<ps::RequestHandler> handler = factory(layout_, rank_ - layout_.num_workers);
    clean = serve(server_comm_, layout_, *handler);
    HERD_LOG(kInfo, "parameter server: every worker has finished");
  } catch (const std::exception& error) {
    HERD_LOG(kError, "parameter server {} stops: {}", rank_ - layout_.num_workers, error.what());
    exit_status = 1;
  }
  const bool owned_mpi = owns_mpi_;
  if (!clean) owns_mpi_ = false;  // a gone worker would hold MPI_Finalize
  shutdown(ShutdownCause::kCall);
  // The process ends here, so MPI is finalized even if the program started
  // it, unless that could wait for a rank that is gone.
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (clean && !owned_mpi && !finalized && !collectives::fault_known()) {
    HERD_MPI_WARN_IF_ERROR(MPI_Finalize());
  }
  std::fflush(nullptr);
  std::exit(exit_status);
}

std::string name_the_rank_that_stopped(const std::string& message) {
  static const std::string kSomeRank = "herd::shutdown on some rank";
  static const std::string kOtherSet = "(or herd shut down)";
  const std::size_t at = message.find(kSomeRank);
  const std::size_t at_set = message.find(kOtherSet);
  if (at == std::string::npos && at_set == std::string::npos) return message;
  const std::optional<collectives::StopNotice> notice =
      collectives::stop_notice(std::chrono::milliseconds(100));
  if (!notice) return message;
  std::string named = message;
  if (at != std::string::npos) {
    named.replace(
        at, kSomeRank.size(),
        notice->fault ? "herd::shutdown after a fatal failure: " + notice->text : notice->text);
  } else if (notice->fault) {
    named.replace(at_set, kOtherSet.size(),
                  "(or herd shut down after a fatal failure: " + notice->text + ")");
  }
  return named;
}

ProcessSet Runtime::global_process_set() const { return ProcessSet(); }

void Runtime::start_timeline(const std::string& path, bool mark_cycles) {
  if (path.empty()) throw invalid_argument("herd::start_timeline: the file path is empty");
  const Status started = process_timeline().start(path, mark_cycles, rank_);
  if (!started.is_ok()) throw Error("herd::start_timeline: " + started.message());
}

void Runtime::stop_timeline() { process_timeline().stop(); }

ProcessSet Runtime::add_process_set(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  // Agree first: the checks below then see the same list on every rank, so
  // every rank throws the same error instead of one rank alone.
  require_same_on_every_rank("add_process_set", ranks, registry_comm_, size_);
  const std::string given = fmt::format("[{}]", fmt::join(ranks, ","));
  if (ranks.empty())
    throw invalid_argument("herd::add_process_set: a process set needs at least one rank");
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    throw invalid_argument(fmt::format("herd::add_process_set: ranks {} hold a duplicate", given));
  }
  if (ranks.front() < 0 || ranks.back() >= size_) {
    throw invalid_argument(fmt::format(
        "herd::add_process_set: ranks {} reach outside the job's ranks 0..{}", given, size_ - 1));
  }
  for (const auto& [id, existing] : set_ranks_) {
    if (id != 0 && existing == ranks) {
      throw invalid_argument(
          fmt::format("herd::add_process_set: process set {} already has ranks {}", id, given));
    }
  }
  return create_process_set(next_set_id_++, std::move(ranks));
}

std::vector<ProcessSet> Runtime::process_sets() const {
  std::vector<ProcessSet> sets;
  for (const auto& [id, ranks] : set_ranks_) {
    sets.push_back(id == 0 ? ProcessSet() : ProcessSet(id, ranks));
  }
  return sets;
}

ProcessSet Runtime::create_process_set(int id, std::vector<int> ranks) {
  const bool member = std::binary_search(ranks.begin(), ranks.end(), rank_);
  MPI_Comm comm = MPI_COMM_NULL;
  HERD_MPI_CHECK(MPI_Comm_split(registry_comm_, member ? 0 : MPI_UNDEFINED, rank_, &comm));
  set_ranks_[id] = ranks;
  if (member) {
    member_sets_[id] =
        std::make_unique<ProcessSetState>(id, ranks, comm, config_, gpu_support_.get());
    HERD_MPI_CHECK(MPI_Comm_free(&comm));
  }
  HERD_LOG(kInfo, "process set {} with ranks [{}]", id, fmt::join(ranks, ","));
  return ProcessSet(id, std::move(ranks));
}

void Runtime::remove_process_set(const ProcessSet& set) {
  // Agree first, so that a bad id fails on every rank alike.
  require_same_on_every_rank("remove_process_set", {set.id()}, registry_comm_, size_);
  if (set.is_global())
    throw invalid_argument("herd::remove_process_set: the global process set stays");
  auto known = set_ranks_.find(set.id());
  if (known == set_ranks_.end()) {
    throw invalid_argument(
        fmt::format("herd::remove_process_set: there is no process set {}", set.id()));
  }
  auto member = member_sets_.find(set.id());
  if (member != member_sets_.end()) {
    member->second->stop();
    member_sets_.erase(member);
  }
  set_ranks_.erase(known);
}

ProcessSetState& Runtime::member_state(const ProcessSet& set, const std::string& what) {
  auto known = set_ranks_.find(set.id());
  if (known == set_ranks_.end()) {
    throw invalid_argument(
        fmt::format("{}: there is no process set {} (removed, or never added)", what, set.id()));
  }
  if (!set.is_global() && set.ranks() != known->second) {
    throw invalid_argument(fmt::format("{}: process set {} has ranks [{}], not [{}]", what,
                                       set.id(), fmt::join(known->second, ","),
                                       fmt::join(set.ranks(), ",")));
  }
  auto member = member_sets_.find(set.id());
  if (member == member_sets_.end()) {
    throw invalid_argument(fmt::format("{}: rank {} is not in process set {} (ranks [{}])", what,
                                       rank_, set.id(), fmt::join(known->second, ",")));
  }
  return *member->second;
}

}  // namespace herd::detail
