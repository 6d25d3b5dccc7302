/* Three arrays from three allocation sites; the first is streamed ten times, the others
   once. Prints the arrays' addresses and sizes ("name address bytes"). calloc's zeroing
   is not traced, so every traced access to an array is one of the streaming reads. */
#include <stdio.h>
#include <stdlib.h>

static long sum(const long* a, long n)
{
   long s = 0;
   for (long i = 0; i < n; i++)
      s += a[i];
   return s;
}

int main(void)
{
   long na = 16384, nb = 32768, nc = 8192;
   long* hot = calloc(na, sizeof(long));
   long* big = calloc(nb, sizeof(long));
   long* small = calloc(nc, sizeof(long));
   long s = 0;
   for (int r = 0; r < 10; r++)
      s += sum(hot, na);
   s += sum(big, nb);
   s += sum(small, nc);
   printf("hot %lu %ld\nbig %lu %ld\nsmall %lu %ld\n", (unsigned long)hot, na * 8,
          (unsigned long)big, nb * 8, (unsigned long)small, nc * 8);
   free(hot);
   free(big);
   free(small);
   return s != 0;
}
