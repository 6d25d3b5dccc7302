/* tk_cache.h: the tracer's in-band cache hierarchy (the model is in tk_cache.c, with its
   assumptions). The tool feeds it every load and store; it reports the transfers main memory
   sees (last-level misses and dirty writebacks). The most common case, a hit on the most
   recently used line of a level-1 set, is tested inline. */

#ifndef TK_CACHE_H
#define TK_CACHE_H

#include "pub_tool_basics.h"

#define TK_MAX_LEVELS 8

typedef struct {
   ULong accesses, hits, misses, writebacks;
} TkLevelStats;

/* One set-associative level. Each set is a list of `ways` entries ordered from the most to the
   least recently used; an entry is (line + 1) << 1 | dirty, and 0 for an empty way (empty
   ways are always at the end of the list). */
typedef struct {
   ULong  sets;
   ULong  set_mask;   /* sets - 1 when sets is a power of two, else 0 (then: line mod sets) */
   UInt   ways;
   ULong* entry;      /* sets * ways entries */
   ULong  accesses, misses, writebacks;
} TkLevel;

/* Receives one memory transfer: the line's byte address, whether it is a write, and the
   `cookie` of the access that caused it. */
typedef void (*TkMemFn)(Addr line_addr, Bool is_write, ULong cookie);

typedef struct {
   UInt    n_levels;
   UInt    line_shift;
   TkLevel level[TK_MAX_LEVELS];
   TkMemFn mem;
} TkCache;

/* Checks a geometry; returns NULL if it is valid, else what is wrong. */
const HChar* tk_cache_check(UInt n_levels, const ULong* size_bytes, const UInt* ways,
                            UInt line_bytes);
void tk_cache_init(TkCache* c, UInt n_levels, const ULong* size_bytes, const UInt* ways,
                   UInt line_bytes, TkMemFn mem);
TkLevelStats tk_cache_stats(const TkCache* c, UInt level);

/* The whole access: every line, every level (out of line). */
void tk_cache_access(TkCache* c, Addr addr, UInt size, Bool write, ULong cookie);

/* The common case, inline: an access within one line that hits the most recently used way
   of its level-1 set. Returns False, having changed nothing, for any other access; the
   caller then makes it with tk_cache_access. */
static inline Bool tk_cache_mru_hit(TkCache* c, Addr addr, UInt size, Bool write)
{
   TkLevel* l = &c->level[0];
   ULong line = addr >> c->line_shift;
   ULong set;
   ULong* e;
   if (UNLIKELY(((addr + size - 1) >> c->line_shift) != line || size == 0))
      return False;
   set = l->set_mask ? (line & l->set_mask) : (line % l->sets);
   e = l->entry + set * l->ways;
   if ((*e & ~1ULL) != (line + 1) << 1)
      return False;
   *e |= write;
   l->accesses++;
   return True;
}

#endif
