"""The python3 recipe's program (data/recipes/record_traces.py): a weighted undirected graph
read from an edge list ("u v w" per line), then shortest paths from two sources (Dijkstra
with heapq), connected components (breadth-first, collections.deque) and 10 iterations of
PageRank over dicts. Only the standard library; run by Debian's /usr/bin/python3."""
import heapq
import sys
from collections import deque


def read(path: str) -> dict[int, list[tuple[int, int]]]:
    adj: dict[int, list[tuple[int, int]]] = {}
    with open(path) as f:
        for line in f:
            u, v, w = map(int, line.split())
            adj.setdefault(u, []).append((v, w))
            adj.setdefault(v, []).append((u, w))
    return adj


def dijkstra(adj: dict[int, list[tuple[int, int]]], src: int) -> dict[int, int]:
    dist = {src: 0}
    heap = [(0, src)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        for v, w in adj[u]:
            nd = d + w
            if nd < dist.get(v, nd + 1):
                dist[v] = nd
                heapq.heappush(heap, (nd, v))
    return dist


def components(adj: dict[int, list[tuple[int, int]]]) -> list[int]:
    seen: set[int] = set()
    sizes = []
    for s in adj:
        if s in seen:
            continue
        seen.add(s)
        queue, n = deque([s]), 0
        while queue:
            u = queue.popleft()
            n += 1
            for v, _ in adj[u]:
                if v not in seen:
                    seen.add(v)
                    queue.append(v)
        sizes.append(n)
    return sorted(sizes, reverse=True)


def pagerank(adj: dict[int, list[tuple[int, int]]], rounds: int = 10, d: float = 0.85) -> dict[int, float]:
    n = len(adj)
    rank = dict.fromkeys(adj, 1.0 / n)
    for _ in range(rounds):
        nxt = dict.fromkeys(adj, (1.0 - d) / n)
        for u, edges in adj.items():
            share = d * rank[u] / len(edges)
            for v, _ in edges:
                nxt[v] += share
        rank = nxt
    return rank


def main(path: str) -> None:
    adj = read(path)
    nodes = sorted(adj)
    for src in (nodes[0], nodes[len(nodes) // 2]):
        dist = dijkstra(adj, src)
        far = max(dist.values())
        print(f"from {src}: {len(dist)} reached, farthest {far}, mean {sum(dist.values()) / len(dist):.1f}")
    sizes = components(adj)
    print(f"{len(adj)} nodes, {sum(map(len, adj.values())) // 2} edges, {len(sizes)} components (largest {sizes[0]})")
    rank = pagerank(adj)
    top = sorted(rank, key=lambda u: (-rank[u], u))[:5]
    print("top ranks:", " ".join(f"{u}:{rank[u] * len(adj):.3f}" for u in top))


if __name__ == "__main__":
    main(sys.argv[1])
