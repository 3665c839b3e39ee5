#include "launcher/herdrun/hosts.h"

#include <charconv>
#include <sstream>
#include <stdexcept>

namespace herd::launcher {
namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

// A slot count: a positive decimal integer, or nothing.
bool parse_slots(std::string_view text, int* slots) {
  if (text.empty()) return false;
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1) return false;
  *slots = value;
  return true;
}

// "host" or "host:N".
Host parse_host_entry(std::string_view entry, const std::string& where) {
  Host host;
  const auto colon = entry.rfind(':');
  std::string_view name = colon == std::string_view::npos ? entry : entry.substr(0, colon);
  if (colon != std::string_view::npos && !parse_slots(entry.substr(colon + 1), &host.slots)) {
    throw std::invalid_argument(where + ": \"" + std::string(entry) +
                                "\" has a slot count that is not a positive integer");
  }
  if (name.empty()) {
    throw std::invalid_argument(where + ": \"" + std::string(entry) + "\" names no host");
  }
  host.name = std::string(name);
  return host;
}

}  // namespace

std::vector<Host> parse_hosts(std::string_view text) {
  std::vector<Host> hosts;
  while (true) {
    const auto comma = text.find(',');
    const auto entry = trim(text.substr(0, comma));
    if (entry.empty()) {
      throw std::invalid_argument("-H: an empty entry in \"" + std::string(text) +
                                  "\" (expected host:slots,host:slots,...)");
    }
    hosts.push_back(parse_host_entry(entry, "-H"));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return hosts;
}

std::vector<Host> parse_hostfile(std::string_view text, const std::string& source) {
  std::vector<Host> hosts;
  int number = 0;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++number;
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const std::string where = source + ":" + std::to_string(number);
    const auto space = line.find_first_of(" \t");
    if (space == std::string_view::npos) {
      hosts.push_back(parse_host_entry(line, where));
      continue;
    }
    // "host slots=N"
    Host host;
    host.name = std::string(line.substr(0, space));
    const auto rest = trim(line.substr(space));
    constexpr std::string_view kSlots = "slots=";
    if (rest.substr(0, kSlots.size()) != kSlots ||
        !parse_slots(trim(rest.substr(kSlots.size())), &host.slots)) {
      throw std::invalid_argument(where + ": \"" + std::string(line) +
                                  "\" is neither \"host slots=N\" nor \"host:N\"");
    }
    hosts.push_back(host);
  }
  if (hosts.empty()) throw std::invalid_argument(source + ": names no host");
  return hosts;
}

std::string mpirun_host_list(const std::vector<Host>& hosts) {
  std::ostringstream out;
  for (size_t i = 0; i < hosts.size(); ++i) {
    out << (i ? "," : "") << hosts[i].name << ":" << hosts[i].slots;
  }
  return out.str();
}

int total_slots(const std::vector<Host>& hosts) {
  int total = 0;
  for (const auto& host : hosts) total += host.slots;
  return total;
}

}  // namespace herd::launcher
