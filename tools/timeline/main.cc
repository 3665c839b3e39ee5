// herd-timeline: per-rank timeline files (HERD_TIMELINE=path.%r.json) merged
// onto one clock, and the straggler report (docs/timeline.md).
//
//   herd-timeline merge -o OUT.json [--report] rank0.json rank1.json ...
//   herd-timeline stragglers [--top N] rank0.json rank1.json ...
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/timeline/merge.h"
#include "tools/timeline/stragglers.h"
#include "tools/timeline/trace_files.h"

namespace {

void write_merged(const std::string& path, const nlohmann::json& merged) {
  std::ofstream out(path);
  if (!out.good()) throw std::runtime_error("cannot open " + path + " for writing");
  out << merged.dump() << "\n";
  out.close();
  if (!out.good()) throw std::runtime_error("writing " + path + " failed");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "herd-timeline: merges per-rank herd timelines onto one clock and shows which "
      "ranks the others waited for (docs/timeline.md)"};
  app.require_subcommand(1);

  std::vector<std::string> merge_files;
  std::string output;
  bool with_report = false;
  std::size_t top = 20;
  CLI::App* merge = app.add_subcommand(
      "merge", "write one Chrome trace of every rank's file, one pid block per rank");
  merge->add_option("-o,--output", output, "the merged trace (JSON)")->required();
  merge->add_flag("--report", with_report, "print the straggler report as well");
  merge->add_option("--top", top, "tensors in the report, the longest waits first (0: all)");
  merge->add_option("files", merge_files, "the ranks' timeline files")->required();

  std::vector<std::string> report_files;
  CLI::App* stragglers = app.add_subcommand(
      "stragglers", "print per tensor how long each rank waited for the last rank");
  stragglers->add_option("--top", top, "tensors shown, the longest waits first (0: all)");
  stragglers->add_option("files", report_files, "the ranks' timeline files")->required();

  CLI11_PARSE(app, argc, argv);
  try {
    using namespace herd::timeline_tool;
    if (merge->parsed()) {
      const std::vector<RankTrace> traces = read_rank_traces(merge_files);
      write_merged(output, merge_traces(traces));
      std::printf("merged %zu rank(s) into %s\n", traces.size(), output.c_str());
      if (with_report) std::printf("\n%s", format_report(find_stragglers(traces), top).c_str());
    } else {
      const std::vector<RankTrace> traces = read_rank_traces(report_files);
      std::printf("%s", format_report(find_stragglers(traces), top).c_str());
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "herd-timeline: %s\n", error.what());
    return 1;
  }
  return 0;
}
