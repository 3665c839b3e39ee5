// Status: the result of every fallible internal function.
//
// Internal layers (ops, collectives, runtime) never throw across a layer
// boundary for an expected failure (a transport error, a peer's mismatch);
// they return a Status that the caller must look at ([[nodiscard]]). The
// runtime turns a failed Status into a failed handle, and the public API turns
// it into herd::Error. Broken invariants use HERD_ENFORCE (common/enforce.h).
#pragma once

#include <string>
#include <utility>

#include "herd/error.h"

namespace herd {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK

  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }
  // This rank's request is wrong by itself (herd::ErrorKind::kInvalidArgument).
  static Status invalid_argument(std::string message) {
    return Status(std::move(message), ErrorKind::kInvalidArgument);
  }
  // A well-formed request herd does not support (ErrorKind::kNotImplemented).
  static Status not_implemented(std::string message) {
    return Status(std::move(message), ErrorKind::kNotImplemented);
  }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return message_; }
  // kFailed for an OK status and for Status::error.
  ErrorKind kind() const { return kind_; }

  // Prefixes the message with context, e.g. "ring allreduce step 2: ".
  Status with_context(const std::string& context) const {
    return is_ok() ? *this : Status(context + message_, kind_);
  }
  // Appends a note to the message, e.g. "; not heard from ...", keeping the kind.
  Status with_note(const std::string& note) const {
    return is_ok() || note.empty() ? *this : Status(message_ + note, kind_);
  }

 private:
  explicit Status(std::string message, ErrorKind kind = ErrorKind::kFailed)
      : failed_(true), kind_(kind), message_(std::move(message)) {}

  bool failed_ = false;
  ErrorKind kind_ = ErrorKind::kFailed;
  std::string message_;
};

}  // namespace herd

// Returns the Status of `expr` from the enclosing function if it failed.
#define HERD_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::herd::Status herd_status_ = (expr);           \
    if (!herd_status_.is_ok()) return herd_status_; \
  } while (0)
