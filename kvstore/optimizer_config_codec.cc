// OptimizerConfig <-> string fields (kvstore/optimizer_config_codec.h).
#include "kvstore/optimizer_config_codec.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <type_traits>

#include "herd/error.h"

namespace herd {
namespace kv {
namespace detail {
namespace {

// Writes fields under one prefix; fmt's "{}" prints a double's shortest
// round-trip form.
class FieldWriter {
 public:
  FieldWriter(ConfigFields& fields, std::string prefix)
      : fields_(fields), prefix_(std::move(prefix)) {}
  void text(const std::string& name, const std::string& value) { fields_[prefix_ + name] = value; }
  void number(const std::string& name, double value) { text(name, fmt::format("{}", value)); }
  void flag(const std::string& name, bool value) { text(name, value ? "1" : "0"); }

 private:
  ConfigFields& fields_;
  std::string prefix_;
};

class FieldReader {
 public:
  FieldReader(const ConfigFields& fields, std::string prefix)
      : fields_(fields), prefix_(std::move(prefix)) {}

  const std::string& text(const std::string& name) const {
    auto it = fields_.find(prefix_ + name);
    if (it == fields_.end()) {
      throw Error(fmt::format("kvstore: optimizer field '{}{}' is missing", prefix_, name));
    }
    return it->second;
  }
  double number(const std::string& name) const {
    const std::string& value = text(name);
    char* end = nullptr;
    errno = 0;
    const double parsed = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || errno == ERANGE) {
      throw Error(fmt::format("kvstore: optimizer field '{}{}' is '{}', not a number", prefix_,
                              name, value));
    }
    return parsed;
  }
  bool flag(const std::string& name) const { return number(name) != 0; }

 private:
  const ConfigFields& fields_;
  std::string prefix_;
};

void write_warmup(FieldWriter& out, const LinearWarmup& warmup) {
  out.number("schedule.warmup.duration", warmup.duration);
  out.number("schedule.warmup.start_factor", warmup.start_factor);
}

LinearWarmup read_warmup(const FieldReader& in) {
  return LinearWarmup{in.number("schedule.warmup.duration"),
                      in.number("schedule.warmup.start_factor")};
}

// Milestones as one field, comma-separated.
std::string join_numbers(const std::vector<double>& values) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i) {
    text += (i ? "," : "") + fmt::format("{}", values[i]);
  }
  return text;
}

std::vector<double> split_numbers(const std::string& field, const std::string& text) {
  std::vector<double> values;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    ConfigFields one{{field, text.substr(start, comma - start)}};
    values.push_back(FieldReader(one, "").number(field));
    start = comma + 1;
  }
  return values;
}

void write_schedule(FieldWriter& out, const LrSchedule& schedule) {
  std::visit(
      [&out](const auto& s) {
        using S = std::decay_t<decltype(s)>;
        out.number("schedule.base_lr", s.base_lr);
        write_warmup(out, s.warmup);
        if constexpr (std::is_same_v<S, ConstantLr>) {
          out.text("schedule.kind", "constant");
        } else if constexpr (std::is_same_v<S, StepDecay>) {
          out.text("schedule.kind", "step");
          out.number("schedule.step_size", s.step_size);
          out.number("schedule.gamma", s.gamma);
        } else if constexpr (std::is_same_v<S, MultiStepDecay>) {
          out.text("schedule.kind", "multistep");
          out.text("schedule.milestones", join_numbers(s.milestones));
          out.number("schedule.gamma", s.gamma);
        } else if constexpr (std::is_same_v<S, CosineDecay>) {
          out.text("schedule.kind", "cosine");
          out.number("schedule.total", s.total);
          out.number("schedule.min_lr", s.min_lr);
        } else {
          out.text("schedule.kind", "polynomial");
          out.number("schedule.total", s.total);
          out.number("schedule.power", s.power);
          out.number("schedule.end_lr", s.end_lr);
        }
      },
      schedule);
}

LrSchedule read_schedule(const FieldReader& in, const std::string& prefix) {
  const std::string& kind = in.text("schedule.kind");
  const double base = in.number("schedule.base_lr");
  const LinearWarmup warmup = read_warmup(in);
  if (kind == "constant") return ConstantLr{base, warmup};
  if (kind == "step") {
    return StepDecay{base, in.number("schedule.step_size"), in.number("schedule.gamma"), warmup};
  }
  if (kind == "multistep") {
    return MultiStepDecay{
        base, split_numbers(prefix + "schedule.milestones", in.text("schedule.milestones")),
        in.number("schedule.gamma"), warmup};
  }
  if (kind == "cosine") {
    return CosineDecay{base, in.number("schedule.total"), in.number("schedule.min_lr"), warmup};
  }
  if (kind == "polynomial") {
    return PolynomialDecay{base, in.number("schedule.total"), in.number("schedule.power"),
                           in.number("schedule.end_lr"), warmup};
  }
  throw Error(fmt::format(
      "kvstore: optimizer field '{}schedule.kind' is '{}'; expected constant, step, multistep, "
      "cosine or polynomial",
      prefix, kind));
}

}  // namespace

std::string to_string(OptimizerConfig::Kind kind) {
  switch (kind) {
    case OptimizerConfig::Kind::kSGD: return "sgd";
    case OptimizerConfig::Kind::kAdam: return "adam";
    case OptimizerConfig::Kind::kAdamW: return "adamw";
  }
  return "unknown";
}

ConfigFields encode_optimizer_config(const OptimizerConfig& config, const std::string& prefix) {
  ConfigFields fields;
  FieldWriter out(fields, prefix);
  out.text("kind", to_string(config.kind));
  out.number("rescale_grad", config.rescale_grad);
  if (config.kind == OptimizerConfig::Kind::kSGD) {
    out.number("sgd.lr", config.sgd.lr);
    out.number("sgd.momentum", config.sgd.momentum);
    out.number("sgd.dampening", config.sgd.dampening);
    out.number("sgd.weight_decay", config.sgd.weight_decay);
    out.flag("sgd.nesterov", config.sgd.nesterov);
  } else {
    out.number("adam.lr", config.adam.lr);
    out.number("adam.beta1", config.adam.beta1);
    out.number("adam.beta2", config.adam.beta2);
    out.number("adam.eps", config.adam.eps);
    out.number("adam.weight_decay", config.adam.weight_decay);
    out.flag("adam.decoupled_weight_decay", config.adam.decoupled_weight_decay);
  }
  out.flag("has_schedule", config.schedule.has_value());
  if (config.schedule) write_schedule(out, *config.schedule);
  return fields;
}

std::string describe_optimizer_config(const OptimizerConfig& config) {
  std::string text;
  for (const auto& [field, value] : encode_optimizer_config(config)) {
    text += (text.empty() ? "" : " ") + field + "=" + value;
  }
  return text;
}

OptimizerConfig decode_optimizer_config(const ConfigFields& fields, const std::string& prefix) {
  FieldReader in(fields, prefix);
  OptimizerConfig config;
  const std::string& kind = in.text("kind");
  if (kind == "sgd") {
    config.kind = OptimizerConfig::Kind::kSGD;
    config.sgd =
        SGDOptions{in.number("sgd.lr"), in.number("sgd.momentum"), in.number("sgd.dampening"),
                   in.number("sgd.weight_decay"), in.flag("sgd.nesterov")};
  } else if (kind == "adam" || kind == "adamw") {
    config.kind = kind == "adam" ? OptimizerConfig::Kind::kAdam : OptimizerConfig::Kind::kAdamW;
    config.adam =
        AdamOptions{in.number("adam.lr"),           in.number("adam.beta1"),
                    in.number("adam.beta2"),        in.number("adam.eps"),
                    in.number("adam.weight_decay"), in.flag("adam.decoupled_weight_decay")};
  } else {
    throw Error(fmt::format(
        "kvstore: optimizer field '{}kind' is '{}'; expected sgd, adam or adamw", prefix, kind));
  }
  config.rescale_grad = in.number("rescale_grad");
  if (in.flag("has_schedule")) config.schedule = read_schedule(in, prefix);
  return config;
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
