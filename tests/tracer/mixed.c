/* Reads, writes and read-modify-writes over a few arrays, with accesses that straddle
   cache lines, enough to make small caches evict dirty lines. */
#include <stdlib.h>
#include <string.h>

int main(void)
{
   long n = 6000;
   long* a = malloc(n * sizeof(long));
   long* b = malloc(n * sizeof(long));
   char* c = malloc(n * 8 + 64);
   for (long i = 0; i < n; i++) {
      a[i] = i;
      b[(i * 37) % n] = i;
   }
   for (int r = 0; r < 3; r++)
      for (long i = 0; i < n; i++)
         a[(i * 13) % n] += b[i];
   for (long i = 0; i + 8 <= n * 8; i += 61) {
      long v;   /* unaligned 8-byte accesses, some across a line boundary */
      memcpy(&v, (char*)a + i, 8);
      memcpy(c + i + 3, &v, 8);
   }
   long s = 0;
   for (long i = 0; i < n; i++)
      s += a[i] + c[i];
   free(a);
   free(b);
   free(c);
   return s == 42;
}
