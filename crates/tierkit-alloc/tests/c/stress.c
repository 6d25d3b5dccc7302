/* Stress for tierkit-alloc: THREADS threads allocate, reallocate (across sites, so
 * across arenas) and free at 6 sites for SECONDS seconds; the main thread forks a child half
 * way, which allocates at every site and exits; with "rlimit" the address space is limited so
 * that large requests are refused. Every block carries a pattern checked before it is freed or
 * reallocated. Each block's arena (tierkit_alloc_arena_of) must be its site's (STRESS_ARENAS,
 * one per site: hot cold via_hot via_cold hot_realloc cold_realloc) or -1 (the fallback).
 * A refused request must return NULL with errno ENOMEM, as glibc's would.
 * Prints one line "ops A allocs B refused C corrupt D wrong_arena E bad_errno F child G";
 * exit status 1 if D, E, F or G is not 0.
 * Usage: stress SECONDS THREADS [rlimit]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")
NOINLINE void *hot(size_t n) { void *p = malloc(n); KEEP(p); return p; }
NOINLINE void *cold(size_t n) { void *p = malloc(n); KEEP(p); return p; }
NOINLINE void *wrap(size_t n) { void *p = malloc(n); KEEP(p); return p; }
NOINLINE void *via_hot(size_t n) { void *p = wrap(n); KEEP(p); return p; }
NOINLINE void *via_cold(size_t n) { void *p = wrap(n); KEEP(p); return p; }
NOINLINE void *hot_realloc(void *p, size_t n) { void *q = realloc(p, n); KEEP(q); return q; }
NOINLINE void *cold_realloc(void *p, size_t n) { void *q = realloc(p, n); KEEP(q); return q; }

static void *(*const ALLOC[4])(size_t) = {hot, cold, via_hot, via_cold};
static void *(*const REALLOC[2])(void *, size_t) = {hot_realloc, cold_realloc};
static int expected[6] = {-1, -1, -1, -1, -1, -1};
static int (*arena_of)(const void *);
static volatile int stop;

struct stats { long ops, allocs, refused, corrupt, wrong_arena, bad_errno; };
struct slot { unsigned char *p; size_t n; unsigned char tag; };

static uint64_t rnd(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

static int huge; /* rlimit mode: some requests of 64 to 512 MiB, refused once the limit is near */

static size_t pick_size(uint64_t *s) {
    uint64_t r = rnd(s);
    if (huge && r % 1024 == 1) return (64ul << 20) + r % (448ul << 20);
    /* at least 3 bytes: the pattern's three bytes are distinct */
    if (r % 512 == 0) return 3 + r % (2u << 20);
    if (r % 16 == 0) return 3 + r % 65536;
    return 3 + r % 2048;
}

static void mark(struct slot *b) {
    b->p[0] = b->tag;
    b->p[b->n / 2] = b->tag ^ 0x55;
    b->p[b->n - 1] = b->tag ^ 0xaa;
}
static int intact(const struct slot *b, size_t n) { /* the first n bytes of b's pattern */
    if (b->p[0] != b->tag) return 0;
    if (b->n / 2 < n && b->p[b->n / 2] != (unsigned char)(b->tag ^ 0x55)) return 0;
    if (b->n - 1 < n && b->p[b->n - 1] != (unsigned char)(b->tag ^ 0xaa)) return 0;
    return 1;
}

static void placed(struct stats *st, const void *p, int site) {
    if (!arena_of) return;
    int a = arena_of(p);
    if (a != expected[site] && a != -1) st->wrong_arena++;
}

static void refused(struct stats *st) {
    st->refused++;
    if (errno != ENOMEM) st->bad_errno++;
}

static void run(struct stats *st, uint64_t seed, long max_ops) {
    struct slot slots[128] = {{0}};
    uint64_t s = seed;
    for (long i = 0; !stop && (max_ops == 0 || i < max_ops); i++) {
        st->ops++;
        struct slot *b = &slots[rnd(&s) % 128];
        if (!b->p) {
            int site = rnd(&s) % 4;
            size_t n = pick_size(&s);
            errno = 0;
            unsigned char *p = ALLOC[site](n);
            if (!p) { refused(st); continue; }
            st->allocs++;
            placed(st, p, site);
            b->p = p; b->n = n; b->tag = (unsigned char)rnd(&s);
            mark(b);
            continue;
        }
        if (!intact(b, b->n)) st->corrupt++;
        uint64_t what = rnd(&s) % 4;
        if (what < 2) {
            free(b->p);
            b->p = NULL;
        } else if (what == 2) {
            int site = rnd(&s) % 2;
            size_t n = pick_size(&s);
            errno = 0;
            unsigned char *q = REALLOC[site](b->p, n);
            if (!q) { refused(st); continue; } /* the old block stays valid */
            st->allocs++;
            placed(st, q, 4 + site);
            struct slot nb = {q, n, b->tag};
            size_t keep = n < b->n ? n : b->n;
            struct slot old = {q, b->n, b->tag};
            if (!intact(&old, keep)) st->corrupt++;
            *b = nb;
            mark(b);
        }
    }
    for (int i = 0; i < 128; i++)
        if (slots[i].p) {
            if (!intact(&slots[i], slots[i].n)) st->corrupt++;
            free(slots[i].p);
        }
}

static void *worker(void *arg) {
    struct stats *st = arg;
    run(st, (uint64_t)(uintptr_t)arg * 2654435761u + 1, 0);
    return NULL;
}

int main(int argc, char **argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 10;
    int threads = argc > 2 ? atoi(argv[2]) : 16;
    if (threads > 64) threads = 64;
    arena_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "tierkit_alloc_arena_of");
    const char *ea = getenv("STRESS_ARENAS");
    for (int i = 0; ea && i < 6; i++) {
        expected[i] = atoi(ea);
        ea = strchr(ea, ',');
        if (ea) ea++;
    }
    if (argc > 3 && strcmp(argv[3], "rlimit") == 0) {
        /* what is mapped now plus 768 MiB: the 2 MiB requests of 16 threads then meet refusals */
        FILE *f = fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (f) { if (fscanf(f, "%lu", &pages) != 1) pages = 0; fclose(f); }
        struct rlimit rl = {pages * sysconf(_SC_PAGESIZE) + (768ul << 20), RLIM_INFINITY};
        rl.rlim_max = rl.rlim_cur;
        setrlimit(RLIMIT_AS, &rl);
        huge = 1;
    }
    static struct stats st[64];
    pthread_t t[64];
    /* under the address-space limit a thread's stack can be refused too (EAGAIN): only the
       threads that started are joined (joining an unset pthread_t crashes) */
    int started[64] = {0};
    for (int i = 0; i < threads; i++) started[i] = pthread_create(&t[i], NULL, worker, &st[i]) == 0;
    struct timespec half = {seconds / 2, (seconds % 2) * 500000000L};
    nanosleep(&half, NULL);
    long child_failed = 0;
    pid_t pid = fork();
    if (pid == 0) {
        struct stats cs = {0};
        run(&cs, 99, 20000);
        _exit(cs.corrupt || cs.wrong_arena || cs.bad_errno ? 1 : 0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) child_failed = 1;
    struct timespec rest = {seconds - seconds / 2 - (seconds % 2), (seconds % 2) * 500000000L};
    nanosleep(&rest, NULL);
    stop = 1;
    struct stats sum = {0};
    for (int i = 0; i < threads; i++) {
        if (!started[i]) continue;
        pthread_join(t[i], NULL);
        sum.ops += st[i].ops; sum.allocs += st[i].allocs; sum.refused += st[i].refused;
        sum.corrupt += st[i].corrupt; sum.wrong_arena += st[i].wrong_arena; sum.bad_errno += st[i].bad_errno;
    }
    int n_started = 0;
    for (int i = 0; i < threads; i++) n_started += started[i];
    printf("threads %d ops %ld allocs %ld refused %ld corrupt %ld wrong_arena %ld bad_errno %ld child %ld\n", n_started, sum.ops, sum.allocs,
           sum.refused, sum.corrupt, sum.wrong_arena, sum.bad_errno, child_failed);
    return sum.corrupt || sum.wrong_arena || sum.bad_errno || child_failed ? 1 : 0;
}
