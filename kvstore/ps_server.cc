#include "kvstore/ps_server.h"

#include <map>
#include <vector>

#include <fmt/format.h>

#include "herd/error.h"
#include "kvstore/gradient_compression.h"
#include "kvstore/optimizer_config_codec.h"
#include "kvstore/ps_protocol.h"
#include "kvstore/update_store.h"

namespace herd {
namespace kv {
namespace detail {
namespace {

class KVServer : public ps::RequestHandler {
 public:
  KVServer(const ps::Layout& layout, int server) : layout_(layout), server_(server) {}

  ps::Message handle(int worker, const ps::Message& message) override {
    std::vector<uint8_t> values;
    PsReply reply;
    try {
      const PsRequest request = decode_request(message);
      Store& store = stores_[request.store];
      switch (request.op) {
        case PsOp::kPush: push(store, request); break;
        case PsOp::kPull: pull(store, request, &values); break;
        case PsOp::kPushPull:
          push(store, request);
          pull(store, request, &values);
          break;
        case PsOp::kSetOptimizer:
          store.values.set_optimizer(decode_optimizer_config(request.optimizer));
          break;
        case PsOp::kUpdateCount: reply.update_count = store.updates; break;
        case PsOp::kCloseStore:
          // The store's state goes once every worker has closed it.
          if (++store.closed == layout_.num_workers) stores_.erase(request.store);
          break;
      }
    } catch (const std::exception& error) {
      reply.ok = false;
      reply.error =
          fmt::format("{} (on parameter server {}, for worker {})", error.what(), server_, worker);
    }
    reply.payload = values.data();
    reply.payload_bytes = values.size();
    return encode_reply(reply);
  }

 private:
  struct Store {
    UpdateStore values;
    int64_t updates = 0;  // pushes applied (initialising pushes not counted)
    int closed = 0;       // workers that have closed the store
  };

  void push(Store& store, const PsRequest& request) {
    const TensorView received{
        const_cast<uint8_t*>(request.payload), request.dtype, {request.count}};
    if (!store.values.contains(request.key)) {
      // Upstream's init: the first push of a key holds its value, sent
      // uncompressed by worker 0.
      if (request.compression.type != CompressionType::kNone) {
        throw Error(fmt::format("kvstore: key {} received a compressed push before its init",
                                request.name));
      }
      store.values.init(request.key, request.name, received);
      return;
    }
    if (!store.values.has_optimizer()) {
      throw Error(
          "an optimizer is required for asynchronous updates, as upstream; call set_optimizer "
          "first");
    }
    if (request.compression.type == CompressionType::kNone) {
      store.values.update(request.key, received);
    } else {
      if (request.dtype != DataType::kFloat32) {
        throw Error(fmt::format("kvstore: key {}: compressed pushes are float32 only, got {}",
                                request.name, herd::to_string(request.dtype)));
      }
      scratch_.resize(static_cast<std::size_t>(request.count));
      dequantize(request.compression, request.payload, request.count, scratch_.data());
      store.values.update(request.key,
                          TensorView{scratch_.data(), DataType::kFloat32, {request.count}});
    }
    store.updates += 1;
  }

  void pull(Store& store, const PsRequest& request, std::vector<uint8_t>* values) {
    values->resize(static_cast<std::size_t>(request.count) * element_size(request.dtype));
    store.values.read(request.key, TensorView{values->data(), request.dtype, {request.count}});
  }

  ps::Layout layout_;
  int server_;
  std::map<int32_t, Store> stores_;
  std::vector<float> scratch_;  // a compressed push, dequantized
};

}  // namespace

std::unique_ptr<ps::RequestHandler> make_ps_request_handler(const ps::Layout& layout, int server) {
  return std::make_unique<KVServer>(layout, server);
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
