/* tk_main.c: tierkit's Valgrind tool (`valgrind --tool=tierkit`), run by `tierkit trace record`.

   It records, for an unmodified program:
   - every load, store and modify (a load then a store of the same bytes by one instruction)
     of every thread, with the thread and the exact global instruction count, either raw
     (`--tk-cache=none`) or filtered in-band through the cache hierarchy of tk_cache.c (then
     only the transfers main memory sees: last-level misses and dirty writebacks);
   - every allocation, reallocation and free made through malloc, calloc, realloc, free,
     memalign, posix_memalign, aligned_alloc, valloc and C++ new/new[]/delete/delete[]
     (Valgrind's malloc replacement), each with its allocation site: the call stack, up to
     `--tk-context` physical frames (return addresses), each as the object that holds it
     and its offset there (the site key), and symbolized as `function (file:line)` for
     display;
   - a slice marker every `--tk-slice` instructions.
   It writes them as a compact binary stream (below) to the file descriptor `--tk-fd`; the
   Rust side (crates/tierkit-core/src/trace/raw.rs) decodes it and writes the native `.tkt`
   trace. The tool records; it models nothing but the cache, which lives in tk_cache.c.

   Options (all given by `tierkit trace record`; users need not run the tool directly):
     --tk-fd=N                 write the stream to file descriptor N (required)
     --tk-cache=none|S:W:L,... levels innermost first: size, ways, line size, in bytes
                               [default: none]
     --tk-context=N            physical frames per allocation site, 1..64 [4]
     --tk-slice=K              a slice marker every K instructions, 0 = none [0]

   Time. The instruction count of an access is the number of guest instructions the program
   (all threads together) executed before the instruction that made it: each superblock
   loads the count at its entry, every access adds its instruction's index within the
   superblock (known when instrumenting), and the count is advanced at each exit actually
   taken by the number of instructions executed up to it. Each iteration of a rep-prefixed
   instruction counts as one instruction, as in cachegrind's Ir. Events (allocations,
   markers) carry the count at the moment they happen. The tool turns superblock chasing
   off (--vex-guest-chase=no), which would otherwise let VEX speculate across a conditional
   branch and count instructions that did not run.

   Threads get ids in creation order: the main thread is 0, the next thread created 1, and so
   on; an id is never reused, even when Valgrind reuses its own thread slot.

   Processes. A forked child is not traced: the child stops writing (it closes its copy of
   the stream) and the parent writes a FORK record, which `tierkit trace record` reports on
   one stderr line. An execve that succeeds ends the trace (the new program runs natively,
   as Valgrind's --trace-children=no does); the tool writes an EXEC record before it.

   Accesses the allocator makes for itself are not traced: the replacement allocator runs
   inside Valgrind, so its metadata accesses, calloc's zeroing and realloc's copy are not in the
   stream (a native allocator would make them).

   RAW STREAM FORMAT, version 2 (version 1 differed only in the SITE record). Little-endian. "varint": unsigned LEB128 (7 bits per byte,
   least significant group first, high bit set on every byte but the last). "zz": a signed
   value zig-zag coded ((v << 1) ^ (v >> 63)) then written as a varint. "string": varint byte
   length, then that many bytes of UTF-8.

   Header:
     8 bytes   magic "TKVGRAW\0"
     u16       version (2)
     u16       flags: bit 0 = accesses are post-cache (cache on)
     varint    slice length in instructions (0: no slice markers)
     varint    context depth (physical frames per site)
     varint    number of cache levels L (0 when the cache is off), then per level, innermost
               first: varint size in bytes, varint ways, varint line size in bytes
     string    the Valgrind version the tool was built against
     varint    process id of the traced program

   Records follow, each starting with a tag byte. Every record except THREAD and FORK carries
   a time: a varint, its instruction count minus the previous timed record's (the first
   against 0); counts never decrease. A record belongs to the thread named by the last
   THREAD record (thread 0 before any).

     tag 0x00-0x7F  ACCESS. Bit 6 (0x40): a store. Bits 0-5: the size in bytes if 1..62; 63:
                    one cache line (post-cache records); 0: the size follows as a varint.
                    Then: [varint size], zz address minus the previous access's address
                    (mod 2^64; the first against 0), varint time.
     0x80  THREAD   varint thread id.
     0x81  ALLOC    varint time, varint address, varint size in bytes, varint site id,
                    u8 function (0 malloc, 1 calloc, 2 realloc of NULL, 3 memalign,
                    posix_memalign, aligned_alloc or valloc, 4 new, 5 new[]).
     0x82  FREE     varint time, varint address (free, delete, delete[], realloc to size 0).
     0x83  REALLOC  varint time, varint old address, varint new address, varint new size,
                    varint site id.
     0x84  SITE     varint time, varint site id, varint frame count N, then per physical
                    frame, innermost first: string display (`function (file:line)`, then
                    the functions it is inlined in, outward, each after " < "), string
                    path of the object holding the frame's address ("" if none is known),
                    varint offset (the address minus the object's text bias, i.e. its
                    link-time address; the address itself when no object is known).
                    The address of every frame is the return address minus 1 (inside the
                    call instruction); the replacement allocator's own frame is left out.
                    Defines a site id before its first use; ids count from 0. Sites are
                    keyed by (object path, offset) of their frames, so call stacks that
                    differ only by where objects were loaded share one id. (Version 1: N
                    display strings, with inlined functions as frames of their own, and
                    sites keyed by their display strings.)
     0x85  MARKER   varint time, u8 kind (0 = slice, 2 = user), varint id. Slice marker k
                    (k >= 1) has time exactly k * slice: it follows every access of
                    instructions before that count and precedes every access of later ones.
                    A user marker is the program's TIERKIT_MARK(id) (tracer/tierkit.h), at
                    the instruction count where it ran.
     0x86  FORK     (nothing) the program forked; the child is not traced.
     0x87  EXEC     varint time; the program is calling execve. If the call fails, records
                    continue; if it succeeds, the stream ends here.
     0x88  END      varint time (the final instruction count), varint raw loads, varint raw
                    stores (a modify counts as both), varint L, then per cache level:
                    varint accesses, hits, misses, writebacks. Nothing follows.

   A stream that stops without END was cut short (the program was killed by a signal that
   Valgrind cannot intercept, such as SIGKILL); a last record may be incomplete. The tool
   buffers records (1 MiB) and writes whole buffers; it also flushes before fork, execve and
   kill/tkill/tgkill, so that a program that kills itself loses nothing, and before a system
   call that may wait (sleep, poll, wait...) or any call 200 M instructions after the last
   flush, so that a program killed from outside loses little.
*/

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_debuginfo.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_replacemalloc.h"
#include "pub_tool_stacktrace.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"
#include "valgrind.h"
#include "config.h"
#include "tk_cache.h"

/* TIERKIT_MARK(id) of tracer/tierkit.h */
#define TK_USERREQ_MARK VG_USERREQ_TOOL_BASE('T', 'K')

/* Not in the tool headers, but part of the core the tool links statically: moves a file
   descriptor into the range Valgrind reserves for itself, so that the program can neither
   see nor close the stream, and marks it close-on-exec. */
extern Int VG_(safe_fd)(Int oldfd);

#define TK_MAX_CONTEXT 64

/* ------------------------------------------------------------------ options */

static Long clo_fd = -1;
static const HChar* clo_cache = "none";
static Long clo_context = 4;
static Long clo_slice = 0;

static UInt n_levels;
static ULong level_size[TK_MAX_LEVELS];
static UInt level_ways[TK_MAX_LEVELS];
static UInt line_bytes = 64;

static Bool tk_process_cmd_line_option(const HChar* arg)
{
   if VG_INT_CLO(arg, "--tk-fd", clo_fd) {}
   else if VG_STR_CLO(arg, "--tk-cache", clo_cache) {}
   else if VG_BINT_CLO(arg, "--tk-context", clo_context, 1, TK_MAX_CONTEXT) {}
   else if VG_BINT_CLO(arg, "--tk-slice", clo_slice, 0, (Long)1 << 62) {}
   else return VG_(replacement_malloc_process_cmd_line_option)(arg);
   return True;
}

static void tk_print_usage(void)
{
   VG_(printf)(
      "    --tk-fd=N                 write the raw stream to file descriptor N\n"
      "    --tk-cache=none|S:W:L,... cache levels (size:ways:line in bytes) [none]\n"
      "    --tk-context=N            frames per allocation site [4]\n"
      "    --tk-slice=K              slice marker every K instructions, 0 = none [0]\n");
}

static void tk_print_debug_usage(void)
{
   VG_(printf)("    (none)\n");
}

/* Parse --tk-cache; exits with a message on error. */
static void parse_cache_option(void)
{
   const HChar* s = clo_cache;
   const HChar* bad;
   n_levels = 0;
   if (VG_(strcmp)(s, "none") == 0)
      return;
   for (;;) {
      HChar* end;
      ULong size, ways, line;
      if (n_levels == TK_MAX_LEVELS)
         VG_(fmsg_bad_option)("--tk-cache", "at most %d cache levels\n", TK_MAX_LEVELS);
      size = VG_(strtoull10)(s, &end);
      if (*end != ':') goto bad_spec;
      ways = VG_(strtoull10)(end + 1, &end);
      if (*end != ':') goto bad_spec;
      line = VG_(strtoull10)(end + 1, &end);
      if (*end != ',' && *end != '\0') goto bad_spec;
      if (ways > 0xFFFFFFFFULL || line > 0xFFFF) goto bad_spec;
      if (n_levels > 0 && line != line_bytes)
         VG_(fmsg_bad_option)("--tk-cache", "all levels need the same line size\n");
      level_size[n_levels] = size;
      level_ways[n_levels] = (UInt)ways;
      line_bytes = (UInt)line;
      n_levels++;
      if (*end == '\0')
         break;
      s = end + 1;
   }
   bad = tk_cache_check(n_levels, level_size, level_ways, line_bytes);
   if (bad)
      VG_(fmsg_bad_option)("--tk-cache", "%s\n", bad);
   return;
bad_spec:
   VG_(fmsg_bad_option)("--tk-cache", "expected 'none' or SIZE:WAYS:LINE,... in bytes\n");
}

/* ------------------------------------------------------------------ the stream */

#define T_THREAD  0x80
#define T_ALLOC   0x81
#define T_FREE    0x82
#define T_REALLOC 0x83
#define T_SITE    0x84
#define T_MARKER  0x85
#define T_FORK    0x86
#define T_EXEC    0x87
#define T_END     0x88

#define SIZE_LINE 63
#define OUT_BYTES (1 << 20)

/* Instructions executed before the current superblock; advanced by the instrumentation at
   every superblock exit taken (see tk_instrument). Global: Valgrind runs one thread at a
   time and switches only between superblocks. */
ULong tk_insn_base;

/* Instructions between flushes at system calls: bounds what a program killed from outside
   (SIGKILL) loses, at the cost of one write per this many instructions at most. */
#define FLUSH_EVERY_INSN 200000000ULL
static ULong last_flush_insn;

static UChar out_buf[OUT_BYTES];
static UInt out_pos;
static Int out_fd = -1;      /* -1: not writing (stream closed, reader gone, forked child) */

static ULong prev_time;      /* time of the last timed record written */
static Addr prev_addr;       /* address of the last access written */
static UInt written_tid;     /* thread of the last record written */
static UInt cur_tid;         /* tierkit id of the thread running client code */

static void flush_out(void)
{
   UInt done = 0;
   while (out_fd >= 0 && done < out_pos) {
      Int n = VG_(write)(out_fd, out_buf + done, out_pos - done);
      if (n <= 0) {
         /* the reader went away: let the program finish, untraced */
         VG_(close)(out_fd);
         out_fd = -1;
      } else {
         done += n;
      }
   }
   out_pos = 0;
   last_flush_insn = tk_insn_base;
}

static inline void need(UInt n)
{
   if (UNLIKELY(out_pos + n > OUT_BYTES))
      flush_out();
}

static inline void put_u8(UInt v)
{
   out_buf[out_pos++] = (UChar)v;
}

static inline void put_varint(ULong v)
{
   while (v >= 0x80) {
      out_buf[out_pos++] = (UChar)(v | 0x80);
      v >>= 7;
   }
   out_buf[out_pos++] = (UChar)v;
}

static inline void put_zz(Long v)
{
   put_varint(((ULong)v << 1) ^ (ULong)(v >> 63));
}

static void put_string(const HChar* s, UInt len)
{
   need(10 + len);
   put_varint(len);
   VG_(memcpy)(out_buf + out_pos, s, len);
   out_pos += len;
}

/* Times never decrease in the stream (see tk_pre_deliver_signal for the one way they could). */
static inline void put_time(ULong t)
{
   if (UNLIKELY(t < prev_time))
      t = prev_time;
   put_varint(t - prev_time);
   prev_time = t;
}

static inline void put_thread(void)
{
   if (UNLIKELY(cur_tid != written_tid)) {
      put_u8(T_THREAD);
      put_varint(cur_tid);
      written_tid = cur_tid;
   }
}

static inline void emit_access(Addr a, UInt size, Bool write, ULong t)
{
   UInt code = size >= 1 && size <= 62 ? size : 0;
   if (size == line_bytes && n_levels > 0)
      code = SIZE_LINE;
   need(48);
   put_thread();
   put_u8((write ? 0x40 : 0) | code);
   if (code == 0)
      put_varint(size);
   put_zz((Long)(a - prev_addr));
   prev_addr = a;
   put_time(t);
}

/* Start a timed non-access record; `room` bounds its fixed-size fields. */
static void begin_event(UInt tag, ULong t, UInt room)
{
   need(16 + room);
   put_thread();
   put_u8(tag);
   put_time(t);
}

/* ------------------------------------------------------------------ time and markers */

/* (tk_insn_base, the instruction count, is defined with the stream above.) */
static ULong next_mark = ~0ULL;   /* time of the next slice marker */

static void emit_markers_until(ULong now)
{
   if (out_fd < 0) {
      next_mark = ~0ULL;
      return;
   }
   while (next_mark <= now) {
      begin_event(T_MARKER, next_mark, 12);
      put_u8(0);
      put_varint(next_mark / (ULong)clo_slice);
      next_mark += (ULong)clo_slice;
   }
}

static inline void check_markers(ULong now)
{
   if (UNLIKELY(now >= next_mark))
      emit_markers_until(now);
}

/* ------------------------------------------------------------------ accesses */

static TkCache cache;
static ULong n_raw[2];   /* loads, stores */

static void on_memory_transfer(Addr line_addr, Bool is_write, ULong time)
{
   if (out_fd >= 0)
      emit_access(line_addr, line_bytes, is_write, time);
}

/* `packed`: the instruction's index in its superblock << 16 | the access size in bytes. */
static inline void on_access(Addr a, UWord packed, Bool write)
{
   ULong now = tk_insn_base + (packed >> 16);
   UInt size = packed & 0xFFFF;
   check_markers(now);
   n_raw[write]++;
   if (LIKELY(n_levels > 0)) {
      if (LIKELY(tk_cache_mru_hit(&cache, a, size, write)))
         return;
      tk_cache_access(&cache, a, size, write, now);
   } else if (out_fd >= 0) {
      emit_access(a, size, write, now);
   }
}

static VG_REGPARM(2) void tk_load(Addr a, UWord packed)
{
   on_access(a, packed, False);
}

static VG_REGPARM(2) void tk_store(Addr a, UWord packed)
{
   on_access(a, packed, True);
}

static VG_REGPARM(2) void tk_modify(Addr a, UWord packed)
{
   on_access(a, packed, False);
   on_access(a, packed, True);
}

/* ------------------------------------------------------------------ threads */

#define NO_TID 0xFFFFFFFFu

static UInt* tid_of_vg;   /* Valgrind ThreadId -> tierkit thread id */
static UInt next_tid;

static UInt tk_tid(ThreadId vg)
{
   if (!tid_of_vg || vg > VG_N_THREADS)
      return 0;
   if (tid_of_vg[vg] == NO_TID)
      tid_of_vg[vg] = next_tid++;
   return tid_of_vg[vg];
}

static void tk_start_client_code(ThreadId tid, ULong blocks_dispatched)
{
   cur_tid = tk_tid(tid);
}

static void tk_thread_create(ThreadId parent, ThreadId child)
{
   /* numbered at creation, so ids follow creation order */
   if (!tid_of_vg || child > VG_N_THREADS)
      return;
   tid_of_vg[child] = NO_TID;
   tk_tid(child);
}

static void tk_thread_exit(ThreadId tid)
{
   if (tid_of_vg && tid <= VG_N_THREADS)
      tid_of_vg[tid] = NO_TID;
}

/* A synchronous signal (a fault) leaves a superblock midway, before the count is advanced;
   accesses already written may then be ahead of it. Resume the count after them. */
static void tk_pre_deliver_signal(ThreadId tid, Int sigNo, Bool alt_stack)
{
   if (prev_time > tk_insn_base)
      tk_insn_base = prev_time;
}

/* ------------------------------------------------------------------ allocation sites */

/* A site is its physical frames (return addresses), each as the object that holds it and the
   offset in that object's link-time address space (the frame key of docs/guidance.md): the
   same in every run whatever the load address, the run directory or the symbols. Raw call
   stacks (instruction addresses) are mapped to sites first, since describing frames is slow;
   two stacks that differ only where the object was loaded become one site. */
typedef struct StackNode {
   struct StackNode* next;
   UWord hash;
   UInt n_ips;
   UInt site;
   Addr ips[];
} StackNode;

typedef struct SiteNode {
   struct SiteNode* next;
   UWord hash;
   UInt len;
   UInt site;
   HChar text[];   /* per frame: object path, NUL, offset (8 bytes) */
} SiteNode;

typedef struct {
   void** bucket;
   UInt n_buckets;   /* a power of two */
   UInt count;
} Table;

static Table stacks, sites;
static UInt n_sites;

static UWord hash_bytes(const void* p, SizeT n)
{
   const UChar* b = p;
   ULong h = 0xcbf29ce484222325ULL;   /* FNV-1a */
   SizeT i;
   for (i = 0; i < n; i++) {
      h ^= b[i];
      h *= 0x100000001b3ULL;
   }
   return (UWord)h;
}

static void table_init(Table* t, UInt n)
{
   t->n_buckets = n;
   t->count = 0;
   t->bucket = VG_(calloc)("tk.table", n, sizeof(void*));
}

/* Both node types start with `next` and `hash`. */
typedef struct Node { struct Node* next; UWord hash; } Node;

static void table_insert(Table* t, Node* node)
{
   if (t->count >= 2 * t->n_buckets) {
      UInt n = t->n_buckets * 2, i;
      void** b = VG_(calloc)("tk.table", n, sizeof(void*));
      for (i = 0; i < t->n_buckets; i++) {
         Node* x = t->bucket[i];
         while (x) {
            Node* next = x->next;
            x->next = b[x->hash & (n - 1)];
            b[x->hash & (n - 1)] = x;
            x = next;
         }
      }
      VG_(free)(t->bucket);
      t->bucket = b;
      t->n_buckets = n;
   }
   node->next = t->bucket[node->hash & (t->n_buckets - 1)];
   t->bucket[node->hash & (t->n_buckets - 1)] = node;
   t->count++;
}

#define FRAME_MAX 1024
#define PATH_MAX_TK 4096
static HChar key_text[TK_MAX_CONTEXT * (PATH_MAX_TK + 1 + 8)];
static HChar display[FRAME_MAX + 1];

/* The object holding `ip` and `ip`'s offset in its link-time address space: the text bias is
   what dl_iterate_phdr calls dlpi_addr (0 for a non-PIE executable). An address in no known
   object gets the path "" and the address itself. */
static const HChar* object_of(DiEpoch ep, Addr ip, ULong* offset)
{
   DebugInfo* di = VG_(find_DebugInfo)(ep, ip);
   const HChar* path;
   if (!di || !(path = VG_(DebugInfo_get_filename)(di))) {
      *offset = ip;
      return "";
   }
   *offset = (ULong)(ip - (Addr)VG_(DebugInfo_get_text_bias)(di));
   return path;
}

/* The display string of one physical frame: its innermost function, then the functions it
   is inlined in, outward, joined by " < " (`function (file:line)` each, as describe_IP
   gives them, address cut). */
static UInt describe_frame(DiEpoch ep, Addr ip)
{
   InlIPCursor* iipc = VG_(new_IIPC)(ep, ip);
   UInt len = 0;
   do {
      const HChar* desc = VG_(describe_IP)(ep, ip, iipc);
      const HChar* colon;
      UInt n;
      if (desc[0] == '0' && desc[1] == 'x' && (colon = VG_(strstr)(desc, ": ")) != NULL)
         desc = colon + 2;
      n = VG_(strlen)(desc);
      if (len > 0) {
         if (len + 3 > FRAME_MAX)
            break;
         VG_(memcpy)(display + len, " < ", 3);
         len += 3;
      }
      if (n > FRAME_MAX - len)
         n = FRAME_MAX - len;
      VG_(memcpy)(display + len, desc, n);
      len += n;
   } while (len < FRAME_MAX && VG_(next_IIPC)(iipc));
   VG_(delete_IIPC)(iipc);
   display[len] = 0;
   return len;
}

static void emit_site(UInt site, const Addr* ips, UInt n_frames)
{
   DiEpoch ep = VG_(current_DiEpoch)();
   UInt i;
   begin_event(T_SITE, tk_insn_base, 20);
   put_varint(site);
   put_varint(n_frames);
   for (i = 0; i < n_frames; i++) {
      ULong off;
      const HChar* obj = object_of(ep, ips[i], &off);
      UInt n = VG_(strlen)(obj);
      put_string(display, describe_frame(ep, ips[i]));
      put_string(obj, n > PATH_MAX_TK ? PATH_MAX_TK : n);
      need(10);
      put_varint(off);
   }
}

/* The site of the allocation thread `tid` is making; defines it in the stream if new. */
static UInt site_of_current_call(ThreadId tid)
{
   Addr ips[TK_MAX_CONTEXT + 2];
   UInt n_ips = VG_(get_StackTrace)(tid, ips, (UInt)clo_context + 2, NULL, NULL, 0);
   UWord h = hash_bytes(ips, n_ips * sizeof(Addr));
   StackNode* s;
   SiteNode* f;
   DiEpoch ep;
   const Addr* frames = ips;
   UInt i, len = 0, n_frames;

   for (s = stacks.bucket[h & (stacks.n_buckets - 1)]; s; s = s->next)
      if (s->hash == h && s->n_ips == n_ips && VG_(memcmp)(s->ips, ips, n_ips * sizeof(Addr)) == 0)
         return s->site;

   /* physical frames, innermost first, without the replacement allocator's own frame: ips[0]
      is in vgpreload (the malloc the program called); ips[1..] are return addresses minus 1,
      inside the call instructions (VG_(get_StackTrace) subtracts the 1) */
   ep = VG_(current_DiEpoch)();
   n_frames = n_ips;
   if (n_frames > 0) {
      const HChar* obj;
      if (VG_(get_objname)(ep, ips[0], &obj) && VG_(strstr)(obj, "/vgpreload_")) {
         frames++;
         n_frames--;
      }
   }
   if (n_frames > (UInt)clo_context)
      n_frames = (UInt)clo_context;
   for (i = 0; i < n_frames; i++) {
      ULong off;
      const HChar* obj = object_of(ep, frames[i], &off);
      UInt n = VG_(strlen)(obj);
      if (n > PATH_MAX_TK)
         n = PATH_MAX_TK;
      VG_(memcpy)(key_text + len, obj, n);
      key_text[len + n] = 0;
      VG_(memcpy)(key_text + len + n + 1, &off, 8);
      len += n + 1 + 8;
   }

   h = hash_bytes(key_text, len);
   for (f = sites.bucket[h & (sites.n_buckets - 1)]; f; f = f->next)
      if (f->hash == h && f->len == len && VG_(memcmp)(f->text, key_text, len) == 0)
         break;
   if (!f) {
      f = VG_(malloc)("tk.site", sizeof(SiteNode) + len);
      f->hash = h;
      f->len = len;
      f->site = n_sites++;
      VG_(memcpy)(f->text, key_text, len);
      table_insert(&sites, (Node*)f);
      if (out_fd >= 0)
         emit_site(f->site, frames, n_frames);
   }

   s = VG_(malloc)("tk.stack", sizeof(StackNode) + n_ips * sizeof(Addr));
   s->hash = hash_bytes(ips, n_ips * sizeof(Addr));
   s->n_ips = n_ips;
   s->site = f->site;
   VG_(memcpy)(s->ips, ips, n_ips * sizeof(Addr));
   table_insert(&stacks, (Node*)s);
   return s->site;
}

/* ------------------------------------------------------------------ allocation events */

enum { FN_MALLOC = 0, FN_CALLOC = 1, FN_REALLOC = 2, FN_MEMALIGN = 3, FN_NEW = 4, FN_NEW_ARRAY = 5 };

static void record_alloc(ThreadId tid, Addr p, SizeT n, UInt fn)
{
   UInt site;
   if (out_fd < 0)
      return;
   cur_tid = tk_tid(tid);
   check_markers(tk_insn_base);
   site = site_of_current_call(tid);
   begin_event(T_ALLOC, tk_insn_base, 40);
   put_varint(p);
   put_varint(n);
   put_varint(site);
   put_u8(fn);
}

static void record_free(ThreadId tid, Addr p)
{
   if (out_fd < 0)
      return;
   cur_tid = tk_tid(tid);
   check_markers(tk_insn_base);
   begin_event(T_FREE, tk_insn_base, 10);
   put_varint(p);
}

/* TIERKIT_MARK(id) in the program (tracer/tierkit.h): a user marker with its id. */
static Bool tk_client_request(ThreadId tid, UWord* args, UWord* ret)
{
   if (!VG_IS_TOOL_USERREQ('T', 'K', args[0]))
      return False;
   *ret = 0;
   if (args[0] != TK_USERREQ_MARK || out_fd < 0)
      return True;
   cur_tid = tk_tid(tid);
   check_markers(tk_insn_base);
   begin_event(T_MARKER, tk_insn_base, 12);
   put_u8(2);
   put_varint(args[1]);
   return True;
}

static void* new_block(ThreadId tid, SizeT n, SizeT align, Bool zero, UInt fn)
{
   void* p;
   if ((SSizeT)n < 0)
      return NULL;
   p = VG_(cli_malloc)(align, n);
   if (!p)
      return NULL;
   if (zero)
      VG_(memset)(p, 0, n);
   record_alloc(tid, (Addr)p, n, fn);
   return p;
}

static void free_block(ThreadId tid, void* p)
{
   if (!p)
      return;
   record_free(tid, (Addr)p);
   VG_(cli_free)(p);
}

static void* tk_malloc(ThreadId tid, SizeT n)
{
   return new_block(tid, n, VG_(clo_alignment), False, FN_MALLOC);
}

static void* tk_builtin_new(ThreadId tid, SizeT n)
{
   return new_block(tid, n, VG_(clo_alignment), False, FN_NEW);
}

static void* tk_builtin_new_aligned(ThreadId tid, SizeT n, SizeT align)
{
   return new_block(tid, n, align, False, FN_NEW);
}

static void* tk_builtin_vec_new(ThreadId tid, SizeT n)
{
   return new_block(tid, n, VG_(clo_alignment), False, FN_NEW_ARRAY);
}

static void* tk_builtin_vec_new_aligned(ThreadId tid, SizeT n, SizeT align)
{
   return new_block(tid, n, align, False, FN_NEW_ARRAY);
}

static void* tk_memalign(ThreadId tid, SizeT align, SizeT n)
{
   return new_block(tid, n, align, False, FN_MEMALIGN);
}

static void* tk_calloc(ThreadId tid, SizeT nmemb, SizeT size1)
{
   if (size1 != 0 && nmemb > ~(SizeT)0 / size1)
      return NULL;
   return new_block(tid, nmemb * size1, VG_(clo_alignment), True, FN_CALLOC);
}

static void tk_free(ThreadId tid, void* p)
{
   free_block(tid, p);
}

static void tk_free_aligned(ThreadId tid, void* p, SizeT align)
{
   free_block(tid, p);
}

static void* tk_realloc(ThreadId tid, void* p, SizeT n)
{
   void* q;
   UInt site;
   if (!p)
      return new_block(tid, n, VG_(clo_alignment), False, FN_REALLOC);
   if (n == 0) {
      free_block(tid, p);
      return NULL;
   }
   if ((SSizeT)n < 0)
      return NULL;
   q = VG_(cli_realloc)(p, n);
   if (!q || out_fd < 0)
      return q;
   cur_tid = tk_tid(tid);
   check_markers(tk_insn_base);
   site = site_of_current_call(tid);
   begin_event(T_REALLOC, tk_insn_base, 50);
   put_varint((Addr)p);
   put_varint((Addr)q);
   put_varint(n);
   put_varint(site);
   return q;
}

static SizeT tk_malloc_usable_size(ThreadId tid, void* p)
{
   return VG_(cli_malloc_usable_size)(p);
}

/* ------------------------------------------------------------------ processes */

static void tk_fork_pre(ThreadId tid)
{
   flush_out();   /* or the child would write the parent's buffered records again */
}

static void tk_fork_parent(ThreadId tid)
{
   if (out_fd < 0)
      return;
   need(1);
   put_u8(T_FORK);
}

static void tk_fork_child(ThreadId tid)
{
   if (out_fd >= 0)
      VG_(close)(out_fd);
   out_fd = -1;
   out_pos = 0;
   next_mark = ~0ULL;
}

/* A call that may wait: the program may be killed while it waits, so flush first. */
static Bool may_wait(UInt n)
{
   switch (n) {
   case __NR_nanosleep: case __NR_clock_nanosleep: case __NR_pause: case __NR_select:
   case __NR_pselect6: case __NR_poll: case __NR_ppoll: case __NR_epoll_wait:
   case __NR_epoll_pwait: case __NR_wait4: case __NR_waitid: case __NR_rt_sigsuspend:
   case __NR_rt_sigtimedwait:
      return True;
   default:
      return False;
   }
}

static void tk_pre_syscall(ThreadId tid, UInt syscallno, UWord* args, UInt nArgs)
{
   if (out_fd < 0)
      return;
   if (syscallno == __NR_execve || syscallno == __NR_execveat) {
      cur_tid = tk_tid(tid);
      begin_event(T_EXEC, tk_insn_base, 0);
      flush_out();
   } else if (syscallno == __NR_kill || syscallno == __NR_tkill || syscallno == __NR_tgkill ||
              (out_pos > 0 && (may_wait(syscallno) || tk_insn_base - last_flush_insn > FLUSH_EVERY_INSN))) {
      flush_out();
   }
}

static void tk_post_syscall(ThreadId tid, UInt syscallno, UWord* args, UInt nArgs, SysRes res)
{
}

/* ------------------------------------------------------------------ instrumentation */

typedef enum { EV_LOAD, EV_STORE, EV_MODIFY } EvKind;

typedef struct {
   EvKind kind;
   IRExpr* addr;    /* an atom */
   Int size;
   IRExpr* guard;   /* NULL: unconditional */
} Ev;

#define MAX_EVS 16
static Ev evs[MAX_EVS];   /* accesses of the current instruction, not yet instrumented */
static Int n_evs;

static void flush_events(IRSB* sb, UInt insn_index)
{
   Int i;
   for (i = 0; i < n_evs; i++) {
      Ev* e = &evs[i];
      const HChar* name;
      void* fn;
      IRDirty* di;
      UInt size = e->size > 0xFFFF ? 0xFFFF : (UInt)e->size;
      switch (e->kind) {
      case EV_LOAD: name = "tk_load"; fn = tk_load; break;
      case EV_STORE: name = "tk_store"; fn = tk_store; break;
      default: name = "tk_modify"; fn = tk_modify; break;
      }
      di = unsafeIRDirty_0_N(2, name, VG_(fnptr_to_fnentry)(fn),
                             mkIRExprVec_2(e->addr, mkIRExpr_HWord(((HWord)insn_index << 16) | size)));
      if (e->guard)
         di->guard = e->guard;
      addStmtToIRSB(sb, IRStmt_Dirty(di));
   }
   n_evs = 0;
}

static void add_event(IRSB* sb, UInt insn_index, EvKind kind, IRExpr* addr, Int size, IRExpr* guard)
{
   tl_assert(isIRAtom(addr));
   /* a store of the bytes the same instruction just loaded: one modify */
   if (kind == EV_STORE && !guard && n_evs > 0) {
      Ev* last = &evs[n_evs - 1];
      if (last->kind == EV_LOAD && !last->guard && last->size == size && eqIRAtom(last->addr, addr)) {
         last->kind = EV_MODIFY;
         return;
      }
   }
   if (n_evs == MAX_EVS)
      flush_events(sb, insn_index);
   evs[n_evs].kind = kind;
   evs[n_evs].addr = addr;
   evs[n_evs].size = size;
   evs[n_evs].guard = guard;
   n_evs++;
}

/* tk_insn_base = base + executed (guarded by `guard` when it is not NULL) */
static void add_time_update(IRSB* sb, IRTemp base, UInt executed, IRExpr* guard)
{
   IRTemp t = newIRTemp(sb->tyenv, Ity_I64);
   IRExpr* where = mkIRExpr_HWord((HWord)&tk_insn_base);
   addStmtToIRSB(sb, IRStmt_WrTmp(t, IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(base),
                                                  IRExpr_Const(IRConst_U64(executed)))));
   if (guard)
      addStmtToIRSB(sb, IRStmt_StoreG(Iend_LE, where, IRExpr_RdTmp(t), guard));
   else
      addStmtToIRSB(sb, IRStmt_Store(Iend_LE, where, IRExpr_RdTmp(t)));
}

static IRSB* tk_instrument(VgCallbackClosure* closure, IRSB* sbIn, const VexGuestLayout* layout,
                           const VexGuestExtents* vge, const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   IRSB* sb;
   IRTemp base;
   Int i;
   Int insn = -1;   /* index of the current instruction in the superblock */

   if (gWordTy != hWordTy)
      VG_(tool_panic)("host/guest word size mismatch");

   sb = deepCopyIRSBExceptStmts(sbIn);
   for (i = 0; i < sbIn->stmts_used && sbIn->stmts[i]->tag != Ist_IMark; i++)
      addStmtToIRSB(sb, sbIn->stmts[i]);

   base = newIRTemp(sb->tyenv, Ity_I64);
   addStmtToIRSB(sb, IRStmt_WrTmp(base, IRExpr_Load(Iend_LE, Ity_I64,
                                                    mkIRExpr_HWord((HWord)&tk_insn_base))));
   n_evs = 0;

   for (; i < sbIn->stmts_used; i++) {
      IRStmt* st = sbIn->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
      switch (st->tag) {
      case Ist_IMark:
         if (insn >= 0)
            flush_events(sb, (UInt)insn);
         insn++;
         break;
      case Ist_WrTmp:
         if (st->Ist.WrTmp.data->tag == Iex_Load) {
            IRExpr* ld = st->Ist.WrTmp.data;
            add_event(sb, insn, EV_LOAD, ld->Iex.Load.addr, sizeofIRType(ld->Iex.Load.ty), NULL);
         }
         break;
      case Ist_Store: {
         IRExpr* data = st->Ist.Store.data;
         add_event(sb, insn, EV_STORE, st->Ist.Store.addr,
                   sizeofIRType(typeOfIRExpr(sb->tyenv, data)), NULL);
         break;
      }
      case Ist_StoreG: {
         IRStoreG* sg = st->Ist.StoreG.details;
         add_event(sb, insn, EV_STORE, sg->addr, sizeofIRType(typeOfIRExpr(sb->tyenv, sg->data)),
                   sg->guard);
         break;
      }
      case Ist_LoadG: {
         IRLoadG* lg = st->Ist.LoadG.details;
         IRType ty_res = Ity_INVALID, ty_arg = Ity_INVALID;
         typeOfIRLoadGOp(lg->cvt, &ty_res, &ty_arg);
         add_event(sb, insn, EV_LOAD, lg->addr, sizeofIRType(ty_arg), lg->guard);
         break;
      }
      case Ist_Dirty: {
         IRDirty* d = st->Ist.Dirty.details;
         if (d->mFx != Ifx_None && d->mAddr != NULL && d->mSize > 0) {
            EvKind k = d->mFx == Ifx_Read ? EV_LOAD : d->mFx == Ifx_Write ? EV_STORE : EV_MODIFY;
            add_event(sb, insn, k, d->mAddr, d->mSize, d->guard);
         }
         break;
      }
      case Ist_CAS: {
         IRCAS* cas = st->Ist.CAS.details;
         Int size = sizeofIRType(typeOfIRExpr(sb->tyenv, cas->dataLo));
         if (cas->dataHi)
            size *= 2;
         add_event(sb, insn, EV_MODIFY, cas->addr, size, NULL);
         break;
      }
      case Ist_LLSC: {
         if (st->Ist.LLSC.storedata == NULL)
            add_event(sb, insn, EV_LOAD, st->Ist.LLSC.addr,
                      sizeofIRType(typeOfIRTemp(sb->tyenv, st->Ist.LLSC.result)), NULL);
         else
            add_event(sb, insn, EV_STORE, st->Ist.LLSC.addr,
                      sizeofIRType(typeOfIRExpr(sb->tyenv, st->Ist.LLSC.storedata)), NULL);
         break;
      }
      case Ist_Exit:
         /* taking this exit completes the instructions up to and including this one */
         flush_events(sb, (UInt)insn);
         add_time_update(sb, base, (UInt)insn + 1, st->Ist.Exit.guard);
         break;
      default:
         break;
      }
      /* dirty calls go after the statements of their instruction, except before an exit */
      addStmtToIRSB(sb, st);
   }
   if (insn >= 0)
      flush_events(sb, (UInt)insn);
   add_time_update(sb, base, (UInt)(insn + 1), NULL);
   return sb;
}

/* ------------------------------------------------------------------ start and end */

static void emit_header(void)
{
   UInt i;
   const HChar* magic = "TKVGRAW";
   need(256);
   VG_(memcpy)(out_buf + out_pos, magic, 8);   /* with its NUL */
   out_pos += 8;
   put_u8(2);   /* stream version */
   put_u8(0);
   put_u8(n_levels > 0 ? 1 : 0);
   put_u8(0);
   put_varint((ULong)clo_slice);
   put_varint((ULong)clo_context);
   put_varint(n_levels);
   for (i = 0; i < n_levels; i++) {
      put_varint(level_size[i]);
      put_varint(level_ways[i]);
      put_varint(line_bytes);
   }
   put_string(VERSION, VG_(strlen)(VERSION));
   put_varint((ULong)VG_(getpid)());
}

static void tk_post_clo_init(void)
{
   struct vg_stat st;
   UInt i;
   if (clo_fd < 0)
      VG_(fmsg_bad_option)("--tk-fd", "is required (the tool is meant to be run by 'tierkit trace record')\n");
   if (VG_(fstat)((Int)clo_fd, &st) != 0)
      VG_(fmsg_bad_option)("--tk-fd", "%lld is not an open file descriptor\n", clo_fd);
   out_fd = VG_(safe_fd)((Int)clo_fd);
   /* No superblock chasing: with it VEX may merge a conditional branch and the block after it
      into one speculated if-then-else, whose instructions would all count even when the
      branch skipped them (cachegrind's counts have this error). */
   VG_(clo_vex_control).guest_chase = False;
   parse_cache_option();
   if (n_levels > 0)
      tk_cache_init(&cache, n_levels, level_size, level_ways, line_bytes, on_memory_transfer);
   if (clo_slice > 0)
      next_mark = (ULong)clo_slice;

   tid_of_vg = VG_(malloc)("tk.tids", (VG_N_THREADS + 1) * sizeof(UInt));
   for (i = 0; i <= VG_N_THREADS; i++)
      tid_of_vg[i] = NO_TID;
   table_init(&stacks, 1024);
   table_init(&sites, 1024);
   VG_(atfork)(tk_fork_pre, tk_fork_parent, tk_fork_child);

   emit_header();
   flush_out();
}

static void tk_fini(Int exitcode)
{
   UInt i;
   ULong end = tk_insn_base > prev_time ? tk_insn_base : prev_time;
   if (out_fd < 0)
      return;
   check_markers(end);
   begin_event(T_END, end, 30 + 40 * n_levels);
   put_varint(n_raw[0]);
   put_varint(n_raw[1]);
   put_varint(n_levels);
   for (i = 0; i < n_levels; i++) {
      TkLevelStats s = tk_cache_stats(&cache, i);
      put_varint(s.accesses);
      put_varint(s.hits);
      put_varint(s.misses);
      put_varint(s.writebacks);
   }
   flush_out();
   if (out_fd >= 0)
      VG_(close)(out_fd);
   out_fd = -1;
}

static void tk_pre_clo_init(void)
{
   VG_(details_name)("tierkit");
   VG_(details_version)(NULL);
   VG_(details_description)("the tierkit memory-access tracer");
   VG_(details_copyright_author)("tierkit authors; MIT licence");
   VG_(details_bug_reports_to)("the tierkit repository");
   VG_(details_avg_translation_sizeB)(300);

   VG_(basic_tool_funcs)(tk_post_clo_init, tk_instrument, tk_fini);
   VG_(needs_command_line_options)(tk_process_cmd_line_option, tk_print_usage, tk_print_debug_usage);
   VG_(needs_malloc_replacement)(tk_malloc, tk_builtin_new, tk_builtin_new_aligned, tk_builtin_vec_new,
                                 tk_builtin_vec_new_aligned, tk_memalign, tk_calloc, tk_free,
                                 tk_free, tk_free_aligned, tk_free, tk_free_aligned, tk_realloc,
                                 tk_malloc_usable_size, 0);
   VG_(needs_syscall_wrapper)(tk_pre_syscall, tk_post_syscall);
   VG_(needs_client_requests)(tk_client_request);
   VG_(track_start_client_code)(tk_start_client_code);
   VG_(track_pre_thread_ll_create)(tk_thread_create);
   VG_(track_pre_thread_ll_exit)(tk_thread_exit);
   VG_(track_pre_deliver_signal)(tk_pre_deliver_signal);
}

VG_DETERMINE_INTERFACE_VERSION(tk_pre_clo_init)
