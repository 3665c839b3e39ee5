#include "benchmarks/herd_bench/table.h"

#include <cctype>
#include <stdexcept>

namespace herd::bench {

int64_t parse_bytes(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    ++digits;
  }
  if (digits == 0 || digits > 15) throw std::invalid_argument("not a size: '" + text + "'");
  const int64_t number = std::stoll(text.substr(0, digits));
  std::string suffix;
  for (char c : text.substr(digits)) suffix += static_cast<char>(std::toupper(c));
  if (suffix.size() > 1 && suffix.back() == 'B') suffix.pop_back();   // "KB", "KIB", "B"
  if (suffix.size() == 2 && suffix.back() == 'I') suffix.pop_back();  // "KI"
  int shift = 0;
  if (suffix == "K") {
    shift = 10;
  } else if (suffix == "M") {
    shift = 20;
  } else if (suffix == "G") {
    shift = 30;
  } else if (!suffix.empty() && suffix != "B") {
    throw std::invalid_argument("unknown size suffix in '" + text + "' (use K, M or G)");
  }
  if (number > (int64_t{1} << (62 - shift))) throw std::invalid_argument("size too large: " + text);
  return number << shift;
}

std::string format_bytes(int64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.*f %s", value == static_cast<int64_t>(value) ? 0 : 1, value,
                kUnits[unit]);
  return text;
}

void Table::print_header() const {
  if (csv_) {
    std::fprintf(out_, "size,count,type,redop,path,time_us,algbw_gbps,busbw_gbps,wrong\n");
    return;
  }
  std::fprintf(out_, "%12s %12s %9s %7s %12s %11s %9s %9s %8s\n", "size", "count", "type", "redop",
               "path", "time", "algbw", "busbw", "#wrong");
  std::fprintf(out_, "%12s %12s %9s %7s %12s %11s %9s %9s %8s\n", "(B)", "(elements)", "", "", "",
               "(us)", "(GB/s)", "(GB/s)", "");
}

void Table::print_row(const Row& row) const {
  const char* const missing = csv_ ? "" : "-";
  const std::string redop = row.redop.empty() ? missing : row.redop;
  char busbw[32], wrong[32];
  if (row.busbw_gbps) {
    std::snprintf(busbw, sizeof busbw, "%.3f", *row.busbw_gbps);
  } else {
    std::snprintf(busbw, sizeof busbw, "%s", missing);
  }
  if (row.wrong) {
    std::snprintf(wrong, sizeof wrong, "%lld", static_cast<long long>(*row.wrong));
  } else {
    std::snprintf(wrong, sizeof wrong, "%s", missing);
  }
  const char* const format = csv_ ? "%lld,%lld,%s,%s,%s,%.2f,%.3f,%s,%s\n"
                                  : "%12lld %12lld %9s %7s %12s %11.2f %9.3f %9s %8s\n";
  std::fprintf(out_, format, static_cast<long long>(row.bytes), static_cast<long long>(row.count),
               row.type.c_str(), redop.c_str(), row.path.c_str(), row.time_us, row.algbw_gbps,
               busbw, wrong);
}

void Table::print_note(const std::string& note) const {
  std::fprintf(csv_ ? stderr : out_, "# %s\n", note.c_str());
}

}  // namespace herd::bench
