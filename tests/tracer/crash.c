/* Writes a buffer, then dereferences a null pointer (SIGSEGV). Prints "buffer address bytes". */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
   long n = 1000;
   long* buf = malloc(n * sizeof(long));
   for (long i = 0; i < n; i++)
      buf[i] = i;
   printf("buffer %lu %ld\n", (unsigned long)buf, n * 8);
   fflush(stdout);
   volatile long* nowhere = NULL;
   return (int)*nowhere;
}
