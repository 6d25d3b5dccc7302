/* bfs — breadth-first search on a seeded random graph stored as CSR arrays (Graph500-like).
 *
 * Memory behaviour
 *   n = 2^scale vertices (scale: small 15, medium 20, large 24) and 8n undirected edges drawn
 *   with R-MAT probabilities (0.57, 0.19, 0.19, 0.05), vertex numbers scrambled by a seeded
 *   bijection: a few vertices have very high degree, most have few.
 *   Allocations, in order:
 *     edges    8 B per edge, grown by doubling with realloc while edges are generated (the
 *              realloc site), written once in order, read twice in order to build the CSR,
 *              then freed: large, short-lived, sequential;
 *     offsets  4 B x (n+1), CSR row starts;   adjacency 4 B x 2 x edges (both directions);
 *     cursor   4 B x n, used while filling the adjacency, then freed;
 *     dist     4 B x n, BFS level of each vertex;   queue 4 B x n, the frontier.
 *   Peak (while the CSR is filled) ~ 136 B per vertex: small 4.3 MiB, medium 136 MiB,
 *   large 2.1 GiB; during the searches 76 B per vertex stay live.
 *   Each search (8 roots by default) reads the queue and the offsets in frontier order, reads
 *   each reached vertex's adjacency run (short sequential runs at random places) and reads
 *   dist[v] for every edge end at random (the hot, randomly read array, written once per
 *   reached vertex). Reads dominate (~10 reads per write). dist is reset (written) before
 *   each search.
 *
 * Output: see wl.h; line 1 adds scale=, vertices=, edges=, roots=; then one line per search,
 * "root=R visited=V levels=L".
 */
#include "wl.h"

struct edge { uint32_t u, v; };

/* R-MAT quadrant thresholds in 1/65536: a, a+b, a+b+c */
#define RMAT_A 37355u
#define RMAT_AB 49807u
#define RMAT_ABC 62259u

static struct edge *generate_edges(unsigned scale, uint64_t want, uint64_t key, uint64_t *count) {
    uint64_t n = 1ULL << scale;
    uint64_t mult = (wl_rand(key, ~0ULL) | 1) & (n - 1), add = wl_rand(key, ~1ULL) & (n - 1);
    uint64_t cap = 4096, len = 0, draw = 0;
    struct edge *e = malloc(cap * sizeof *e);
    WL_NEED(e, cap * sizeof *e, "the edge list");
    for (uint64_t i = 0; i < want; i++) {
        uint64_t u = 0, v = 0, r = 0;
        for (unsigned l = 0; l < scale; l++) {
            if (l % 4 == 0) r = wl_rand(key, draw++);
            unsigned q = (unsigned)(r & 0xFFFF);
            r >>= 16;
            unsigned bu = q >= RMAT_AB, bv = (q >= RMAT_A && q < RMAT_AB) || q >= RMAT_ABC;
            u = (u << 1) | bu;
            v = (v << 1) | bv;
        }
        u = (u * mult + add) & (n - 1);
        v = (v * mult + add) & (n - 1);
        if (u == v) continue; /* no self-loops */
        if (len == cap) {
            cap *= 2;
            struct edge *bigger = realloc(e, cap * sizeof *e);
            WL_NEED(bigger, cap * sizeof *e, "the edge list");
            e = bigger;
        }
        e[len++] = (struct edge){(uint32_t)u, (uint32_t)v};
    }
    *count = len;
    return e;
}

static uint32_t *alloc_offsets(uint64_t n, const struct edge *e, uint64_t m) {
    uint32_t *off = calloc(n + 1, sizeof *off);
    WL_NEED(off, (n + 1) * sizeof *off, "the CSR offsets");
    for (uint64_t i = 0; i < m; i++) {
        off[e[i].u + 1]++;
        off[e[i].v + 1]++;
    }
    for (uint64_t i = 0; i < n; i++) off[i + 1] += off[i];
    return off;
}

static uint32_t *fill_adjacency(uint64_t n, const uint32_t *off, const struct edge *e, uint64_t m) {
    uint32_t *adj = malloc(2 * m * sizeof *adj);
    WL_NEED(adj, 2 * m * sizeof *adj, "the CSR adjacency");
    uint32_t *cursor = malloc(n * sizeof *cursor);
    WL_NEED(cursor, n * sizeof *cursor, "the fill cursors");
    memcpy(cursor, off, n * sizeof *cursor);
    for (uint64_t i = 0; i < m; i++) {
        adj[cursor[e[i].u]++] = e[i].v;
        adj[cursor[e[i].v]++] = e[i].u;
    }
    free(cursor);
    return adj;
}

/* returns the number of vertices reached; *levels gets the number of BFS levels */
static uint64_t search(uint64_t n, const uint32_t *off, const uint32_t *adj, int32_t *dist, uint32_t *queue,
                       uint32_t root, uint64_t *levels, uint64_t *h) {
    for (uint64_t i = 0; i < n; i++) dist[i] = -1;
    uint64_t head = 0, tail = 0;
    dist[root] = 0;
    queue[tail++] = root;
    int32_t deepest = 0;
    while (head < tail) {
        uint32_t u = queue[head++];
        int32_t du = dist[u] + 1;
        for (uint32_t k = off[u]; k < off[u + 1]; k++) {
            uint32_t v = adj[k];
            if (dist[v] < 0) {
                dist[v] = du;
                deepest = du;
                queue[tail++] = v;
            }
        }
    }
    /* the visiting order and the level of every reached vertex */
    for (uint64_t i = 0; i < tail; i++) *h = wl_fold(*h, ((uint64_t)queue[i] << 8) ^ (uint64_t)dist[queue[i]]);
    *levels = (uint64_t)deepest + 1;
    return tail;
}

int main(int argc, char **argv) {
    struct wl_common c;
    wl_parse(&c, "bfs", "Breadth-first searches on a seeded R-MAT graph in CSR arrays.", argc, argv, NULL, 0);

    static const unsigned scales[] = {15, 20, 24};
    unsigned scale = scales[c.size];
    uint64_t n = 1ULL << scale, want = 8 * n;
    uint64_t roots = wl_scaled(&c, 8);
    uint64_t peak = want * 8 + (n + 1) * 4 + 2 * want * 4 + n * 4;
    wl_head(&c);
    printf(" scale=%u vertices=%llu edges=%llu roots=%llu", scale, (unsigned long long)n, (unsigned long long)want,
           (unsigned long long)roots);
    wl_head_end(&c, peak);

    uint64_t m;
    struct edge *edges = generate_edges(scale, want, wl_stream(c.seed, 1), &m);
    uint32_t *off = alloc_offsets(n, edges, m);
    uint32_t *adj = fill_adjacency(n, off, edges, m);
    free(edges);

    int32_t *dist = malloc(n * sizeof *dist);
    WL_NEED(dist, n * sizeof *dist, "the BFS levels");
    uint32_t *queue = malloc(n * sizeof *queue);
    WL_NEED(queue, n * sizeof *queue, "the BFS queue");

    uint64_t h = wl_fold(0, m);
    uint64_t rkey = wl_stream(c.seed, 2);
    for (uint64_t r = 0, draw = 0; r < roots; r++) {
        uint32_t root = 0;
        for (int tries = 0; tries < 1000; tries++) { /* a root with at least one edge */
            root = (uint32_t)wl_below(wl_rand(rkey, draw++), n);
            if (off[root + 1] > off[root]) break;
        }
        uint64_t levels;
        uint64_t visited = search(n, off, adj, dist, queue, root, &levels, &h);
        printf("root=%u visited=%llu levels=%llu\n", root, (unsigned long long)visited, (unsigned long long)levels);
        h = wl_fold(h, visited);
    }
    wl_checksum(h);
    free(queue);
    free(dist);
    free(adj);
    free(off);
    return 0;
}
