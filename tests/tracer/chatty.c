/* Writes to stdout and stderr and exits with status 7. */
#include <stdio.h>

int main(void)
{
   printf("to stdout\n");
   fprintf(stderr, "to stderr\n");
   return 7;
}
