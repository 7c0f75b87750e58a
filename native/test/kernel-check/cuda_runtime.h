// Stands in for the CUDA runtime header when the kernels are compiled for
// the CPU: cuda_kernels.cuh only needs these two types for its launch
// declarations, and nothing here calls the runtime.
#pragma once
typedef struct CUstream_st* cudaStream_t;
typedef int cudaError_t;
