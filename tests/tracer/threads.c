/* Four threads (main and three it creates), each allocating and writing its own buffer. */
#include <pthread.h>
#include <stdlib.h>

#define N 4096

static void* work(void* arg)
{
   long* buf = malloc(N * sizeof(long));
   for (long i = 0; i < N; i++)
      buf[i] = i + (long)arg;
   long s = 0;
   for (long i = 0; i < N; i++)
      s += buf[i];
   free(buf);
   return (void*)s;
}

int main(void)
{
   pthread_t t[3];
   for (long i = 0; i < 3; i++)
      pthread_create(&t[i], NULL, work, (void*)(i + 1));
   work(0);
   for (int i = 0; i < 3; i++)
      pthread_join(t[i], NULL);
   return 0;
}
