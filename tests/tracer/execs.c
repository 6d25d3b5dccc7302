/* Works, then replaces itself with /bin/true. */
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
   long* buf = malloc(1000 * sizeof(long));
   for (long i = 0; i < 1000; i++)
      buf[i] = i;
   execl("/bin/true", "true", (char*)NULL);
   return 1;
}
