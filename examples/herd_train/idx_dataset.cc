#include "herd_train/idx_dataset.h"

#include <array>
#include <sstream>
#include <utility>

#include <sys/stat.h>

#include "herd/data/idx_file.h"
#include "herd/error.h"

namespace herd_train {
namespace {

constexpr const char* kPackageHint =
    "the Debian package dataset-fashion-mnist provides Fashion-MNIST (apt-get install "
    "dataset-fashion-mnist)";

bool exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

bool is_directory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

const char* split_name(Split split) { return split == Split::kTrain ? "train" : "t10k"; }

const char* const kFileNames[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

}  // namespace

void pixels_to_inputs(const uint8_t* pixels, int64_t count, float* inputs) {
  // byte / 255.0f for each of the 256 bytes: a lookup per pixel runs in less
  // than half the time of a division (270 against 600 ns a 784-pixel sample).
  static const std::array<float, 256> kInputs = [] {
    std::array<float, 256> values{};
    for (int b = 0; b < 256; ++b)
      values[static_cast<std::size_t>(b)] = static_cast<uint8_t>(b) / 255.0f;
    return values;
  }();
  for (int64_t i = 0; i < count; ++i) inputs[i] = kInputs[pixels[i]];
}

// herd::data reads and checks the IDX files themselves (magic, dimensions,
// size); herd-train adds what a classifier's inputs need.
Dataset parse_idx_images(std::vector<uint8_t> bytes, const std::string& name) {
  herd::data::IdxArray idx = herd::data::parse_idx(std::move(bytes), name, 3);
  Dataset data;
  data.count = idx.dims[0];
  data.rows = idx.dims[1];
  data.cols = idx.dims[2];
  if (data.rows == 0 || data.cols == 0) {
    std::ostringstream message;
    message << "IDX file " << name << ": images are " << data.rows << "x" << data.cols
            << "; rows and columns must be >= 1";
    throw herd::Error(message.str());
  }
  data.pixels = std::move(idx.data);
  return data;
}

std::vector<uint8_t> parse_idx_labels(std::vector<uint8_t> bytes, const std::string& name) {
  std::vector<uint8_t> labels = herd::data::parse_idx(std::move(bytes), name, 1).data;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= kNumClasses) {
      std::ostringstream message;
      message << "IDX file " << name << ": label " << i << " is " << int{labels[i]}
              << ", outside the classes 0.." << kNumClasses - 1;
      throw herd::Error(message.str());
    }
  }
  return labels;
}

std::vector<uint8_t> read_maybe_gzipped(const std::string& path) {
  if (!exists(path)) {
    throw herd::Error("IDX file " + path + " does not exist; " + kPackageHint +
                      ", or pass the directory that holds the files");
  }
  return herd::data::read_idx_bytes(path);
}

Dataset load_idx(const std::string& images_path, const std::string& labels_path) {
  Dataset data = parse_idx_images(read_maybe_gzipped(images_path), images_path);
  data.labels = parse_idx_labels(read_maybe_gzipped(labels_path), labels_path);
  if (static_cast<int64_t>(data.labels.size()) != data.count) {
    std::ostringstream message;
    message << "IDX files disagree: " << images_path << " has " << data.count << " images but "
            << labels_path << " has " << data.labels.size() << " labels";
    throw herd::Error(message.str());
  }
  return data;
}

std::string fashion_mnist_path(const std::string& dir, const std::string& name) {
  const std::string plain = dir + "/" + name;
  return exists(plain) ? plain : plain + ".gz";
}

std::string find_fashion_mnist_dir(const std::string& dir) {
  const std::string chosen = dir.empty() ? std::string(kDefaultFashionMnistDir) : dir;
  if (!is_directory(chosen)) {
    throw herd::Error("Fashion-MNIST directory " + chosen + " does not exist; " + kPackageHint +
                      (dir.empty() ? "" : ", or pass the directory that holds the IDX files"));
  }
  for (const char* name : kFileNames) {
    const std::string path = fashion_mnist_path(chosen, name);
    if (!exists(path)) {
      throw herd::Error("Fashion-MNIST directory " + chosen + " has no " + name + " (nor " + name +
                        ".gz); " + kPackageHint);
    }
  }
  return chosen;
}

Dataset load_fashion_mnist(const std::string& dir, Split split) {
  const std::string prefix = split_name(split);
  const std::string images = fashion_mnist_path(dir, prefix + "-images-idx3-ubyte");
  Dataset data = load_idx(images, fashion_mnist_path(dir, prefix + "-labels-idx1-ubyte"));
  if (data.rows != 28 || data.cols != 28) {
    std::ostringstream message;
    message << "IDX file " << images << ": images are " << data.rows << "x" << data.cols
            << ", Fashion-MNIST's are 28x28";
    throw herd::Error(message.str());
  }
  return data;
}

}  // namespace herd_train
