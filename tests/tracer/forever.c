/* Writes a buffer of 1000 words, prints "pid N", "buffer address bytes" and "ready", then streams
   stores over 8 MiB until it is stopped from outside (at most 120 s, so that a test that
   fails cannot leave it running). With the argument "ignore" it ignores SIGTERM, SIGINT and
   SIGHUP, so that only SIGKILL stops it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv)
{
   if (argc > 1 && strcmp(argv[1], "ignore") == 0) {
      signal(SIGTERM, SIG_IGN);
      signal(SIGINT, SIG_IGN);
      signal(SIGHUP, SIG_IGN);
   }
   long n = 1000;
   long* buf = malloc(n * sizeof(long));
   for (long i = 0; i < n; i++)
      buf[i] = i;
   printf("pid %ld\nbuffer %lu %ld\nready\n", (long)getpid(), (unsigned long)buf, n * 8);
   fflush(stdout);
   long words = (8L << 20) / sizeof(long);
   volatile long* big = malloc(words * sizeof(long));
   time_t start = time(NULL);
   for (long round = 0;; round++) {
      for (long i = 0; i < words; i += 8)
         big[i] = round;
      if (time(NULL) - start > 120)
         return 3;
   }
}
