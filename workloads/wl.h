/* wl.h — what every tierkit workload shares: option parsing, a counter-based random
 * generator, checksums, and the output format. Header-only (static functions), so each
 * workload is one C file and its allocation call sites are its own.
 *
 * Command line, every workload:
 *   --size small|medium|large  footprint class (default small)
 *   --seed S                   random seed, decimal or 0x-hex (default 1)
 *   --work F                   multiply the amount of work (updates, iterations, lookups) by
 *                              F >= 0 without changing the footprint; 0 builds and initializes
 *                              the data, computes the checksum and stops (default 1)
 *   --plan                     print the parameter line only; allocate and run nothing
 *   --help                     usage on stdout, exit 0
 * plus the workload's own options. `--opt value` and `--opt=value` are both accepted.
 *
 * Output format (stdout):
 *   line 1  "<name> size=<size> seed=<S> work=<F> <key>=<value> ... footprint_bytes=<N>":
 *           the parameters the size chose, and N, the planned peak of live heap bytes;
 *   then    zero or more "<key>=<value> ..." result lines (counts, per-phase figures);
 *   last    "checksum=<16 hex digits>", a hash of the result, so that the work cannot be
 *           optimized away and two runs can be compared.
 * Nothing depends on time or addresses: the same arguments give the same output, byte for byte.
 *
 * Errors: one line "<name>: error: ..." on stderr; exit status 2 for a bad argument, 1 when
 * memory runs out.
 *
 * Regions and hot data (for `tierkit validate`, docs/validation.md "Hot data"): with
 * WL_REGIONS=FILE in the environment, a workload writes to FILE, as it runs, its main arrays
 * ("region NAME 0xSTART BYTES") and, each time the data it works hardest on changes, which
 * regions that is from then on ("hot T_MS NAME..."; T_MS: milliseconds since the program
 * started, on the monotonic clock). The k-th "hot" line (k = 1, 2, ...) is also the user
 * marker k of a trace recorded with `tierkit trace record` (TIERKIT_MARK, tracer/tierkit.h),
 * so that a simulation of the trace knows the same moments. Without WL_REGIONS nothing is
 * written and stdout is unchanged.
 */
#ifndef TIERKIT_WL_H
#define TIERKIT_WL_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* TIERKIT_MARK(id) as tracer/tierkit.h defines it (the workloads stay self-contained: they
 * build wherever their directory is copied): a Valgrind client request the tracer records as
 * user marker `id`, a few instructions that do nothing outside it. */
#ifndef TIERKIT_MARK
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define TIERKIT_MARK(id) \
    VALGRIND_DO_CLIENT_REQUEST_STMT((((unsigned int)('T') & 0xff) << 24 | ((unsigned int)('K') & 0xff) << 16), (id), 0, 0, 0, 0)
#endif
#endif
#endif
#ifndef TIERKIT_MARK
#define TIERKIT_MARK(id) ((void)(id))
#endif

enum wl_size { WL_SMALL, WL_MEDIUM, WL_LARGE };
static const char *const wl_size_names[] = {"small", "medium", "large"};

struct wl_common {
    const char *name;
    enum wl_size size;
    uint64_t seed;
    double work;
    int plan;
};

enum wl_kind { WL_U64, WL_F64 };

/* A workload-specific option: an unsigned integer or a float, with an inclusive range. */
struct wl_opt {
    const char *name; /* with the dashes: "--threads" */
    enum wl_kind kind;
    void *dst;        /* uint64_t * or double * */
    double lo, hi;    /* inclusive range */
    const char *help;
};

static const char *wl_prog = "workload";
static struct timespec wl_t0;

static void wl_usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void wl_usage_error(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: error: ", wl_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see '%s --help')\n", wl_prog);
    exit(2);
}

static void wl_oom(size_t bytes, const char *what) __attribute__((noreturn));
static void wl_oom(size_t bytes, const char *what) {
    fprintf(stderr, "%s: error: out of memory allocating %zu bytes for %s\n", wl_prog, bytes, what);
    exit(1);
}

/* Checked at the call site (a macro, not a wrapper), so that every allocation keeps its own
 * call site and call stack in a trace. */
#define WL_NEED(p, bytes, what) \
    do {                        \
        if (!(p)) wl_oom((bytes), (what)); \
    } while (0)

static int wl_parse_u64(const char *s, uint64_t *out) {
    if (!*s || !(s[0] >= '0' && s[0] <= '9')) return 0; /* no sign, no blanks */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end) return 0;
    *out = v;
    return 1;
}

static int wl_parse_f64(const char *s, double *out) {
    if (!*s) return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

static void wl_print_usage(const char *summary, const struct wl_opt *extra, int nextra) {
    printf("usage: %s [--size small|medium|large] [--seed S] [--work F] [--plan]", wl_prog);
    for (int i = 0; i < nextra; i++) printf(" [%s %s]", extra[i].name, extra[i].kind == WL_U64 ? "N" : "X");
    printf("\n%s\n\n", summary);
    printf("  --size small|medium|large  footprint class (default small)\n");
    printf("  --seed S                   random seed (default 1)\n");
    printf("  --work F                   scale the amount of work, not the footprint (default 1; 0: build only)\n");
    printf("  --plan                     print the parameter line and exit\n");
    for (int i = 0; i < nextra; i++) {
        char opt[64];
        snprintf(opt, sizeof opt, "%s %s", extra[i].name, extra[i].kind == WL_U64 ? "N" : "X");
        printf("  %-26s %s (%g..%g)\n", opt, extra[i].help, extra[i].lo, extra[i].hi);
    }
}

static void wl_parse(struct wl_common *c, const char *name, const char *summary, int argc, char **argv,
                     const struct wl_opt *extra, int nextra) {
    wl_prog = name;
    clock_gettime(CLOCK_MONOTONIC, &wl_t0);
    c->name = name;
    c->size = WL_SMALL;
    c->seed = 1;
    c->work = 1.0;
    c->plan = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            wl_print_usage(summary, extra, nextra);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0 || !a[2]) wl_usage_error("unexpected argument '%s'", a);
        /* split --key=value */
        char key[64];
        const char *val = NULL;
        const char *eq = strchr(a, '=');
        size_t klen = eq ? (size_t)(eq - a) : strlen(a);
        if (klen >= sizeof key) wl_usage_error("unknown option '%.40s...'", a);
        memcpy(key, a, klen);
        key[klen] = 0;
        if (eq) val = eq + 1;
        if (!strcmp(key, "--plan")) {
            if (val) wl_usage_error("--plan takes no value");
            c->plan = 1;
            continue;
        }
        int known = !strcmp(key, "--size") || !strcmp(key, "--seed") || !strcmp(key, "--work");
        const struct wl_opt *o = NULL;
        for (int k = 0; k < nextra && !known; k++)
            if (!strcmp(key, extra[k].name)) o = &extra[k];
        if (!known && !o) wl_usage_error("unknown option '%s'", key);
        if (!val) {
            if (i + 1 >= argc) wl_usage_error("%s needs a value", key);
            val = argv[++i];
        }
        if (!strcmp(key, "--size")) {
            int s = -1;
            for (int k = 0; k < 3; k++)
                if (!strcmp(val, wl_size_names[k])) s = k;
            if (s < 0) wl_usage_error("--size: '%s' is not small, medium or large", val);
            c->size = (enum wl_size)s;
        } else if (!strcmp(key, "--seed")) {
            if (!wl_parse_u64(val, &c->seed)) wl_usage_error("--seed: '%s' is not an unsigned 64-bit integer", val);
        } else if (!strcmp(key, "--work")) {
            if (!wl_parse_f64(val, &c->work) || c->work < 0 || c->work > 1e6)
                wl_usage_error("--work: '%s' is not a number in 0..1e6", val);
        } else if (o->kind == WL_U64) {
            uint64_t v;
            if (!wl_parse_u64(val, &v)) wl_usage_error("%s: '%s' is not an unsigned integer", key, val);
            if ((double)v < o->lo || (double)v > o->hi)
                wl_usage_error("%s: %s is out of range %g..%g", key, val, o->lo, o->hi);
            *(uint64_t *)o->dst = v;
        } else {
            double v;
            if (!wl_parse_f64(val, &v)) wl_usage_error("%s: '%s' is not a number", key, val);
            if (v < o->lo || v > o->hi) wl_usage_error("%s: %s is out of range %g..%g", key, val, o->lo, o->hi);
            *(double *)o->dst = v;
        }
    }
}

/* The WL_REGIONS file (see the top), opened at first use; NULL without WL_REGIONS. */
__attribute__((unused)) static FILE *wl_regions_file(void) {
    static int opened;
    static FILE *f;
    if (!opened) {
        opened = 1;
        const char *path = getenv("WL_REGIONS");
        if (path && *path) {
            f = fopen(path, "w");
            if (!f) {
                fprintf(stderr, "%s: error: WL_REGIONS: cannot write %s: %s\n", wl_prog, path, strerror(errno));
                exit(2);
            }
        }
    }
    return f;
}

/* One of the workload's arrays: NAME (no spaces) is [p, p + bytes). */
__attribute__((unused)) static void wl_region(const char *name, const void *p, uint64_t bytes) {
    FILE *f = wl_regions_file();
    if (!f) return;
    fprintf(f, "region %s 0x%llx %llu\n", name, (unsigned long long)(uintptr_t)p, (unsigned long long)bytes);
    fflush(f);
}

/* From here on the hot data is the regions named in `names` (space-separated): a "hot" line
 * in the WL_REGIONS file and, under the tracer, user marker k for the k-th call. */
__attribute__((unused)) static void wl_hot(const char *names) {
    static unsigned long long k;
    k++;
    TIERKIT_MARK(k);
    FILE *f = wl_regions_file();
    if (!f) return;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double ms = (double)(t.tv_sec - wl_t0.tv_sec) * 1e3 + (double)(t.tv_nsec - wl_t0.tv_nsec) / 1e6;
    fprintf(f, "hot %.3f %s\n", ms, names);
    fflush(f);
}

/* Scale a default operation count by --work, rounding to nearest. */
static uint64_t wl_scaled(const struct wl_common *c, uint64_t n) {
    return (uint64_t)llround((double)n * c->work);
}

/* Line 1 is printed in two halves: wl_head, then the workload's own " key=value" pairs,
 * then wl_head_end, which stops here under --plan. */
static void wl_head(const struct wl_common *c) {
    printf("%s size=%s seed=%llu work=%g", c->name, wl_size_names[c->size], (unsigned long long)c->seed, c->work);
}

static void wl_head_end(const struct wl_common *c, uint64_t footprint_bytes) {
    printf(" footprint_bytes=%llu\n", (unsigned long long)footprint_bytes);
    fflush(stdout);
    if (c->plan) exit(0);
}

static void wl_checksum(uint64_t h) {
    printf("checksum=%016llx\n", (unsigned long long)h);
}

/* ---- random numbers: splitmix64, used as a counter-based generator ----
 * wl_rand(key, i) is the i-th number of the stream named by key, so any thread can compute any
 * part of a stream and results do not depend on how work is split. */
#define WL_GOLDEN 0x9E3779B97F4A7C15ULL

static inline uint64_t wl_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* key of an independent stream for one purpose ("edges", "roots", ...) */
static inline uint64_t wl_stream(uint64_t seed, uint64_t purpose) {
    return wl_mix64(wl_mix64(seed) ^ (purpose * 0xD1B54A32D192ED03ULL));
}

static inline uint64_t wl_rand(uint64_t key, uint64_t i) { return wl_mix64(key + (i + 1) * WL_GOLDEN); }

struct wl_rng { uint64_t s; };
static inline uint64_t wl_next(struct wl_rng *r) { return wl_mix64(r->s += WL_GOLDEN); }

/* uniform in [0, n) from one 64-bit draw (multiply-shift; bias is far below anything measured) */
static inline uint64_t wl_below(uint64_t r, uint64_t n) { return (uint64_t)(((unsigned __int128)r * n) >> 64); }

/* uniform in [0, 1) */
static inline double wl_unit(uint64_t r) { return (double)(r >> 11) * 0x1.0p-53; }

/* ---- checksums ---- */
static inline uint64_t wl_fold(uint64_t h, uint64_t v) {
    h = (h ^ v) * WL_GOLDEN;
    return h ^ (h >> 32);
}

static inline uint64_t wl_fold_f64(uint64_t h, double d) {
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    return wl_fold(h, v);
}

#endif
