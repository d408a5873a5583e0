// dlbench-gpu: the GPU micro-benchmarks of study 001 (Xu, Shi, Chu 2017), after the CUDA samples.
//
//   dlbench-gpu bandwidth MB ITER        host->device, device->host, device->device (pinned), GB/s
//   dlbench-gpu conv N ITER              separable 17-tap convolution of an N x N image, Mpixels/s
//   dlbench-gpu gemm M N K ITER          cuBLAS SGEMM C(MxN) = A(MxK) B(KxN), TFLOPS
//                                        (built with -DDLBENCH_NO_CUBLAS where cuBLAS is absent: a
//                                        tiled kernel, labelled implementation=tiled, not comparable)
//   dlbench-gpu histogram VALUES ITER    64- and 256-bin histograms of bytes in [0,255], GB/s
//   dlbench-gpu transpose N ITER         the 8 transpose variants of the CUDA sample, GB/s
//
// Each result is one line "metric=... value=... unit=... key=value...". Sizes that do not fit the
// device's free memory are scaled down by the caller (dlbench.workloads.gpu.runner).
#ifndef DLBENCH_NO_CUBLAS
#include <cublas_v2.h>
#endif
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      fprintf(stderr, "dlbench-gpu: %s failed: %s\n", #call, cudaGetErrorString(err_));    \
      exit(3);                                                                             \
    }                                                                                      \
  } while (0)

static float elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// ---------------------------------------------------------------- bandwidth
static void bandwidth(size_t mb, int iters) {
  size_t bytes = mb << 20;
  void *host, *dev_a, *dev_b;
  CHECK(cudaMallocHost(&host, bytes));
  CHECK(cudaMalloc(&dev_a, bytes));
  CHECK(cudaMalloc(&dev_b, bytes));
  memset(host, 1, bytes);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  struct { const char *name; cudaMemcpyKind kind; void *dst; void *src; double factor; } cases[] = {
      {"host_to_device", cudaMemcpyHostToDevice, dev_a, host, 1.0},
      {"device_to_host", cudaMemcpyDeviceToHost, host, dev_a, 1.0},
      {"device_to_device", cudaMemcpyDeviceToDevice, dev_b, dev_a, 2.0},  // read + write, as the sample
  };
  for (auto &c : cases) {
    CHECK(cudaMemcpy(c.dst, c.src, bytes, c.kind));
    CHECK(cudaEventRecord(start));
    for (int i = 0; i < iters; i++) CHECK(cudaMemcpyAsync(c.dst, c.src, bytes, c.kind));
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    double gbs = c.factor * bytes * iters / (elapsed_ms(start, stop) / 1e3) / 1e9;
    printf("metric=bandwidth value=%.4f unit=GB/s direction=%s bytes=%zu memory=pinned\n", gbs, c.name, bytes);
  }
  cudaFreeHost(host);
  cudaFree(dev_a);
  cudaFree(dev_b);
}

// ---------------------------------------------------------------- separable convolution
#define RADIUS 8
__constant__ float kernel_c[2 * RADIUS + 1];

__global__ void conv_rows(float *dst, const float *src, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float sum = 0;
  for (int k = -RADIUS; k <= RADIUS; k++) {
    int xx = min(max(x + k, 0), w - 1);
    sum += src[(size_t)y * w + xx] * kernel_c[RADIUS - k];
  }
  dst[(size_t)y * w + x] = sum;
}

__global__ void conv_cols(float *dst, const float *src, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float sum = 0;
  for (int k = -RADIUS; k <= RADIUS; k++) {
    int yy = min(max(y + k, 0), h - 1);
    sum += src[(size_t)yy * w + x] * kernel_c[RADIUS - k];
  }
  dst[(size_t)y * w + x] = sum;
}

static void convolution(int n, int iters) {
  size_t bytes = (size_t)n * n * sizeof(float);
  float *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemset(a, 0, bytes));
  float k[2 * RADIUS + 1];
  for (int i = 0; i < 2 * RADIUS + 1; i++) k[i] = 1.0f / (2 * RADIUS + 1);
  CHECK(cudaMemcpyToSymbol(kernel_c, k, sizeof(k)));
  dim3 block(16, 16), grid((n + 15) / 16, (n + 15) / 16);
  conv_rows<<<grid, block>>>(b, a, n, n);
  conv_cols<<<grid, block>>>(a, b, n, n);
  CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; i++) {
    conv_rows<<<grid, block>>>(b, a, n, n);
    conv_cols<<<grid, block>>>(a, b, n, n);
  }
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  double mpix = (double)n * n * iters / (elapsed_ms(start, stop) / 1e3) / 1e6;
  printf("metric=convolution value=%.4f unit=Mpixels/s size=%d taps=%d\n", mpix, n, 2 * RADIUS + 1);
  cudaFree(a);
  cudaFree(b);
}

// ---------------------------------------------------------------- GEMM (cuBLAS)
#ifdef DLBENCH_NO_CUBLAS
__global__ void sgemm_tiled(int m, int n, int k, const float *a, const float *b, float *c) {
  __shared__ float as[16][16], bs[16][16];
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  float sum = 0;
  for (int t = 0; t < k; t += 16) {  // column-major, as cuBLAS
    as[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[(size_t)(t + threadIdx.x) * m + row] : 0;
    bs[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < k) ? b[(size_t)col * k + t + threadIdx.y] : 0;
    __syncthreads();
    for (int q = 0; q < 16; q++) sum += as[threadIdx.y][q] * bs[q][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[(size_t)col * m + row] = sum;
}
static const char *GEMM_IMPL = "tiled";
#define RUN_GEMM() sgemm_tiled<<<dim3((n + 15) / 16, (m + 15) / 16), dim3(16, 16)>>>(m, n, k, a, b, c)
#else
static const char *GEMM_IMPL = "cublas";
#define RUN_GEMM() cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, m, b, k, &beta, c, m)
#endif

static void gemm(int m, int n, int k, int iters) {
  float *a, *b, *c;
  CHECK(cudaMalloc(&a, (size_t)m * k * sizeof(float)));
  CHECK(cudaMalloc(&b, (size_t)k * n * sizeof(float)));
  CHECK(cudaMalloc(&c, (size_t)m * n * sizeof(float)));
  CHECK(cudaMemset(a, 0, (size_t)m * k * sizeof(float)));
  CHECK(cudaMemset(b, 0, (size_t)k * n * sizeof(float)));
#ifndef DLBENCH_NO_CUBLAS
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "dlbench-gpu: cublasCreate failed\n"); exit(3); }
  const float alpha = 1.0f, beta = 0.0f;
#endif
  RUN_GEMM();
  CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; i++) RUN_GEMM();
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  double tflops = 2.0 * m * n * k * iters / (elapsed_ms(start, stop) / 1e3) / 1e12;
  printf("metric=gemm value=%.4f unit=TFLOPS m=%d n=%d k=%d precision=fp32 implementation=%s\n", tflops, m, n, k,
         GEMM_IMPL);
#ifndef DLBENCH_NO_CUBLAS
  cublasDestroy(handle);
#endif
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

// ---------------------------------------------------------------- histogram
template <int BINS>
__global__ void histogram_shared(unsigned int *out, const unsigned char *data, size_t n) {
  __shared__ unsigned int local[BINS];
  for (int i = threadIdx.x; i < BINS; i += blockDim.x) local[i] = 0;
  __syncthreads();
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    atomicAdd(&local[data[i] * BINS / 256], 1u);
  __syncthreads();
  for (int i = threadIdx.x; i < BINS; i += blockDim.x) atomicAdd(&out[i], local[i]);
}

template <int BINS>
static void histogram_run(const unsigned char *data, size_t n, int iters, unsigned int *bins) {
  CHECK(cudaMemset(bins, 0, BINS * sizeof(unsigned int)));
  histogram_shared<BINS><<<240, 256>>>(bins, data, n);
  CHECK(cudaDeviceSynchronize());
  std::vector<unsigned int> host(BINS);
  CHECK(cudaMemcpy(host.data(), bins, BINS * sizeof(unsigned int), cudaMemcpyDeviceToHost));
  unsigned long long total = 0;
  for (auto v : host) total += v;
  if (total != n) { fprintf(stderr, "dlbench-gpu: histogram%d counted %llu of %zu values\n", BINS, total, n); exit(4); }
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; i++) histogram_shared<BINS><<<240, 256>>>(bins, data, n);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  double gbs = (double)n * iters / (elapsed_ms(start, stop) / 1e3) / 1e9;
  printf("metric=histogram value=%.4f unit=GB/s bins=%d values=%zu\n", gbs, BINS, n);
}

static void histogram(size_t n, int iters) {
  std::vector<unsigned char> host(n);
  unsigned int seed = 12345;
  for (size_t i = 0; i < n; i++) { seed = seed * 1103515245u + 12345u; host[i] = (seed >> 16) & 255; }
  unsigned char *data;
  unsigned int *bins;
  CHECK(cudaMalloc(&data, n));
  CHECK(cudaMalloc(&bins, 256 * sizeof(unsigned int)));
  CHECK(cudaMemcpy(data, host.data(), n, cudaMemcpyHostToDevice));
  histogram_run<64>(data, n, iters, bins);
  histogram_run<256>(data, n, iters, bins);
  cudaFree(data);
  cudaFree(bins);
}

// ---------------------------------------------------------------- transpose (CUDA sample variants)
#define TILE 32
#define ROWS 8

__global__ void copy_simple(float *o, const float *i, int w, int h) {
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) o[(y + j) * w + x] = i[(y + j) * w + x];
}
__global__ void copy_shared(float *o, const float *i, int w, int h) {
  __shared__ float tile[TILE][TILE];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = i[(y + j) * w + x];
  __syncthreads();
  for (int j = 0; j < TILE; j += ROWS) o[(y + j) * w + x] = tile[threadIdx.y + j][threadIdx.x];
}
__global__ void transpose_naive(float *o, const float *i, int w, int h) {
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) o[x * h + (y + j)] = i[(y + j) * w + x];
}
__global__ void transpose_coalesced(float *o, const float *i, int w, int h) {
  __shared__ float tile[TILE][TILE];  // bank conflicts on the column reads
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = i[(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) o[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}
__global__ void transpose_no_bank_conflicts(float *o, const float *i, int w, int h) {
  __shared__ float tile[TILE][TILE + 1];  // padding removes the bank conflicts
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = i[(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) o[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}
__global__ void transpose_coarse_grained(float *o, const float *i, int w, int h) {
  // "decomposed": moves whole tiles without transposing inside them (coarse-grained step)
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = i[(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) o[(y + j) * h + x] = tile[threadIdx.y + j][threadIdx.x];
}
__global__ void transpose_fine_grained(float *o, const float *i, int w, int h) {
  // "decomposed": transposes inside each tile, tiles stay in place (fine-grained step)
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = i[(y + j) * w + x];
  __syncthreads();
  for (int j = 0; j < TILE; j += ROWS) o[(y + j) * w + x] = tile[threadIdx.x][threadIdx.y + j];
}
__global__ void transpose_diagonal(float *o, const float *i, int w, int h) {
  // diagonal block reordering avoids partition camping
  __shared__ float tile[TILE][TILE + 1];
  int bx, by;
  if (w == h) {
    by = blockIdx.x;
    bx = (blockIdx.x + blockIdx.y) % gridDim.x;
  } else {
    int bid = blockIdx.x + gridDim.x * blockIdx.y;
    by = bid % gridDim.y;
    bx = ((bid / gridDim.y) + by) % gridDim.x;
  }
  int x = bx * TILE + threadIdx.x, y = by * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = i[(y + j) * w + x];
  __syncthreads();
  x = by * TILE + threadIdx.x;
  y = bx * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS) o[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}

static void transpose(int n, int iters) {
  n = (n / TILE) * TILE;
  size_t bytes = (size_t)n * n * sizeof(float);
  float *in, *out;
  CHECK(cudaMalloc(&in, bytes));
  CHECK(cudaMalloc(&out, bytes));
  std::vector<float> host((size_t)n * n);
  for (size_t k = 0; k < host.size(); k++) host[k] = (float)k;
  CHECK(cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice));
  dim3 grid(n / TILE, n / TILE), threads(TILE, ROWS);
  struct { const char *name; void (*kernel)(float *, const float *, int, int); bool transposes; } variants[] = {
      {"simple_copy", copy_simple, false},
      {"shared_memory_copy", copy_shared, false},
      {"naive", transpose_naive, true},
      {"coalesced", transpose_coalesced, true},
      {"no_bank_conflicts", transpose_no_bank_conflicts, true},
      {"coarse_grained", transpose_coarse_grained, false},
      {"fine_grained", transpose_fine_grained, false},
      {"diagonal", transpose_diagonal, true},
  };
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<float> result((size_t)n * n);
  for (auto &v : variants) {
    v.kernel<<<grid, threads>>>(out, in, n, n);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaGetLastError());
    if (v.transposes) {  // verify a full transpose against the host
      CHECK(cudaMemcpy(result.data(), out, bytes, cudaMemcpyDeviceToHost));
      for (int r = 0; r < n; r += 97)
        for (int c = 0; c < n; c += 89)
          if (result[(size_t)c * n + r] != host[(size_t)r * n + c]) {
            fprintf(stderr, "dlbench-gpu: transpose %s is wrong at (%d,%d)\n", v.name, r, c);
            exit(4);
          }
    }
    CHECK(cudaEventRecord(start));
    for (int k = 0; k < iters; k++) v.kernel<<<grid, threads>>>(out, in, n, n);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    double gbs = 2.0 * bytes * iters / (elapsed_ms(start, stop) / 1e3) / 1e9;
    printf("metric=transpose value=%.4f unit=GB/s variant=%s size=%d\n", gbs, v.name, n);
  }
  cudaFree(in);
  cudaFree(out);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: dlbench-gpu {devices|bandwidth|conv|gemm|histogram|transpose} ...\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("metric=devices value=0 unit=count\n");
    return 10;  // no GPU: the caller records "not available"
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "devices")) {
    for (int d = 0; d < devices; d++) {
      cudaDeviceProp p;
      CHECK(cudaGetDeviceProperties(&p, d));
      size_t free_b = 0, total_b = 0;
      CHECK(cudaSetDevice(d));
      CHECK(cudaMemGetInfo(&free_b, &total_b));
      printf("metric=device value=%d unit=index name=%s free_bytes=%zu total_bytes=%zu sm=%d.%d\n", d,
             p.name, free_b, total_b, p.major, p.minor);
    }
  } else if (!strcmp(cmd, "bandwidth") && argc == 4) {
    bandwidth(strtoul(argv[2], 0, 10), atoi(argv[3]));
  } else if (!strcmp(cmd, "conv") && argc == 4) {
    convolution(atoi(argv[2]), atoi(argv[3]));
  } else if (!strcmp(cmd, "gemm") && argc == 6) {
    gemm(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
  } else if (!strcmp(cmd, "histogram") && argc == 4) {
    histogram(strtoull(argv[2], 0, 10), atoi(argv[3]));
  } else if (!strcmp(cmd, "transpose") && argc == 4) {
    transpose(atoi(argv[2]), atoi(argv[3]));
  } else {
    fprintf(stderr, "dlbench-gpu: bad arguments\n");
    return 2;
  }
  return 0;
}
