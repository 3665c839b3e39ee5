// Checkpoint files: bit-exact round trips, resuming bitwise identically to a
// run that never stopped, every kind of corruption refused with a message
// naming the file and what is wrong, mismatched models refused, and failed
// writes leaving nothing behind.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/train/checkpoint.h"
#include "herd/train/optimizer.h"
#include "tests/unit/train/optimizer_test_util.h"

namespace herd {
namespace {

using test::OwnedParam;

// A fresh directory under $TMPDIR (or /tmp), removed with its files.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/herd_ckpt_XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path_ = buf.data();
  }
  ~TempDir() {
    ::chmod(path_.c_str(), 0755);
    for (const std::string& f : files()) {
      const std::string full = path_ + "/" + f;
      if (::unlink(full.c_str()) != 0) ::rmdir(full.c_str());
    }
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
      }
      ::closedir(d);
    }
    return names;
  }

 private:
  std::string path_;
};

std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void put_u32(std::vector<unsigned char>& b, std::size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(std::vector<unsigned char>& b, std::size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<unsigned char>(v >> (8 * i));
}
// Recomputes the header's checksum, so that a deliberately inconsistent
// payload reaches the section checks.
void fix_crc(std::vector<unsigned char>& b) { put_u32(b, 12, crc32(b.data() + 24, b.size() - 24)); }
// The offset of the first occurrence of `text` in `b`.
std::size_t find(const std::vector<unsigned char>& b, const std::string& text) {
  for (std::size_t i = 0; i + text.size() <= b.size(); ++i) {
    if (std::memcmp(b.data() + i, text.data(), text.size()) == 0) return i;
  }
  FAIL("'" << text << "' not in the file");
  return 0;
}

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}
using test::bitwise_equal;

using Model = test::TinyModel;

TEST_CASE("crc32 is the standard CRC-32", "[checkpoint]") {
  CHECK(crc32("123456789", 9) == 0xCBF43926u);
  CHECK(crc32("", 0) == 0u);
  CHECK(crc32("The quick brown fox jumps over the lazy dog", 43) == 0x414FA339u);
  // Continuing a running value equals one pass.
  CHECK(crc32("6789", 4, crc32("12345", 5)) == 0xCBF43926u);
}

// The file byte for byte, as include/herd/checkpoint.h lays it out (the
// CRC-32 from zlib's crc32 over the payload): a build reads the checkpoints
// of another only while these bytes stay the same.
TEST_CASE("a checkpoint's bytes are the documented format", "[checkpoint]") {
  Checkpoint ck;
  ck.step = 5;
  ck.epoch = -1;
  ck.position = 0.25;
  ck.seed = 7;
  ck.metadata["k"] = "vv";
  ck.parameters.push_back({"w", {1.0f, -2.0f}});
  ck.optimizer.step = 3;
  ck.optimizer.buffers.push_back({"w/m", {0.5f}});
  const std::vector<unsigned char> expected = {
      0x48, 0x45, 0x52, 0x44, 0x43, 0x4b, 0x50, 0x54,  // "HERDCKPT"
      0x02, 0x00, 0x00, 0x00,                          // version 2
      0xd3, 0xf5, 0xfd, 0xdd,                          // CRC-32 of the payload, 0xddfdf5d3
      0x9b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // payload size 155
      0x53, 0x43, 0x48, 0x44,                          // SCHD
      0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 36 bytes
      0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // step 5
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // epoch -1
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd0, 0x3f,  // position 0.25
      0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // seed 7
      0x01, 0x00, 0x00, 0x00,                          // 1 rank
      0x4d, 0x45, 0x54, 0x41,                          // META
      0x0f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 15 bytes
      0x01, 0x00, 0x00, 0x00,                          // 1 entry
      0x01, 0x00, 0x00, 0x00, 0x6b,                    // key: length 1, "k"
      0x02, 0x00, 0x00, 0x00, 0x76, 0x76,              // value: length 2, "vv"
      0x50, 0x41, 0x52, 0x4d,                          // PARM
      0x19, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 25 bytes
      0x01, 0x00, 0x00, 0x00,                          // 1 parameter
      0x01, 0x00, 0x00, 0x00, 0x77,                    // name: length 1, "w"
      0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 2 values
      0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0,  // 1.0f, -2.0f
      0x4f, 0x50, 0x54, 0x53,                          // OPTS
      0x1f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 31 bytes
      0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // optimizer step 3
      0x01, 0x00, 0x00, 0x00,                          // 1 buffer
      0x03, 0x00, 0x00, 0x00, 0x77, 0x2f, 0x6d,        // name: length 3, "w/m"
      0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 1 value
      0x00, 0x00, 0x00, 0x3f,                          // 0.5f
  };
  TempDir dir;
  const std::string path = dir.file("pinned.ckpt");
  save_checkpoint(path, ck);
  CHECK(read_bytes(path) == expected);

  write_bytes(path, expected);
  const Checkpoint back = load_checkpoint(path);
  CHECK(back.step == 5);
  CHECK(back.epoch == -1);
  CHECK(back.position == 0.25);
  CHECK(back.seed == 7);
  CHECK(back.ranks == 1);
  CHECK(back.metadata == ck.metadata);
  REQUIRE(back.parameters.size() == 1);
  CHECK(back.parameters[0].name == "w");
  CHECK(back.parameters[0].values == std::vector<float>{1.0f, -2.0f});
  CHECK(back.optimizer.step == 3);
  REQUIRE(back.optimizer.buffers.size() == 1);
  CHECK(back.optimizer.buffers[0].name == "w/m");
  CHECK(back.optimizer.buffers[0].values == std::vector<float>{0.5f});
}

TEST_CASE("a checkpoint round-trips bit for bit", "[checkpoint]") {
  TempDir dir;
  Checkpoint ck;
  const std::vector<uint32_t> special = {
      0x7fc00001u,  // quiet NaN with a payload
      0xffa00123u,  // negative signalling NaN with a payload
      0x80000000u,  // -0.0
      0x00000001u,  // smallest denormal
      0x807fffffu,  // largest negative denormal
      0x7f800000u,  // +inf
      0xff800000u,  // -inf
      0x7f7fffffu,  // FLT_MAX
      0x3f800000u,  // 1.0
  };
  std::vector<float> values;
  for (uint32_t b : special) values.push_back(from_bits(b));
  ck.parameters.push_back({"layer.weight", values});
  ck.parameters.push_back({"empty", {}});
  ck.parameters.push_back({"z", {1.0f, 2.0f}});
  ck.optimizer.step = 17;
  ck.optimizer.buffers.push_back({"layer.weight/momentum", values});
  ck.optimizer.buffers.push_back({"empty/momentum", {}});
  ck.step = 1234;
  ck.epoch = -3;
  ck.position = 2.0 / 3.0;
  ck.seed = std::numeric_limits<uint64_t>::max();
  ck.metadata["model"] = "mlp 784-128-10";
  ck.metadata["optimizer"] = "sgd momentum=0.9";
  ck.metadata["empty"] = "";
  ck.metadata[std::string("bin\0ary", 7)] = std::string("\xff\0\x01", 3);

  const std::string path = dir.file("a.ckpt");
  save_checkpoint(path, ck);
  CHECK(dir.files() == std::vector<std::string>{"a.ckpt"});  // no temporary file left

  const std::vector<unsigned char> bytes = read_bytes(path);
  REQUIRE(bytes.size() > 24);
  CHECK(std::memcmp(bytes.data(), "HERDCKPT", 8) == 0);
  CHECK(bytes[8] == kCheckpointVersion);  // little-endian version
  CHECK(bytes[9] == 0);
  CHECK(bytes[10] == 0);
  CHECK(bytes[11] == 0);

  const Checkpoint back = load_checkpoint(path);
  REQUIRE(back.parameters.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back.parameters[i].name == ck.parameters[i].name);
    CHECK(bitwise_equal(back.parameters[i].values, ck.parameters[i].values));
  }
  for (std::size_t i = 0; i < special.size(); ++i) {
    INFO("element " << i);
    CHECK(bits_of(back.parameters[0].values[i]) == special[i]);
  }
  CHECK(back.optimizer.step == 17);
  REQUIRE(back.optimizer.buffers.size() == 2);
  CHECK(back.optimizer.buffers[0].name == "layer.weight/momentum");
  CHECK(bitwise_equal(back.optimizer.buffers[0].values, values));
  CHECK(back.optimizer.buffers[1].name == "empty/momentum");
  CHECK(back.optimizer.buffers[1].values.empty());
  CHECK(back.step == 1234);
  CHECK(back.epoch == -3);
  CHECK(std::memcmp(&back.position, &ck.position, sizeof(double)) == 0);
  CHECK(back.seed == std::numeric_limits<uint64_t>::max());
  CHECK(back.metadata == ck.metadata);

  // Saving again over the file replaces it, still leaving no temporary.
  ck.step = 1235;
  save_checkpoint(path, ck);
  CHECK(load_checkpoint(path).step == 1235);
  CHECK(dir.files() == std::vector<std::string>{"a.ckpt"});
}

using Factory = std::function<std::unique_ptr<Optimizer>()>;

// Trains 3 steps, checkpoints, trains 4 more; separately loads the checkpoint
// into a model with other values and a fresh optimizer and trains the same 4
// steps: parameters and optimizer state must agree bit for bit.
void check_resume_is_bitwise(const Factory& make) {
  TempDir dir;
  const std::string path = dir.file("run.ckpt");
  Model straight;
  auto opt = make();
  straight.train(*opt, 1, 3);
  Checkpoint ck = make_checkpoint(straight.params(), *opt, /*step=*/3, /*epoch=*/1, /*seed=*/42);
  ck.position = 1.5;
  ck.metadata["optimizer"] = "test";
  save_checkpoint(path, ck);
  straight.train(*opt, 4, 7);

  Model resumed;
  for (float& x : resumed.weight.value) x = 99.0f;  // overwritten by the checkpoint
  for (float& x : resumed.bias.value) x = -99.0f;
  auto fresh = make();
  const Checkpoint loaded = load_checkpoint(path);
  CHECK(loaded.step == 3);
  CHECK(loaded.epoch == 1);
  CHECK(loaded.position == 1.5);
  CHECK(loaded.seed == 42);
  CHECK(loaded.metadata.at("optimizer") == "test");
  // Parameters in another order than saved: matched by name.
  apply_checkpoint(loaded, {resumed.bias.view(), resumed.weight.view()}, *fresh);
  CHECK(fresh->step_count() == 3);
  resumed.train(*fresh, 4, 7);
  CHECK(bitwise_equal(resumed.weight.value, straight.weight.value));
  CHECK(bitwise_equal(resumed.bias.value, straight.bias.value));
  CHECK(fresh->step_count() == opt->step_count());
  // The same buffers (in registration order, which here differs).
  const OptimizerState sa = opt->export_state(), sb = fresh->export_state();
  std::map<std::string, std::vector<float>> a, b;
  for (const StateBuffer& s : sa.buffers) a[s.name] = s.values;
  for (const StateBuffer& s : sb.buffers) b[s.name] = s.values;
  CHECK(!a.empty());
  CHECK(a.size() == sa.buffers.size());
  REQUIRE(a.size() == b.size());
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    CHECK(ia->first == ib->first);
    CHECK(bitwise_equal(ia->second, ib->second));
  }
}

TEST_CASE("resuming from a checkpoint continues bitwise identically", "[checkpoint]") {
  SECTION("SGD with momentum") {
    check_resume_is_bitwise([] {
      SGDOptions o;
      o.lr = 0.1;
      o.momentum = 0.9;
      o.weight_decay = 1e-2;
      return std::make_unique<SGD>(o);
    });
  }
  SECTION("SGD with Nesterov momentum") {
    check_resume_is_bitwise([] {
      SGDOptions o;
      o.lr = 0.05;
      o.momentum = 0.8;
      o.nesterov = true;
      return std::make_unique<SGD>(o);
    });
  }
  SECTION("Adam") {
    check_resume_is_bitwise([] {
      AdamOptions o;
      o.lr = 0.01;
      return std::make_unique<Adam>(o);
    });
  }
  SECTION("AdamW") {
    check_resume_is_bitwise([] {
      AdamOptions o;
      o.lr = 0.01;
      o.weight_decay = 1e-2;
      o.decoupled_weight_decay = true;
      return std::make_unique<Adam>(o);
    });
  }
}

TEST_CASE("a checkpoint taken before the first step restores a fresh optimizer", "[checkpoint]") {
  SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.dampening = 0.5;
  Model a, b;
  SGD never_stepped(o);
  const Checkpoint ck = make_checkpoint(a.params(), never_stepped, 0, 0, 7);
  CHECK(ck.optimizer.buffers.empty());
  SGD used(o), reference(o);
  b.fill_grads(1);
  used.step(b.params());  // state that the checkpoint must reset
  apply_checkpoint(ck, b.params(), used);
  CHECK(used.step_count() == 0);
  for (int s = 1; s <= 3; ++s) {
    a.fill_grads(s);
    b.fill_grads(s);
    reference.step(a.params());
    used.step(b.params());
  }
  CHECK(bitwise_equal(a.weight.value, b.weight.value));
  CHECK(bitwise_equal(a.bias.value, b.bias.value));
}

// A valid checkpoint file's bytes, for the corruption cases.
std::vector<unsigned char> good_file(const TempDir& dir) {
  Model m;
  SGDOptions o;
  o.momentum = 0.9;
  SGD sgd(o);
  m.fill_grads(1);
  sgd.step(m.params());
  Checkpoint ck = make_checkpoint(m.params(), sgd, 1, 0, 5);
  ck.metadata["model"] = "test";
  save_checkpoint(dir.file("good.ckpt"), ck);
  return read_bytes(dir.file("good.ckpt"));
}

TEST_CASE("corrupt checkpoints are refused with a clear message", "[checkpoint]") {
  using Catch::Contains;
  using Catch::Equals;
  TempDir dir;
  const std::vector<unsigned char> good = good_file(dir);
  const std::string path = dir.file("bad.ckpt");
  REQUIRE_NOTHROW(load_checkpoint(dir.file("good.ckpt")));

  SECTION("missing file") {
    CHECK_THROWS_WITH(load_checkpoint(dir.file("nope.ckpt")),
                      Contains("nope.ckpt") && Contains("No such file"));
  }
  SECTION("truncated") {
    for (std::size_t size : {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{23}}) {
      INFO("truncated to " << size);
      write_bytes(path, {good.begin(), good.begin() + static_cast<std::ptrdiff_t>(size)});
      CHECK_THROWS_WITH(load_checkpoint(path), Contains(path) && Contains("truncated") &&
                                                   Contains(std::to_string(size) + " bytes") &&
                                                   Contains("24-byte header"));
    }
    for (std::size_t size : {std::size_t{24}, std::size_t{30}, good.size() / 2, good.size() - 1}) {
      INFO("truncated to " << size);
      write_bytes(path, {good.begin(), good.begin() + static_cast<std::ptrdiff_t>(size)});
      CHECK_THROWS_WITH(load_checkpoint(path),
                        Contains(path) && Contains("truncated") &&
                            Contains("expected " + std::to_string(good.size()) + " bytes") &&
                            Contains("found " + std::to_string(size)));
    }
  }
  SECTION("trailing bytes") {
    std::vector<unsigned char> bad = good;
    bad.push_back(0);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path),
                      Contains("inconsistent") && Contains("trailing") &&
                          Contains("found " + std::to_string(good.size() + 1)));
  }
  SECTION("a flipped byte in the payload") {
    for (std::size_t at : {std::size_t{24}, std::size_t{40}, good.size() / 2, good.size() - 1}) {
      INFO("flipped byte " << at);
      std::vector<unsigned char> bad = good;
      bad[at] ^= 0x10;
      write_bytes(path, bad);
      CHECK_THROWS_WITH(load_checkpoint(path),
                        Contains(path) && Contains("checksum mismatch") && Contains("CRC-32"));
    }
  }
  SECTION("wrong magic") {
    std::vector<unsigned char> bad = good;
    bad[0] = 'X';
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path), Contains(path) && Contains("wrong magic") &&
                                                 Contains("HERDCKPT") &&
                                                 Contains("58455244434b5054"));
  }
  SECTION("another version") {
    std::vector<unsigned char> bad = good;
    put_u32(bad, 8, 3);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path),
                      Contains(path) && Contains("version 3") && Contains("reads version 2"));
    // Version 1 had no rank count.
    put_u32(bad, 8, 1);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path),
                      Contains(path) && Contains("version 1") && Contains("reads version 2"));
  }
  SECTION("a rank count of 0") {
    std::vector<unsigned char> bad = good;
    // SCHD's body starts after the header and the section's tag and length;
    // the rank count follows step, epoch, position and seed.
    const std::size_t ranks_at = 24 + 12 + 32;
    put_u32(bad, ranks_at, 0);
    fix_crc(bad);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(
        load_checkpoint(path),
        Equals("checkpoint '" + path + "' is inconsistent: section SCHD at byte " +
               std::to_string(ranks_at) + " of the file gives 0 ranks (expected 1 to 2147483647)"));
  }
  SECTION("a section too short for its fields") {
    std::vector<unsigned char> bad = good;
    // SCHD claims 30 bytes: the seed's 8 bytes at file offset 24+12+24 = 60
    // find only 6. The section ends early, so the next one starts inside
    // SCHD's old body; the message is about the first problem met.
    put_u64(bad, 24 + 4, 30);
    fix_crc(bad);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path),
                      Equals("checkpoint '" + path +
                             "' is inconsistent: section SCHD at byte 60 of the file needs 8 more "
                             "bytes for seed, but only 6 remain in the section"));
  }
  SECTION("inconsistent lengths under a valid checksum") {
    std::vector<unsigned char> bad = good;
    // The first parameter's name "fc1.weight" is preceded by its u32 length
    // and followed by its u64 element count (6).
    const std::size_t name = find(bad, "fc1.weight");
    put_u64(bad, name + 10, 1000);
    fix_crc(bad);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path), Contains(path) && Contains("inconsistent") &&
                                                 Contains("parameter 'fc1.weight'") &&
                                                 Contains("1000 elements"));

    bad = good;
    put_u64(bad, name + 10, 5);  // one float too few: the section has bytes left over
    fix_crc(bad);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path), Contains("inconsistent") && Contains("section PARM"));

    bad = good;
    const std::size_t parm = find(bad, "PARM");
    put_u64(bad, parm + 4, bad.size());  // section longer than the file
    fix_crc(bad);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path), Contains("inconsistent") && Contains("section PARM") &&
                                                 Contains(std::to_string(bad.size())));

    bad = good;
    std::memcpy(bad.data() + find(bad, "META"), "XXXX", 4);
    fix_crc(bad);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path), Contains("unknown section XXXX"));

    bad = good;
    std::memcpy(bad.data() + find(bad, "OPTS"), "PARM", 4);
    fix_crc(bad);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path), Contains("section PARM appears twice"));

    bad = good;
    put_u64(bad, 16, 0);  // an empty payload: all sections missing
    bad.resize(24);
    fix_crc(bad);
    write_bytes(path, bad);
    CHECK_THROWS_WITH(load_checkpoint(path), Contains("section SCHD is missing"));
  }
}

TEST_CASE("a checkpoint of another model is refused, changing nothing", "[checkpoint]") {
  using Catch::Contains;
  Model saved_model;
  SGDOptions o;
  o.momentum = 0.9;
  SGD sgd(o);
  saved_model.fill_grads(1);
  sgd.step(saved_model.params());
  const Checkpoint ck = make_checkpoint(saved_model.params(), sgd, 1, 0, 0);

  Model m;
  const std::vector<float> before = m.weight.value;
  SECTION("a parameter of another size") {
    OwnedParam bias("fc1.bias", {1.0f, 2.0f, 3.0f});
    SGD fresh(o);
    CHECK_THROWS_WITH(apply_checkpoint(ck, {m.weight.view(), bias.view()}, fresh),
                      Contains("parameter 'fc1.bias'") && Contains("size 2 in the checkpoint") &&
                          Contains("3 in the model"));
    CHECK(bias.value == std::vector<float>{1.0f, 2.0f, 3.0f});
    CHECK(!fresh.has_state());
  }
  SECTION("a parameter of another name") {
    OwnedParam bias("fc1.b", {1.0f, 2.0f});
    SGD fresh(o);
    CHECK_THROWS_WITH(apply_checkpoint(ck, {m.weight.view(), bias.view()}, fresh),
                      Contains("parameter 'fc1.b'") && Contains("not in the checkpoint"));
  }
  SECTION("a parameter missing from the model") {
    SGD fresh(o);
    CHECK_THROWS_WITH(apply_checkpoint(ck, {m.weight.view()}, fresh),
                      Contains("'fc1.bias'") && Contains("not in the model"));
  }
  SECTION("another optimizer kind") {
    Adam adam(AdamOptions{});
    CHECK_THROWS_WITH(apply_checkpoint(ck, m.params(), adam), Contains("fc1.weight/"));
  }
  CHECK(bitwise_equal(m.weight.value, before));
}

TEST_CASE("a checkpoint of another number of ranks is refused, changing nothing", "[checkpoint]") {
  Model saved_model;
  SGDOptions o;
  o.momentum = 0.9;
  SGD sgd(o);
  saved_model.fill_grads(1);
  sgd.step(saved_model.params());
  Checkpoint ck = make_checkpoint(saved_model.params(), sgd, 1, 0, 0);
  // No herd::init in this process: a single process, one rank.
  CHECK(ck.ranks == 1);

  // Written by 2 ranks, read back from the file, applied in this 1-rank run.
  ck.ranks = 2;
  TempDir dir;
  const std::string path = dir.file("two.ckpt");
  save_checkpoint(path, ck);
  const Checkpoint loaded = load_checkpoint(path);
  CHECK(loaded.ranks == 2);
  Model m;
  const std::vector<float> before = m.weight.value;
  SGD fresh(o);
  CHECK_THROWS_WITH(apply_checkpoint(loaded, m.params(), fresh),
                    "checkpoint mismatch: the checkpoint was written by a run of 2 ranks, but "
                    "this run has 1; resuming at another number of ranks is refused (each rank's "
                    "data shard and the learning-rate scaling depend on it): resume with 2 ranks");
  CHECK(bitwise_equal(m.weight.value, before));
  CHECK(!fresh.has_state());

  ck.ranks = 0;
  CHECK_THROWS_WITH(save_checkpoint(dir.file("zero.ckpt"), ck),
                    "checkpoint: ranks is 0; a run has at least 1 rank");
}

TEST_CASE("a failed save throws naming the path and leaves no file", "[checkpoint]") {
  using Catch::Contains;
  TempDir dir;
  Checkpoint ck;
  ck.parameters.push_back({"w", {1.0f}});

  SECTION("a directory that does not exist") {
    const std::string path = dir.file("missing/x.ckpt");
    CHECK_THROWS_WITH(save_checkpoint(path, ck), Contains(path) && Contains("No such file"));
    CHECK(dir.files().empty());
  }
  SECTION("the path is a directory: the temporary file is removed") {
    const std::string path = dir.file("subdir");
    REQUIRE(::mkdir(path.c_str(), 0755) == 0);
    CHECK_THROWS_WITH(save_checkpoint(path, ck),
                      Contains(path) && Contains("renaming") && Contains("Is a directory"));
    CHECK(dir.files() == std::vector<std::string>{"subdir"});
  }
  SECTION("a read-only directory") {
    if (::geteuid() == 0) {
      WARN("running as root: a read-only directory is writable; skipped");
      return;
    }
    REQUIRE(::chmod(dir.path().c_str(), 0555) == 0);
    const std::string path = dir.file("x.ckpt");
    CHECK_THROWS_WITH(save_checkpoint(path, ck), Contains(path) && Contains("Permission denied"));
    ::chmod(dir.path().c_str(), 0755);
    CHECK(dir.files().empty());
  }
  SECTION("repeated names are refused before anything is written") {
    ck.parameters.push_back({"w", {2.0f}});
    CHECK_THROWS_WITH(save_checkpoint(dir.file("x.ckpt"), ck), Contains("'w' is given twice"));
    CHECK(dir.files().empty());
  }
}

}  // namespace
}  // namespace herd
