// An OptimizerConfig as string fields ("kind" -> "sgd", "sgd.lr" -> "0.1",
// "schedule.kind" -> "cosine", ...): how a checkpoint's metadata (and any
// other carrier of key/value text) holds a store's optimizer. Doubles are
// written in their shortest round-trip form, so decode(encode(c)) == c bit for
// bit and a restored store computes the same updates.
#pragma once

#include <map>
#include <string>

#include "herd/kvstore.h"

namespace herd {
namespace kv {
namespace detail {

using ConfigFields = std::map<std::string, std::string>;

// Every field of `config` (the options of its kind only), keys prefixed with
// `prefix`.
ConfigFields encode_optimizer_config(const OptimizerConfig& config, const std::string& prefix = "");

// The inverse; throws herd::Error naming the field when one is missing or
// not a number, or the kind is unknown. Fields without `prefix` are ignored.
OptimizerConfig decode_optimizer_config(const ConfigFields& fields, const std::string& prefix = "");

// The fields as one line for messages: "kind=sgd rescale_grad=1 sgd.lr=0.1 ...".
std::string describe_optimizer_config(const OptimizerConfig& config);

// "sgd", "adam", "adamw".
std::string to_string(OptimizerConfig::Kind kind);

}  // namespace detail
}  // namespace kv
}  // namespace herd
