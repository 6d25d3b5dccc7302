/* realloc moves a block: 100 bytes grown to 1 MiB. Prints "old address" and "new address". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
   char* p = malloc(100);
   memset(p, 1, 100);
   printf("old %lu\n", (unsigned long)p);
   fflush(stdout);
   char* q = realloc(p, 1 << 20);
   q[(1 << 20) - 1] = 2;
   printf("new %lu\n", (unsigned long)q);
   free(q);
   return 0;
}
