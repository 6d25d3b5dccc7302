/* A loop that only stores into a buffer. Prints "buffer address bytes". */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
   long n = 8192;
   long* buf = malloc(n * sizeof(long));
   for (long i = 0; i < n; i++)
      buf[i] = i;
   __asm__ volatile("" : : "r"(buf) : "memory");   /* the stores must happen */
   printf("buffer %lu %ld\n", (unsigned long)buf, n * 8);
   free(buf);
   return 0;
}
