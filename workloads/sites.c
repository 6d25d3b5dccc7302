/* sites — five arrays from five allocation sites, of clearly different size and hotness, so
 * that site-level profiling and guidance have something to find.
 *
 * Memory behaviour
 *   B = 2^13 words (64 KiB) small, 2^18 (2 MiB) medium, 2^22 (32 MiB) large; a word is 8 B.
 *   Each array comes from its own helper function (own call site and call stack), allocated
 *   and first touched in this order, so that a first-touch policy fills the fast tier with the
 *   cold archive before the hot counters exist:
 *
 *     site    helper              words  use                                    st/word  ld/word  per byte
 *     cold    make_cold_archive    32 B  written once; 1 word in 64 read at end      1     1/64     0.13
 *     warm    make_warm_samples    16 B  written once; read in order every round     1      8       1.13
 *     lookup  make_lookup_table     4 B  calloc'd, filled; 2 B random reads/round    1      4       0.63
 *     log     start_event_log       4 B  B/2 appends per round, in order; starts     1      1       0.25
 *             grow_event_log             at 2 B, doubled by realloc half-way (the
 *                                        realloc site); read once at the end
 *     hot     make_hot_counters     1 B  written once; 16 random read-modify-       129    129      32.3
 *                                        writes per word per round; read at end
 *
 *   "st"/"ld" are 8-byte stores/loads by the program over the default 8 rounds (--work
 *   scales the rounds); the realloc's copy of the log and calloc's zeroing are not counted.
 *   Footprint 57 B words = 456 B bytes: small 3.6 MiB, medium 114 MiB, large 1.8 GiB.
 *   A round interleaves everything: one pass over warm, with one hot update per warm word
 *   (so the hot counters are hot throughout, not in a burst), then 2 B random lookups, then
 *   B/2 log appends. The hot array is 1/57 of the footprint but takes ~56% of the accesses;
 *   the cold archive is 56% of the footprint and takes ~7%. After a cache filter the small hot
 *   array may live entirely in cache (at small size, trace with --cache small or none to see
 *   it); at large size it is 32 MiB of random updates and stays the hottest per byte.
 *   The counts are printed per site, as computed from the loop bounds.
 *
 * Output: see wl.h; line 1 adds base_words=, rounds=; then one line per site,
 * "site=NAME function=HELPER bytes=N loads=L stores=S", in allocation order.
 */
#include "wl.h"

#define NOINLINE __attribute__((noinline))

static NOINLINE uint64_t *make_cold_archive(uint64_t words, uint64_t key) {
    uint64_t *a = malloc(words * sizeof *a);
    WL_NEED(a, words * sizeof *a, "the cold archive");
    for (uint64_t i = 0; i < words; i++) a[i] = wl_rand(key, i);
    return a;
}

static NOINLINE uint64_t *make_warm_samples(uint64_t words, uint64_t key) {
    uint64_t *w = malloc(words * sizeof *w);
    WL_NEED(w, words * sizeof *w, "the warm samples");
    for (uint64_t i = 0; i < words; i++) w[i] = wl_rand(key, i) >> 40;
    return w;
}

static NOINLINE uint64_t *make_lookup_table(uint64_t words, uint64_t key) {
    uint64_t *t = calloc(words, sizeof *t);
    WL_NEED(t, words * sizeof *t, "the lookup table");
    for (uint64_t i = 0; i < words; i++) t[i] = wl_rand(key, i);
    return t;
}

struct event_log {
    uint64_t *word;
    uint64_t len, cap, max_cap;
};

static NOINLINE void start_event_log(struct event_log *log, uint64_t words, uint64_t max_words) {
    log->word = malloc(words * sizeof *log->word);
    WL_NEED(log->word, words * sizeof *log->word, "the event log");
    log->len = 0;
    log->cap = words;
    log->max_cap = max_words;
}

static NOINLINE void grow_event_log(struct event_log *log) {
    uint64_t cap = 2 * log->cap;
    uint64_t *bigger = realloc(log->word, cap * sizeof *bigger);
    WL_NEED(bigger, cap * sizeof *bigger, "the event log");
    log->word = bigger;
    log->cap = cap;
}

static inline void append_event(struct event_log *log, uint64_t v) {
    if (log->len == log->cap && log->cap < log->max_cap) grow_event_log(log);
    log->word[log->len % log->cap] = v; /* a ring once it has its full size (more than 8 rounds) */
    log->len++;
}

static NOINLINE uint64_t *make_hot_counters(uint64_t words) {
    uint64_t *h = malloc(words * sizeof *h);
    WL_NEED(h, words * sizeof *h, "the hot counters");
    for (uint64_t i = 0; i < words; i++) h[i] = i;
    return h;
}

static void report(const char *site, const char *fn, uint64_t words, uint64_t loads, uint64_t stores) {
    printf("site=%s function=%s bytes=%llu loads=%llu stores=%llu\n", site, fn, (unsigned long long)(words * 8),
           (unsigned long long)loads, (unsigned long long)stores);
}

int main(int argc, char **argv) {
    struct wl_common c;
    wl_parse(&c, "sites", "Five allocation sites of clearly different size and hotness.", argc, argv, NULL, 0);

    static const unsigned log2_base[] = {13, 18, 22};
    const uint64_t B = 1ULL << log2_base[c.size];
    const uint64_t rounds = wl_scaled(&c, 8);
    wl_head(&c);
    printf(" base_words=%llu rounds=%llu", (unsigned long long)B, (unsigned long long)rounds);
    wl_head_end(&c, 57 * B * 8);

    uint64_t *cold = make_cold_archive(32 * B, wl_stream(c.seed, 1));
    uint64_t *warm = make_warm_samples(16 * B, wl_stream(c.seed, 2));
    uint64_t *lookup = make_lookup_table(4 * B, wl_stream(c.seed, 3));
    struct event_log log;
    start_event_log(&log, 2 * B, 4 * B);
    uint64_t *hot = make_hot_counters(B);
    wl_region("cold", cold, 32 * B * 8);
    wl_region("warm", warm, 16 * B * 8);
    wl_region("lookup", lookup, 4 * B * 8);
    wl_region("hot", hot, B * 8);
    wl_hot("hot");

    const uint64_t hkey = wl_stream(c.seed, 4), lkey = wl_stream(c.seed, 5);
    uint64_t s = 0, hdraw = 0, ldraw = 0;
    for (uint64_t r = 0; r < rounds; r++) {
        for (uint64_t i = 0; i < 16 * B; i++) {
            uint64_t w = warm[i];
            s += w;
            hot[wl_rand(hkey, hdraw++) & (B - 1)] += w;
        }
        for (uint64_t i = 0; i < 2 * B; i++) s ^= lookup[wl_rand(lkey, ldraw++) & (4 * B - 1)];
        for (uint64_t i = 0; i < B / 2; i++) append_event(&log, s + i);
    }

    uint64_t h = wl_fold(0, s);
    for (uint64_t i = 0; i < 32 * B; i += 64) h = wl_fold(h, cold[i]);
    for (uint64_t i = 0; i < B; i++) h = wl_fold(h, hot[i]);
    uint64_t logged = log.len < log.cap ? log.len : log.cap;
    for (uint64_t i = 0; i < logged; i++) h = wl_fold(h, log.word[i]);

    report("cold", "make_cold_archive", 32 * B, 32 * B / 64, 32 * B);
    report("warm", "make_warm_samples", 16 * B, 16 * B * rounds, 16 * B);
    report("lookup", "make_lookup_table", 4 * B, 2 * B * rounds, 4 * B);
    report("log", "start_event_log", log.cap, logged, log.len);
    report("hot", "make_hot_counters", B, 16 * B * rounds + B, 16 * B * rounds + B);
    wl_checksum(h);
    free(hot);
    free(log.word);
    free(lookup);
    free(warm);
    free(cold);
    return 0;
}
