// herd's public C++ API: data-parallel collectives for training processes
// launched by mpirun.
//
// Call herd::init() once per process, then submit named tensors from any
// number of threads. Each submission returns at once; a background thread
// agrees with the other ranks on which names are ready everywhere, fuses them
// and reduces them with a ring-allreduce. Every function throws herd::Error on
// misuse, including any call before init() or after shutdown().
#pragma once

#include <string>

#include "herd/error.h"
#include "herd/handle.h"
#include "herd/types.h"

namespace herd {

// Initializes MPI with MPI_THREAD_MULTIPLE unless the program already did
// (then herd uses that MPI and leaves MPI_Finalize to the program), reads the
// HERD_* settings (docs/configuration.md) and starts the background thread.
// Throws herd::Error on a bad setting, naming the variable and its value.
void init();

// Stops the background thread. Operations still pending complete with a
// "shut down" error; every rank must call shutdown() before it exits.
void shutdown();

bool is_initialized();

int rank();
int size();
// Rank and number of ranks on this machine.
int local_rank();
int local_size();

// Reduces `input` across all ranks into `output` under the name `name`, which
// must be submitted on every rank with the same shape, dtype, op and scales.
// input is multiplied by `prescale` before the reduction and the result by
// `postscale` after it. input and output may be the same buffer. Throws at
// once if `name` is still pending on this rank or the views are malformed.
Handle allreduce_async(const std::string& name, TensorView input, TensorView output, ReduceOp op,
                       double prescale = 1.0, double postscale = 1.0);

// allreduce_async followed by wait.
void allreduce(const std::string& name, TensorView input, TensorView output, ReduceOp op,
               double prescale = 1.0, double postscale = 1.0);

// True once the operation has completed, successfully or not. Never blocks.
bool poll(const Handle& handle);

// Blocks until the operation completes; throws herd::Error with the failure's
// message if it failed.
void wait(const Handle& handle);

}  // namespace herd
