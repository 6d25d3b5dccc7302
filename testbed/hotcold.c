/* hotcold: a program with a known hot set, for checking placement on the testbed (docs/real-linux.md).
 *
 * Three regions, each its own anonymous mapping:
 *   cold   COLD MiB, written once at the start, never touched again;
 *   write  WRITE MiB, random read-modify-writes (write-intensive, seed 004 section 4.4);
 *   read   READ MiB, random reads (read-intensive).
 * The loop alternates one update of `write` with one read of `read` for SECONDS seconds.
 * With --start-slow the program first moves `write` and `read` to the slow node itself
 * (move_pages), as if they had been allocated while the fast node was full: a placement
 * policy then has to find them and bring them back.
 *
 * Every SAMPLE_MS it asks the kernel where each page of each region is (move_pages with
 * nodes == NULL: a query, nothing moves) and counts the pages on the fast node. A query pass
 * over the regions is not atomic: a daemon moving pages meanwhile (demoting a page already
 * counted, then promoting one not yet counted) can make a pass count more pages on the fast
 * node than were ever there at once. So each sample repeats the pass until two passes in a
 * row agree page for page (at most SNAPSHOT_TRIES passes) and says whether they did. It
 * prints one JSON line at the end: region sizes in pages, the accesses made, and the series
 * [t_ms, write_fast, read_fast, cold_fast, agreed] (agreed: 1 if the counts come from two
 * passes that agreed, 0 if the daemon kept moving pages through all the passes), and
 * accesses_series, the accesses made before each sample, and work_ms_series, the time spent in
 * the loop before each sample, the samples' own time left out (a sample's queries cost the
 * same under every policy, and in the paced VM over a second each): with the slow-tier plugin
 * pacing the guest, accesses per second of that time are the program's speed under a policy.
 * Static, no libnuma: the VM has no libc.
 *
 * With --tlb-flush-ms F the program flushes its TLB every F ms. A real CPU's TLB holds a few
 * thousand translations and the hot regions' random accesses keep missing it, so the accessed
 * bits that DAMON clears are set again soon; QEMU's software TLB holds millions and sets them
 * again only after a flush (docs/real-linux.md, "DAMON under emulation"). Without the flushes a
 * run where the daemon stops moving pages (its moves flush the TLB too) can leave DAMON seeing
 * the hot set as cold for the rest of the run. The flush is an mprotect, read-only and back, of
 * a 1 MiB region of its own (256 present pages): Linux flushes the whole address space's TLB
 * when a range of more than 33 pages changes (arch/x86/mm/tlb.c, tlb_single_page_flush_ceiling),
 * and the hot regions' page table entries are left alone. mprotect of the hot regions
 * themselves, as this did before, rewrote their entries and undid NUMA balancing's scan (its
 * PROT_NONE hint faults): autonuma-tiering then made no promotion at all.
 * usage: hotcold [--cold MiB] [--write MiB] [--read MiB] [--seconds S] [--sample-ms M]
 *                [--tlb-flush-ms F] [--start-slow] [--fast-node N] [--slow-node M]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MPOL_MF_MOVE (1 << 1)
#define MAX_SAMPLES 4096
#define SNAPSHOT_TRIES 8
#define FLUSH_BYTES (1 << 20)

struct region {
    const char *name;
    char *base;
    size_t pages;
    void **addr;
    int *status;
    int *previous; /* the status of the pass before, for the snapshot's agreement check */
};

static long page_bytes;

static long move_pages_(unsigned long count, void **pages, const int *nodes, int *status)
{
    return syscall(SYS_move_pages, 0, count, pages, nodes, status, MPOL_MF_MOVE);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void map_region(struct region *r, const char *name, size_t mib)
{
    r->name = name;
    r->pages = mib * (1 << 20) / page_bytes;
    /* a guard page on each side keeps the kernel from merging neighbouring regions */
    char *m = mmap(NULL, (r->pages + 2) * page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "hotcold: cannot map %zu MiB for %s: %s\n", mib, name, strerror(errno));
        exit(2);
    }
    mprotect(m, page_bytes, PROT_NONE);
    mprotect(m + (r->pages + 1) * page_bytes, page_bytes, PROT_NONE);
    r->base = m + page_bytes;
    r->addr = malloc(r->pages * sizeof *r->addr);
    r->status = malloc(r->pages * sizeof *r->status);
    r->previous = malloc(r->pages * sizeof *r->previous);
    if (!r->addr || !r->status || !r->previous) {
        fprintf(stderr, "hotcold: out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < r->pages; i++)
        r->addr[i] = r->base + i * page_bytes;
    for (size_t i = 0; i < r->pages * page_bytes; i += 64)
        r->base[i] = (char)i; /* first touch, from a CPU of the fast node */
}

/* where each page of the region is, into r->status (a query: nodes == NULL); 0 on success */
static int query(struct region *r)
{
    for (size_t done = 0; done < r->pages; done += 1024) {
        size_t k = r->pages - done < 1024 ? r->pages - done : 1024;
        if (move_pages_(k, r->addr + done, NULL, r->status + done) != 0)
            return -1;
    }
    return 0;
}

/* pages of the region on `node`, from its last query */
static size_t on_node(const struct region *r, int node)
{
    size_t n = 0;
    for (size_t i = 0; i < r->pages; i++)
        n += r->status[i] == node;
    return n;
}

/* query all `n` regions until two passes in a row agree page for page; 1 if they did, 0 if
 * SNAPSHOT_TRIES passes never did (or a query failed); the regions' status is the last pass */
static int snapshot(struct region **rs, int n)
{
    for (int pass = 0; pass < SNAPSHOT_TRIES; pass++) {
        int same = pass > 0, failed = 0;
        for (int i = 0; i < n; i++) {
            memcpy(rs[i]->previous, rs[i]->status, rs[i]->pages * sizeof *rs[i]->status);
            if (query(rs[i]) != 0) {
                /* a region whose query fails counts as on no node (as before the snapshot) */
                memset(rs[i]->status, 0xff, rs[i]->pages * sizeof *rs[i]->status);
                failed = 1;
            }
            same = same && !memcmp(rs[i]->previous, rs[i]->status, rs[i]->pages * sizeof *rs[i]->status);
        }
        if (failed)
            return 0;
        if (same)
            return 1;
    }
    return 0;
}

static size_t move_all(struct region *r, int node)
{
    int *nodes = malloc(r->pages * sizeof *nodes);
    size_t moved = 0;
    for (size_t i = 0; i < r->pages; i++)
        nodes[i] = node;
    for (size_t done = 0; done < r->pages; done += 1024) {
        size_t k = r->pages - done < 1024 ? r->pages - done : 1024;
        move_pages_(k, r->addr + done, nodes + done, r->status + done);
    }
    for (size_t i = 0; i < r->pages; i++)
        moved += r->status[i] == node;
    free(nodes);
    return moved;
}

static uint64_t next(uint64_t *s)
{
    /* xorshift64*: a fixed, cheap sequence */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

int main(int argc, char **argv)
{
    size_t cold_mib = 64, write_mib = 16, read_mib = 16;
    double seconds = 10, sample_ms = 500, flush_ms = 0;
    int start_slow = 0, fast = 0, slow = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--start-slow")) {
            start_slow = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "hotcold: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--cold")) cold_mib = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--write")) write_mib = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--read")) read_mib = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--seconds")) seconds = atof(v);
        else if (!strcmp(a, "--sample-ms")) sample_ms = atof(v);
        else if (!strcmp(a, "--tlb-flush-ms")) flush_ms = atof(v);
        else if (!strcmp(a, "--fast-node")) fast = atoi(v);
        else if (!strcmp(a, "--slow-node")) slow = atoi(v);
        else {
            fprintf(stderr, "hotcold: unknown option %s\n", a);
            return 2;
        }
    }
    if (!write_mib || !read_mib || seconds <= 0 || sample_ms <= 0 || flush_ms < 0) {
        fprintf(stderr, "hotcold: --write and --read need at least 1 MiB, --seconds and --sample-ms more than 0, "
                        "--tlb-flush-ms at least 0\n");
        return 2;
    }
    page_bytes = sysconf(_SC_PAGESIZE);
    struct region cold, wr, rd;
    map_region(&cold, "cold", cold_mib);
    map_region(&wr, "write", write_mib);
    map_region(&rd, "read", read_mib);
    size_t started_slow = 0;
    if (start_slow)
        started_slow = move_all(&wr, slow) + move_all(&rd, slow);

    static double series[MAX_SAMPLES][5];
    static unsigned long long acc_at[MAX_SAMPLES]; /* accesses made before each sample */
    static double work_at[MAX_SAMPLES];            /* seconds in the loop, samples left out */
    double sampling = 0;                           /* seconds spent sampling so far */
    struct region *all[] = {&wr, &rd, &cold};
    int nall = cold.pages ? 3 : 2;
    int n = 0;
    uint64_t s = 0x9e3779b97f4a7c15ULL, acc = 0, sum = 0;
    const uint64_t wwords = wr.pages * page_bytes / 8, rwords = rd.pages * page_bytes / 8;
    uint64_t *w = (uint64_t *)wr.base, *r = (uint64_t *)rd.base;
    /* the region whose mprotect flushes the TLB: present pages, or nothing changes */
    char *flusher = NULL;
    if (flush_ms > 0) {
        flusher = mmap(NULL, FLUSH_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (flusher == MAP_FAILED) {
            fprintf(stderr, "hotcold: cannot map the TLB flush region: %s\n", strerror(errno));
            return 1;
        }
        memset(flusher, 1, FLUSH_BYTES);
    }
    double t0 = now_s(), due = 0, flush_due = flush_ms / 1e3;
    for (;;) {
        double t = now_s() - t0;
        if (t >= due && n < MAX_SAMPLES) {
            series[n][0] = t * 1e3;
            acc_at[n] = acc;
            work_at[n] = t - sampling;
            series[n][4] = snapshot(all, nall);
            series[n][1] = on_node(&wr, fast);
            series[n][2] = on_node(&rd, fast);
            series[n][3] = cold.pages ? on_node(&cold, fast) : 0;
            n++;
            due += sample_ms / 1e3;
            sampling += now_s() - t0 - t;
        }
        if (t >= seconds)
            break;
        if (flush_ms > 0 && t >= flush_due) {
            mprotect(flusher, FLUSH_BYTES, PROT_READ);
            mprotect(flusher, FLUSH_BYTES, PROT_READ | PROT_WRITE);
            flush_due = t + flush_ms / 1e3;
        }
        for (int k = 0; k < 4096; k++) {
            w[next(&s) % wwords] += k;
            sum += r[next(&s) % rwords];
        }
        acc += 8192;
    }
    printf("{\"pages\": {\"cold\": %zu, \"write\": %zu, \"read\": %zu}, \"started_slow\": %zu, \"accesses\": %llu, "
           "\"checksum\": %llu, \"series\": [",
           cold.pages, wr.pages, rd.pages, started_slow, (unsigned long long)acc, (unsigned long long)sum);
    for (int i = 0; i < n; i++)
        printf("%s[%.0f, %.0f, %.0f, %.0f, %.0f]", i ? ", " : "", series[i][0], series[i][1], series[i][2], series[i][3],
               series[i][4]);
    printf("], \"accesses_series\": [");
    for (int i = 0; i < n; i++)
        printf("%s%llu", i ? ", " : "", acc_at[i]);
    printf("], \"work_ms_series\": [");
    for (int i = 0; i < n; i++)
        printf("%s%.1f", i ? ", " : "", work_at[i] * 1e3);
    printf("]}\n");
    return 0;
}
