/* tierkit.h — annotations a program may make for tierkit's tracer.
 *
 *   TIERKIT_MARK(id)   a user marker with this id (an unsigned integer) in the trace, at the
 *                      instruction where it runs: `tierkit trace record` keeps it as a marker
 *                      of kind "user" (docs/trace-format.md), and a simulation can sample
 *                      what it watches there (docs/validation.md, "Hot data").
 *
 * Outside the tracer the macro is a few instructions that do nothing (Valgrind's client
 * request sequence); without Valgrind's headers it is nothing at all. Include it and build
 * as usual: no library to link.
 */
#ifndef TIERKIT_H
#define TIERKIT_H

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define TIERKIT_HAVE_VALGRIND 1
#endif
#endif

#ifdef TIERKIT_HAVE_VALGRIND
/* the tool's request code: VG_USERREQ_TOOL_BASE('T','K') */
#define TIERKIT_USERREQ_MARK (((unsigned int)('T') & 0xff) << 24 | ((unsigned int)('K') & 0xff) << 16)
#define TIERKIT_MARK(id) VALGRIND_DO_CLIENT_REQUEST_STMT(TIERKIT_USERREQ_MARK, (id), 0, 0, 0, 0)
#else
#define TIERKIT_MARK(id) ((void)(id))
#endif

#endif
