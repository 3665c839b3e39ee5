// herd::Status: context and notes change a failure's message and keep its
// kind, so that a note added on the way to the caller (the ranks a failed
// collective no longer hears from) does not turn a misuse into a failure.
#include <catch2/catch.hpp>

#include "common/status.h"

namespace herd {
namespace {

TEST_CASE("status: a note is appended and keeps the kind; an OK status or an empty note stays") {
  const Status misuse = Status::invalid_argument("tensor 'w': 3 elements, expected 4");
  const Status noted = misuse.with_note("; not heard from: rank 2");
  CHECK(noted.message() == "tensor 'w': 3 elements, expected 4; not heard from: rank 2");
  CHECK(noted.kind() == misuse.kind());
  CHECK(noted.kind() != Status::error("x").kind());
  CHECK(misuse.with_note("").message() == misuse.message());
  CHECK(Status::ok().with_note("; not heard from: rank 2").is_ok());
  CHECK(Status::ok().with_note("; x").message().empty());
}

TEST_CASE("status: context is prefixed and keeps the kind") {
  const Status misuse = Status::invalid_argument("3 elements");
  const Status placed = misuse.with_context("allreduce 'w': ");
  CHECK(placed.message() == "allreduce 'w': 3 elements");
  CHECK(placed.kind() == misuse.kind());
}

}  // namespace
}  // namespace herd
