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
#include "herd/float16.h"
#include "herd/handle.h"
#include "herd/process_set.h"
#include "herd/shared_buffer.h"
#include "herd/stats.h"
#include "herd/tensor.h"
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

// Ends the job from the application, on every rank, with `reason` (say what
// went wrong and where: "bad record at byte 96 of x.rec"): records it as this
// rank's fatal failure and sends it to every other rank, where every pending
// and later operation, on any process set, fails with herd::Error holding
// "rank R (host H, pid P): <reason>"; then shuts herd down here as
// herd::shutdown does, except that MPI is not finalized (after a fatal
// failure it never is: docs/errors.md, "Ending after a fatal failure").
// Returns once herd is shut down on this rank; the program then ends,
// non-zero. Operations pending on this rank fail with the same text. When a
// fatal failure is already known, that one stays the one every rank sees.
// Throws herd::Error, sending nothing, before init(), after shutdown() or
// for an empty `reason`.
void fail(const std::string& reason);

// Shuts herd down as a process that ends without herd::shutdown does: the
// other ranks first learn that this rank exited without shutdown, so their
// pending operations fail naming it. herd's own static destructor does this
// for C++ programs; this entry is for language bindings whose exit hooks run
// before C++ static destructors (herd's Python package calls it at
// interpreter exit). A no-op when herd is not running.
void shutdown_at_exit();

bool is_initialized();

int rank();
int size();
// Rank and number of ranks on this machine.
int local_rank();
int local_size();
// Rank and number of ranks among the ranks with this rank's local_rank(), one
// per machine when every machine runs the same number of ranks: cross_size()
// is then the number of machines and cross_rank() this machine's index.
int cross_rank();
int cross_size();
// True when every machine of the job runs the same number of ranks.
bool is_homogeneous();
// True when MPI provides MPI_THREAD_MULTIPLE (the level init() found or
// asked for), so that the program may call MPI from any thread.
bool mpi_threads_supported();

// Whether this build of herd has the GPU path (CUDA), and whether it uses
// NCCL for GPU tensors. Callable before init. Without CUDA, a TensorView on a
// GPU is refused; with CUDA but without NCCL, GPU tensors are reduced over
// MPI through host memory (docs/gpu.md).
bool cuda_built();
bool nccl_built();
// NCCL_VERSION_CODE of the NCCL herd was built with (22809 for 2.28.9); 0
// when nccl_built() is false.
int nccl_version_code();

// Reduces `input` across all ranks into `output` under the name `name`, which
// must be submitted on every rank with the same shape, dtype, op and scales.
// input is multiplied by `prescale` before the reduction and the result by
// `postscale` after it. input and output may be the same buffer. Throws at
// once if `name` is still pending on this rank or the views are malformed.
// ReduceOp::kAdasum (docs/adasum.md) throws at once for a dtype other than
// float16/32/64 (kInvalidArgument), for GPU memory or for a process set whose
// size is not a power of two (kNotImplemented).
Handle allreduce_async(const std::string& name, TensorView input, TensorView output, ReduceOp op,
                       double prescale = 1.0, double postscale = 1.0,
                       const ProcessSet& process_set = ProcessSet());

// allreduce_async followed by wait.
void allreduce(const std::string& name, TensorView input, TensorView output, ReduceOp op,
               double prescale = 1.0, double postscale = 1.0,
               const ProcessSet& process_set = ProcessSet());

// Concatenates every rank's `input` along the first dimension, in rank order,
// into `output` (allocated by herd; [sum of first dims, trailing dims...]).
// Ranks may differ in the first dimension only. `output` must stay alive
// until the handle completes.
Handle allgather_async(const std::string& name, TensorView input, Tensor* output,
                       const ProcessSet& process_set = ProcessSet());
void allgather(const std::string& name, TensorView input, Tensor* output,
               const ProcessSet& process_set = ProcessSet());

// Copies `root`'s `inout` into every other rank's `inout`, in place.
Handle broadcast_async(const std::string& name, TensorView inout, int root,
                       const ProcessSet& process_set = ProcessSet());
void broadcast(const std::string& name, TensorView inout, int root,
               const ProcessSet& process_set = ProcessSet());

// Sends rows of `input` (along the first dimension) to every rank: the first
// splits[0] rows to rank 0, the next splits[1] to rank 1, ... An empty
// `splits` divides the rows evenly (the first dimension must then be a
// multiple of the number of ranks). `output` receives the blocks from every
// rank in rank order; `received_splits` (optional) the number of rows each
// rank sent here.
Handle alltoall_async(const std::string& name, TensorView input, std::vector<int64_t> splits,
                      Tensor* output, std::vector<int64_t>* received_splits = nullptr,
                      const ProcessSet& process_set = ProcessSet());
void alltoall(const std::string& name, TensorView input, std::vector<int64_t> splits,
              Tensor* output, std::vector<int64_t>* received_splits = nullptr,
              const ProcessSet& process_set = ProcessSet());

// Reduces `input` across ranks like allreduce, then leaves rank i only its
// block of rows of the result: with R rows and p ranks, rank i gets
// R / p rows, and the first R % p ranks one row more, in rank order.
// ReduceOp::kAdasum throws at once (kNotImplemented).
Handle reducescatter_async(const std::string& name, TensorView input, Tensor* output, ReduceOp op,
                           double prescale = 1.0, double postscale = 1.0,
                           const ProcessSet& process_set = ProcessSet());
void reducescatter(const std::string& name, TensorView input, Tensor* output, ReduceOp op,
                   double prescale = 1.0, double postscale = 1.0,
                   const ProcessSet& process_set = ProcessSet());

// Allreduces several tensors as one unit: none starts before all are ready
// on every rank. One handle completes when all are done.
Handle grouped_allreduce_async(const std::vector<std::string>& names,
                               const std::vector<TensorView>& inputs,
                               const std::vector<TensorView>& outputs, ReduceOp op,
                               double prescale = 1.0, double postscale = 1.0,
                               const ProcessSet& process_set = ProcessSet());
void grouped_allreduce(const std::vector<std::string>& names, const std::vector<TensorView>& inputs,
                       const std::vector<TensorView>& outputs, ReduceOp op, double prescale = 1.0,
                       double postscale = 1.0, const ProcessSet& process_set = ProcessSet());

// Returns once every rank of the set has called barrier(); each rank's k-th
// barrier meets the others' k-th. One barrier at a time per rank and set (a
// second one called while the first waits throws herd::Error).
void barrier(const ProcessSet& process_set = ProcessSet());

// For a rank that has run out of data: blocks until every rank has called
// join(), and returns the rank that joined last (of several that joined in
// the same agreement round, the highest). Meanwhile the other ranks'
// allreduces and grouped allreduces proceed, this rank contributing the
// identity of each op (0 for sum, average and adasum, 1 for product, +infinity or the
// type's largest value for min, -infinity or its lowest for max, without
// prescale); an average still divides by the number of ranks in the set,
// joined ones included. Any other collective submitted
// while a rank has joined fails with herd::Error naming the joined ranks.
// Global set only.
int join();

// Every collective above runs on `process_set`, the global set by default;
// the calling rank must belong to it. Ranks named in arguments (broadcast's
// root) and in error messages are global ranks; results ordered "by rank"
// (allgather, alltoall, reducescatter) follow the set's members in ascending
// order.

// Makes a process set of `ranks` (global ranks; any order, no duplicates).
// Called by every rank of the job, members or not, with the same ranks and
// in the same order of calls; throws herd::Error on every rank otherwise.
ProcessSet add_process_set(std::vector<int> ranks);
// Removes a set made by add_process_set; called by every rank of the job.
// Operations still pending on the set fail.
void remove_process_set(const ProcessSet& process_set);
// The set of all ranks.
ProcessSet global_process_set();
// Every process set of the job (those of HERD_PROCESS_SETS included): the
// global set first, then by id. A ProcessSet passed to a collective must be
// one of these (same id and ranks).
std::vector<ProcessSet> process_sets();

// Starts writing this rank's timeline to `path`: a Chrome-trace JSON file
// (chrome://tracing, Perfetto) of each tensor's negotiation and operation,
// with CYCLE_START marks of the background loop's cycles when `mark_cycles`
// (docs/timeline.md). "%r" in `path` stands for the rank, so every rank
// writes its own file; without "%r" rank 0 alone writes, and the call does
// nothing on the other ranks. A timeline being written to another path is
// finished first; the same path again changes `mark_cycles` only. Not
// collective: any rank, any time between init and shutdown. Throws
// herd::Error when the file cannot be opened.
void start_timeline(const std::string& path, bool mark_cycles = false);
// Finishes the timeline file (valid JSON from then on) and stops recording;
// a no-op when none is being written. herd::shutdown stops it too.
void stop_timeline();

// True once the operation has completed, successfully or not. Never blocks.
bool poll(const Handle& handle);

// Blocks until the operation completes; throws herd::Error with the failure's
// message if it failed.
void wait(const Handle& handle);

}  // namespace herd
