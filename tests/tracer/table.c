/* Builds a hash table whose size comes from the command line: different inputs, same
   allocation sites. */
#include <stdlib.h>

struct node { long key; struct node* next; };

static struct node** make_buckets(long n)
{
   return calloc(n, sizeof(struct node*));
}

static struct node* make_node(long key, struct node* next)
{
   struct node* x = malloc(sizeof *x);
   x->key = key;
   x->next = next;
   return x;
}

int main(int argc, char** argv)
{
   long n = argc > 1 ? atol(argv[1]) : 1000;
   long nb = n / 4 + 1;
   struct node** b = make_buckets(nb);
   for (long i = 0; i < n; i++)
      b[i % nb] = make_node(i, b[i % nb]);
   long s = 0;
   for (long i = 0; i < nb; i++)
      for (struct node* x = b[i]; x; x = x->next)
         s += x->key;
   return s < 0;
}
