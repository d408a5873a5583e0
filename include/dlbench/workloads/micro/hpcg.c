/*
 * dlbench-hpcg: the HPCG reference algorithm, single process, reference kernels only.
 *
 * No packaged HPCG exists in the registries this project installs from, so this is our
 * implementation of the published algorithm (Dongarra, Heroux, Luszczek, "HPCG Benchmark: a New
 * Metric for Ranking High Performance Computing Systems", and the reference code 3.x):
 *   - 27-point stencil on an n x n x n grid: diagonal 26, off-diagonals -1; b = A * ones;
 *   - preconditioned CG, 50 iterations per set, no convergence stop (tolerance 0);
 *   - preconditioner: 4-level multigrid V-cycle, one symmetric Gauss-Seidel pre- and post-smoothing
 *     sweep per level, restriction by injection at even grid points, SymGS on the coarsest grid;
 *   - FLOPs counted exactly as the reference's ReportResults: ddot 2*nrow each (3 per iteration),
 *     waxpby 2*nrow each (3 per iteration), SpMV 2*nnz (1 per iteration), MG 4*nnz per SymGS
 *     sweep + 2*nnz per fine residual, plus the preamble ops of each set.
 * It runs CG sets until the time budget is used and prints one line of key=value pairs.
 * Not counted as an official HPCG result (no optimized kernels, no MPI, no validation phase).
 *
 * Usage: dlbench-hpcg N SECONDS      (N divisible by 8)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NNZ_ROW 27
#define LEVELS 4
#define CG_ITERS 50

typedef struct Level {
  int n;                 /* grid points per dimension */
  long nrow;             /* n^3 */
  long nnz;              /* stored nonzeros */
  int *ncols;            /* nonzeros per row */
  long *cols;            /* nrow * NNZ_ROW */
  double *vals;          /* nrow * NNZ_ROW */
  double *diag;          /* nrow */
  long *f2c;             /* for each coarse row, its fine row (on the finer level's struct) */
  double *axf, *rc, *xc; /* work vectors of the V-cycle */
  struct Level *coarse;
} Level;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *xalloc(size_t bytes) {
  void *p = malloc(bytes);
  if (!p) { fprintf(stderr, "dlbench-hpcg: out of memory (%zu bytes)\n", bytes); exit(2); }
  return p;
}

static Level *build(int n) {
  Level *A = xalloc(sizeof(Level));
  memset(A, 0, sizeof(Level));
  A->n = n;
  A->nrow = (long)n * n * n;
  A->ncols = xalloc(sizeof(int) * A->nrow);
  A->cols = xalloc(sizeof(long) * A->nrow * NNZ_ROW);
  A->vals = xalloc(sizeof(double) * A->nrow * NNZ_ROW);
  A->diag = xalloc(sizeof(double) * A->nrow);
  for (int iz = 0; iz < n; iz++)
    for (int iy = 0; iy < n; iy++)
      for (int ix = 0; ix < n; ix++) {
        long row = ((long)iz * n + iy) * n + ix;
        int k = 0;
        for (int dz = -1; dz <= 1; dz++)
          for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
              int x = ix + dx, y = iy + dy, z = iz + dz;
              if (x < 0 || y < 0 || z < 0 || x >= n || y >= n || z >= n) continue;
              long col = ((long)z * n + y) * n + x;
              A->cols[row * NNZ_ROW + k] = col;
              A->vals[row * NNZ_ROW + k] = (col == row) ? 26.0 : -1.0;
              if (col == row) A->diag[row] = 26.0;
              k++;
            }
        A->ncols[row] = k;
        A->nnz += k;
      }
  return A;
}

static Level *hierarchy(int n, int levels) {
  Level *top = build(n), *A = top;
  for (int l = 1; l < levels; l++) {
    int nc = A->n / 2;
    A->coarse = build(nc);
    A->f2c = xalloc(sizeof(long) * A->coarse->nrow);
    for (int iz = 0; iz < nc; iz++)
      for (int iy = 0; iy < nc; iy++)
        for (int ix = 0; ix < nc; ix++)
          A->f2c[((long)iz * nc + iy) * nc + ix] = ((long)(2 * iz) * A->n + 2 * iy) * A->n + 2 * ix;
    A->axf = xalloc(sizeof(double) * A->nrow);
    A->rc = xalloc(sizeof(double) * A->coarse->nrow);
    A->xc = xalloc(sizeof(double) * A->coarse->nrow);
    A = A->coarse;
  }
  return top;
}

static void spmv(const Level *A, const double *x, double *y) {
  for (long i = 0; i < A->nrow; i++) {
    double sum = 0.0;
    const long *c = A->cols + i * NNZ_ROW;
    const double *v = A->vals + i * NNZ_ROW;
    for (int k = 0; k < A->ncols[i]; k++) sum += v[k] * x[c[k]];
    y[i] = sum;
  }
}

/* One Gauss-Seidel row update: x[i] = (r[i] - sum_{j != i} a_ij x[j]) / a_ii. */
static inline void relax_row(const Level *A, long i, const double *r, double *x) {
  const long *c = A->cols + i * NNZ_ROW;
  const double *v = A->vals + i * NNZ_ROW;
  double sum = r[i];
  for (int k = 0; k < A->ncols[i]; k++) sum -= v[k] * x[c[k]];
  sum += x[i] * A->diag[i];
  x[i] = sum / A->diag[i];
}

/* Symmetric Gauss-Seidel: a forward then a backward sweep (the reference ComputeSYMGS_ref). */
static void symgs(const Level *A, const double *r, double *x) {
  for (long i = 0; i < A->nrow; i++) relax_row(A, i, r, x);
  for (long i = A->nrow - 1; i >= 0; i--) relax_row(A, i, r, x);
}

static void mg(Level *A, const double *r, double *x) {
  memset(x, 0, sizeof(double) * A->nrow);
  if (A->coarse) {
    symgs(A, r, x);
    spmv(A, x, A->axf);
    for (long i = 0; i < A->coarse->nrow; i++) A->rc[i] = r[A->f2c[i]] - A->axf[A->f2c[i]];
    mg(A->coarse, A->rc, A->xc);
    for (long i = 0; i < A->coarse->nrow; i++) x[A->f2c[i]] += A->xc[i];
    symgs(A, r, x);
  } else {
    symgs(A, r, x);
  }
}

static double dot(long n, const double *a, const double *b) {
  double s = 0.0;
  for (long i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

static void waxpby(long n, double alpha, const double *x, double beta, const double *y, double *w) {
  for (long i = 0; i < n; i++) w[i] = alpha * x[i] + beta * y[i];
}

/* One CG set of CG_ITERS iterations from x = 0; returns the final relative residual. */
static double cg(Level *A, const double *b, double *x, double *r, double *z, double *p, double *Ap) {
  long n = A->nrow;
  memset(x, 0, sizeof(double) * n);
  memcpy(p, x, sizeof(double) * n);
  spmv(A, p, Ap);
  waxpby(n, 1.0, b, -1.0, Ap, r);
  double normr0 = sqrt(dot(n, r, r)), normr = normr0, rtz = 0.0;
  for (int k = 1; k <= CG_ITERS; k++) {
    mg(A, r, z);
    if (k == 1) {
      memcpy(p, z, sizeof(double) * n);
      rtz = dot(n, r, z);
    } else {
      double old = rtz;
      rtz = dot(n, r, z);
      waxpby(n, 1.0, z, rtz / old, p, p);
    }
    spmv(A, p, Ap);
    double alpha = rtz / dot(n, p, Ap);
    waxpby(n, 1.0, x, alpha, p, x);
    waxpby(n, 1.0, r, -alpha, Ap, r);
    normr = sqrt(dot(n, r, r));
  }
  return normr / normr0;
}

/* The reference's operation count for `sets` CG sets (ReportResults.cpp). */
static double flops(const Level *A, double sets) {
  double iters = sets * CG_ITERS, nrow = A->nrow, nnz = A->nnz;
  double f = (3.0 * iters + sets) * 2.0 * nrow      /* ddot */
           + (3.0 * iters + sets) * 2.0 * nrow      /* waxpby */
           + (iters + sets) * 2.0 * nnz;            /* spmv */
  const Level *L = A;
  for (int l = 1; l < LEVELS; l++) {
    f += iters * 4.0 * L->nnz;  /* presmoother */
    f += iters * 2.0 * L->nnz;  /* fine-grid residual */
    f += iters * 4.0 * L->nnz;  /* postsmoother */
    L = L->coarse;
  }
  f += iters * 4.0 * L->nnz;    /* coarsest SymGS */
  return f;
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: dlbench-hpcg N SECONDS\n"); return 2; }
  int n = atoi(argv[1]);
  double budget = atof(argv[2]);
  if (n < 16 || n % 8 != 0 || budget <= 0) {
    fprintf(stderr, "dlbench-hpcg: N must be >= 16 and divisible by 8, SECONDS > 0\n");
    return 2;
  }
  double t0 = now();
  Level *A = hierarchy(n, LEVELS);
  long nrow = A->nrow;
  double *b = xalloc(sizeof(double) * nrow), *ones = xalloc(sizeof(double) * nrow);
  double *x = xalloc(sizeof(double) * nrow), *r = xalloc(sizeof(double) * nrow);
  double *z = xalloc(sizeof(double) * nrow), *p = xalloc(sizeof(double) * nrow), *Ap = xalloc(sizeof(double) * nrow);
  for (long i = 0; i < nrow; i++) ones[i] = 1.0;
  spmv(A, ones, b); /* exact solution is all ones */
  double setup = now() - t0;
  int sets = 0;
  double residual = 0.0, start = now(), elapsed = 0.0;
  do {
    residual = cg(A, b, x, r, z, p, Ap);
    sets++;
    elapsed = now() - start;
  } while (elapsed < budget);
  double err = 0.0;
  for (long i = 0; i < nrow; i++) err = fmax(err, fabs(x[i] - 1.0));
  printf("hpcg n=%d rows=%ld nnz=%ld sets=%d iterations=%d seconds=%.6f setup_seconds=%.6f gflops=%.6f "
         "relative_residual=%.3e max_error=%.3e\n",
         n, nrow, A->nnz, sets, sets * CG_ITERS, elapsed, setup, flops(A, sets) / elapsed / 1e9, residual, err);
  return 0;
}
