// herd-rec: MXNet RecordIO files (.rec + .idx) from the command line
// (docs/data.md "herd-rec").
//
//   herd-rec pack --idx-images F --idx-labels F -o OUT.rec
//   herd-rec pack --lst LIST.lst [--root DIR] [--pack-label] -o OUT.rec
//
// Exit status: 0 done, 1 a file is bad or cannot be read or written (the
// message names it), 2 the command line is wrong.
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "tools/herd_rec/pack.h"

namespace {

constexpr int kBadInput = 1;
constexpr int kBadUsage = 2;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "herd-rec: packs MXNet RecordIO files (.rec + .idx) from IDX files or an im2rec list "
      "(docs/data.md)"};
  app.require_subcommand(1);

  std::string output;
  std::string idx_images, idx_labels, lst, root;
  bool pack_label = false;
  CLI::App* pack = app.add_subcommand(
      "pack", "write OUT.rec and OUT.idx from IDX images and labels, or from an im2rec .lst");
  pack->add_option("-o,--output", output, "the .rec to write (its .idx goes beside it)")
      ->required();
  CLI::Option* images_option =
      pack->add_option("--idx-images", idx_images, "IDX images file (plain or .gz)");
  CLI::Option* labels_option =
      pack->add_option("--idx-labels", idx_labels, "IDX labels file (plain or .gz)");
  CLI::Option* lst_option =
      pack->add_option("--lst", lst, "im2rec list: index<TAB>label[<TAB>label...]<TAB>path");
  CLI::Option* root_option =
      pack->add_option("--root", root,
                       "directory of the .lst's relative paths (default: the "
                       "directory of the .lst)");
  CLI::Option* pack_label_option = pack->add_flag(
      "--pack-label", pack_label, "store every label of a line (default: the first, as im2rec)");
  images_option->needs(labels_option);
  labels_option->needs(images_option);
  images_option->excludes(lst_option);
  labels_option->excludes(lst_option);
  root_option->needs(lst_option);
  pack_label_option->needs(lst_option);

  try {
    app.parse(argc, argv);
    if (pack->parsed() && lst.empty() && idx_images.empty()) {
      throw CLI::ValidationError("pack needs --idx-images and --idx-labels, or --lst");
    }
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : kBadUsage;
  }

  try {
    using namespace herd::rec_tool;
    if (pack->parsed()) {
      const PackSummary summary = lst.empty() ? pack_idx(idx_images, idx_labels, output)
                                              : pack_lst(lst, root, pack_label, output);
      std::printf("packed %" PRIu64 " records into %s (%" PRIu64 " bytes) and %s\n",
                  summary.records, summary.rec_path.c_str(), summary.bytes,
                  summary.idx_path.c_str());
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "herd-rec: %s\n", error.what());
    return kBadInput;
  }
  return 0;
}
