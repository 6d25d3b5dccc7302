/* tk_cache.c: the cache hierarchy the tracer filters accesses through.

   It implements exactly the model of tierkit's Rust cache filter
   (crates/tierkit-core/src/cache.rs), so that a raw trace filtered afterwards by
   `tierkit trace convert --cache SPEC` gives the same records as a trace recorded with the same
   `--cache SPEC` in-band (tests/test_tracer.py checks this). Assumptions, as there:

   - a hierarchy of set-associative levels, innermost first, all with the same line size; each
     write-back and write-allocate, with true LRU replacement inside a set: a set fills its
     empty ways before it evicts anything, then evicts its least recently used line.
     (cache.rs stamps each way with a per-level access clock and evicts the first way with the
     smallest stamp; here each set is a list ordered by recency. Both evict the same line.)
   - the set of a line is `line mod sets` (sets need not be a power of two);
   - non-inclusive: a line is filled into every level it missed in; only the innermost level
     sees the store itself (deeper levels are filled clean); a dirty victim of level i is
     written into level i+1 (a write access there, which may evict further), and from the last
     level it goes to memory as a write;
   - a dirty victim is written back before the missing line is looked up in the next level;
   - a store that misses everywhere reads its line from memory first (read for ownership): it
     appears as a memory read, and its data leaves as a write only when evicted dirty;
   - the memory read of a line is reported before the writebacks its access caused;
   - one hierarchy for all threads (Valgrind runs the threads of a program one at a time);
   - an access that straddles a line boundary touches each line it covers, in address order;
     an access of size 0 touches one line;
   - no prefetching, no instruction fetches; dirty lines still cached at the end are not
     flushed.
*/

#include "pub_tool_basics.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_mallocfree.h"
#include "tk_cache.h"

const HChar* tk_cache_check(UInt n_levels, const ULong* size_bytes, const UInt* ways,
                            UInt line_bytes)
{
   UInt i;
   if (n_levels == 0 || n_levels > TK_MAX_LEVELS)
      return "between 1 and 8 cache levels are supported";
   if (line_bytes == 0 || (line_bytes & (line_bytes - 1)) != 0)
      return "the line size must be a power of two";
   for (i = 0; i < n_levels; i++) {
      ULong set_bytes = (ULong)ways[i] * line_bytes;
      if (ways[i] == 0)
         return "every level needs at least one way";
      if (size_bytes[i] == 0 || size_bytes[i] % set_bytes != 0)
         return "a level's size must be a positive multiple of ways x line size";
   }
   return NULL;
}

void tk_cache_init(TkCache* c, UInt n_levels, const ULong* size_bytes, const UInt* ways,
                   UInt line_bytes, TkMemFn mem)
{
   UInt i;
   tl_assert(tk_cache_check(n_levels, size_bytes, ways, line_bytes) == NULL);
   VG_(memset)(c, 0, sizeof *c);
   c->n_levels = n_levels;
   c->mem = mem;
   while ((1u << c->line_shift) < line_bytes)
      c->line_shift++;
   for (i = 0; i < n_levels; i++) {
      TkLevel* l = &c->level[i];
      ULong n = size_bytes[i] / line_bytes;
      l->ways = ways[i];
      l->sets = n / ways[i];
      /* with one set the mask is 0 and `line mod 1` is 0 too */
      l->set_mask = (l->sets & (l->sets - 1)) == 0 ? l->sets - 1 : 0;
      /* sets start on 128-byte boundaries, so a set of up to 16 ways is one pair of host
         cache lines (what the host fetches together) */
      l->entry = (ULong*)(((Addr)VG_(calloc)("tk.cache.entry", n * sizeof(ULong) + 128, 1) + 127) & ~(Addr)127);
   }
}

TkLevelStats tk_cache_stats(const TkCache* c, UInt level)
{
   const TkLevel* l = &c->level[level];
   TkLevelStats s;
   s.accesses = l->accesses;
   s.misses = l->misses;
   s.hits = l->accesses - l->misses;
   s.writebacks = l->writebacks;
   return s;
}

static ULong* set_of(const TkLevel* l, ULong line)
{
   ULong set = l->set_mask ? (line & l->set_mask) : (line % l->sets);
   return l->entry + set * l->ways;
}

/* Put `line` first in its set after a miss. Returns True and the victim's line if a dirty
   line was evicted. */
static Bool fill(TkLevel* l, ULong* set, ULong line, Bool write, ULong* victim_line)
{
   ULong victim = set[l->ways - 1];
   UInt w;
   Bool dirty_victim = (victim & 1) != 0;   /* an empty way (0) is never dirty */
   l->misses++;
   if (dirty_victim) {
      *victim_line = (victim >> 1) - 1;
      l->writebacks++;
   }
   for (w = l->ways - 1; w > 0; w--)
      set[w] = set[w - 1];
   set[0] = ((line + 1) << 1) | write;
   return dirty_victim;
}

typedef enum { HIT, MISS, MISS_DIRTY_VICTIM } Lookup;

/* An access to one level; fills on a miss. */
static Lookup level_access(TkLevel* l, ULong line, Bool write, ULong* victim_line)
{
   ULong* set = set_of(l, line);
   ULong key = (line + 1) << 1;
   UInt w;
   l->accesses++;
   for (w = 0; w < l->ways; w++) {
      if ((set[w] & ~1ULL) == key) {
         ULong e = set[w] | write;
         for (; w > 0; w--)
            set[w] = set[w - 1];
         set[0] = e;
         return HIT;
      }
   }
   return fill(l, set, line, write, victim_line) ? MISS_DIRTY_VICTIM : MISS;
}

/* Writebacks caused by the line access in progress, reported after its memory read. */
static ULong pending[TK_MAX_LEVELS];
static UInt n_pending;

/* Write the dirty `line`, evicted from level `from`, into the levels below it. */
static void write_back(TkCache* c, ULong line, UInt from)
{
   UInt lvl = from + 1;
   ULong victim;
   while (lvl < c->n_levels) {
      if (level_access(&c->level[lvl], line, True, &victim) != MISS_DIRTY_VICTIM)
         return;
      line = victim;
      lvl++;
   }
   tl_assert(n_pending < TK_MAX_LEVELS);
   pending[n_pending++] = line;
}

/* One access to one line (cache.rs's Hierarchy::access, per line). */
static void line_access(TkCache* c, ULong line, Bool write, ULong cookie)
{
   ULong victim;
   UInt lvl, i;
   Lookup r;
   n_pending = 0;
   for (lvl = 0;; lvl++) {
      if (lvl == c->n_levels) {
         c->mem(line << c->line_shift, False, cookie);
         break;
      }
      /* only the innermost level sees the store itself; deeper levels are filled clean */
      r = level_access(&c->level[lvl], line, write && lvl == 0, &victim);
      if (r == HIT)
         break;
      if (r == MISS_DIRTY_VICTIM)
         write_back(c, victim, lvl);
   }
   for (i = 0; i < n_pending; i++)
      c->mem(pending[i] << c->line_shift, True, cookie);
}

void tk_cache_access(TkCache* c, Addr addr, UInt size, Bool write, ULong cookie)
{
   ULong first = addr >> c->line_shift;
   ULong last = (addr + (size ? size : 1) - 1) >> c->line_shift;
   ULong line;
   for (line = first; line <= last; line++)
      line_access(c, line, write, cookie);
}
