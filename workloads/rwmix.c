/* rwmix — random accesses over one buffer with a chosen share of writes.
 *
 * Memory behaviour
 *   One buffer of W words of 8 B (malloc; W: small 2^19 = 4 MiB, medium 2^24 = 128 MiB,
 *   large 2^28 = 2 GiB), written once in order, then 4W accesses at uniformly random words
 *   (no locality, every page equally hot). Each access is a store of a new value with
 *   probability R (--write-ratio R, 0..1, default 0.5) and otherwise a load: stores are plain
 *   stores, not read-modify-writes, so R = 1 gives a loop with no loads at all and R = 0 one
 *   with no stores. The printed reads= and writes= count the loop's loads and stores. Outside
 *   the loop: the initial sequential write of every word, and at the end one load per 4 KiB
 *   page for the checksum (1/512 of the words), so the stores are observable without a
 *   full read pass that would change the mix.
 *   Use it to see how a tier's asymmetric read/write latency, bandwidth and energy (PCM,
 *   Optane) change a policy's results as R goes from 0 to 1.
 *
 * Output: see wl.h; line 1 adds words=, accesses=, write_ratio=; then "reads=R writes=W".
 */
#include "wl.h"

static uint64_t *make_buffer(uint64_t words, uint64_t key) {
    uint64_t *b = malloc(words * sizeof *b);
    WL_NEED(b, words * sizeof *b, "the buffer");
    for (uint64_t i = 0; i < words; i++) b[i] = wl_rand(key, i);
    return b;
}

int main(int argc, char **argv) {
    struct wl_common c;
    double ratio = 0.5;
    const struct wl_opt opts[] = {
        {"--write-ratio", WL_F64, &ratio, 0, 1, "share of the accesses that are stores"},
    };
    wl_parse(&c, "rwmix", "Random accesses over one buffer with a chosen share of writes.", argc, argv, opts, 1);

    static const unsigned log2_words[] = {19, 24, 28};
    const uint64_t words = 1ULL << log2_words[c.size];
    const uint64_t accesses = wl_scaled(&c, 4 * words);
    /* an access is a store when the low 32 bits of its random number are below this */
    const uint64_t store_below = (uint64_t)llround(ratio * 4294967296.0);
    wl_head(&c);
    printf(" words=%llu accesses=%llu write_ratio=%g", (unsigned long long)words, (unsigned long long)accesses, ratio);
    wl_head_end(&c, words * 8);

    uint64_t *buf = make_buffer(words, wl_stream(c.seed, 1));
    const uint64_t key = wl_stream(c.seed, 2);
    uint64_t s = 0, writes = 0;
    wl_region("buffer", buf, words * 8);
    /* no locality: every page of the buffer equally hot */
    wl_hot("buffer");
    for (uint64_t i = 0; i < accesses; i++) {
        uint64_t r = wl_rand(key, i);
        uint64_t *w = &buf[wl_below(r, words)];
        if ((r & 0xFFFFFFFFu) < store_below) {
            *w = r;
            writes++;
        } else {
            s += *w;
        }
    }
    printf("reads=%llu writes=%llu\n", (unsigned long long)(accesses - writes), (unsigned long long)writes);

    uint64_t h = wl_fold(0, s);
    for (uint64_t i = 0; i < words; i += 512) h = wl_fold(h, buf[i]);
    wl_checksum(wl_fold(h, writes));
    free(buf);
    return 0;
}
