// herd-recordio-bench: how fast herd reads a RecordIO file, against cat.
//
//   herd-recordio-bench write FILE.rec --total 1G --record-size 100K
//
// writes FILE.rec and FILE.idx (keys 0, 1, ...): records of --record-size
// pseudo-random bytes until --total bytes of payload.
//
//   herd-recordio-bench read FILE.rec [--idx FILE.idx] [--repeat 3]
//                       [--parts 2,4] [--threads 1,2,4] [--capacity 64]
//                       [--cat-seconds S]
//
// times each reader of read_modes.h --repeat times and prints the best: the
// sequential RecordReader on one thread, the parts by byte range and by
// index on a thread each, and the prefetcher on --threads workers holding
// --capacity records. Columns: threads, seconds, GiB/s of the file's size
// and, given --cat-seconds (the time of `cat FILE > /dev/null`, which
// benchmarks/recordio_read.sh measures), the share of cat's speed. Exits 1 when a reader saw other
// records than the sequential one, 2 on a bad file or command line.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "benchmarks/herd_bench/table.h"
#include "benchmarks/recordio/read_modes.h"
#include "herd/recordio.h"

namespace {

using herd::bench::ReadSummary;

void write_file(const std::string& rec_path, const std::string& idx_path, int64_t total,
                int64_t record_size) {
  herd::data::IndexedRecordWriter writer(idx_path, rec_path);
  std::vector<uint8_t> record(static_cast<std::size_t>(record_size));
  uint64_t state = 0x243f6a8885a308d3;
  int64_t key = 0;
  for (int64_t written = 0; written < total; written += record_size) {
    // xorshift64: random enough that no aligned word is the magic in
    // practice, and far faster than the disk.
    for (std::size_t i = 0; i + 8 <= record.size(); i += 8) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      std::memcpy(record.data() + i, &state, 8);
    }
    writer.write(key++, record.data(), record.size());
  }
  writer.close();
  std::printf("wrote %s: %lld records of %s, and %s\n", rec_path.c_str(),
              static_cast<long long>(key), herd::bench::format_bytes(record_size).c_str(),
              idx_path.c_str());
}

struct Row {
  std::string reader;
  int threads;
  std::function<ReadSummary()> read;
};

int read_file(const std::string& rec_path, const std::string& idx_path, int repeat,
              const std::vector<int>& parts, const std::vector<int>& threads, std::size_t capacity,
              double cat_seconds) {
  const uint64_t file_size = herd::data::RecordFile(rec_path).size();
  std::vector<Row> rows;
  rows.push_back(
      {"RecordReader, sequential", 1, [&] { return herd::bench::read_sequential(rec_path); }});
  for (int p : parts) {
    rows.push_back({"parts by byte range, a thread each", p,
                    [&, p] { return herd::bench::read_byte_range_parts(rec_path, p); }});
  }
  for (int p : parts) {
    rows.push_back({"parts by index, a thread each", p,
                    [&, p] { return herd::bench::read_index_parts(rec_path, idx_path, p); }});
  }
  for (int t : threads) {
    rows.push_back({"RecordPrefetcher, in file order", t, [&, t] {
                      return herd::bench::read_prefetched(rec_path, idx_path, t, capacity);
                    }});
  }

  std::printf("%s: %s\n", rec_path.c_str(),
              herd::bench::format_bytes(static_cast<int64_t>(file_size)).c_str());
  std::printf("%-38s %7s %9s %8s %8s\n", "reader", "threads", "seconds", "GiB/s", "of cat");
  const double gib = static_cast<double>(file_size) / (1024.0 * 1024.0 * 1024.0);
  if (cat_seconds > 0) {
    std::printf("%-38s %7d %9.3f %8.2f %7.0f%%\n", "cat FILE > /dev/null", 1, cat_seconds,
                gib / cat_seconds, 100.0);
  }
  ReadSummary reference;
  int status = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    double best = 0;
    for (int i = 0; i < repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const ReadSummary summary = rows[r].read();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (r == 0 && i == 0) reference = summary;
      if (!(summary == reference)) {
        std::fprintf(stderr,
                     "herd-recordio-bench: %s on %d threads saw %llu records of %llu bytes "
                     "(digest %016llx), the sequential reader %llu of %llu (digest %016llx)\n",
                     rows[r].reader.c_str(), rows[r].threads,
                     static_cast<unsigned long long>(summary.records),
                     static_cast<unsigned long long>(summary.bytes),
                     static_cast<unsigned long long>(summary.digest),
                     static_cast<unsigned long long>(reference.records),
                     static_cast<unsigned long long>(reference.bytes),
                     static_cast<unsigned long long>(reference.digest));
        status = 1;
      }
      if (i == 0 || seconds < best) best = seconds;
    }
    std::printf("%-38s %7d %9.3f %8.2f", rows[r].reader.c_str(), rows[r].threads, best, gib / best);
    if (cat_seconds > 0) {
      std::printf(" %7.0f%%", 100.0 * cat_seconds / best);
    }
    std::printf("\n");
  }
  std::printf("%llu records, %llu bytes of payload\n",
              static_cast<unsigned long long>(reference.records),
              static_cast<unsigned long long>(reference.bytes));
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"herd-recordio-bench: time herd's RecordIO readers against cat."};
  app.require_subcommand(1);

  std::string rec_path;
  std::string idx_path;
  int64_t total = 1 << 30;
  int64_t record_size = 100 << 10;
  CLI::App* write = app.add_subcommand("write", "Write a .rec file and its .idx");
  write->add_option("file", rec_path, "The .rec file to write")->required();
  write->add_option("--idx", idx_path, "The .idx file (default: FILE with .idx for .rec)");
  const auto size_option = [](CLI::App* command, const std::string& flags, int64_t& bytes,
                              const std::string& help) {
    command
        ->add_option_function<std::string>(
            flags, [&bytes](const std::string& text) { bytes = herd::bench::parse_bytes(text); },
            help)
        ->check([](const std::string& text) {
          try {
            return herd::bench::parse_bytes(text) > 0 ? std::string()
                                                      : std::string("size must be positive");
          } catch (const std::exception& e) {
            return std::string(e.what());
          }
        });
  };
  size_option(write, "--total", total, "Bytes of payload in all (K, M, G suffixes; default 1G)");
  size_option(write, "--record-size", record_size, "Bytes per record (default 100K)");

  int repeat = 3;
  std::vector<int> parts = {2, 4};
  std::vector<int> threads = {1, 2, 4};
  std::size_t capacity = 64;
  double cat_seconds = 0;
  CLI::App* read = app.add_subcommand("read", "Time the readers on a .rec file");
  read->add_option("file", rec_path, "The .rec file to read")->required()->check(CLI::ExistingFile);
  read->add_option("--idx", idx_path, "Its .idx file (default: FILE with .idx for .rec)");
  read->add_option("--repeat", repeat, "Runs of each reader; the best is kept")
      ->check(CLI::PositiveNumber);
  read->add_option("--parts", parts, "Part counts of the sharded readers")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  read->add_option("--threads", threads, "Worker counts of the prefetcher")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  read->add_option("--capacity", capacity, "Records the prefetcher holds (default 64)")
      ->check(CLI::PositiveNumber);
  read->add_option("--cat-seconds", cat_seconds, "cat's time on the file, for the last column")
      ->check(CLI::NonNegativeNumber);

  CLI11_PARSE(app, argc, argv);
  if (idx_path.empty()) idx_path = herd::data::index_path_for(rec_path);
  try {
    if (write->parsed()) {
      write_file(rec_path, idx_path, total, record_size);
      return 0;
    }
    return read_file(rec_path, idx_path, repeat, parts, threads, capacity, cat_seconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "herd-recordio-bench: %s\n", e.what());
    return 2;
  }
}
