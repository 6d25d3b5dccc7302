/* Site keys that survive real runs (docs/guidance.md, "Site keys"; seed 002 §III, 000 §3).
   Six heap arrays of 64 KiB: three allocated by main directly (hot, warm, cold), three
   through one wrapper allocator (hot, warm, cold), whose innermost frame is the same for
   all three. Hot arrays are swept 40 times, warm ones 4 times, cold ones once (when they
   are filled). Stripped, every frame of this program symbolizes as "??? (in ...)". */
#include <stdlib.h>
#include <string.h>

#define N (64 * 1024)

__attribute__((noinline)) static char* wrap_alloc(size_t n)
{
   char* p = malloc(n);
   if (!p)
      abort();
   return p;
}

__attribute__((noinline)) static char* wrapped_hot(void) { return wrap_alloc(N); }
__attribute__((noinline)) static char* wrapped_warm(void) { return wrap_alloc(N); }
__attribute__((noinline)) static char* wrapped_cold(void) { return wrap_alloc(N); }

static volatile long sink;

static void sweep(volatile char* p, int times)
{
   long s = 0;
   for (int t = 0; t < times; t++)
      for (size_t i = 0; i < N; i += 64)
         s += p[i];
   sink += s;
}

int main(void)
{
   char* hot = malloc(N);
   char* warm = malloc(N);
   char* cold = malloc(N);
   char* whot = wrapped_hot();
   char* wwarm = wrapped_warm();
   char* wcold = wrapped_cold();
   char* all[] = {hot, warm, cold, whot, wwarm, wcold};
   for (int i = 0; i < 6; i++)
      memset(all[i], i + 1, N);
   sweep(hot, 40);
   sweep(whot, 40);
   sweep(warm, 4);
   sweep(wwarm, 4);
   for (int i = 0; i < 6; i++)
      free(all[i]);
   return 0;
}
