/* kmeans — Lloyd's k-means iterations over points in 8 dimensions, 16 clusters.
 *
 * Memory behaviour
 *   N points of 8 floats (N: small 2^16, medium 2^22, large 2^25) drawn around 16 seeded
 *   centres. Allocations:
 *     points      32 B x N, written once, then read in order every iteration: large, warm,
 *                 read-only, streamed;
 *     membership   4 B x N, the cluster of each point, read in order every iteration and
 *                 written where the cluster changed (every point in the first iteration,
 *                 few later): medium, streamed, mostly read;
 *     centroids, sums, counts   about 2 KiB in all: tiny and extremely hot (read 16 x 8 times
 *                 per point), in cache all the time.
 *   Footprint 36 B per point: small 2.3 MiB, medium 144 MiB, large 1.1 GiB.
 *   Iterations: small 10, medium 5, large 3 (a fixed number, so the work is known). At the
 *   memory level every iteration is one sequential read of the points and of the membership
 *   (plus writes where memberships change), which makes this the most regular (and the
 *   most compute-heavy per byte) workload of the suite. Nearly all accesses are reads:
 *   after the first iteration the only stores to memory are membership changes.
 *
 * Output: see wl.h; line 1 adds points=, dims=, clusters=, iterations=; then one line per
 * iteration, "iteration=I moved=M" (points that changed cluster).
 */
#include "wl.h"

#define DIMS 8
#define K 16

static float *make_points(uint64_t n, uint64_t key) {
    float *p = malloc(n * DIMS * sizeof *p);
    WL_NEED(p, n * DIMS * sizeof *p, "the points");
    float centre[K][DIMS];
    for (int k = 0; k < K; k++)
        for (int d = 0; d < DIMS; d++) centre[k][d] = (float)(100.0 * wl_unit(wl_rand(key, (uint64_t)(k * DIMS + d))));
    struct wl_rng r = {wl_mix64(key)};
    for (uint64_t i = 0; i < n; i++) {
        int k = (int)wl_below(wl_next(&r), K);
        for (int d = 0; d < DIMS; d++) {
            /* a sum of three uniforms: a bell-shaped cloud of width ~10 around the centre */
            double noise = wl_unit(wl_next(&r)) + wl_unit(wl_next(&r)) + wl_unit(wl_next(&r)) - 1.5;
            p[i * DIMS + d] = centre[k][d] + (float)(7.0 * noise);
        }
    }
    return p;
}

static int32_t *make_membership(uint64_t n) {
    int32_t *m = malloc(n * sizeof *m);
    WL_NEED(m, n * sizeof *m, "the membership");
    for (uint64_t i = 0; i < n; i++) m[i] = -1;
    return m;
}

static uint64_t assign(uint64_t n, const float *p, int32_t *member, const double (*cent)[DIMS], double (*sum)[DIMS],
                       uint64_t *count) {
    uint64_t moved = 0;
    for (uint64_t i = 0; i < n; i++) {
        const float *x = p + i * DIMS;
        int best = 0;
        double best_d = INFINITY;
        for (int k = 0; k < K; k++) {
            double d2 = 0;
            for (int d = 0; d < DIMS; d++) {
                double t = x[d] - cent[k][d];
                d2 += t * t;
            }
            if (d2 < best_d) {
                best_d = d2;
                best = k;
            }
        }
        if (member[i] != best) {
            member[i] = best;
            moved++;
        }
        count[best]++;
        for (int d = 0; d < DIMS; d++) sum[best][d] += x[d];
    }
    return moved;
}

int main(int argc, char **argv) {
    struct wl_common c;
    wl_parse(&c, "kmeans", "Lloyd's k-means iterations over 8-dimensional points, 16 clusters.", argc, argv, NULL,
             0);

    static const unsigned log2_points[] = {16, 22, 25};
    static const uint64_t default_iterations[] = {10, 5, 3};
    uint64_t n = 1ULL << log2_points[c.size];
    uint64_t iterations = wl_scaled(&c, default_iterations[c.size]);
    wl_head(&c);
    printf(" points=%llu dims=%d clusters=%d iterations=%llu", (unsigned long long)n, DIMS, K,
           (unsigned long long)iterations);
    wl_head_end(&c, n * (DIMS * sizeof(float) + sizeof(int32_t)) + K * DIMS * 2 * sizeof(double) + K * 8);

    float *points = make_points(n, wl_stream(c.seed, 1));
    int32_t *member = make_membership(n);
    double(*cent)[DIMS] = malloc(K * sizeof *cent);
    WL_NEED(cent, K * sizeof *cent, "the centroids");
    double(*sum)[DIMS] = malloc(K * sizeof *sum);
    WL_NEED(sum, K * sizeof *sum, "the centroid sums");
    uint64_t *count = malloc(K * sizeof *count);
    WL_NEED(count, K * sizeof *count, "the cluster sizes");

    /* start from K points spread through the input */
    for (int k = 0; k < K; k++)
        for (int d = 0; d < DIMS; d++) cent[k][d] = points[(uint64_t)k * (n / K) * DIMS + d];

    for (uint64_t it = 0; it < iterations; it++) {
        memset(sum, 0, K * sizeof *sum);
        memset(count, 0, K * sizeof *count);
        uint64_t moved = assign(n, points, member, (const double(*)[DIMS])cent, sum, count);
        for (int k = 0; k < K; k++)
            if (count[k])
                for (int d = 0; d < DIMS; d++) cent[k][d] = sum[k][d] / (double)count[k];
        printf("iteration=%llu moved=%llu\n", (unsigned long long)it, (unsigned long long)moved);
    }

    uint64_t h = 0;
    for (int k = 0; k < K; k++)
        for (int d = 0; d < DIMS; d++) h = wl_fold_f64(h, cent[k][d]);
    for (uint64_t i = 0; i < n; i++) h = wl_fold(h, (uint64_t)member[i]);
    wl_checksum(h);
    free(count);
    free(sum);
    free(cent);
    free(member);
    free(points);
    return 0;
}
