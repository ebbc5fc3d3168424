// Occupancy probe behind h200_occupancy.csv: prints the device attributes and the runtime's
// cudaOccupancyMaxActiveBlocksPerMultiprocessor for a grid of (kernel registers, static shared,
// threads, dynamic shared). Build and run on the GPU: nvcc -arch=sm_90 -O2 -o occ h200_occupancy_probe.cu && ./occ
#include <cstdio>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

template <int R>
__global__ void __maxnreg__(R) regs_kernel(float* out, const float* in, int n) {
  constexpr int K = 250;
  float v[K];
#pragma unroll
  for (int i = 0; i < K; ++i) v[i] = in[(threadIdx.x * K + i) % n];
#pragma unroll
  for (int it = 0; it < 3; ++it)
#pragma unroll
    for (int i = 0; i < K; ++i) v[i] = fmaf(v[i], v[(i + 1) % K], v[(i + 7) % K]);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < K; ++i) s = fmaf(v[i], (float)(i + 1), s);
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int S>
__global__ void static_kernel(float* out, const float* in, int n) {
  __shared__ float buf[S / 4];
  for (int i = threadIdx.x; i < S / 4; i += blockDim.x) buf[i] = in[i % n];
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = buf[(threadIdx.x * 7) % (S / 4)];
}

__global__ void tiny_kernel(float* out) { out[threadIdx.x] = 1.f; }

struct K { const void* f; const char* name; };

int main() {
  int dev = 0;
  CK(cudaSetDevice(dev));
  const struct { cudaDeviceAttr a; const char* n; } attrs[] = {
    {cudaDevAttrComputeCapabilityMajor, "cc_major"}, {cudaDevAttrComputeCapabilityMinor, "cc_minor"},
    {cudaDevAttrMultiProcessorCount, "sm_count"}, {cudaDevAttrMaxThreadsPerMultiProcessor, "max_threads_per_sm"},
    {cudaDevAttrMaxBlocksPerMultiprocessor, "max_blocks_per_sm"}, {cudaDevAttrMaxRegistersPerMultiprocessor, "registers_per_sm"},
    {cudaDevAttrMaxRegistersPerBlock, "registers_per_block"}, {cudaDevAttrMaxSharedMemoryPerMultiprocessor, "shared_bytes_per_sm"},
    {cudaDevAttrMaxSharedMemoryPerBlockOptin, "shared_bytes_per_block_optin"}, {cudaDevAttrMaxSharedMemoryPerBlock, "shared_bytes_per_block"},
    {cudaDevAttrReservedSharedMemoryPerBlock, "reserved_shared_bytes_per_block"}, {cudaDevAttrL2CacheSize, "l2_bytes"},
    {cudaDevAttrCooperativeLaunch, "cooperative_launch"}, {cudaDevAttrMaxThreadsPerBlock, "max_threads_per_block"},
  };
  for (auto& a : attrs) { int v = 0; CK(cudaDeviceGetAttribute(&v, a.a, dev)); printf("attr %s %d\n", a.n, v); }
  int optin = 0; CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));

  K ks[] = {
    {(const void*)tiny_kernel, "tiny"},
    {(const void*)regs_kernel<16>, "r16"}, {(const void*)regs_kernel<24>, "r24"}, {(const void*)regs_kernel<32>, "r32"},
    {(const void*)regs_kernel<40>, "r40"}, {(const void*)regs_kernel<48>, "r48"}, {(const void*)regs_kernel<56>, "r56"},
    {(const void*)regs_kernel<64>, "r64"}, {(const void*)regs_kernel<72>, "r72"}, {(const void*)regs_kernel<80>, "r80"},
    {(const void*)regs_kernel<88>, "r88"}, {(const void*)regs_kernel<96>, "r96"}, {(const void*)regs_kernel<104>, "r104"},
    {(const void*)regs_kernel<128>, "r128"}, {(const void*)regs_kernel<136>, "r136"}, {(const void*)regs_kernel<168>, "r168"},
    {(const void*)regs_kernel<200>, "r200"}, {(const void*)regs_kernel<232>, "r232"}, {(const void*)regs_kernel<255>, "r255"},
    {(const void*)static_kernel<4096>, "s4096"}, {(const void*)static_kernel<12000>, "s12000"}, {(const void*)static_kernel<49152>, "s49152"},
  };
  const int threads[] = {1, 32, 33, 64, 96, 128, 160, 192, 224, 256, 288, 320, 384, 416, 512, 640, 768, 1024};
  const int dyn[] = {0, 1, 127, 128, 129, 1000, 1024, 4096, 6000, 10000, 12288, 16384, 32768, 49152, 65536, 76000,
                     100000, 101376, 102400, 116736, 131072, 134144, 166912, 167936, 200000, 232448, 232449};
  printf("csv kernel,threads,registers_per_thread,static_shared_bytes,dynamic_shared_bytes,blocks_per_sm\n");
  for (auto& k : ks) {
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, k.f));
    int maxdyn = optin - (int)fa.sharedSizeBytes;
    CK(cudaFuncSetAttribute(k.f, cudaFuncAttributeMaxDynamicSharedMemorySize, maxdyn));
    printf("func %s regs %d static %zu local %zu max_threads %d\n", k.name, fa.numRegs, fa.sharedSizeBytes, fa.localSizeBytes, fa.maxThreadsPerBlock);
    for (int t : threads) for (int d : dyn) {
      int blocks = -1;
      cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.f, t, (size_t)d);
      if (e != cudaSuccess) { cudaGetLastError(); blocks = -1; }
      printf("csv %s,%d,%d,%zu,%d,%d\n", k.name, t, fa.numRegs, fa.sharedSizeBytes, d, blocks);
    }
  }
  return 0;
}
