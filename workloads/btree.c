/* btree — a B+tree built from random keys, then many random lookups.
 *
 * Memory behaviour
 *   n random 64-bit keys (n: small 2^16, medium 2^22, large 40 Mi) are generated into an
 *   array, then inserted one by one, in that (random) order, into a B+tree of 512-byte nodes
 *   (up to 31 keys; leaves hold the values and a link to the next leaf). Allocations:
 *     keys   8 B x n (malloc), written once in order, read in order while building and at
 *            random by the lookups: large, lukewarm;
 *     nodes  one pool of nodes, grown by doubling with realloc (the realloc site; node
 *            numbers, not pointers, link the tree, so moving the pool is harmless). Random
 *            insertion leaves nodes ~68% full: ~25 B of nodes per key.
 *   Footprint ~33 B per key: small ~2.1 MiB, medium ~132 MiB, large ~1.3 GiB (the printed
 *   footprint_bytes is this estimate; "nodes=" on the result line gives the exact count).
 *   Build: each insertion walks root to leaf (a few inner nodes, then one leaf at random) and
 *   writes the leaf; splits write new nodes at the end of the pool. Lookups (small 2^18,
 *   medium 2^22, large 2^24; 7 in 8 for a key present, 1 in 8 for a random, almost surely
 *   absent key) only read: the root and upper levels (~5% of the nodes) are very hot, the
 *   leaves (~95%) each get a few random reads, and each present key costs one random read of
 *   the key array. Reads dominate: the build is ~10 reads per write, lookups read only. A
 *   final walk along the leaf chain checks the order and feeds the checksum.
 *
 * Output: see wl.h; line 1 adds keys=, lookups=, node_bytes=512; then
 * "nodes=N height=H keys_in_tree=K" and "found=F".
 */
#include "wl.h"

#define ORDER 32         /* children of an inner node */
#define MAXK (ORDER - 1) /* keys of a node */
#define NEXT MAXK        /* slot of a leaf that links to the next leaf */
#define NONE UINT64_MAX
#define MAXDEPTH 32

struct node {
    uint32_t nkeys, leaf;
    uint64_t key[MAXK];
    uint64_t slot[ORDER]; /* inner: child node numbers; leaf: values, then the next leaf */
};

struct tree {
    struct node *pool;
    uint64_t len, cap, root, height;
};

static void tree_init(struct tree *t) {
    t->cap = 64;
    t->pool = malloc(t->cap * sizeof *t->pool);
    WL_NEED(t->pool, t->cap * sizeof *t->pool, "the node pool");
    t->len = 0;
}

static uint64_t new_node(struct tree *t, int leaf) {
    if (t->len == t->cap) {
        uint64_t cap = 2 * t->cap;
        struct node *bigger = realloc(t->pool, cap * sizeof *bigger);
        WL_NEED(bigger, cap * sizeof *bigger, "the node pool");
        t->pool = bigger;
        t->cap = cap;
    }
    struct node *nd = &t->pool[t->len];
    nd->nkeys = 0;
    nd->leaf = (uint32_t)leaf;
    nd->slot[NEXT] = NONE;
    return t->len++;
}

/* first i with key[i] >= k */
static inline uint32_t lower_bound(const uint64_t *key, uint32_t n, uint64_t k) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (key[mid] < k) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* first i with key[i] > k: the child of an inner node that holds k */
static inline uint32_t upper_bound(const uint64_t *key, uint32_t n, uint64_t k) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (key[mid] <= k) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void insert(struct tree *t, uint64_t k, uint64_t v) {
    uint64_t path[MAXDEPTH];
    uint32_t at[MAXDEPTH];
    int depth = 0;
    uint64_t cur = t->root;
    while (!t->pool[cur].leaf) {
        const struct node *nd = &t->pool[cur];
        uint32_t i = upper_bound(nd->key, nd->nkeys, k);
        path[depth] = cur;
        at[depth++] = i;
        cur = nd->slot[i];
    }
    struct node *lf = &t->pool[cur];
    uint32_t i = lower_bound(lf->key, lf->nkeys, k);
    if (i < lf->nkeys && lf->key[i] == k) { /* a repeated key keeps its latest value */
        lf->slot[i] = v;
        return;
    }
    if (lf->nkeys < MAXK) {
        memmove(&lf->key[i + 1], &lf->key[i], (lf->nkeys - i) * sizeof(uint64_t));
        memmove(&lf->slot[i + 1], &lf->slot[i], (lf->nkeys - i) * sizeof(uint64_t));
        lf->key[i] = k;
        lf->slot[i] = v;
        lf->nkeys++;
        return;
    }

    /* split a full leaf: the lower half stays, the upper half moves to a new right sibling */
    uint64_t tk[MAXK + 1], tv[ORDER + 1];
    memcpy(tk, lf->key, i * sizeof *tk);
    memcpy(tv, lf->slot, i * sizeof *tv);
    tk[i] = k;
    tv[i] = v;
    memcpy(&tk[i + 1], &lf->key[i], (MAXK - i) * sizeof *tk);
    memcpy(&tv[i + 1], &lf->slot[i], (MAXK - i) * sizeof *tv);
    uint64_t right = new_node(t, 1);
    lf = &t->pool[cur]; /* the pool may have moved */
    struct node *rt = &t->pool[right];
    const uint32_t keep = (MAXK + 1) / 2;
    memcpy(lf->key, tk, keep * sizeof *tk);
    memcpy(lf->slot, tv, keep * sizeof *tv);
    lf->nkeys = keep;
    memcpy(rt->key, &tk[keep], (MAXK + 1 - keep) * sizeof *tk);
    memcpy(rt->slot, &tv[keep], (MAXK + 1 - keep) * sizeof *tv);
    rt->nkeys = MAXK + 1 - keep;
    rt->slot[NEXT] = lf->slot[NEXT];
    lf->slot[NEXT] = right;
    uint64_t sep = rt->key[0], child = right;

    /* insert (sep, child) into the parents, splitting full ones on the way up */
    while (depth > 0) {
        uint64_t pid = path[--depth];
        uint32_t a = at[depth];
        struct node *p = &t->pool[pid];
        if (p->nkeys < MAXK) {
            memmove(&p->key[a + 1], &p->key[a], (p->nkeys - a) * sizeof(uint64_t));
            memmove(&p->slot[a + 2], &p->slot[a + 1], (p->nkeys - a) * sizeof(uint64_t));
            p->key[a] = sep;
            p->slot[a + 1] = child;
            p->nkeys++;
            return;
        }
        memcpy(tk, p->key, a * sizeof *tk);
        tk[a] = sep;
        memcpy(&tk[a + 1], &p->key[a], (MAXK - a) * sizeof *tk);
        memcpy(tv, p->slot, (a + 1) * sizeof *tv);
        tv[a + 1] = child;
        memcpy(&tv[a + 2], &p->slot[a + 1], (MAXK - a) * sizeof *tv);
        uint64_t nr = new_node(t, 0);
        p = &t->pool[pid];
        struct node *r = &t->pool[nr];
        const uint32_t mid = (MAXK + 1) / 2; /* tk[mid] moves up */
        memcpy(p->key, tk, mid * sizeof *tk);
        memcpy(p->slot, tv, (mid + 1) * sizeof *tv);
        p->nkeys = mid;
        memcpy(r->key, &tk[mid + 1], (MAXK - mid) * sizeof *tk);
        memcpy(r->slot, &tv[mid + 1], (MAXK + 1 - mid) * sizeof *tv);
        r->nkeys = MAXK - mid;
        sep = tk[mid];
        child = nr;
    }
    uint64_t nr = new_node(t, 0);
    struct node *r = &t->pool[nr];
    r->nkeys = 1;
    r->key[0] = sep;
    r->slot[0] = t->root;
    r->slot[1] = child;
    t->root = nr;
    t->height++;
}

static int lookup(const struct tree *t, uint64_t k, uint64_t *v) {
    uint64_t cur = t->root;
    while (!t->pool[cur].leaf) {
        const struct node *nd = &t->pool[cur];
        cur = nd->slot[upper_bound(nd->key, nd->nkeys, k)];
    }
    const struct node *lf = &t->pool[cur];
    uint32_t i = lower_bound(lf->key, lf->nkeys, k);
    if (i < lf->nkeys && lf->key[i] == k) {
        *v = lf->slot[i];
        return 1;
    }
    return 0;
}

static uint64_t *make_keys(uint64_t n, uint64_t key) {
    uint64_t *k = malloc(n * sizeof *k);
    WL_NEED(k, n * sizeof *k, "the keys");
    for (uint64_t i = 0; i < n; i++) k[i] = wl_rand(key, i);
    return k;
}

int main(int argc, char **argv) {
    struct wl_common c;
    wl_parse(&c, "btree", "A B+tree built from random keys, then random lookups.", argc, argv, NULL, 0);

    static const uint64_t default_keys[] = {1ULL << 16, 1ULL << 22, 40ULL << 20};
    static const uint64_t default_lookups[] = {1ULL << 18, 1ULL << 22, 1ULL << 24};
    uint64_t n = default_keys[c.size];
    uint64_t lookups = wl_scaled(&c, default_lookups[c.size]);
    uint64_t footprint = n * 8 + n * 25; /* keys + nodes at ~68% fill */
    wl_head(&c);
    printf(" keys=%llu lookups=%llu node_bytes=%zu", (unsigned long long)n, (unsigned long long)lookups,
           sizeof(struct node));
    wl_head_end(&c, footprint);

    uint64_t *keys = make_keys(n, wl_stream(c.seed, 1));
    struct tree t;
    tree_init(&t);
    t.root = new_node(&t, 1);
    t.height = 1;
    for (uint64_t i = 0; i < n; i++) insert(&t, keys[i], i);

    /* walk the leaves in key order: checks the tree and summarizes it */
    uint64_t cur = t.root, in_tree = 0, prev = 0, h = 0;
    while (!t.pool[cur].leaf) cur = t.pool[cur].slot[0];
    for (; cur != NONE; cur = t.pool[cur].slot[NEXT]) {
        const struct node *lf = &t.pool[cur];
        for (uint32_t i = 0; i < lf->nkeys; i++) {
            if (in_tree && lf->key[i] <= prev) {
                fprintf(stderr, "btree: error: leaves out of order (a bug in this program)\n");
                return 1;
            }
            prev = lf->key[i];
            h = wl_fold(h, prev ^ lf->slot[i]);
            in_tree++;
        }
    }
    printf("nodes=%llu height=%llu keys_in_tree=%llu\n", (unsigned long long)t.len, (unsigned long long)t.height,
           (unsigned long long)in_tree);

    uint64_t found = 0, sum = 0, lkey = wl_stream(c.seed, 2);
    for (uint64_t q = 0; q < lookups; q++) {
        uint64_t r = wl_rand(lkey, q);
        uint64_t k = (r & 7) ? keys[wl_below(r, n)] : wl_mix64(r);
        uint64_t v;
        if (lookup(&t, k, &v)) {
            found++;
            sum += v;
        }
    }
    printf("found=%llu\n", (unsigned long long)found);
    h = wl_fold(wl_fold(h, found), sum);
    wl_checksum(h);
    free(t.pool);
    free(keys);
    return 0;
}
