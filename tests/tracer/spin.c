/* Between two stores, a loop of exactly 2 * N instructions (dec, jnz). Prints the address
   of the two stored words ("cells address"). */
#include <stdio.h>
#include <stdlib.h>

static long cell[2];

int main(int argc, char** argv)
{
   long n = argc > 1 ? atol(argv[1]) : 1000;
   long* p = cell;
   __asm__ volatile(
      "movq $1, (%1)\n\t"      /* instruction k: the first store */
      "1: dec %0\n\t"
      "jnz 1b\n\t"
      "movq $2, 8(%1)\n\t"     /* instruction k + 2n + 1: the second store */
      : "+r"(n) : "r"(p) : "memory", "cc");
   printf("cells %lu\n", (unsigned long)p);
   return 0;
}
