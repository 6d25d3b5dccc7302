/* slowtier: a QEMU TCG plugin that makes the testbed's node 1 really slower than node 0
 * (docs/real-linux.md, "A slow tier that is really slower").
 *
 * Under TCG both NUMA nodes of the VM are host RAM and run at the same speed. This plugin gives
 * the guest a time model and paces each vCPU to it in host time:
 *
 *   guest time of a vCPU = instructions / ips + (LLC misses to node 0) * lat0
 *                                             + (LLC misses to node 1) * lat1
 *
 * - Every translated block adds its instruction count to the vCPU's counter (an inline op, no
 *   call); a conditional callback fires every `quantum` instructions and paces.
 * - Memory accesses of user-space code (or of all code, scope=all) go through a small
 *   set-associative last-level cache model per vCPU (64-byte lines, LRU, tagged by virtual
 *   line). A miss is resolved to its guest physical address; one inside node 1's range costs
 *   lat1, any other RAM lat0. Hits cost nothing beyond their instruction.
 * - Pacing: each vCPU keeps the host time its model has reached and sleeps until then
 *   (clock_nanosleep, absolute). QEMU's virtual clock under TCG is the host's monotonic clock,
 *   and the guest's TSC follows the host's, so every guest clock sees the modelled time as long
 *   as the host keeps up. When it does not (a loaded host), the vCPU runs behind its model; up
 *   to `credit` ns of that is caught up later, the rest is counted as `lag_ns` in the stats
 *   file, which the testbed reads around every measurement and reports.
 *
 * Why not QEMU's time-control API (qemu_plugin_request_time_control / qemu_plugin_update_ns,
 * QEMU >= 9.1)? It advances QEMU_CLOCK_VIRTUAL through qemu_clock_advance_virtual_time(), which
 * sets the clock through the accelerator's set_virtual_clock hook. In QEMU 10.0 only the qtest
 * accelerator has one; TCG does not, so under TCG the call only waits until the host-based
 * clock reaches the requested time: pacing in host time, as here, but from inside a BQL-held
 * loop. -icount gives a deterministic clock but no way for a plugin to add time to it.
 *
 * Not modelled: memory-level parallelism (each miss is paid in full, one after another, so a
 * stream runs at 64 B per miss latency), bandwidth limits and queueing, TLB misses and page
 * walks, writebacks, cache coherence between vCPUs, the kernel's own accesses under scope=user
 * (page copies of migrations, page clearing), DMA. The cache is tagged by virtual line and not
 * flushed at context switches.
 *
 * Arguments (-plugin slowtier.so,arg=value,...):
 *   slow=BASE:SIZE   node 1's guest physical range, bytes (decimal or 0x hex); may be repeated
 *   lat0=NS lat1=NS  miss latency of node 0 and node 1 (default 100, 300)
 *   ips=N            guest instructions per second (default 100000000)
 *   llc=BYTES ways=N the cache model (default 4194304, 16 ways; sets must be a power of two)
 *   scope=user|all   whose memory accesses are modelled (default user)
 *   credit=NS        how far behind its model a vCPU may run and still catch up (default 50000000)
 *   stats=PATH       rewrite this file with the counters about every 50 ms and at exit
 *   control=PATH     read about every 50 ms: "1" paces, anything else lets time flow at the
 *                    host's pace (the testbed boots unpaced and turns pacing on to measure)
 *
 * QEMU ships no header for plugins in Debian's packages, so the few functions used are declared
 * below from QEMU's documented plugin API (docs/devel/tcg-plugins.rst, "API").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- QEMU's plugin API (the subset used), as documented ------------------------------------ */
typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
struct qemu_plugin_hwaddr;
struct qemu_plugin_scoreboard;
typedef struct {
    struct qemu_plugin_scoreboard *score;
    size_t offset;
} qemu_plugin_u64;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64, QEMU_PLUGIN_INLINE_STORE_U64 };
enum qemu_plugin_cond {
    QEMU_PLUGIN_COND_NEVER, QEMU_PLUGIN_COND_ALWAYS, QEMU_PLUGIN_COND_EQ, QEMU_PLUGIN_COND_NE,
    QEMU_PLUGIN_COND_LT, QEMU_PLUGIN_COND_LE, QEMU_PLUGIN_COND_GT, QEMU_PLUGIN_COND_GE,
};
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
                                          uint64_t vaddr, void *userdata);

void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_idle_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_resume_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                      void *userdata);
struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(qemu_plugin_meminfo_t info, uint64_t vaddr);
bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *haddr);
uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *haddr);
struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size);
void *qemu_plugin_scoreboard_find(struct qemu_plugin_scoreboard *score, unsigned int vcpu_index);
void qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
                                                       qemu_plugin_u64 entry, uint64_t imm);
void qemu_plugin_register_vcpu_tb_exec_cond_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                               enum qemu_plugin_cb_flags flags, enum qemu_plugin_cond cond,
                                               qemu_plugin_u64 entry, uint64_t imm, void *userdata);
int qemu_plugin_num_vcpus(void);

#define EXPORT __attribute__((visibility("default")))
/* API version 2 (QEMU 9.0) added scoreboards, per-vCPU inline ops and conditional callbacks */
EXPORT int qemu_plugin_version = 2;

/* ---- the model ------------------------------------------------------------------------------ */
#define MAX_RANGES 8
#define LINE_SHIFT 6
#define KERNEL_BASE 0x8000000000000000ULL /* x86-64: the kernel's half of the address space */

static struct { uint64_t base, end; } slow_ranges[MAX_RANGES];
static int n_slow;
static uint64_t lat[2] = {100, 300};
static uint64_t ips = 100000000;
static uint64_t llc_bytes = 4u << 20, ways = 16, sets;
static bool scope_all;
static int64_t credit_ns = 50000000;
static uint64_t quantum; /* instructions between two pacings: 1 ms of guest time */
static const char *stats_path;
static const char *control_path;
static int control_fd = -1;
static int pacing = 1; /* 0 while the control file says so: time flows at the host's pace */

typedef struct {
    uint64_t insns;     /* since the last pacing (inline add) */
    uint64_t stall_ns;  /* miss latency since the last pacing */
    int64_t sched_ns;   /* the host time this vCPU's model has reached */
    uint64_t total_insns, total_stall_ns, lag_ns, accesses, misses[2];
    uint64_t *tags;     /* sets * ways line numbers, most recent first; 0 = empty */
} vcpu_t;

static struct qemu_plugin_scoreboard *vcpus;
static qemu_plugin_u64 insns_entry;
static int stats_fd = -1;
static int64_t stats_last_ns;
static int stats_busy;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static vcpu_t *vcpu(unsigned int i) { return qemu_plugin_scoreboard_find(vcpus, i); }

static void write_stats(void)
{
    if (stats_fd < 0)
        return;
    uint64_t t[6] = {0};
    int n = qemu_plugin_num_vcpus();
    for (int i = 0; i < n; i++) {
        vcpu_t *v = vcpu(i);
        t[0] += __atomic_load_n(&v->total_insns, __ATOMIC_RELAXED);
        t[1] += __atomic_load_n(&v->total_stall_ns, __ATOMIC_RELAXED);
        t[2] += __atomic_load_n(&v->lag_ns, __ATOMIC_RELAXED);
        t[3] += __atomic_load_n(&v->accesses, __ATOMIC_RELAXED);
        t[4] += __atomic_load_n(&v->misses[0], __ATOMIC_RELAXED);
        t[5] += __atomic_load_n(&v->misses[1], __ATOMIC_RELAXED);
    }
    char buf[512];
    int len = snprintf(buf, sizeof buf,
                       "{\"insns\": %" PRIu64 ", \"stall_ns\": %" PRIu64 ", \"lag_ns\": %" PRIu64
                       ", \"accesses\": %" PRIu64 ", \"misses_node0\": %" PRIu64 ", \"misses_node1\": %" PRIu64
                       ", \"ips\": %" PRIu64 ", \"lat0_ns\": %" PRIu64 ", \"lat1_ns\": %" PRIu64
                       ", \"llc_bytes\": %" PRIu64 ", \"ways\": %" PRIu64 ", \"scope\": \"%s\"}\n",
                       t[0], t[1], t[2], t[3], t[4], t[5], ips, lat[0], lat[1], llc_bytes, ways,
                       scope_all ? "all" : "user");
    /* one write at offset 0 of a fixed-width record: a reader sees an old or a new one */
    if (len > 0 && pwrite(stats_fd, buf, (size_t)len, 0) == len)
        (void)ftruncate(stats_fd, len);
}

static void read_control(void)
{
    char c = '1';
    if (control_fd >= 0 && pread(control_fd, &c, 1, 0) == 1)
        __atomic_store_n(&pacing, c == '1', __ATOMIC_RELAXED);
}

static void maybe_write_stats(int64_t now)
{
    if ((stats_fd < 0 && control_fd < 0) || now - __atomic_load_n(&stats_last_ns, __ATOMIC_RELAXED) < 50000000)
        return;
    if (__atomic_exchange_n(&stats_busy, 1, __ATOMIC_ACQUIRE))
        return;
    stats_last_ns = now;
    read_control();
    write_stats();
    __atomic_store_n(&stats_busy, 0, __ATOMIC_RELEASE);
}

/* pay the model's time since the last pacing in host time */
static void pace(vcpu_t *v)
{
    uint64_t n = v->insns;
    int64_t model = (int64_t)((n * 1000000000ULL) / ips) + (int64_t)v->stall_ns;
    __atomic_store_n(&v->total_insns, v->total_insns + n, __ATOMIC_RELAXED);
    __atomic_store_n(&v->total_stall_ns, v->total_stall_ns + v->stall_ns, __ATOMIC_RELAXED);
    v->insns = 0;
    v->stall_ns = 0;
    v->sched_ns += model;
    int64_t now = now_ns();
    if (!__atomic_load_n(&pacing, __ATOMIC_RELAXED)) {
        v->sched_ns = now;
    } else if (v->sched_ns > now) {
        struct timespec ts = {.tv_sec = v->sched_ns / 1000000000, .tv_nsec = v->sched_ns % 1000000000};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        now = v->sched_ns;
    } else if (now - v->sched_ns > credit_ns) {
        __atomic_store_n(&v->lag_ns, v->lag_ns + (uint64_t)(now - v->sched_ns - credit_ns), __ATOMIC_RELAXED);
        v->sched_ns = now - credit_ns;
    }
    maybe_write_stats(now);
}

static void on_quantum(unsigned int vcpu_index, void *udata)
{
    (void)udata;
    pace(vcpu(vcpu_index));
}

static void on_idle(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    pace(vcpu(vcpu_index));
}

static void on_resume(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    vcpu_t *v = vcpu(vcpu_index);
    int64_t now = now_ns();
    if (v->sched_ns < now) /* idle time passes at the host's pace, as on a machine */
        v->sched_ns = now;
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    vcpu_t *v = vcpu(vcpu_index);
    v->sched_ns = now_ns();
    v->tags = calloc(sets * ways, sizeof *v->tags);
    if (!v->tags) {
        fprintf(stderr, "slowtier: out of memory for the cache model\n");
        abort();
    }
}

static bool is_slow(uint64_t pa)
{
    for (int i = 0; i < n_slow; i++)
        if (pa >= slow_ranges[i].base && pa < slow_ranges[i].end)
            return true;
    return false;
}

static void on_mem(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    (void)udata;
    vcpu_t *v = vcpu(vcpu_index);
    v->accesses++;
    uint64_t line = (vaddr >> LINE_SHIFT) + 1; /* + 1: 0 marks an empty way */
    uint64_t *set = v->tags + (line & (sets - 1)) * ways;
    uint64_t w = 0;
    while (w < ways && set[w] != line)
        w++;
    if (w < ways) { /* a hit: move to the front */
        memmove(set + 1, set, w * sizeof *set);
        set[0] = line;
        return;
    }
    memmove(set + 1, set, (ways - 1) * sizeof *set);
    set[0] = line;
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    if (!hw || qemu_plugin_hwaddr_is_io(hw))
        return;
    int node = is_slow(qemu_plugin_hwaddr_phys_addr(hw)) ? 1 : 0;
    v->misses[node]++;
    v->stall_ns += lat[node];
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, QEMU_PLUGIN_INLINE_ADD_U64, insns_entry, n);
    qemu_plugin_register_vcpu_tb_exec_cond_cb(tb, on_quantum, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_COND_GE,
                                              insns_entry, quantum, NULL);
    if (!scope_all && qemu_plugin_tb_vaddr(tb) >= KERNEL_BASE)
        return;
    for (size_t i = 0; i < n; i++)
        qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i), on_mem, QEMU_PLUGIN_CB_NO_REGS,
                                         QEMU_PLUGIN_MEM_RW, NULL);
}

static void on_plugin_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    int n = qemu_plugin_num_vcpus();
    for (int i = 0; i < n; i++) {
        vcpu_t *v = vcpu(i);
        __atomic_store_n(&v->total_insns, v->total_insns + v->insns, __ATOMIC_RELAXED);
        __atomic_store_n(&v->total_stall_ns, v->total_stall_ns + v->stall_ns, __ATOMIC_RELAXED);
        v->insns = v->stall_ns = 0;
    }
    write_stats();
    if (stats_fd >= 0)
        close(stats_fd);
}

/* ---- arguments ------------------------------------------------------------------------------ */
static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-')
        return false;
    *out = v;
    return true;
}

static int bad(const char *arg, const char *why)
{
    fprintf(stderr, "slowtier: bad argument %s: %s\n", arg, why);
    return -1;
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    if (!info->system_emulation) {
        fprintf(stderr, "slowtier: needs system emulation\n");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        char *a = argv[i], *eq = strchr(a, '=');
        if (!eq)
            return bad(a, "expected NAME=VALUE");
        size_t k = (size_t)(eq - a);
        const char *val = eq + 1;
        uint64_t u;
        if (k == 4 && !strncmp(a, "slow", k)) {
            char copy[128];
            snprintf(copy, sizeof copy, "%s", val);
            char *colon = strchr(copy, ':');
            uint64_t base, size;
            if (!colon)
                return bad(a, "expected BASE:SIZE");
            *colon = 0;
            if (!parse_u64(copy, &base) || !parse_u64(colon + 1, &size) || !size)
                return bad(a, "BASE and SIZE must be numbers, SIZE above 0");
            if (n_slow == MAX_RANGES)
                return bad(a, "too many ranges");
            slow_ranges[n_slow].base = base;
            slow_ranges[n_slow].end = base + size;
            n_slow++;
        } else if (k == 4 && !strncmp(a, "lat0", k) && parse_u64(val, &u)) {
            lat[0] = u;
        } else if (k == 4 && !strncmp(a, "lat1", k) && parse_u64(val, &u)) {
            lat[1] = u;
        } else if (k == 3 && !strncmp(a, "ips", k) && parse_u64(val, &u) && u >= 1000) {
            ips = u;
        } else if (k == 3 && !strncmp(a, "llc", k) && parse_u64(val, &u) && u >= 4096) {
            llc_bytes = u;
        } else if (k == 4 && !strncmp(a, "ways", k) && parse_u64(val, &u) && u >= 1 && u <= 64) {
            ways = u;
        } else if (k == 6 && !strncmp(a, "credit", k) && parse_u64(val, &u)) {
            credit_ns = (int64_t)u;
        } else if (k == 5 && !strncmp(a, "scope", k) && (!strcmp(val, "user") || !strcmp(val, "all"))) {
            scope_all = !strcmp(val, "all");
        } else if (k == 5 && !strncmp(a, "stats", k) && *val) {
            stats_path = val;
        } else if (k == 7 && !strncmp(a, "control", k) && *val) {
            control_path = val;
        } else {
            return bad(a, "unknown name or value out of range");
        }
    }
    if (!n_slow)
        return bad("slow", "node 1's range is required (slow=BASE:SIZE)");
    sets = llc_bytes >> LINE_SHIFT;
    if (sets % ways)
        return bad("llc", "not a multiple of ways * 64 bytes");
    sets /= ways;
    if (sets & (sets - 1))
        return bad("llc", "llc / (ways * 64) must be a power of two");
    quantum = ips / 1000 ? ips / 1000 : 1;
    if (stats_path) {
        stats_fd = open(stats_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (stats_fd < 0) {
            fprintf(stderr, "slowtier: cannot open %s: %s\n", stats_path, strerror(errno));
            return -1;
        }
    }
    if (control_path) {
        control_fd = open(control_path, O_RDONLY | O_CLOEXEC);
        if (control_fd < 0) {
            fprintf(stderr, "slowtier: cannot open %s: %s\n", control_path, strerror(errno));
            return -1;
        }
        read_control();
    }
    vcpus = qemu_plugin_scoreboard_new(sizeof(vcpu_t));
    insns_entry = (qemu_plugin_u64){vcpus, offsetof(vcpu_t, insns)};
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_idle_cb(id, on_idle);
    qemu_plugin_register_vcpu_resume_cb(id, on_resume);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
    return 0;
}
