/* lu — blocked right-looking LU factorization (no pivoting) of a dense matrix.
 *
 * Memory behaviour
 *   An n x n matrix of doubles, row-major (n: small 512, medium 4096, large 12288): 2 MiB,
 *   128 MiB, 1.1 GiB, made diagonally dominant so that no pivoting is needed. Allocations:
 *     matrix  n^2 x 8 B (malloc): large; every block step reads and writes the whole
 *             trailing submatrix once, so it is warm, and its hot part shrinks towards the
 *             bottom-right corner as the factorization proceeds (a slowly moving hot set);
 *     pack    64 x 256 x 8 B = 128 KiB (malloc): the current block row's 256-column slice,
 *             copied contiguously (as BLAS packs) and read once per trailing row: tiny and
 *             very hot, always in cache.
 *   One block step (64 columns) factors the 64 x 64 diagonal block, computes the block row
 *   of U and the block column of L (each read and written once), then updates the trailing
 *   matrix, 256-column slice after slice, row after row: A22 -= L21 . U12. In the matrix,
 *   each element of the trailing matrix is read once and written once per step (1:1), with
 *   128 floating-point operations between; the pack buffer takes most of the loads.
 *   A full factorization is 2/3 n^3 flops, which only the small size does by default (8 block
 *   steps); medium does the first 4 of its 64 steps and large the first 2 of 192, each of
 *   which still sweeps the whole matrix (--steps N sets the number; the first step touches
 *   every element). A final pass reads the matrix for the checksum.
 *
 * Output: see wl.h; line 1 adds n=, block=64, steps= (of block_columns=).
 */
#include "wl.h"

#define NB 64     /* block size: rows and columns of the diagonal block */
#define SLICE 256 /* columns of the trailing matrix per pack */

static double *make_matrix(uint64_t n, uint64_t key) {
    double *a = malloc(n * n * sizeof *a);
    WL_NEED(a, n * n * sizeof *a, "the matrix");
    for (uint64_t i = 0; i < n; i++) {
        for (uint64_t j = 0; j < n; j++) a[i * n + j] = wl_unit(wl_rand(key, i * n + j)) - 0.5;
        a[i * n + i] += (double)n;
    }
    return a;
}

static double *alloc_pack(void) {
    double *p = malloc(NB * SLICE * sizeof *p);
    WL_NEED(p, NB * SLICE * sizeof *p, "the pack buffer");
    return p;
}

static void step(double *restrict a, uint64_t n, uint64_t k0, double *restrict pack) {
    const uint64_t k1 = k0 + NB < n ? k0 + NB : n;
#define A(i, j) a[(i) * n + (j)]
    /* diagonal block: unblocked LU */
    for (uint64_t j = k0; j < k1; j++)
        for (uint64_t i = j + 1; i < k1; i++) {
            double l = A(i, j) /= A(j, j);
            for (uint64_t jj = j + 1; jj < k1; jj++) A(i, jj) -= l * A(j, jj);
        }
    /* block column of L: L21 = A21 . U11^-1, one row at a time */
    for (uint64_t i = k1; i < n; i++)
        for (uint64_t j = k0; j < k1; j++) {
            double s = A(i, j);
            for (uint64_t p = k0; p < j; p++) s -= A(i, p) * A(p, j);
            A(i, j) = s / A(j, j);
        }
    /* block row of U: U12 = L11^-1 . A12 (L11 has a unit diagonal) */
    for (uint64_t i = k0 + 1; i < k1; i++)
        for (uint64_t p = k0; p < i; p++) {
            double l = A(i, p);
            for (uint64_t j = k1; j < n; j++) A(i, j) -= l * A(p, j);
        }
    /* trailing matrix: A22 -= L21 . U12, one packed slice of U12 at a time */
    for (uint64_t j0 = k1; j0 < n; j0 += SLICE) {
        const uint64_t w = n - j0 < SLICE ? n - j0 : SLICE;
        for (uint64_t p = k0; p < k1; p++) memcpy(&pack[(p - k0) * SLICE], &A(p, j0), w * sizeof *pack);
        for (uint64_t i = k1; i < n; i++) {
            double *restrict row = &A(i, j0);
            for (uint64_t p = k0; p < k1; p++) {
                const double l = A(i, p);
                const double *restrict u = &pack[(p - k0) * SLICE];
                for (uint64_t j = 0; j < w; j++) row[j] -= l * u[j];
            }
        }
    }
#undef A
}

int main(int argc, char **argv) {
    struct wl_common c;
    uint64_t steps_opt = UINT64_MAX;
    const struct wl_opt opts[] = {
        {"--steps", WL_U64, &steps_opt, 0, 1e6, "block steps to run (default: all for small, 4 medium, 2 large)"},
    };
    wl_parse(&c, "lu", "Blocked LU factorization (no pivoting) of a dense diagonally dominant matrix.", argc, argv,
             opts, 1);

    static const uint64_t sides[] = {512, 4096, 12288};
    static const uint64_t default_steps[] = {512 / NB, 4, 2};
    uint64_t n = sides[c.size], blocks = (n + NB - 1) / NB;
    if (steps_opt != UINT64_MAX && steps_opt > blocks)
        wl_usage_error("--steps: %llu is more than the %llu block columns of size %s", (unsigned long long)steps_opt,
                       (unsigned long long)blocks, wl_size_names[c.size]);
    uint64_t steps = wl_scaled(&c, steps_opt != UINT64_MAX ? steps_opt : default_steps[c.size]);
    if (steps > blocks) steps = blocks;
    wl_head(&c);
    printf(" n=%llu block=%d steps=%llu block_columns=%llu", (unsigned long long)n, NB, (unsigned long long)steps,
           (unsigned long long)blocks);
    wl_head_end(&c, n * n * sizeof(double) + NB * SLICE * sizeof(double));

    double *a = make_matrix(n, wl_stream(c.seed, 1));
    double *pack = alloc_pack();
    for (uint64_t s = 0; s < steps; s++) step(a, n, s * NB, pack);

    uint64_t h = 0;
    for (uint64_t i = 0; i < n * n; i++) h = wl_fold_f64(h, a[i]);
    wl_checksum(h);
    free(pack);
    free(a);
    return 0;
}
