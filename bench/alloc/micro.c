/* malloc/free microbenchmark for bench/alloc_overhead.py: THREADS threads each make PAIRS
 * malloc+free pairs of 16 to 256 bytes (a size cycle), touching each block once; prints the
 * wall time in ns per pair over all threads' pairs ("wall_ns_per_pair N").
 * Usage: micro THREADS PAIRS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long pairs;

__attribute__((noinline)) static void *site(size_t n) { void *p = malloc(n); __asm__ volatile("" : : "r"(p) : "memory"); return p; }

static void *worker(void *arg) {
    (void)arg;
    static const size_t sizes[] = {16, 32, 48, 64, 96, 128, 192, 256};
    for (long i = 0; i < pairs; i++) {
        char *p = site(sizes[i & 7]);
        p[0] = (char)i;
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    pairs = argc > 2 ? atol(argv[2]) : 10000000;
    pthread_t t[256];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("wall_ns_per_pair %.3f\n", ns / ((double)pairs * threads));
    return 0;
}
