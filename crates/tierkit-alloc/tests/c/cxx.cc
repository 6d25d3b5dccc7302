// C++ allocation sites for tierkit-alloc (docs/guidance.md: the runtime interposes operator
// new itself, so frame 0 of a key is the program's new expression, not libstdc++).
// Prints "SITE ARENA ADDR SIZE" per block and "ok NAME" / "FAIL NAME" per check.
#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <new>

static int (*arena_of)(const void *);
static int failures;
static int arena(const void *p) { return arena_of ? arena_of(p) : -2; }
static void show(const char *s, const void *p, size_t n) { std::printf("%s %d %#lx %zu\n", s, arena(p), (unsigned long)(uintptr_t)p, n); }
static void check(bool ok, const char *name) { std::printf("%s %s\n", ok ? "ok" : "FAIL", name); failures += !ok; }

struct alignas(256) Wide { char b[256]; };

__attribute__((noinline)) char *new_hot(size_t n) { char *p = new char[n]; __asm__ volatile("" : : "r"(p) : "memory"); return p; }
__attribute__((noinline)) long *new_cold() { long *p = new long(7); __asm__ volatile("" : : "r"(p) : "memory"); return p; }
__attribute__((noinline)) Wide *new_wide() { Wide *p = new Wide; __asm__ volatile("" : : "r"(p) : "memory"); return p; }
__attribute__((noinline)) char *new_nothrow(size_t n) { char *p = new (std::nothrow) char[n]; __asm__ volatile("" : : "r"(p) : "memory"); return p; }

int main() {
    arena_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "tierkit_alloc_arena_of");
    for (int i = 0; i < 10; i++) {
        char *h = new_hot(100 + i);
        long *c = new_cold();
        Wide *w = new_wide();
        char *n = new_nothrow(50);
        show("new_hot", h, 100 + i);
        show("new_cold", c, sizeof(long));
        show("new_wide", w, sizeof(Wide));
        show("new_nothrow", n, 50);
        check(((uintptr_t)w % 256) == 0, "aligned_new");
        delete[] h;
        delete c;
        delete w;
        delete[] n;
    }
    bool threw = false;
    try {
        volatile size_t huge = SIZE_MAX / 4;
        char *p = new char[huge];
        show("impossible", p, 0);
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    check(threw, "bad_alloc");
    check(new_nothrow(SIZE_MAX / 4) == nullptr, "nothrow_null");
    return failures ? 1 : 0;
}
