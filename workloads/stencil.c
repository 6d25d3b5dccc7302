/* stencil — a 7-point Jacobi stencil streaming over two 3D grids (lbm-like).
 *
 * Memory behaviour
 *   Two grids of n^3 doubles (n: small 64, medium 208, large 512), one malloc each at its own
 *   site: 2 MiB + 2 MiB small, 2 x 68.7 MiB medium, 2 x 1 GiB large.
 *   Both are initialized (the first with random values, the second as its copy, so both carry
 *   the fixed boundary), then each iteration (small and medium 8, large 4) computes every
 *   interior cell of the destination from the cell and its 6 neighbours in the source and the
 *   grids swap roles. Every cell of both grids is touched every iteration in address order:
 *   pure streaming, no hot subset, each grid read in one iteration and written in the next.
 *   The program reads 7 source values per cell it writes (compiled, ~5 loads: the x-neighbours
 *   stay in registers), but the neighbours are in lines already cached, so what reaches
 *   memory is about one line read per line written (the classic 1:1 stencil traffic). A
 *   final pass reads the result for the checksum.
 *
 * Output: see wl.h; line 1 adds n=, grid_bytes=, iterations=.
 */
#include "wl.h"

static void sweep(uint64_t n, const double *restrict src, double *restrict dst) {
    const uint64_t plane = n * n;
    for (uint64_t z = 1; z + 1 < n; z++)
        for (uint64_t y = 1; y + 1 < n; y++) {
            const uint64_t row = z * plane + y * n;
            for (uint64_t x = 1; x + 1 < n; x++) {
                const uint64_t i = row + x;
                dst[i] = 0.4 * src[i] + 0.1 * (src[i - 1] + src[i + 1] + src[i - n] + src[i + n] + src[i - plane] +
                                               src[i + plane]);
            }
        }
}

int main(int argc, char **argv) {
    struct wl_common c;
    wl_parse(&c, "stencil", "A 7-point Jacobi stencil streaming over two 3D grids (lbm-like).", argc, argv, NULL,
             0);

    static const uint64_t sides[] = {64, 208, 512};
    static const uint64_t default_iterations[] = {8, 8, 4};
    uint64_t n = sides[c.size], cells = n * n * n, bytes = cells * sizeof(double);
    uint64_t iterations = wl_scaled(&c, default_iterations[c.size]);
    wl_head(&c);
    printf(" n=%llu grid_bytes=%llu iterations=%llu", (unsigned long long)n, (unsigned long long)bytes,
           (unsigned long long)iterations);
    wl_head_end(&c, 2 * bytes);

    double *src = malloc(bytes);
    WL_NEED(src, bytes, "the source grid");
    double *dst = malloc(bytes);
    WL_NEED(dst, bytes, "the destination grid");

    uint64_t key = wl_stream(c.seed, 1);
    for (uint64_t i = 0; i < cells; i++) src[i] = wl_unit(wl_rand(key, i));
    memcpy(dst, src, bytes);
    wl_region("grid0", src, bytes);
    wl_region("grid1", dst, bytes);
    /* streaming: both grids, every iteration */
    wl_hot("grid0 grid1");

    for (uint64_t it = 0; it < iterations; it++) {
        sweep(n, src, dst);
        double *t = src;
        src = dst;
        dst = t;
    }

    uint64_t h = 0;
    for (uint64_t i = 0; i < cells; i++) h = wl_fold_f64(h, src[i]);
    wl_checksum(h);
    free(dst);
    free(src);
    return 0;
}
