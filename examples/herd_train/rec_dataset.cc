#include "herd_train/rec_dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "herd/data/image_record.h"
#include "herd/data/record_index.h"
#include "herd/data/recordio.h"
#include "herd/error.h"

namespace herd_train {
namespace {

bool file_exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

herd::data::RecordShard open_shard(const std::string& rec_path, const std::string& index_path,
                                   int part_index, int num_parts) {
  if (!index_path.empty()) {
    return herd::data::RecordShard::by_index(rec_path, index_path, part_index, num_parts);
  }
  return herd::data::RecordShard::by_byte_range({rec_path}, part_index, num_parts);
}

// The pixel count of the file's first record, which every record must share.
int64_t first_record_features(const herd::data::RecordFile& file) {
  if (file.size() == 0) throw herd::Error(file.path() + " holds no records (it is empty)");
  std::vector<uint8_t> record;
  file.read_at(0, &record);
  const std::string where = file.path() + " at byte 0";
  const herd::data::ImageRecord image =
      herd::data::unpack_image_record(record.data(), record.size(), where);
  if (image.payload_size == 0) {
    throw herd::Error(where +
                      ": the first record holds no pixels (an image header alone); "
                      "herd-train needs raw pixels after the header");
  }
  return static_cast<int64_t>(image.payload_size);
}

}  // namespace

RecDataset::RecDataset(const std::string& rec_path, int part_index, int num_parts)
    : path_(rec_path),
      index_path_(file_exists(herd::data::index_path_for(rec_path))
                      ? herd::data::index_path_for(rec_path)
                      : ""),
      shard_(open_shard(rec_path, index_path_, part_index, num_parts)) {
  features_ = first_record_features(shard_.files().at(0));
}

const uint8_t* RecDataset::decode(const std::vector<uint8_t>& record,
                                  const herd::data::RecordLocation& where, uint8_t* label) const {
  // The record's place is spelled out only for a message: formatting it for
  // every record would cost more than decoding it.
  herd::data::ImageRecord image;
  try {
    image = herd::data::unpack_image_record(record.data(), record.size(), std::string());
  } catch (const herd::Error&) {
    herd::data::unpack_image_record(record.data(), record.size(), shard_.describe(where));
    throw;
  }
  if (static_cast<int64_t>(image.payload_size) != features_) {
    throw herd::Error(shard_.describe(where) + ": the record holds " +
                      std::to_string(image.payload_size) +
                      " bytes of pixels after its header, but the file's first record holds " +
                      std::to_string(features_) + "; every record must hold as many");
  }
  // flag 0: the header's label; else the first of the labels after it.
  const float value = image.labels.at(0);
  if (!(value >= 0 && value < kNumClasses && std::floor(value) == value)) {
    std::ostringstream message;
    message << shard_.describe(where) << ": label " << value << " is not a class (an integer 0.."
            << kNumClasses - 1 << ")";
    throw herd::Error(message.str());
  }
  *label = static_cast<uint8_t>(value);
  return image.payload;
}

Dataset RecDataset::read_part(int threads, bool keep) const {
  std::vector<std::size_t> order(shard_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  Dataset data;
  data.rows = 1;
  data.cols = features_;
  if (keep) {
    data.count = count();
    data.pixels.resize(static_cast<std::size_t>(count() * features_));
    data.labels.resize(static_cast<std::size_t>(count()));
  }
  uint8_t scratch_label = 0;
  herd::data::RecordPrefetcher prefetcher(shard_, order, threads,
                                          static_cast<std::size_t>(threads) * 64);
  std::vector<uint8_t> record;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!prefetcher.next(&record)) {
      throw herd::Error(path_ + ": the part's record " + std::to_string(i) + " of " +
                        std::to_string(order.size()) + " was not handed out");
    }
    uint8_t* label = keep ? &data.labels[i] : &scratch_label;
    const uint8_t* pixels = decode(record, shard_.records()[i], label);
    if (keep) std::copy(pixels, pixels + features_, data.pixels.data() + i * features_);
  }
  return data;
}

RecBatchLoader::RecBatchLoader(const RecDataset& data, const std::vector<int64_t>& order,
                               int64_t batch_size, int64_t steps, int threads)
    : data_(data), batch_size_(batch_size), steps_(steps) {
  if (batch_size < 1) throw herd::Error("RecBatchLoader: batch size must be >= 1");
  if (steps < 0) throw herd::Error("RecBatchLoader: steps must be >= 0");
  if (threads < 1) throw herd::Error("RecBatchLoader: threads must be >= 1");
  const int64_t needed = steps * batch_size;
  if (static_cast<int64_t>(order.size()) < needed) {
    throw herd::Error("RecBatchLoader: " + std::to_string(steps) + " batches of " +
                      std::to_string(batch_size) + " need " + std::to_string(needed) +
                      " positions, got " + std::to_string(order.size()));
  }
  order_.reserve(static_cast<std::size_t>(needed));
  for (int64_t k = 0; k < needed; ++k) {
    const int64_t position = order[static_cast<std::size_t>(k)];
    if (position < 0 || position >= data.count()) {
      throw herd::Error("RecBatchLoader: position " + std::to_string(position) + " is outside " +
                        data.path() + "'s part of " + std::to_string(data.count()) + " records");
    }
    order_.push_back(static_cast<std::size_t>(position));
  }
  batch_.inputs.resize(static_cast<std::size_t>(batch_size * data.features()));
  batch_.labels.resize(static_cast<std::size_t>(batch_size));
  // As BatchLoader: at most 2 x threads batches ahead of the consumer.
  prefetcher_ = std::make_unique<herd::data::RecordPrefetcher>(
      data.shard(), order_, threads, static_cast<std::size_t>(2 * threads * batch_size));
}

RecBatchLoader::~RecBatchLoader() = default;

const BatchLoader::Batch& RecBatchLoader::next() {
  if (next_step_ >= steps_) {
    throw herd::Error("RecBatchLoader: next() after the last of " + std::to_string(steps_) +
                      " batches");
  }
  const int64_t features = data_.features();
  for (int64_t j = 0; j < batch_size_; ++j) {
    const std::size_t k = static_cast<std::size_t>(next_step_ * batch_size_ + j);
    if (!prefetcher_->next(&record_)) {
      throw herd::Error("RecBatchLoader: " + data_.path() + ": record " + std::to_string(k) +
                        " of the epoch was not handed out");
    }
    const uint8_t* pixels = data_.decode(record_, data_.shard().records()[order_[k]],
                                         &batch_.labels[static_cast<std::size_t>(j)]);
    pixels_to_inputs(pixels, features, batch_.inputs.data() + j * features);
  }
  batch_.step = next_step_++;
  return batch_;
}

}  // namespace herd_train
