// The dist_async engine (kvstore/dist_async_engine.h): the worker's side.
// Each key is placed on the servers as upstream places it
// (kvstore/ps_placement.h); a call sends one request per slice of every key
// to the servers before waiting for any reply; each server applies a push as
// it arrives (kvstore/ps_server.h). Requests from this worker to one server
// are handled in the order sent, so a pull after a push sees it.
#include "kvstore/dist_async_engine.h"

#include <atomic>
#include <cstring>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "common/logging.h"
#include "herd/error.h"
#include "herd/herd.h"
#include "herd/parameter_server.h"
#include "kvstore/gradient_compression.h"
#include "kvstore/optimizer_config_codec.h"
#include "kvstore/ps_placement.h"
#include "kvstore/ps_protocol.h"
#include "kvstore/ps_server.h"
#include "kvstore/update_store.h"

namespace herd {
namespace kv {
namespace {

// Server ranks run the request handler of this library: registered as the
// library loads, so that herd::init on a server rank finds it. This file
// holds create()'s dist_async engine, which every program using the
// KVStore links.
const bool g_handler_registered = [] {
  ps::set_request_handler_factory(&detail::make_ps_request_handler);
  return true;
}();

// Every worker numbers its dist_async stores in creation order.
std::atomic<int32_t> g_next_store{0};

class DistAsyncEngine : public detail::Engine {
 public:
  explicit DistAsyncEngine(std::string type) : type_(std::move(type)), store_(g_next_store++) {
    layout_ = ps::layout();
    if (layout_.num_servers == 0) {
      throw Error(
          fmt::format("kvstore '{}': the job has no parameter servers; set HERD_NUM_SERVERS (or "
                      "DMLC_NUM_SERVER) to make the last ranks of the job servers",
                      type_));
    }
  }

  // Tells the servers that this worker is done with the store; they drop it
  // once every worker has. Best effort: a failure was already reported by
  // the call that met it.
  ~DistAsyncEngine() override {
    if (!herd::is_initialized()) return;
    try {
      detail::PsRequest request;
      request.op = detail::PsOp::kCloseStore;
      request.store = store_;
      send_to_all_servers(request, "close");
    } catch (const Error& error) {
      HERD_LOG(kDebug, "kvstore '{}': closing the store: {}", type_, error.what());
    }
  }

  int rank() const override { return herd::rank(); }
  int num_workers() const override { return herd::size(); }

  // Worker 0's values become the keys' first values (a push into a key
  // that holds nothing); the barrier makes init a point every worker has
  // passed before any push, as upstream's.
  void init(const std::vector<detail::KeyItem>& items) override {
    if (rank() == 0) {
      std::vector<Sent> sent;
      for (std::size_t i = 0; i < items.size(); ++i) {
        send_slices(items, i, detail::PsOp::kPush, /*compress=*/false, "init", &sent);
      }
      wait_all(sent, nullptr);
    }
    herd::barrier();
  }

  void push(const std::vector<detail::KeyItem>& items, int /*priority*/) override {
    require_optimizer(items, "push");
    std::vector<Sent> sent;
    for (std::size_t i = 0; i < items.size(); ++i) {
      send_slices(items, i, detail::PsOp::kPush, /*compress=*/true, "push", &sent);
    }
    wait_all(sent, nullptr);
    stats_.pushes += static_cast<int64_t>(items.size());
  }

  void pull(const std::vector<detail::KeyItem>& items, int /*priority*/) override {
    std::vector<Sent> sent;
    for (std::size_t i = 0; i < items.size(); ++i) {
      send_slices(items, i, detail::PsOp::kPull, /*compress=*/false, "pull", &sent);
    }
    wait_all(sent, &items);
    stats_.pulls += static_cast<int64_t>(items.size());
  }

  // One round trip per slice: the server applies the push and answers with
  // the value it then holds.
  void pushpull(const std::vector<detail::KeyItem>& items, int /*priority*/) override {
    require_optimizer(items, "pushpull");
    std::vector<Sent> sent;
    for (std::size_t i = 0; i < items.size(); ++i) {
      send_slices(items, i, detail::PsOp::kPushPull, /*compress=*/true, "pushpull", &sent);
    }
    wait_all(sent, &items);
    stats_.pushes += static_cast<int64_t>(items.size());
    stats_.pulls += static_cast<int64_t>(items.size());
  }

  // Collective over the workers, as upstream: worker 0 sends the config to
  // every server and waits for each to take it, then every worker passes a
  // barrier, so no push reaches a server before its optimizer.
  void set_optimizer(const OptimizerConfig& config) override {
    detail::UpdateStore probe;
    probe.set_optimizer(config);  // throws, on every worker, for a bad config
    if (rank() == 0) {
      detail::PsRequest request;
      request.op = detail::PsOp::kSetOptimizer;
      request.store = store_;
      request.optimizer = detail::encode_optimizer_config(config);
      send_to_all_servers(request, "set_optimizer");
    }
    herd::barrier();
    has_optimizer_ = true;
  }

  void set_updater(Updater /*updater*/) override {
    throw Error(fmt::format(
        "kvstore: set_updater: the updates run on the parameter servers, which cannot run a "
        "function of this process; use set_optimizer"));
  }

  void set_gradient_compression(const GradientCompression& compression) override {
    compression_ = parse_compression(compression.type, compression.threshold);
    residuals_.clear();
  }

  bool is_capable(const std::string& capability) const override {
    return capability == "optimizer";
  }

  void barrier() override { herd::barrier(); }

  void save_optimizer_states(const std::string& /*path*/, bool /*dump*/) const override {
    throw Error(fmt::format(
        "kvstore: save_optimizer_states: the optimizer's state lives on the parameter servers, "
        "not in this process (as upstream); use dist_sync to checkpoint it"));
  }
  void load_optimizer_states(const std::string& /*path*/) override {
    throw Error(fmt::format(
        "kvstore: load_optimizer_states: the optimizer's state lives on the parameter servers, "
        "not in this process (as upstream); use dist_sync to restore it"));
  }

  Stats stats() const override { return stats_; }

  std::vector<int64_t> update_counts() override {
    detail::PsRequest request;
    request.op = detail::PsOp::kUpdateCount;
    request.store = store_;
    return send_to_all_servers(request, "update_counts");
  }

 private:
  // A request on its way: which item and slice it carries, and what to
  // name in its failure.
  struct Sent {
    int64_t id = 0;
    std::size_t item = 0;
    detail::Slice slice;
    std::string what;
  };

  std::string what(const char* operation, const detail::KeyItem& item) const {
    return fmt::format("kvstore: {} of key {}", operation, item.name);
  }

  void require_optimizer(const std::vector<detail::KeyItem>& items, const char* operation) {
    if (has_optimizer_ || items.empty()) return;
    throw Error(
        fmt::format("{}: an optimizer is required for asynchronous updates, as upstream; call "
                    "set_optimizer first",
                    what(operation, items.front())));
  }

  // Sends one request per slice of `items[index]`; the pushes compressed when the
  // store compresses and `compress` allows (init is sent raw).
  void send_slices(const std::vector<detail::KeyItem>& items, std::size_t index, detail::PsOp op,
                   bool compress, const char* operation, std::vector<Sent>* sent) {
    const detail::KeyItem& item = items[index];
    const int64_t n = item.value.num_elements();
    const std::size_t element = element_size(item.value.dtype);
    const bool compressed = compress && compression_.type != CompressionType::kNone;
    if (compressed && item.value.dtype != DataType::kFloat32) {
      throw Error(fmt::format(
          "{}: gradient compression ({}) takes float32 values; the key holds {}",
          what(operation, item), to_string(compression_.type), herd::to_string(item.value.dtype)));
    }
    for (const detail::Slice& slice :
         detail::place_key(item.id, n, layout_.num_servers, layout_.bigarray_bound)) {
      detail::PsRequest request;
      request.op = op;
      request.store = store_;
      request.key = item.id;
      request.name = item.name;
      request.dtype = item.value.dtype;
      request.offset = slice.offset;
      request.count = slice.count;
      std::vector<uint8_t> codes;
      if (op != detail::PsOp::kPull) {
        const auto* values = static_cast<const uint8_t*>(item.value.data);
        if (compressed) {
          request.compression = compression_;
          codes.resize(static_cast<std::size_t>(compressed_bytes(compression_.type, slice.count)));
          std::vector<float>& residual = residuals_[{item.id, slice.server}];
          residual.resize(static_cast<std::size_t>(slice.count), 0.0f);
          quantize(compression_, reinterpret_cast<const float*>(values) + slice.offset,
                   residual.data(), slice.count, codes.data());
          request.payload = codes.data();
          request.payload_bytes = codes.size();
        } else {
          request.payload = values + static_cast<std::size_t>(slice.offset) * element;
          request.payload_bytes = static_cast<std::size_t>(slice.count) * element;
        }
        stats_.bytes_sent += static_cast<int64_t>(request.payload_bytes);
      }
      const int64_t id = send(slice.server, detail::encode_request(request), what(operation, item));
      sent->push_back(Sent{id, index, slice, what(operation, item)});
    }
  }

  // ps::send_request, its failure opening with `what`.
  static int64_t send(int server, ps::Message request, const std::string& what) {
    try {
      return ps::send_request(server, std::move(request));
    } catch (const Error& error) {
      throw Error(fmt::format("{}: {}", what, error.what()));
    }
  }

  // Waits for every reply; writes pulled slices into `items`' views when
  // given. Throws the first failure once every reply is in, so that none is
  // left behind for a later call.
  void wait_all(const std::vector<Sent>& sent, const std::vector<detail::KeyItem>* items) {
    std::string first_error;
    for (const Sent& request : sent) {
      const ps::Message message = ps::wait_reply(request.id, request.what);
      const detail::PsReply reply = detail::decode_reply(message);
      if (!reply.ok) {
        if (first_error.empty()) first_error = fmt::format("{}: {}", request.what, reply.error);
        continue;
      }
      if (items == nullptr) continue;
      const detail::KeyItem& item = (*items)[request.item];
      const std::size_t element = element_size(item.value.dtype);
      const std::size_t bytes = static_cast<std::size_t>(request.slice.count) * element;
      if (reply.payload_bytes != bytes) {
        if (first_error.empty()) {
          first_error = fmt::format("{}: the server sent {} bytes for {} elements", request.what,
                                    reply.payload_bytes, request.slice.count);
        }
        continue;
      }
      if (bytes > 0) {
        std::memcpy(static_cast<uint8_t*>(item.value.data) +
                        static_cast<std::size_t>(request.slice.offset) * element,
                    reply.payload, bytes);
      }
      stats_.bytes_received += static_cast<int64_t>(bytes);
    }
    if (!first_error.empty()) throw Error(first_error);
  }

  // Sends `request` to every server, waits for every reply; returns the
  // update counts they carry.
  std::vector<int64_t> send_to_all_servers(const detail::PsRequest& request,
                                           const char* operation) {
    const std::string text = fmt::format("kvstore: {}", operation);
    std::vector<int64_t> ids;
    for (int server = 0; server < layout_.num_servers; ++server) {
      ids.push_back(send(server, detail::encode_request(request), text));
    }
    std::vector<int64_t> counts;
    std::string first_error;
    for (int64_t id : ids) {
      const detail::PsReply reply = detail::decode_reply(ps::wait_reply(id, text));
      if (!reply.ok && first_error.empty()) first_error = fmt::format("{}: {}", text, reply.error);
      counts.push_back(reply.update_count);
    }
    if (!first_error.empty()) throw Error(first_error);
    return counts;
  }

  std::string type_;
  int32_t store_;
  ps::Layout layout_;
  bool has_optimizer_ = false;
  CompressionParams compression_;
  // Per (key, server): this worker's error feedback for the slice it sends
  // there.
  std::map<std::pair<int64_t, int>, std::vector<float>> residuals_;
  Stats stats_;
};

}  // namespace

std::unique_ptr<detail::Engine> make_dist_async_engine(const std::string& type) {
  (void)g_handler_registered;
  return std::make_unique<DistAsyncEngine>(type);
}

}  // namespace kv
}  // namespace herd
