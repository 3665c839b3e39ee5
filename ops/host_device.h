// HERD_HOST_DEVICE: marks an inline function that both the CPU code of ops/
// and the CUDA kernels of ops/cuda/ call, so the two share one definition of
// the bit-level rules (ops/half_bits.h) instead of two that could drift apart.
//
// Under nvcc it is `__host__ __device__`; for the plain C++ compiler it is
// empty, and a header using it compiles exactly as if it were not there.
#pragma once

#if defined(__CUDACC__)
#define HERD_HOST_DEVICE __host__ __device__
#else
#define HERD_HOST_DEVICE
#endif
