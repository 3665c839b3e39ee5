// A Transport that hands every call to the one it wraps, for tests that
// watch or change only some calls (counting sends, failing some): they
// override those and leave the rest to it.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "collectives/transport.h"

namespace herd::detail::testing {

class ForwardingTransport : public collectives::Transport {
 public:
  explicit ForwardingTransport(std::unique_ptr<collectives::Transport> inner)
      : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::unique_ptr<collectives::PendingTransfer> isend(const void* data, std::size_t bytes, int peer,
                                                      int tag) override {
    return inner_->isend(data, bytes, peer, tag);
  }
  std::unique_ptr<collectives::PendingTransfer> irecv(void* data, std::size_t bytes, int peer,
                                                      int tag) override {
    return inner_->irecv(data, bytes, peer, tag);
  }

 private:
  std::unique_ptr<collectives::Transport> inner_;
};

}  // namespace herd::detail::testing
