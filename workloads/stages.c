/* stages — the hot allocation site changes: each stage hammers its own array, allocated by
 * its own helper function.
 *
 * Memory behaviour
 *   W words of 8 B in all (W: small 2^19 = 4 MiB, medium 2^24 = 128 MiB, large 2^28 = 2 GiB),
 *   split into N tables of L = W/N words each (--stages N, 2..8, default 4; when N does not
 *   divide W the remainder is dropped, so the footprint is N*L*8 bytes: exactly W*8 for
 *   N = 2, 4, 8). Table s comes from its own helper, make_stage<s>_table, with its own direct
 *   malloc line, so each table is its own allocation site and call stack. The tables are
 *   allocated and first touched (written in order) at start, table 0 first, so a first-touch
 *   policy fills the fast tier with the early tables. Then stage s = 0, 1, ..., N-1 runs its
 *   own pass of 4 x L random accesses:
 *     90% are read-modify-writes at uniformly random words of table s (the stage's hot site),
 *     10% are reads at uniformly random words of all tables (a table, then a word, with
 *         equal tables, so every word of the footprint is equally likely): a light background.
 *   So within a stage, each word of table s gets 3.6 updates (7.2 accesses) and every word of
 *   the footprint 0.4/N background reads (0.1 with 4 stages): the hot table is 18N+1 times
 *   hotter per byte than the others (73x with 4 stages). At the stage boundary the hot site
 *   changes to the next table and the previous one goes cold for good. Read/write mix in the
 *   stages: 53% reads, 47% writes. A final pass reads every table, in order, for the checksum.
 *
 *   Over the whole run every table gets the same accesses (3.6 updates and 0.4 background
 *   reads per word, plus the first touch and the final read), so a profile of the whole run
 *   sees N equally warm allocation sites and static site-level guidance has nothing to choose:
 *   a fast tier of 1/N of the footprint holds the hot table during one stage in N. A profile
 *   per phase (per stage) sees exactly one hot site in each phase, that stage's helper, so
 *   per-phase guidance (a per-phase arena that moves its site to the fast tier at the phase
 *   transition, seed paper 000 §3.2) can keep every stage's hot table in the fast tier. Unlike
 *   phases, where the hot set moves inside one allocation, here it moves between sites.
 *
 *   With --scratch 1, each stage also allocates its statistics record at its start
 *   (new_stage_stats, 16 B, freed when the stage's line is printed), as programs that allocate
 *   working memory at the start of each phase do. The tables and their accesses are the same;
 *   the record gives an allocator that counts its calls a marker of each stage's start (the
 *   phase markers of per-phase guidance, docs/guidance.md), which the default run lacks: it
 *   allocates nothing after its tables.
 *
 * Output: see wl.h; line 1 adds words= (N*L), stages=, accesses_per_stage=; then one line per
 * stage, "stage=S function=HELPER bytes=B updates=U background_reads=R".
 */
#include "wl.h"

#define NOINLINE __attribute__((noinline))
#define MAX_STAGES 8
#define HOT_SHARE 0.9

struct stage_stats { uint64_t updates, background_reads; };

/* One helper per stage, each expanded on its own line, so each malloc has its own line
 * (the debug information puts an expanded macro at the line that invokes it): eight
 * allocation sites, `make_stageN_table (stages.c:LINE)`. The error strings differ, so the
 * compiler cannot fold the eight bodies into one function. */
#define STAGE_TABLE(n)                                                   \
    static NOINLINE uint64_t *make_stage##n##_table(uint64_t words) {    \
        uint64_t *t = malloc(words * sizeof *t);                         \
        WL_NEED(t, words * sizeof *t, "the stage " #n " table");         \
        return t;                                                        \
    }
STAGE_TABLE(0)
STAGE_TABLE(1)
STAGE_TABLE(2)
STAGE_TABLE(3)
STAGE_TABLE(4)
STAGE_TABLE(5)
STAGE_TABLE(6)
STAGE_TABLE(7)

static uint64_t *(*const make_table[MAX_STAGES])(uint64_t) = {
    make_stage0_table, make_stage1_table, make_stage2_table, make_stage3_table,
    make_stage4_table, make_stage5_table, make_stage6_table, make_stage7_table,
};
static const char *const make_table_name[MAX_STAGES] = {
    "make_stage0_table", "make_stage1_table", "make_stage2_table", "make_stage3_table",
    "make_stage4_table", "make_stage5_table", "make_stage6_table", "make_stage7_table",
};

/* --scratch 1: the stage's statistics record, allocated at the stage's start */
static NOINLINE struct stage_stats *new_stage_stats(void) {
    struct stage_stats *st = calloc(1, sizeof *st);
    WL_NEED(st, sizeof *st, "a stage's statistics record");
    return st;
}

/* first touch: write every word in order */
static void fill(uint64_t *t, uint64_t words, uint64_t key) {
    for (uint64_t i = 0; i < words; i++) t[i] = wl_rand(key, i);
}

/* one stage: hammer table s, with a background of reads over every word of every table */
static uint64_t run_stage(uint64_t *const *table, uint64_t n, uint64_t len, uint64_t s, uint64_t accesses,
                          uint64_t key, struct stage_stats *st) {
    const uint64_t hot_below = (uint64_t)(HOT_SHARE * 4294967296.0);
    uint64_t *hot = table[s];
    uint64_t sum = 0;
    for (uint64_t i = 0; i < accesses; i++) {
        uint64_t r = wl_rand(key, i);
        if ((r & 0xFFFFFFFFu) < hot_below) {
            hot[wl_below(r, len)] += r >> 32;
            st->updates++;
        } else {
            uint64_t g = wl_below(r, n * len); /* table g / len, word g % len */
            sum += table[g / len][g % len];
            st->background_reads++;
        }
    }
    return sum;
}

int main(int argc, char **argv) {
    struct wl_common c;
    uint64_t stages = 4, scratch = 0;
    const struct wl_opt opts[] = {
        {"--stages", WL_U64, &stages, 2, MAX_STAGES, "number of stages, each with its own allocation site"},
        {"--scratch", WL_U64, &scratch, 0, 1, "1: each stage allocates its statistics record at its start"},
    };
    wl_parse(&c, "stages", "The hot allocation site changes: each stage hammers its own array.", argc, argv,
             opts, 2);

    static const unsigned log2_words[] = {19, 24, 28};
    const uint64_t len = (1ULL << log2_words[c.size]) / stages, words = stages * len;
    const uint64_t per_stage = wl_scaled(&c, 4 * len);
    wl_head(&c);
    printf(" words=%llu stages=%llu accesses_per_stage=%llu", (unsigned long long)words, (unsigned long long)stages,
           (unsigned long long)per_stage);
    wl_head_end(&c, words * 8);

    uint64_t *table[MAX_STAGES];
    for (uint64_t s = 0; s < stages; s++) {
        table[s] = make_table[s](len);
        fill(table[s], len, wl_stream(c.seed, 1 + s));
    }

    uint64_t h = 0;
    for (uint64_t s = 0; s < stages; s++) {
        struct stage_stats local = {0, 0};
        struct stage_stats *st = scratch ? new_stage_stats() : &local;
        h = wl_fold(h, run_stage(table, stages, len, s, per_stage, wl_stream(c.seed, 100 + s), st));
        printf("stage=%llu function=%s bytes=%llu updates=%llu background_reads=%llu\n", (unsigned long long)s,
               make_table_name[s], (unsigned long long)(len * 8), (unsigned long long)st->updates,
               (unsigned long long)st->background_reads);
        if (scratch) free(st);
    }
    for (uint64_t s = 0; s < stages; s++)
        for (uint64_t i = 0; i < len; i++) h = wl_fold(h, table[s][i]);
    wl_checksum(h);
    for (uint64_t s = stages; s-- > 0;) free(table[s]);
    return 0;
}
