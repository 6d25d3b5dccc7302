/* A 16 KiB line-aligned array, written once and then read ten times: it fits in a 32 KiB
   level-1 cache, so main memory sees one read per line and nothing more. Prints
   "array address bytes". */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
   long n = 2048;
   long* a = aligned_alloc(64, n * sizeof(long));
   long s = 0;
   for (long i = 0; i < n; i++)
      a[i] = i;
   for (int r = 0; r < 10; r++)
      for (long i = 0; i < n; i++)
         s += a[i];
   printf("array %lu %ld\n", (unsigned long)a, n * 8);
   free(a);
   return s == 0;
}
