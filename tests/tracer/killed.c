/* Writes a buffer, then kills itself with the signal named on the command line (SIGKILL
   by default, which Valgrind cannot intercept). Prints "buffer address bytes". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv)
{
   long n = 1000;
   long* buf = malloc(n * sizeof(long));
   for (long i = 0; i < n; i++)
      buf[i] = i;
   printf("buffer %lu %ld\n", (unsigned long)buf, n * 8);
   fflush(stdout);
   kill(getpid(), argc > 1 && strcmp(argv[1], "term") == 0 ? SIGTERM : SIGKILL);
   return 0;
}
