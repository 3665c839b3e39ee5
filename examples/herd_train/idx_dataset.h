// Fashion-MNIST (and MNIST) from IDX files, for herd-train.
//
// The IDX format (http://yann.lecun.com/exdb/mnist/): a big-endian header,
// then the data as unsigned bytes.
//   images: magic 2051 (0x00000803), count, rows, cols, then count*rows*cols pixels
//   labels: magic 2049 (0x00000801), count, then count labels
// The Debian package dataset-fashion-mnist installs the four files gzip-compressed
// under /usr/share/datasets/fashion-mnist. herd::data (herd/data/idx_file.h)
// reads plain and .gz files alike and checks the magic numbers, the
// dimensions and that the (decompressed) size is exactly header + data; the
// loader checks that images and labels agree in count and that every label is
// a class 0..9, and throws herd::Error naming the file otherwise. Pixels
// stay bytes in memory (a quarter of float32's size: Fashion-MNIST's
// training set is 47 MB per rank instead of 188 MB); they become float32 in
// [0, 1] (byte / 255, pixels_to_inputs) where a batch or an evaluation chunk
// is assembled.
//
// Plain functions of their arguments: no global state, safe to call from any
// thread. Nothing here reads the environment; the program passes the
// directory (its --data-dir option) to find_fashion_mnist_dir().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd_train {

// Where the Debian package dataset-fashion-mnist puts its files.
constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";
constexpr int kNumClasses = 10;

// `count` samples of rows x cols pixels each, with their labels.
struct Dataset {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> pixels;  // [count][rows * cols], row-major, 0..255
  std::vector<uint8_t> labels;  // [count], each in [0, kNumClasses)

  int64_t features() const { return rows * cols; }
  const uint8_t* image(int64_t i) const { return pixels.data() + i * features(); }
};

// The model's inputs for `count` pixel bytes: inputs[i] = pixels[i] / 255.0f,
// in [0, 1] (0 and 255 exactly 0 and 1). Every loader converts through here,
// so IDX and .rec data train bit-identically.
void pixels_to_inputs(const uint8_t* pixels, int64_t count, float* inputs);

// Images of an IDX file parsed from its bytes; `name` (the file's path)
// appears in every error message. The result has no labels yet.
Dataset parse_idx_images(std::vector<uint8_t> bytes, const std::string& name);
// Labels of an IDX file parsed from its bytes, each checked to be < kNumClasses.
std::vector<uint8_t> parse_idx_labels(std::vector<uint8_t> bytes, const std::string& name);

// The whole content of `path`, gunzipped if it is gzip-compressed. Throws
// herd::Error naming the file when it is missing, unreadable or a corrupt
// gzip stream; a missing file's message says that
// `apt-get install dataset-fashion-mnist` provides the data.
std::vector<uint8_t> read_maybe_gzipped(const std::string& path);

// An images file and a labels file together; throws herd::Error when either
// is invalid or their counts differ.
Dataset load_idx(const std::string& images_path, const std::string& labels_path);

enum class Split { kTrain, kTest };

// The directory to read Fashion-MNIST from: `dir` when not empty, else
// kDefaultFashionMnistDir. Throws herd::Error when it does not hold the four
// files (each as NAME or NAME.gz), naming the first one missing and the
// package that provides them.
std::string find_fashion_mnist_dir(const std::string& dir = "");

// The path of one of the four files in `dir`: NAME if it exists, else
// NAME.gz (whether or not that exists; reading it then gives the error).
std::string fashion_mnist_path(const std::string& dir, const std::string& name);

// The train (60000) or test (10000) split, 28x28 images; throws herd::Error
// as load_idx does, and when the images are not 28x28.
Dataset load_fashion_mnist(const std::string& dir, Split split);

}  // namespace herd_train
