/* gups — random read-modify-write updates of one large table (after HPCC RandomAccess).
 *
 * Memory behaviour
 *   One allocation, the table of 2^k 64-bit words (malloc in alloc_table):
 *     small 2^19 words = 4 MiB, medium 2^24 = 128 MiB, large 2^27 = 1 GiB.
 *   The table is written once in order (table[i] = i), then receives 4 updates per word
 *   (HPCC's count): table[r >> (64-k)] ^= r for a stream of random r. Every update is a read
 *   and a write of one word at a uniformly random place: no locality at any scale, every page
 *   as hot as every other, 1 read : 1 write (plus the initial write and a final read per word
 *   for the checksum). The whole table is the working set; caches help only when it fits.
 *   With --threads N the updates are split in N contiguous ranges of the same random stream and
 *   applied with atomic xor, so the checksum does not depend on N (HPCC lets updates race; we
 *   do not, to stay deterministic).
 *
 * Output: see wl.h; line 1 adds threads=, table_bytes=, updates=.
 */
#include <pthread.h>

#include "wl.h"

struct job {
    uint64_t *table;
    unsigned shift;     /* 64 - log2(words) */
    uint64_t key;       /* random stream */
    uint64_t begin, end; /* update numbers */
    int atomic;
};

static uint64_t *alloc_table(uint64_t words) {
    uint64_t *t = malloc(words * sizeof *t);
    WL_NEED(t, words * sizeof *t, "the table");
    for (uint64_t i = 0; i < words; i++) t[i] = i;
    return t;
}

static void *update_range(void *arg) {
    const struct job *j = arg;
    uint64_t *t = j->table;
    if (j->atomic) {
        for (uint64_t i = j->begin; i < j->end; i++) {
            uint64_t r = wl_rand(j->key, i);
            __atomic_fetch_xor(&t[r >> j->shift], r, __ATOMIC_RELAXED);
        }
    } else {
        for (uint64_t i = j->begin; i < j->end; i++) {
            uint64_t r = wl_rand(j->key, i);
            t[r >> j->shift] ^= r;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    struct wl_common c;
    uint64_t threads = 1;
    const struct wl_opt opts[] = {
        {"--threads", WL_U64, &threads, 1, 64, "update threads; the result does not depend on it"},
    };
    wl_parse(&c, "gups", "Random read-modify-write updates of one large table (HPCC RandomAccess-like).", argc,
             argv, opts, 1);

    static const unsigned log2_words[] = {19, 24, 27};
    unsigned k = log2_words[c.size];
    uint64_t words = 1ULL << k;
    uint64_t updates = wl_scaled(&c, 4 * words);
    wl_head(&c);
    printf(" threads=%llu table_bytes=%llu updates=%llu", (unsigned long long)threads,
           (unsigned long long)(words * 8), (unsigned long long)updates);
    wl_head_end(&c, words * 8);

    uint64_t *table = alloc_table(words);
    uint64_t key = wl_stream(c.seed, 1);

    struct job *jobs = calloc(threads, sizeof *jobs);
    pthread_t *tids = calloc(threads, sizeof *tids);
    WL_NEED(jobs && tids, threads * (sizeof *jobs + sizeof *tids), "thread state");
    for (uint64_t t = 0; t < threads; t++) {
        jobs[t] = (struct job){table, 64 - k, key, updates * t / threads, updates * (t + 1) / threads, threads > 1};
    }
    if (threads == 1) {
        update_range(&jobs[0]);
    } else {
        for (uint64_t t = 0; t < threads; t++)
            if (pthread_create(&tids[t], NULL, update_range, &jobs[t])) {
                fprintf(stderr, "gups: error: cannot start thread %llu\n", (unsigned long long)t);
                return 1;
            }
        for (uint64_t t = 0; t < threads; t++) pthread_join(tids[t], NULL);
    }

    uint64_t h = 0;
    for (uint64_t i = 0; i < words; i++) h = wl_fold(h, table[i]);
    wl_checksum(h);
    free(tids);
    free(jobs);
    free(table);
    return 0;
}
