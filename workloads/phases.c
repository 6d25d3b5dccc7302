/* phases — the hot set moves: each phase hammers a different part of one array.
 *
 * Memory behaviour
 *   One data array of W words of 8 B (malloc; W: small 2^19 = 4 MiB, medium 2^24 = 128 MiB,
 *   large 2^28 = 2 GiB), split into P equal parts (--phases P, default 4: quarters), plus a
 *   tiny per-phase statistics array (calloc). The data is written once in order, then phase
 *   p = 0, 1, ..., P-1 runs its own pass of 4 x (W/P) random accesses:
 *     90% are read-modify-writes at uniformly random words of part p (the phase's hot set),
 *     10% are reads anywhere in the array (a light background over everything).
 *   So within a phase, each word of part p gets 3.6 updates (7.2 accesses) and each word
 *   elsewhere 0.4/P background reads (0.1 with quarters): the hot part is ~70x hotter per
 *   byte. At the phase boundary the hot set jumps to the next part and the previous one goes
 *   cold for good. Over the whole run every part
 *   is equally hot, so a profile of the whole run (or per allocation site: there is one
 *   site) shows a uniformly warm array: only a policy that watches pages over time can
 *   follow the moving hot set. Read/write mix in the phases: 53% reads, 47% writes. A final pass reads the array for
 *   the checksum.
 *
 * Output: see wl.h; line 1 adds words=, phases=, accesses_per_phase=; then one line per phase,
 * "phase=P first_byte=O bytes=N updates=U background_reads=R".
 */
#include "wl.h"

#define HOT_SHARE 0.9

struct phase_stats { uint64_t updates, background_reads; };

static uint64_t *make_data(uint64_t words, uint64_t key) {
    uint64_t *d = malloc(words * sizeof *d);
    WL_NEED(d, words * sizeof *d, "the data array");
    for (uint64_t i = 0; i < words; i++) d[i] = wl_rand(key, i);
    return d;
}

/* one phase: hammer words [first, first+len), with a background of reads over all words */
static uint64_t run_phase(uint64_t *data, uint64_t words, uint64_t first, uint64_t len, uint64_t accesses,
                          uint64_t key, struct phase_stats *st) {
    const uint64_t hot_below = (uint64_t)(HOT_SHARE * 4294967296.0);
    uint64_t s = 0;
    for (uint64_t i = 0; i < accesses; i++) {
        uint64_t r = wl_rand(key, i);
        if ((r & 0xFFFFFFFFu) < hot_below) {
            data[first + wl_below(r, len)] += r >> 32;
            st->updates++;
        } else {
            s += data[wl_below(r, words)];
            st->background_reads++;
        }
    }
    return s;
}

int main(int argc, char **argv) {
    struct wl_common c;
    uint64_t phases = 4;
    const struct wl_opt opts[] = {
        {"--phases", WL_U64, &phases, 1, 64, "number of phases, each with its own part of the array"},
    };
    wl_parse(&c, "phases", "The hot set moves: each phase hammers a different part of one array.", argc, argv,
             opts, 1);

    static const unsigned log2_words[] = {19, 24, 28};
    const uint64_t words = 1ULL << log2_words[c.size];
    const uint64_t per_phase = wl_scaled(&c, 4 * (words / phases));
    wl_head(&c);
    printf(" words=%llu phases=%llu accesses_per_phase=%llu", (unsigned long long)words, (unsigned long long)phases,
           (unsigned long long)per_phase);
    wl_head_end(&c, words * 8 + phases * sizeof(struct phase_stats));

    uint64_t *data = make_data(words, wl_stream(c.seed, 1));
    struct phase_stats *stats = calloc(phases, sizeof *stats);
    WL_NEED(stats, phases * sizeof *stats, "the phase statistics");

    for (uint64_t p = 0; p < phases; p++) {
        char name[32];
        uint64_t first = words * p / phases, len = words * (p + 1) / phases - first;
        snprintf(name, sizeof name, "part%llu", (unsigned long long)p);
        wl_region(name, data + first, len * 8);
    }
    uint64_t h = 0;
    for (uint64_t p = 0; p < phases; p++) {
        char name[32];
        uint64_t first = words * p / phases, len = words * (p + 1) / phases - first;
        snprintf(name, sizeof name, "part%llu", (unsigned long long)p);
        wl_hot(name);
        h = wl_fold(h, run_phase(data, words, first, len, per_phase, wl_stream(c.seed, 100 + p), &stats[p]));
        printf("phase=%llu first_byte=%llu bytes=%llu updates=%llu background_reads=%llu\n", (unsigned long long)p,
               (unsigned long long)(first * 8), (unsigned long long)(len * 8), (unsigned long long)stats[p].updates,
               (unsigned long long)stats[p].background_reads);
    }
    for (uint64_t i = 0; i < words; i++) h = wl_fold(h, data[i]);
    wl_checksum(h);
    free(stats);
    free(data);
    return 0;
}
