#include "herd_train/idx_dataset.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <system_error>

#include <sys/stat.h>

#include "herd/error.h"

namespace herd_train {
namespace {

constexpr uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension
constexpr int64_t kImagesHeaderBytes = 16;
constexpr int64_t kLabelsHeaderBytes = 8;
constexpr unsigned kReadChunkBytes = 1u << 20;

constexpr const char* kPackageHint =
    "the Debian package dataset-fashion-mnist provides Fashion-MNIST (apt-get install "
    "dataset-fashion-mnist)";

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw herd::Error("IDX file " + name + ": " + what);
}

uint32_t read_be32(const std::vector<uint8_t>& bytes, std::size_t offset) {
  return (uint32_t{bytes[offset]} << 24) | (uint32_t{bytes[offset + 1]} << 16) |
         (uint32_t{bytes[offset + 2]} << 8) | uint32_t{bytes[offset + 3]};
}

void check_magic(const std::vector<uint8_t>& bytes, const std::string& name, uint32_t expected,
                 int64_t header_bytes, const char* kind) {
  if (static_cast<int64_t>(bytes.size()) < header_bytes) {
    std::ostringstream message;
    message << "is " << bytes.size() << " bytes, shorter than the " << header_bytes
            << "-byte header of an IDX " << kind << " file";
    fail(name, message.str());
  }
  const uint32_t magic = read_be32(bytes, 0);
  if (magic != expected) {
    std::ostringstream message;
    message << "magic number is " << magic << " (0x" << std::hex << magic << std::dec
            << "), expected " << expected << " for an IDX " << kind << " file";
    fail(name, message.str());
  }
}

// Header + data must be exactly the file: a shorter file is truncated, a
// longer one is not what the header describes.
void check_size(const std::vector<uint8_t>& bytes, const std::string& name, int64_t header_bytes,
                int64_t data_bytes) {
  const int64_t expected = header_bytes + data_bytes;
  if (static_cast<int64_t>(bytes.size()) != expected) {
    std::ostringstream message;
    message << "is " << bytes.size() << " bytes, but its header describes " << expected << " ("
            << header_bytes << " header + " << data_bytes << " data)"
            << (static_cast<int64_t>(bytes.size()) < expected ? ": the file is truncated" : "");
    fail(name, message.str());
  }
}

bool exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

bool is_directory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};

const char* split_name(Split split) { return split == Split::kTrain ? "train" : "t10k"; }

const char* const kFileNames[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

}  // namespace

Dataset parse_idx_images(const std::vector<uint8_t>& bytes, const std::string& name) {
  check_magic(bytes, name, kImagesMagic, kImagesHeaderBytes, "images");
  Dataset data;
  data.count = read_be32(bytes, 4);
  data.rows = read_be32(bytes, 8);
  data.cols = read_be32(bytes, 12);
  if (data.rows == 0 || data.cols == 0) {
    std::ostringstream message;
    message << "images are " << data.rows << "x" << data.cols << "; rows and columns must be >= 1";
    fail(name, message.str());
  }
  // Each dimension is < 2^32, so rows * cols < 2^64; check before multiplying by count.
  const uint64_t pixels_per_image = uint64_t(data.rows) * uint64_t(data.cols);
  if (pixels_per_image >
      uint64_t(std::numeric_limits<int64_t>::max()) / (uint64_t(data.count) + 1)) {
    fail(name, "the header's dimensions overflow a 64-bit size");
  }
  const int64_t data_bytes = data.count * static_cast<int64_t>(pixels_per_image);
  check_size(bytes, name, kImagesHeaderBytes, data_bytes);
  data.images.resize(static_cast<std::size_t>(data_bytes));
  const uint8_t* pixels = bytes.data() + kImagesHeaderBytes;
  for (int64_t i = 0; i < data_bytes; ++i) data.images[i] = pixels[i] / 255.0f;
  return data;
}

std::vector<uint8_t> parse_idx_labels(const std::vector<uint8_t>& bytes, const std::string& name) {
  check_magic(bytes, name, kLabelsMagic, kLabelsHeaderBytes, "labels");
  const int64_t count = read_be32(bytes, 4);
  check_size(bytes, name, kLabelsHeaderBytes, count);
  std::vector<uint8_t> labels(bytes.begin() + kLabelsHeaderBytes, bytes.end());
  for (int64_t i = 0; i < count; ++i) {
    if (labels[i] >= kNumClasses) {
      std::ostringstream message;
      message << "label " << i << " is " << int{labels[i]} << ", outside the classes 0.."
              << kNumClasses - 1;
      fail(name, message.str());
    }
  }
  return labels;
}

std::vector<uint8_t> read_maybe_gzipped(const std::string& path) {
  if (!exists(path)) {
    throw herd::Error("IDX file " + path + " does not exist; " + kPackageHint +
                      ", or pass the directory that holds the files");
  }
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) {
    throw herd::Error("IDX file " + path +
                      " cannot be opened: " + (errno ? std::strerror(errno) : "out of memory"));
  }
  // gzread passes a file that is not gzip-compressed through unchanged.
  std::vector<uint8_t> bytes;
  for (;;) {
    const std::size_t old_size = bytes.size();
    bytes.resize(old_size + kReadChunkBytes);
    const int got = gzread(file.get(), bytes.data() + old_size, kReadChunkBytes);
    if (got < 0) break;
    bytes.resize(old_size + static_cast<std::size_t>(got));
    if (got == 0) break;
  }
  int code = Z_OK;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    throw herd::Error("IDX file " + path +
                      " cannot be read: " + (code == Z_ERRNO ? std::strerror(errno) : message) +
                      " (a corrupt or truncated gzip file?)");
  }
  return bytes;
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
