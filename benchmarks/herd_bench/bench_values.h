// Inputs and closed-form results for herd-bench's correctness checks.
//
// Called by the benchmark's main thread only (before and after each timed
// path); pure functions of their arguments. Every rank fills its input with
// small integers unique to (rank, index), chosen so that every reduction of
// them is exact in every supported dtype at the rank counts a benchmark uses
// (see input_value), so a result is compared with its expected value exactly.
#pragma once

#include <cstdint>
#include <string>

#include "herd/types.h"

namespace herd::bench {

// Element i of `rank`'s input for `op`, as a double (exact in every dtype).
double input_value(ReduceOp op, int rank, int64_t i);

// input_value reduced over ranks 0..ranks-1 with `op`, in closed form.
double expected_value(ReduceOp op, int ranks, int64_t i);

// Reads and writes element i of a buffer of `dtype` as a double. float16 and
// bfloat16 go through herd's own conversions (ops/half.h).
double load(DataType dtype, const void* data, int64_t i);
void store(DataType dtype, void* data, int64_t i, double value);

// Fills `count` elements of `data` with `rank`'s input.
void fill_input(DataType dtype, ReduceOp op, int rank, void* data, int64_t count);

// Counts the elements of `data` that differ from expected_value. The check is
// exact except for an average of a floating type, where herd multiplies by a
// rounded 1/ranks and may land one unit in the last place away. Prints the
// first wrong element (rank, path, index, expected, actual) to stderr.
int64_t count_wrong(DataType dtype, ReduceOp op, int ranks, int rank, const void* data,
                    int64_t count, const std::string& path);

// count_wrong for elements first..first+count-1 of the reduction, held at
// data[0..count): the block a reducescatter leaves on one rank.
int64_t count_wrong_from(DataType dtype, ReduceOp op, int ranks, int rank, const void* data,
                         int64_t first, int64_t count, const std::string& path);

// The inputs of the collectives that move data without reducing it
// (allgather, broadcast, alltoall). Rank `source` splits what it sends into
// `blocks` blocks, one per destination (alltoall: blocks = ranks) or a single
// one (allgather, broadcast: blocks = 1, block = 0), and element i of its
// block `block` is
//   1 + source + ranks * (block + blocks * (i % period)),
// an integer unique to (source, block, i % period) for every dtype: period is
// the largest that keeps every value within the integers the dtype holds
// exactly (127 for int8, 256 for bfloat16, 2048 for float16, ...), so a block
// that lands on the wrong rank, at the wrong place or shifted by less than a
// period is caught. Throws std::invalid_argument when ranks * blocks exceeds
// that limit (alltoall in int8 on more than 11 ranks, for instance).
double block_value(DataType dtype, int ranks, int blocks, int source, int block, int64_t i);

// Fills `count` elements of `data` with block_value(..., source, block, i).
void fill_block(DataType dtype, int ranks, int blocks, int source, int block, void* data,
                int64_t count);

// Counts the elements of `data` that differ, exactly, from source's block
// `block`; prints the first one (rank, path, source, index, expected, actual)
// to stderr.
int64_t count_wrong_block(DataType dtype, int ranks, int blocks, int source, int block, int rank,
                          const void* data, int64_t count, const std::string& path);

// True for the dtypes herd-bench accepts (those that load and store handle).
bool is_supported(DataType dtype);

}  // namespace herd::bench
