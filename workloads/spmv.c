/* spmv — repeated sparse matrix-vector products with a random sparse matrix (CG-like).
 *
 * Memory behaviour
 *   A random n x n matrix in CSR form with 16 nonzeros per row (n: small 2^14, medium 2^20,
 *   large 2^23), half of them within 256 columns of the diagonal and half anywhere. Allocations:
 *     row_start  4 B x (n+1)      values  8 B x 16n      columns  4 B x 16n
 *     x, y       8 B x n each (two sites: the product and the input vector)
 *   footprint ~ 212 B per row: small 3.3 MiB, medium 212 MiB, large 1.7 GiB.
 *   Each iteration (10 by default) computes x = A.y (values, columns and row_start streamed
 *   once, read-only, in order; y read at the column positions: half near the row, half at
 *   random, so y is the small, randomly read, hot array; x written once in order), then as
 *   in CG's vector updates reads x twice (its norm, then the scaling) and writes y = x/|x|.
 *   The matrix is ~95% of the footprint and is read once per iteration: large and warm;
 *   the vectors are ~5% and take all the random reads. About 25 loads per store.
 *
 * Output: see wl.h; line 1 adds rows=, nonzeros=, iterations=; then "norm=<last |x|>".
 */
#include "wl.h"

#define PER_ROW 16
#define BAND 256

struct csr {
    uint64_t n, nnz;
    uint32_t *row_start, *col;
    double *val;
};

static void build_matrix(struct csr *a, uint64_t n, uint64_t key) {
    a->n = n;
    a->nnz = n * PER_ROW;
    a->row_start = malloc((n + 1) * sizeof *a->row_start);
    WL_NEED(a->row_start, (n + 1) * sizeof *a->row_start, "the row starts");
    a->val = malloc(a->nnz * sizeof *a->val);
    WL_NEED(a->val, a->nnz * sizeof *a->val, "the matrix values");
    a->col = malloc(a->nnz * sizeof *a->col);
    WL_NEED(a->col, a->nnz * sizeof *a->col, "the column indices");
    for (uint64_t i = 0, k = 0; i < n; i++) {
        a->row_start[i] = (uint32_t)k;
        for (int j = 0; j < PER_ROW; j++, k++) {
            uint64_t r = wl_rand(key, k);
            uint64_t col;
            if (j < PER_ROW / 2) { /* near the diagonal, clamped to the matrix */
                int64_t c = (int64_t)i + (int64_t)wl_below(r, 2 * BAND + 1) - BAND;
                col = c < 0 ? 0 : c >= (int64_t)n ? n - 1 : (uint64_t)c;
            } else {
                col = wl_below(r, n);
            }
            a->col[k] = (uint32_t)col;
            a->val[k] = wl_unit(wl_mix64(r)) + (col == i ? 1.0 : 0.0);
        }
    }
    a->row_start[n] = (uint32_t)a->nnz;
}

static void multiply(const struct csr *a, const double *restrict y, double *restrict x) {
    for (uint64_t i = 0; i < a->n; i++) {
        double s = 0;
        for (uint32_t k = a->row_start[i]; k < a->row_start[i + 1]; k++) s += a->val[k] * y[a->col[k]];
        x[i] = s;
    }
}

int main(int argc, char **argv) {
    struct wl_common c;
    wl_parse(&c, "spmv", "Repeated sparse matrix-vector products x = A.y with a random CSR matrix (CG-like).",
             argc, argv, NULL, 0);

    static const unsigned log2_rows[] = {14, 20, 23};
    uint64_t n = 1ULL << log2_rows[c.size];
    uint64_t iterations = wl_scaled(&c, 10);
    uint64_t footprint = (n + 1) * 4 + n * PER_ROW * (8 + 4) + 2 * n * 8;
    wl_head(&c);
    printf(" rows=%llu nonzeros=%llu iterations=%llu", (unsigned long long)n, (unsigned long long)(n * PER_ROW),
           (unsigned long long)iterations);
    wl_head_end(&c, footprint);

    struct csr a;
    build_matrix(&a, n, wl_stream(c.seed, 1));
    double *x = malloc(n * sizeof *x);
    WL_NEED(x, n * sizeof *x, "the product vector");
    double *y = malloc(n * sizeof *y);
    WL_NEED(y, n * sizeof *y, "the input vector");
    for (uint64_t i = 0; i < n; i++) y[i] = 1.0;

    double norm = 0;
    for (uint64_t it = 0; it < iterations; it++) {
        multiply(&a, y, x);
        double s = 0;
        for (uint64_t i = 0; i < n; i++) s += x[i] * x[i];
        norm = sqrt(s);
        double inv = norm > 0 ? 1.0 / norm : 0.0;
        for (uint64_t i = 0; i < n; i++) y[i] = x[i] * inv;
    }
    printf("norm=%.17g\n", norm);

    uint64_t h = wl_fold_f64(0, norm);
    for (uint64_t i = 0; i < n; i++) h = wl_fold_f64(h, y[i]);
    wl_checksum(h);
    free(y);
    free(x);
    free(a.col);
    free(a.val);
    free(a.row_start);
    return 0;
}
