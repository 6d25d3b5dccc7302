/* Forks a child that works and exits; the parent waits for it. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
   long* buf = malloc(1000 * sizeof(long));
   pid_t pid = fork();
   for (long i = 0; i < 1000; i++)
      buf[i] = i + (pid == 0);
   if (pid == 0)
      _exit(0);
   int status;
   waitpid(pid, &status, 0);
   free(buf);
   return WEXITSTATUS(status);
}
