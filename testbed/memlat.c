/* memlat: what one node's memory costs a program, measured from inside the testbed VM
 * (`python -m tierkit.testbed calibrate`; docs/real-linux.md).
 * usage: memlat NODE MIB [STEPS]
 * Binds MIB MiB to NODE (mbind MPOL_BIND, 4 KiB pages: MADV_NOHUGEPAGE), then measures
 *   - fault_ns_per_page: the first touch of each page (one store per page, in address order),
 *     per page: the kernel's page fault, allocation and zeroing of a 4 KiB page;
 * checks with move_pages(2) where the pages are, then measures
 *   - chase_ns: a dependent pointer chase over every 64-byte line of the buffer in a random
 *     cyclic order (one load per step, no two steps on the same line in a row), per step;
 *   - stream_gb_per_s: a sequential read of the whole buffer (8-byte loads), bytes per second;
 *   - clear_refs_ns_per_page, wp_fault_ns_per_page: soft-dirty tracking's costs, per page:
 *     clearing the bits (/proc/self/clear_refs), then a store to each page (a write fault each);
 *     null where the kernel has no soft-dirty bits;
 *   - move_ns_per_page: move_pages(2) of the whole buffer to the other node (node 0 <-> 1), in
 *     batches of 512 pages, per page: the kernel's cost of a migration, copy included.
 * Times come from clock_gettime(CLOCK_MONOTONIC), the guest's clock. Prints one JSON object.
 * Static, no libnuma: the VM has no libc. Exit 2 with one line on an error. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MPOL_BIND 2
#define LINE 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: memlat NODE MIB [STEPS]\n");
        return 2;
    }
    long node = strtol(argv[1], NULL, 10), mib = strtol(argv[2], NULL, 10);
    long steps = argc > 3 ? strtol(argv[3], NULL, 10) : 0;
    if (node < 0 || node > 63 || mib < 1 || steps < 0) {
        fprintf(stderr, "memlat: bad arguments\n");
        return 2;
    }
    size_t bytes = (size_t)mib << 20, lines = bytes / LINE;
    if (!steps)
        steps = (long)lines;
    char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        fprintf(stderr, "memlat: mmap %ld MiB: %s\n", mib, strerror(errno));
        return 2;
    }
    unsigned long mask = 1UL << node;
    if (syscall(SYS_mbind, buf, bytes, MPOL_BIND, &mask, 64, 0) != 0) {
        fprintf(stderr, "memlat: mbind to node %ld: %s\n", node, strerror(errno));
        return 2;
    }
    madvise(buf, bytes, MADV_NOHUGEPAGE); /* 4 KiB faults whatever the VM's THP setting */
    long page = sysconf(_SC_PAGESIZE), npages = (long)(bytes / page), on_node = 0;
    double t0 = now_s();
    for (long i = 0; i < npages; i++)
        ((volatile char *)buf)[i * page] = 1;
    double fault = (now_s() - t0) / npages;
    /* the chase: a random cyclic permutation of the lines (Sattolo's algorithm) */
    uint32_t *order = malloc(lines * sizeof *order);
    if (!order) {
        fprintf(stderr, "memlat: out of memory\n");
        return 2;
    }
    for (size_t i = 0; i < lines; i++)
        order[i] = (uint32_t)i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = next() % i;
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        *(char **)(buf + (size_t)order[i] * LINE) = buf + (size_t)order[(i + 1) % lines] * LINE;
    free(order);
    /* where the pages are */
    void **pages = malloc(npages * sizeof *pages);
    int *status = malloc(npages * sizeof *status);
    for (long i = 0; i < npages; i++)
        pages[i] = buf + i * page;
    if (syscall(SYS_move_pages, 0, npages, pages, NULL, status, 0) != 0) {
        fprintf(stderr, "memlat: move_pages (query): %s\n", strerror(errno));
        return 2;
    }
    for (long i = 0; i < npages; i++)
        on_node += status[i] == node;
    /* one pass to warm the TLB and the caches, then the measured steps */
    char *p = buf;
    for (size_t i = 0; i < lines; i++)
        p = *(char **)p;
    t0 = now_s();
    for (long i = 0; i < steps; i++)
        p = *(char **)p;
    double chase = (now_s() - t0) / steps;
    volatile uint64_t sink = (uint64_t)(uintptr_t)p;
    uint64_t sum = 0;
    t0 = now_s();
    for (size_t i = 0; i < bytes / 8; i++)
        sum += ((uint64_t *)buf)[i];
    double stream = now_s() - t0;
    sink += sum;
    /* soft-dirty tracking as tierkit-run's daemons use it: clearing the bits (/proc/self/
     * clear_refs "4" write-protects every PTE of the process and flushes its TLB), then the first
     * store to each page afterwards takes a write-protect fault */
    char clear_s[32] = "null", wp_s[32] = "null";
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd >= 0) {
        t0 = now_s();
        if (write(fd, "4", 1) == 1) {
            snprintf(clear_s, sizeof clear_s, "%.1f", (now_s() - t0) * 1e9 / npages);
            t0 = now_s();
            for (long i = 0; i < npages; i++)
                ((volatile char *)buf)[i * page + 8] = 2; /* beside the chase's pointer */
            snprintf(wp_s, sizeof wp_s, "%.1f", (now_s() - t0) * 1e9 / npages);
        }
        close(fd);
    }
    int *to = malloc(npages * sizeof *to);
    for (long i = 0; i < npages; i++)
        to[i] = node == 0 ? 1 : 0;
    long moved = 0;
    t0 = now_s();
    for (long i = 0; i < npages; i += 512) {
        long n = npages - i < 512 ? npages - i : 512;
        if (syscall(SYS_move_pages, 0, n, pages + i, to + i, status + i, 2 /* MPOL_MF_MOVE */) < 0) {
            fprintf(stderr, "memlat: move_pages: %s\n", strerror(errno));
            return 2;
        }
        for (long j = i; j < i + n; j++)
            moved += status[j] == to[j];
    }
    double move = now_s() - t0;
    printf("{\"node\": %ld, \"mib\": %ld, \"steps\": %ld, \"on_node_fraction\": %.4f, \"chase_ns\": %.2f, "
           "\"stream_gb_per_s\": %.4f, \"move_ns_per_page\": %.1f, \"moved_fraction\": %.4f, \"fault_ns_per_page\": %.1f, "
           "\"clear_refs_ns_per_page\": %s, \"wp_fault_ns_per_page\": %s}\n",
           node, mib, steps, (double)on_node / npages, chase * 1e9, bytes / stream / 1e9, move * 1e9 / npages,
           (double)moved / npages, fault * 1e9, clear_s, wp_s);
    return 0;
}
