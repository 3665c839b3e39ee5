// HERD_ENFORCE*: checks of invariants that only a bug in herd can break.
//
// A failed check throws herd::detail::InternalError with the file, line, the
// expression and both values. Expected failures (bad input from a user or a
// peer, a transport error) use Status instead; see common/status.h.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace herd::detail {

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

[[noreturn]] void throw_internal_error(const char* file, int line, const std::string& what);

}  // namespace herd::detail

#define HERD_ENFORCE(cond)                                                                         \
  do {                                                                                             \
    if (!(cond)) ::herd::detail::throw_internal_error(__FILE__, __LINE__, "check failed: " #cond); \
  } while (0)

#define HERD_ENFORCE_OP_(a, b, op)                                                          \
  do {                                                                                      \
    const auto& herd_a_ = (a);                                                              \
    const auto& herd_b_ = (b);                                                              \
    if (!(herd_a_ op herd_b_))                                                              \
      ::herd::detail::throw_internal_error(                                                 \
          __FILE__, __LINE__,                                                               \
          fmt::format("check failed: {} " #op " {} ({} vs {})", #a, #b, herd_a_, herd_b_)); \
  } while (0)

#define HERD_ENFORCE_EQ(a, b) HERD_ENFORCE_OP_(a, b, ==)
#define HERD_ENFORCE_NE(a, b) HERD_ENFORCE_OP_(a, b, !=)
#define HERD_ENFORCE_LE(a, b) HERD_ENFORCE_OP_(a, b, <=)
#define HERD_ENFORCE_LT(a, b) HERD_ENFORCE_OP_(a, b, <)
#define HERD_ENFORCE_GE(a, b) HERD_ENFORCE_OP_(a, b, >=)
