/* A test program for tierkit-alloc (docs/guidance.md): allocation sites with known roles.
 *   hot()  - a direct malloc site;  cold() - another one;  stray() - a site no guidance names
 *   wrap() - a wrapper around malloc reached from via_hot() and via_cold(): ambiguous at depth
 *            1, decided at depth 2
 * Every block is printed as one line "SITE ARENA ADDR SIZE" (ARENA from the preloaded library's
 * tierkit_alloc_arena_of, -2 without it); then the checks of the malloc family, each printing
 * "ok NAME" or "FAIL NAME ..." (exit status 1 on any failure).
 * Usage: sites [rounds] [threads] [fork]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int (*arena_of)(const void *);
static int failures;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

#define NOINLINE __attribute__((noinline))
/* keeps the call a call (no tail call), so that each site has its own return address */
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

NOINLINE void *hot(size_t n) { void *p = malloc(n); KEEP(p); return p; }
NOINLINE void *cold(size_t n) { void *p = malloc(n); KEEP(p); return p; }
NOINLINE void *stray(size_t n) { void *p = malloc(n); KEEP(p); return p; }
NOINLINE void *wrap(size_t n) { void *p = malloc(n); KEEP(p); return p; }
NOINLINE void *via_hot(size_t n) { void *p = wrap(n); KEEP(p); return p; }
NOINLINE void *via_cold(size_t n) { void *p = wrap(n); KEEP(p); return p; }
NOINLINE void *cold_realloc(void *p, size_t n) { void *q = realloc(p, n); KEEP(q); return q; }
NOINLINE void *hot_calloc(size_t n, size_t s) { void *q = calloc(n, s); KEEP(q); return q; }

static int arena(const void *p) { return arena_of ? arena_of(p) : -2; }

static void show(const char *site, void *p, size_t n) {
    pthread_mutex_lock(&out_lock);
    printf("%s %d %#lx %zu\n", site, arena(p), (unsigned long)(uintptr_t)p, n);
    pthread_mutex_unlock(&out_lock);
}

static void check(int ok, const char *name, const char *detail) {
    pthread_mutex_lock(&out_lock);
    if (ok) printf("ok %s\n", name);
    else { printf("FAIL %s %s\n", name, detail); failures++; }
    pthread_mutex_unlock(&out_lock);
}

typedef void *(*site_fn)(size_t);
static const struct { const char *name; site_fn f; } SITES[] = {
    {"hot", hot}, {"cold", cold}, {"stray", stray}, {"via_hot", via_hot}, {"via_cold", via_cold},
};
#define NSITES (sizeof SITES / sizeof SITES[0])

static int rounds = 20;

static void *worker(void *arg) {
    (void)arg;
    void *keep[NSITES * 64];
    int k = 0;
    for (int r = 0; r < rounds; r++)
        for (size_t s = 0; s < NSITES; s++) {
            size_t n = 24 + 40 * r + 1000 * (r % 3 == 0);
            void *p = SITES[s].f(n);
            memset(p, 0x5a, n);
            show(SITES[s].name, p, n);
            if (k < (int)(sizeof keep / sizeof keep[0])) keep[k++] = p;
            else free(p);
        }
    for (int i = 0; i < k; i++) free(keep[i]);
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 20;
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    int do_fork = argc > 3 && strcmp(argv[3], "fork") == 0;
    arena_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "tierkit_alloc_arena_of");
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);

    worker(NULL);

    /* SITES_BIG_MIB=N: N MiB from the hot site and N MiB from the cold one, touched, kept until
     * exit (placement tests on a two-node machine) */
    const char *big = getenv("SITES_BIG_MIB");
    if (big) {
        size_t n = (size_t)atol(big) << 20;
        char *bh = hot(n), *bc = cold(n);
        memset(bh, 1, n);
        memset(bc, 2, n);
        show("hot", bh, n);
        show("cold", bc, n);
    }

    /* realloc across arenas: a hot block reallocated at the cold realloc site keeps its bytes */
    char *h = hot(100);
    for (int i = 0; i < 100; i++) h[i] = (char)i;
    char *c = cold_realloc(h, 5000);
    int same = 1;
    for (int i = 0; i < 100; i++) same &= c[i] == (char)i;
    check(same, "realloc_keeps_bytes", "");
    show("cold_realloc", c, 5000);
    c = cold_realloc(c, 50); /* shrink at the same site */
    same = 1;
    for (int i = 0; i < 50; i++) same &= c[i] == (char)i;
    check(same, "realloc_shrink", "");
    free(c);
    check(realloc(NULL, 10) != NULL, "realloc_null", ""); /* leaks 10 bytes on purpose: no */
    void *z = malloc(10);
    errno = 0;
    check(realloc(z, 0) == NULL, "realloc_zero_frees", "");

    /* calloc zeroes memory that was dirty in the same arena */
    for (int i = 0; i < 8; i++) { void *d = hot(4096); memset(d, 0xff, 4096); free(d); }
    unsigned char *zc = hot_calloc(512, 8);
    int zero = 1;
    for (int i = 0; i < 4096; i++) zero &= zc[i] == 0;
    check(zero, "calloc_zeroes", "");
    show("hot_calloc", zc, 4096);
    free(zc);
    errno = 0;
    check(calloc((size_t)1 << 40, (size_t)1 << 40) == NULL && errno == ENOMEM, "calloc_overflow_enomem", "");

    /* alignment */
    void *ap = NULL;
    int ok = 1;
    for (size_t al = sizeof(void *); al <= 1 << 16; al <<= 1) {
        ok &= posix_memalign(&ap, al, 100) == 0 && ((uintptr_t)ap % al) == 0;
        free(ap);
        void *q = aligned_alloc(al, al * 2);
        ok &= q && ((uintptr_t)q % al) == 0;
        free(q);
        q = memalign(al, 10);
        ok &= q && ((uintptr_t)q % al) == 0;
        free(q);
    }
    check(ok, "alignment", "");
    check(posix_memalign(&ap, 3, 10) == EINVAL, "posix_memalign_einval", "");
    long pg = sysconf(_SC_PAGESIZE);
    void *v = valloc(10), *pv = pvalloc(pg + 1);
    check(v && (uintptr_t)v % pg == 0 && pv && (uintptr_t)pv % pg == 0 && malloc_usable_size(pv) >= (size_t)(2 * pg), "valloc_pvalloc", "");
    free(v);
    free(pv);
    /* malloc_usable_size: at least what was asked, and writable */
    ok = 1;
    for (size_t n = 1; n < 100000; n = n * 3 + 1) {
        char *p = hot(n);
        size_t u = malloc_usable_size(p);
        ok &= u >= n;
        memset(p, 1, u);
        free(p);
    }
    check(ok && malloc_usable_size(NULL) == 0, "malloc_usable_size", "");
    errno = 0;
    check(malloc((size_t)-1 / 2) == NULL && errno == ENOMEM, "malloc_huge_enomem", "");

    /* the internal API for per-phase guidance: move arena 0's pages to node 0 (the only node
     * here), refuse a node that does not exist and an arena that does not */
    int (*move_arena)(unsigned, int) = (int (*)(unsigned, int))dlsym(RTLD_DEFAULT, "tierkit_alloc_move_arena");
    if (move_arena && getenv("SITES_MOVE")) {
        void *keep = hot(1 << 20);
        memset(keep, 1, 1 << 20);
        int r0 = move_arena(0, 0), r1 = move_arena(0, 977), r2 = move_arena(99, 0);
        char d[64];
        snprintf(d, sizeof d, "%d %d %d", r0, r1, r2);
        check(r0 == 0 && r1 == EINVAL && r2 == EINVAL && arena(keep) == 0, "move_arena", d);
        free(keep);
    }
    if (do_fork) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            worker(NULL);
            fflush(stdout);
            _exit(failures ? 1 : 0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork_child", "");
    }
    if (threads > 0) {
        pthread_t t[64];
        for (int i = 0; i < threads && i < 64; i++) pthread_create(&t[i], NULL, worker, NULL);
        for (int i = 0; i < threads && i < 64; i++) pthread_join(t[i], NULL);
        check(1, "threads", "");
    }
    fflush(stdout);
    return failures ? 1 : 0;
}
