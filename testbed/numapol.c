/* Run a program under a memory policy, as numactl --membind / --localalloc would (the VM's
 * busybox has no numactl): set_mempolicy(2) for this thread, then exec; the policy is kept
 * across exec and inherited by children. Static, no libnuma: the VM has no libc.
 * usage: numapol bind:NODE PROG [ARGS...]   MPOL_BIND to NODE
 *        numapol default PROG [ARGS...]     MPOL_DEFAULT (the local node: first touch)
 * `tierkit validate --guided --programs` runs tierkit-run bound to node 1 and the program under
 * it with the default policy again, so that node 0 holds the program's pages and not the
 * daemon's (docs/guidance.md, "Real programs of the suite"). Exit 2 with one line on an error. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_DEFAULT 0
#define MPOL_BIND 2

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: numapol bind:NODE|default PROG [ARGS...]\n");
        return 2;
    }
    unsigned long mask = 0;
    int mode = MPOL_DEFAULT;
    if (strncmp(argv[1], "bind:", 5) == 0) {
        char *end;
        long node = strtol(argv[1] + 5, &end, 10);
        if (*end || end == argv[1] + 5 || node < 0 || node >= (long)(8 * sizeof mask)) {
            fprintf(stderr, "numapol: bad node in %s\n", argv[1]);
            return 2;
        }
        mode = MPOL_BIND;
        mask = 1UL << node;
    } else if (strcmp(argv[1], "default") != 0) {
        fprintf(stderr, "numapol: unknown policy %s (bind:NODE or default)\n", argv[1]);
        return 2;
    }
    if (syscall(SYS_set_mempolicy, mode, mode == MPOL_DEFAULT ? NULL : &mask, mode == MPOL_DEFAULT ? 0 : 8 * sizeof mask + 1) != 0) {
        fprintf(stderr, "numapol: set_mempolicy %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    execvp(argv[2], argv + 2);
    fprintf(stderr, "numapol: %s: %s\n", argv[2], strerror(errno));
    return 2;
}
