// herd-rec: MXNet RecordIO files (.rec + .idx) from the command line
// (docs/data.md "herd-rec").
//
//   herd-rec pack --idx-images F --idx-labels F -o OUT.rec
//   herd-rec pack --lst LIST.lst [--root DIR] [--pack-label] -o OUT.rec
//   herd-rec info FILE.rec [--raw]
//   herd-rec verify FILE.rec [--idx FILE.idx]
//   herd-rec unpack FILE.rec -o DIR [--raw]
//
// Exit status: 0 done, 1 a file is bad or cannot be read or written (the
// message names it), 2 the command line is wrong.
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "tools/herd_rec/inspect.h"
#include "tools/herd_rec/pack.h"
#include "tools/herd_rec/unpack.h"

namespace {

constexpr int kBadInput = 1;
constexpr int kBadUsage = 2;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "herd-rec: packs MXNet RecordIO files (.rec + .idx) from IDX files or an im2rec list, "
      "prints, checks and unpacks them (docs/data.md)"};
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

  std::string rec;
  bool info_raw = false;
  CLI::App* info = app.add_subcommand(
      "info", "print the records, bytes, split records, payload sizes and labels of a .rec");
  info->add_option("file", rec, "the .rec")->required();
  info->add_flag("--raw", info_raw, "records without image headers: no labels, whole records");

  std::string idx;
  CLI::App* verify = app.add_subcommand(
      "verify",
      "walk the framing of a .rec: exit 0 with its count, or 1 naming the first bad "
      "byte offset");
  verify->add_option("file", rec, "the .rec")->required();
  verify->add_option("--idx", idx, "an .idx whose every offset must be a record's head");

  std::string directory;
  bool unpack_raw = false;
  CLI::App* unpack = app.add_subcommand(
      "unpack",
      "write each record's payload as a file and a .lst that pack --lst turns back "
      "into the same .rec");
  unpack->add_option("file", rec, "the .rec")->required();
  unpack->add_option("-o,--output", directory, "the directory to write (created when missing)")
      ->required();
  unpack->add_flag("--raw", unpack_raw, "records without image headers: whole records");

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
    } else if (info->parsed()) {
      std::printf("%s", format_stats(collect_stats(rec, info_raw)).c_str());
    } else if (verify->parsed()) {
      const VerifySummary summary = herd::rec_tool::verify(rec, idx);
      std::printf("%s: OK, %" PRIu64 " records (%" PRIu64 " split), %" PRIu64 " bytes\n",
                  rec.c_str(), summary.records, summary.split_records, summary.bytes);
      if (!idx.empty()) {
        std::printf("%s: OK, %" PRIu64 " offsets, each a record's head\n", idx.c_str(),
                    summary.indexed);
      }
    } else {
      const UnpackSummary summary = herd::rec_tool::unpack(rec, directory, unpack_raw);
      std::printf("unpacked %" PRIu64 " records into %s, listed in %s\n", summary.records,
                  directory.c_str(), summary.lst_path.c_str());
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "herd-rec: %s\n", error.what());
    return kBadInput;
  }
  return 0;
}
