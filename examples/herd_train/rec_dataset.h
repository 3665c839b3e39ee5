// Image records from a RecordIO file (.rec), for herd-train --data and
// --val-data: each worker reads its part of the file, as MXNet's
// ImageRecordIter does with num_parts = workers and part_index = rank.
//
// A record is MXNet's image header (herd/data/image_record.h) followed by the
// image as raw pixels, one byte each (what `herd-rec pack --idx-images` and
// im2rec's pass-through write from raw data): the class is the header's label
// (the first of its labels when it has several), an integer 0..9, and the
// pixels become float32 in [0, 1] by pixels_to_inputs (byte / 255), exactly
// as IDX batches do. Every record of a file holds as many pixels as its first
// one.
//
// The part comes from herd::data::RecordShard: by index when PATH.idx
// exists beside PATH.rec (for a file not named .rec: its name + .idx), else by
// byte range. Records are read (pread) when needed, never the whole file;
// RecBatchLoader reads an epoch's batches ahead of the training thread
// through herd::data::RecordPrefetcher.
//
// Errors are herd::Error naming the file and the record's byte offset (and
// the sizes or the label involved): a record shorter than its header, with
// another pixel count than the first record's, with a label that is no
// class; a file with no records; broken framing (the data library's
// messages).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "herd/data/record_prefetcher.h"
#include "herd/data/record_shard.h"
#include "herd_train/batch_loader.h"
#include "herd_train/idx_dataset.h"

namespace herd_train {

class RecDataset {
 public:
  // Opens part `part_index` of `num_parts` of `rec_path` and reads the
  // file's first record to learn the pixel count. Throws herd::Error naming
  // the file when it cannot be opened, holds no records, or its first record
  // is no image record (or as the data library does for a bad .idx or
  // framing).
  RecDataset(const std::string& rec_path, int part_index, int num_parts);

  const std::string& path() const { return path_; }
  // The .idx the part was split by; empty when split by byte range.
  const std::string& index_path() const { return index_path_; }
  const herd::data::RecordShard& shard() const { return shard_; }
  // Records in this worker's part.
  int64_t count() const { return static_cast<int64_t>(shard_.size()); }
  // Pixels per record (the model's inputs).
  int64_t features() const { return features_; }

  // Decodes `record`, read from `where`: its class goes to `label`, and the
  // result points at its `features()` pixel bytes within `record`. Throws
  // herd::Error naming the file and offset when the record is not an image
  // record of the first one's pixel count with a class 0..9 as label.
  const uint8_t* decode(const std::vector<uint8_t>& record, const herd::data::RecordLocation& where,
                        uint8_t* label) const;

  // Reads and decodes every record of the part on `threads` threads: the
  // first bad one throws, as decode() does. Returns them in file order as a
  // Dataset of count() samples (rows 1, cols features(), the pixels as
  // bytes) when `keep` is set, else an empty Dataset (a check of the part
  // that keeps nothing).
  Dataset read_part(int threads, bool keep) const;

 private:
  std::string path_;
  std::string index_path_;
  herd::data::RecordShard shard_;
  int64_t features_ = 0;
};

// An epoch's batches of a RecDataset's part, read ahead of the training
// thread through herd::data::RecordPrefetcher, as BatchLoader assembles them
// from memory: batch `step` holds the records at positions
// order[step * batch_size, (step + 1) * batch_size) of the part, in that
// order, whatever the number of threads. At most 2 x threads batches of
// records are in flight. A record that fails to read or decode throws from
// next() at its batch, naming the file and offset; the destructor joins the
// prefetcher's threads, also when the epoch ends early.
class RecBatchLoader {
 public:
  // Throws herd::Error for batch_size < 1, steps < 0, threads < 1, fewer than
  // steps * batch_size positions, or a position outside the part.
  RecBatchLoader(const RecDataset& data, const std::vector<int64_t>& order, int64_t batch_size,
                 int64_t steps, int threads);
  ~RecBatchLoader();
  RecBatchLoader(const RecBatchLoader&) = delete;
  RecBatchLoader& operator=(const RecBatchLoader&) = delete;

  // The next batch in step order; valid until the next call. Throws
  // herd::Error after the last step.
  const BatchLoader::Batch& next();

 private:
  const RecDataset& data_;
  std::vector<std::size_t> order_;  // the positions read, steps * batch_size of them
  const int64_t batch_size_;
  const int64_t steps_;
  int64_t next_step_ = 0;
  BatchLoader::Batch batch_;
  std::vector<uint8_t> record_;
  std::unique_ptr<herd::data::RecordPrefetcher> prefetcher_;
};

}  // namespace herd_train
