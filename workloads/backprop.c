/* backprop — a two-layer neural network trained by back-propagation with momentum
 * (Rodinia backprop-like): regular, sequential sweeps over two large weight matrices.
 *
 * Memory behaviour
 *   N input units plus a bias unit (N: small 2^15, medium 2^19, large 2^23), 16 hidden units,
 *   one output unit; R = N+1 rows. Allocations, each from its own helper or line:
 *     input       4 B x R (make_input_units): the training pattern, written once, read in
 *                 order twice per iteration: medium, warm, read-only;
 *     weights    64 B x R (make_input_weights): the input->hidden weights, one row of 16
 *                 floats (one cache line's worth) per input unit, written once with random
 *                 values, then read in order by the forward pass and read and written in
 *                 order by the weight adjustment: large, warm, 2 reads : 1 write;
 *     momentum   64 B x R (make_prev_weights): the previous weight change of every
 *                 input->hidden weight, zeroed once, then read and written in order by the
 *                 weight adjustment: large, warm, 1 read : 1 write;
 *     hidden units, hidden deltas, hidden->output weights and their previous changes (the
 *                 last by calloc): 264 B in all, tiny, hot, in cache all the time.
 *   Footprint 132 B per input unit: small 4.1 MiB, medium 66 MiB, large 1 GiB.
 *   Iterations: small 10, medium 4, large 3 (a fixed number, so the work is known). Each
 *   iteration trains on the same pattern: forward pass input->hidden (one sequential sweep of
 *   the input and the weights, 16 sums per row), hidden->output, the output and hidden
 *   errors, then the weight adjustment hidden->output and input->hidden (one sequential
 *   sweep of the input, the weights and the momentum, together). So at the memory level an
 *   iteration is two sequential sweeps with a stride of one 64-byte row per input unit: the
 *   weights are read, then read and written with the momentum alongside. Every page of the
 *   weights and of the momentum gets the same accesses in every iteration, at the same point
 *   of it: per-page access counts over time form a regular periodic pattern (diagonal stripes
 *   in a page/time plot, two per iteration for the weights, one for the momentum), with no hot
 *   subset; only the timing moves. A final pass reads the weights for the checksum.
 *   The input->hidden learning rate is 0.3 divided by the pattern's squared norm (normalized
 *   LMS), so that one step moves each hidden unit's net input by about 0.3 x its delta at
 *   every size; the hidden->output rate is 0.3, the momentum 0.3, the target 0.1.
 *
 * Output: see wl.h; line 1 adds inputs=, hidden=, outputs=, iterations=; then one line per
 * iteration, "iteration=I output=O error=E" (E = (target - O)^2 / 2 before the adjustment).
 */
#include "wl.h"

#define NOINLINE __attribute__((noinline))
#define HIDDEN 16 /* hidden units: a row of 16 float weights per input unit is 64 bytes */
#define ETA 0.3
#define MOMENTUM 0.3
#define TARGET 0.1

static float squash(double x) { return (float)(1.0 / (1.0 + exp(-x))); }

/* the training pattern; unit 0 is the bias unit, always 1 */
static float *make_input_units(uint64_t rows, uint64_t key) {
    float *x = malloc(rows * sizeof *x);
    WL_NEED(x, rows * sizeof *x, "the input units");
    x[0] = 1.0f;
    for (uint64_t k = 1; k < rows; k++) x[k] = (float)wl_unit(wl_rand(key, k));
    return x;
}

/* uniform in [-a, a] with a = 1/sqrt(rows), so that the hidden units' net input starts near 0
 * (about 0.3 standard deviation) at every size instead of saturating the sigmoid */
static float *make_input_weights(uint64_t rows, uint64_t key) {
    float *w = malloc(rows * HIDDEN * sizeof *w);
    WL_NEED(w, rows * HIDDEN * sizeof *w, "the input weights");
    const double a = 1.0 / sqrt((double)rows);
    for (uint64_t i = 0; i < rows * HIDDEN; i++) w[i] = (float)(a * (2.0 * wl_unit(wl_rand(key, i)) - 1.0));
    return w;
}

/* Its own function, so that the compiler cannot fold malloc and the zeroing into a calloc,
 * whose fresh pages would be touched first by the first weight adjustment, not here. */
static NOINLINE void zero_floats(float *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) p[i] = 0.0f;
}

static float *make_prev_weights(uint64_t rows) {
    float *p = malloc(rows * HIDDEN * sizeof *p);
    WL_NEED(p, rows * HIDDEN * sizeof *p, "the previous weight changes");
    zero_floats(p, rows * HIDDEN);
    return p;
}

/* input -> hidden: one sweep of the weights, row after row, all 16 sums at once */
static void forward_hidden(uint64_t rows, const float *restrict x, const float *restrict w, float *restrict hidden) {
    double sum[HIDDEN] = {0};
    for (uint64_t k = 0; k < rows; k++) {
        const float *row = w + k * HIDDEN;
        for (int j = 0; j < HIDDEN; j++) sum[j] += (double)row[j] * x[k];
    }
    for (int j = 0; j < HIDDEN; j++) hidden[j] = squash(sum[j]);
}

/* input -> hidden weights: one sweep of the weights and the momentum together */
static void adjust_input_weights(uint64_t rows, const float *restrict x, const float *restrict delta, float eta,
                                 float *restrict w, float *restrict prev) {
    float step[HIDDEN];
    for (int j = 0; j < HIDDEN; j++) step[j] = eta * delta[j];
    for (uint64_t k = 0; k < rows; k++) {
        float *row = w + k * HIDDEN, *prow = prev + k * HIDDEN;
        for (int j = 0; j < HIDDEN; j++) {
            float dw = step[j] * x[k] + (float)MOMENTUM * prow[j];
            row[j] += dw;
            prow[j] = dw;
        }
    }
}

int main(int argc, char **argv) {
    struct wl_common c;
    wl_parse(&c, "backprop",
             "A two-layer neural network trained by back-propagation with momentum (Rodinia backprop-like).", argc,
             argv, NULL, 0);

    static const unsigned log2_inputs[] = {15, 19, 23};
    static const uint64_t default_iterations[] = {10, 4, 3};
    const uint64_t n = 1ULL << log2_inputs[c.size], rows = n + 1;
    const uint64_t iterations = wl_scaled(&c, default_iterations[c.size]);
    wl_head(&c);
    printf(" inputs=%llu hidden=%d outputs=1 iterations=%llu", (unsigned long long)n, HIDDEN,
           (unsigned long long)iterations);
    const uint64_t small_bytes = 2 * HIDDEN * sizeof(float) + 2 * (HIDDEN + 1) * sizeof(float);
    wl_head_end(&c, rows * sizeof(float) + 2 * rows * HIDDEN * sizeof(float) + small_bytes);

    float *x = make_input_units(rows, wl_stream(c.seed, 1));
    float *w = make_input_weights(rows, wl_stream(c.seed, 2));
    float *prev = make_prev_weights(rows);
    float *hidden = malloc(HIDDEN * sizeof *hidden);
    WL_NEED(hidden, HIDDEN * sizeof *hidden, "the hidden units");
    float *hidden_delta = malloc(HIDDEN * sizeof *hidden_delta);
    WL_NEED(hidden_delta, HIDDEN * sizeof *hidden_delta, "the hidden deltas");
    /* hidden -> output weights; 0 is the hidden layer's bias */
    float *wo = malloc((HIDDEN + 1) * sizeof *wo);
    WL_NEED(wo, (HIDDEN + 1) * sizeof *wo, "the output weights");
    float *prev_wo = calloc(HIDDEN + 1, sizeof *prev_wo);
    WL_NEED(prev_wo, (HIDDEN + 1) * sizeof *prev_wo, "the previous output weight changes");
    const uint64_t wo_key = wl_stream(c.seed, 3);
    for (int j = 0; j <= HIDDEN; j++) wo[j] = (float)(2.0 * wl_unit(wl_rand(wo_key, (uint64_t)j)) - 1.0);

    /* normalized LMS: divide the input layer's rate by the pattern's squared norm */
    double norm2 = 0;
    for (uint64_t k = 0; k < rows; k++) norm2 += (double)x[k] * x[k];
    const float eta_input = (float)(ETA / norm2);

    float out = 0.0f;
    for (uint64_t it = 0; it < iterations; it++) {
        forward_hidden(rows, x, w, hidden);
        double net = wo[0];
        for (int j = 0; j < HIDDEN; j++) net += (double)wo[j + 1] * hidden[j];
        out = squash(net);

        /* output and hidden errors (the derivative of the sigmoid is o(1-o)) */
        const float delta_out = out * (1.0f - out) * ((float)TARGET - out);
        for (int j = 0; j < HIDDEN; j++) hidden_delta[j] = hidden[j] * (1.0f - hidden[j]) * delta_out * wo[j + 1];

        /* hidden -> output, then input -> hidden, each change with momentum */
        for (int j = 0; j <= HIDDEN; j++) {
            float dw = (float)ETA * delta_out * (j ? hidden[j - 1] : 1.0f) + (float)MOMENTUM * prev_wo[j];
            wo[j] += dw;
            prev_wo[j] = dw;
        }
        adjust_input_weights(rows, x, hidden_delta, eta_input, w, prev);

        const double e = (double)TARGET - out;
        printf("iteration=%llu output=%.9g error=%.9g\n", (unsigned long long)it, (double)out, 0.5 * e * e);
    }

    uint64_t h = 0;
    h = wl_fold_f64(h, out);
    for (int j = 0; j <= HIDDEN; j++) h = wl_fold_f64(h, wo[j]);
    for (uint64_t i = 0; i < rows * HIDDEN; i++) {
        uint32_t bits;
        memcpy(&bits, &w[i], sizeof bits);
        h = wl_fold(h, bits);
    }
    wl_checksum(h);
    free(prev_wo);
    free(wo);
    free(hidden_delta);
    free(hidden);
    free(prev);
    free(w);
    free(x);
    return 0;
}
