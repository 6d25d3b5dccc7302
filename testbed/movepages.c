/* move_pages(2) round trip on the testbed: one page, first touched by a CPU of node 0, moved to
 * node FROM->TO and back, its node queried (nodes == NULL) after each step. Static, no libnuma:
 * the VM has no libc. Prints one JSON line; exits 0 when every step lands where asked.
 * usage: movepages [SLOW_NODE]   (default 1) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_MF_MOVE (1 << 1)

static long move_pages_(unsigned long count, void **pages, const int *nodes, int *status)
{
    return syscall(SYS_move_pages, 0, count, pages, nodes, status, MPOL_MF_MOVE);
}

/* the node the page is on, or -errno */
static int node_of(void *page)
{
    int status = -1;
    if (move_pages_(1, &page, NULL, &status) != 0)
        return -errno;
    return status;
}

/* move, then return the page's node (or the move's -errno / negative per-page status) */
static int move_to(void *page, int node)
{
    int status = -1;
    if (move_pages_(1, &page, &node, &status) != 0)
        return -errno;
    if (status < 0)
        return status;
    return node_of(page);
}

int main(int argc, char **argv)
{
    int slow = argc > 1 ? atoi(argv[1]) : 1;
    long page_bytes = sysconf(_SC_PAGESIZE);
    char *page = mmap(NULL, page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    memset(page, 0x5a, page_bytes); /* first touch: placed on the CPU's node */
    int initial = node_of(page);
    int on_slow = move_to(page, slow);
    int back = move_to(page, 0);
    int intact = 1;
    for (long i = 0; i < page_bytes; i++)
        intact &= page[i] == 0x5a;
    printf("{\"initial_node\": %d, \"after_move_to_%d\": %d, \"after_move_to_0\": %d, \"contents_intact\": %s}\n",
           initial, slow, on_slow, back, intact ? "true" : "false");
    return (initial == 0 && on_slow == slow && back == 0 && intact) ? 0 : 1;
}
