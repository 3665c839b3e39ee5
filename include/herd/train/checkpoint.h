// Checkpoint files: a training run's whole resumable state in one versioned
// binary file.
//
// A herd::Checkpoint holds every parameter's values (by name), the
// optimizer's state (herd::OptimizerState), the schedule position (step,
// epoch and a fractional position for herd::learning_rate_at), the data-order
// seed of the sampler, and a small string->string metadata map (for example
// "model" and "optimizer" descriptions). Loading it into freshly built
// parameters and a fresh optimizer of the same kind continues bitwise
// identically to the run that never stopped.
//
// File format (version 2, every integer and float little-endian, floats and
// doubles as their IEEE-754 bit patterns, so NaN payloads, -0.0 and
// denormals survive exactly); docs/training.md has the full table:
//
//   header (24 bytes)
//     magic          8 bytes   "HERDCKPT"
//     version        u32       kCheckpointVersion
//     crc32          u32       CRC-32 (polynomial 0xEDB88320) of the payload
//     payload_size   u64       bytes after the header; the file is exactly
//                              24 + payload_size bytes long
//   payload: four sections, each
//     tag            u32       'SCHD', 'META', 'PARM' or 'OPTS' (ASCII, as
//                              the bytes appear in the file)
//     length         u64       bytes of the section body that follows
//     body
//   string = u32 byte length + bytes;  float vector = u64 count + count f32
//   SCHD: step i64, epoch i64, position f64, seed u64, ranks u32
//   META: u32 count, then count x (key string, value string)
//   PARM: u32 count, then count x (name string, float vector)
//   OPTS: step i64, u32 count, then count x (buffer name string, float vector)
//
// Single-process: save and load touch one file and nothing else. In a
// data-parallel run, rank 0 saves and every rank loads the same file; the
// file records the number of ranks that wrote it, and apply_checkpoint
// refuses to resume at another number (each rank's data shard and the
// learning-rate scaling depend on it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "herd/train/optimizer.h"

namespace herd {

// The format version this build writes; load_checkpoint() reads exactly this
// version and refuses others, naming both.
inline constexpr uint32_t kCheckpointVersion = 2;

// One parameter's values, by name.
struct CheckpointParameter {
  std::string name;
  std::vector<float> values;
};

struct Checkpoint {
  // Parameters, in the order they were given (names unique).
  std::vector<CheckpointParameter> parameters;
  // The optimizer's exported state (buffer names unique). Empty with step 0
  // when the optimizer had not stepped or initialized its state yet.
  OptimizerState optimizer;
  // Schedule position: optimizer steps (or batches) taken, the epoch to
  // resume in, and a fractional position for learning-rate schedules (for
  // example epoch + batch / batches_per_epoch).
  int64_t step = 0;
  int64_t epoch = 0;
  double position = 0;
  // The seed of the data order (herd::DistributedSampler's seed).
  uint64_t seed = 0;
  // The number of ranks of the run that wrote it (herd::size(); 1 for a
  // single process), at least 1.
  int ranks = 1;
  // Free-form descriptions, e.g. {"model", "mlp 784-128-10"},
  // {"optimizer", "sgd momentum=0.9"}. Written and read back verbatim.
  std::map<std::string, std::string> metadata;
};

// CRC-32 as in zlib, PNG and Ethernet: reflected, polynomial 0xEDB88320,
// initial value and final xor 0xFFFFFFFF. crc32("123456789") == 0xCBF43926.
// `crc` continues a previous result (0 to start).
uint32_t crc32(const void* data, std::size_t size, uint32_t crc = 0);

// Writes `checkpoint` to `path` atomically: the bytes go to
// "<path>.tmp.<pid>" in the same directory, which is fsync'ed and then
// renamed over `path` (and the directory fsync'ed, best effort). A crash or
// a full disk at any point therefore leaves either the previous checkpoint
// or the new one at `path`, never a torn mix, and the pid keeps two writers
// from sharing a temporary file. On any failure throws herd::Error naming
// the path, the failing operation and the errno text, and removes the
// temporary file. Also throws (writing nothing) when names repeat or a
// string or vector is too long for the format.
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);

// Reads a checkpoint written by save_checkpoint(). Throws herd::Error naming
// the path and what is wrong, with expected and found values, when the file
// cannot be opened or read, is shorter than its header or its stated size
// (truncated), longer than its stated size, has the wrong magic, another
// format version or a bad checksum, or when its sections are inconsistent
// (a length past its end, a missing, repeated or unknown section, a
// repeated name, a rank count of 0). Messages give the byte offset in the
// file where the problem was found.
Checkpoint load_checkpoint(const std::string& path);

// A checkpoint of `params`' current values and `optimizer`'s state, at the
// given step and epoch (position = epoch; set it and metadata afterwards if
// needed) with the data-order seed, and ranks = herd::size() (1 when herd is
// not initialized). Throws herd::Error when a parameter name repeats.
Checkpoint make_checkpoint(const std::vector<Parameter>& params, const Optimizer& optimizer,
                           int64_t step, int64_t epoch, uint64_t seed);

// Restores `checkpoint` into `params` and `optimizer`: checks that the
// checkpoint was written by as many ranks as this run has (herd::size(), 1
// when herd is not initialized), and that params and the checkpoint's
// parameters have exactly the same names and sizes (any order), then calls
// optimizer.init_state(params) and imports the checkpoint's optimizer state
// (a zeroed state when the checkpoint holds none), then copies the values
// into the parameters' memory. Throws herd::Error naming both rank counts,
// the parameter (and both sizes) or the optimizer buffer on a mismatch; the
// parameters' values are unchanged when it throws. The schedule position,
// seed and metadata are the caller's to use.
void apply_checkpoint(const Checkpoint& checkpoint, const std::vector<Parameter>& params,
                      Optimizer& optimizer);

}  // namespace herd
