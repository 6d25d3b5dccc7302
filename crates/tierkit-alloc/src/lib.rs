//! tierkit's preloaded allocator (MemBrain's runtime, 002 §IV; docs/guidance.md): `LD_PRELOAD` it with
//! `TIERKIT_GUIDANCE=FILE` (version-2 guidance) and every allocation of the program is served
//! from the jemalloc arena of its site's guidance arena, whose memory is bound to the NUMA node
//! of the arena's tier. Allocations of sites the guidance does not name go to jemalloc's
//! automatic arenas, as under plain jemalloc. docs/guidance.md "A guided run on a real machine"
//! documents the environment variables and the exit report.

// the exported functions are the C library's malloc family: their contract is C's
#![allow(clippy::missing_safety_doc)]

pub mod arena;
pub mod guidance;
mod guidance_file;
pub mod keys;
// the runtime is reached only through the exported malloc family, which unit tests leave out
#[cfg_attr(test, allow(dead_code, unused_imports, unused_macros))]
mod runtime;
pub mod unwind;

use std::alloc::{GlobalAlloc, Layout};

use libc::c_void;
use tikv_jemalloc_sys as je;

/// The library's own allocations go straight to (prefixed) jemalloc: they never re-enter the
/// malloc this library exports.
struct Je;

unsafe impl GlobalAlloc for Je {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        je::mallocx(l.size().max(1), align_flag(l.align())) as *mut u8
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        je::mallocx(l.size().max(1), align_flag(l.align()) | je::MALLOCX_ZERO) as *mut u8
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        je::sdallocx(p as *mut c_void, l.size().max(1), align_flag(l.align()))
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        je::rallocx(p as *mut c_void, new.max(1), align_flag(l.align())) as *mut u8
    }
}

fn align_flag(a: usize) -> i32 {
    if a <= 16 {
        0
    } else {
        je::MALLOCX_ALIGN(a)
    }
}

#[global_allocator]
static GLOBAL: Je = Je;

// ---- the exported malloc family ----------------------------------------------------------
//
// Each allocation function is a two-instruction naked wrapper that passes where its caller is
// (unwind::Caller: on x86-64 the stack slot of its return address, so that a walk of the
// stack can start there; elsewhere the return address, the program's call site, frame 0 of
// the site key) as an extra argument and jumps to the implementation, which returns straight
// to the program.

#[cfg(target_arch = "x86_64")]
#[cfg_attr(test, allow(unused_macros))]
macro_rules! ra_reg {
    (1) => {
        "mov rsi, rsp"
    };
    (2) => {
        "mov rdx, rsp"
    };
    (3) => {
        "mov rcx, rsp"
    };
    (4) => {
        "mov r8, rsp"
    };
}
#[cfg(target_arch = "aarch64")]
#[cfg_attr(test, allow(unused_macros))]
macro_rules! ra_reg {
    (1) => {
        "mov x1, x30"
    };
    (2) => {
        "mov x2, x30"
    };
    (3) => {
        "mov x3, x30"
    };
    (4) => {
        "mov x4, x30"
    };
}
#[cfg(target_arch = "x86_64")]
#[cfg_attr(test, allow(unused_macros))]
macro_rules! jump {
    () => {
        "jmp {f}"
    };
}
#[cfg(target_arch = "aarch64")]
#[cfg_attr(test, allow(unused_macros))]
macro_rules! jump {
    () => {
        "b {f}"
    };
}

macro_rules! with_ra {
    ($name:ident, $imp:path, $n:tt, ($($arg:ident : $t:ty),*) -> $ret:ty) => {
        #[cfg(not(test))]
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $t),*) -> $ret {
            core::arch::naked_asm!(ra_reg!($n), jump!(), f = sym $imp)
        }
    };
}

#[cfg_attr(test, allow(unused_imports))]
use runtime as rt;

with_ra!(malloc, rt::tk_malloc, 1, (size: usize) -> *mut c_void);
with_ra!(calloc, rt::tk_calloc, 2, (n: usize, size: usize) -> *mut c_void);
with_ra!(realloc, rt::tk_realloc, 2, (p: *mut c_void, size: usize) -> *mut c_void);
with_ra!(reallocarray, rt::tk_reallocarray, 3, (p: *mut c_void, n: usize, size: usize) -> *mut c_void);
with_ra!(posix_memalign, rt::tk_posix_memalign, 3, (out: *mut *mut c_void, align: usize, size: usize) -> i32);
with_ra!(aligned_alloc, rt::tk_memalign, 2, (align: usize, size: usize) -> *mut c_void);
with_ra!(memalign, rt::tk_memalign, 2, (align: usize, size: usize) -> *mut c_void);
with_ra!(valloc, rt::tk_valloc, 1, (size: usize) -> *mut c_void);
with_ra!(pvalloc, rt::tk_pvalloc, 1, (size: usize) -> *mut c_void);
// C++ operator new / new[] (plain, nothrow, aligned, aligned nothrow): frame 0 is the
// program's `new` expression, as under Valgrind (docs/guidance.md, "Site keys")
with_ra!(_Znwm, rt::tk_new, 1, (size: usize) -> *mut c_void);
with_ra!(_Znam, rt::tk_new_arr, 1, (size: usize) -> *mut c_void);
with_ra!(_ZnwmRKSt9nothrow_t, rt::tk_new_nothrow, 2, (size: usize, nt: *const c_void) -> *mut c_void);
with_ra!(_ZnamRKSt9nothrow_t, rt::tk_new_nothrow, 2, (size: usize, nt: *const c_void) -> *mut c_void);
with_ra!(_ZnwmSt11align_val_t, rt::tk_new_aligned, 2, (size: usize, align: usize) -> *mut c_void);
with_ra!(_ZnamSt11align_val_t, rt::tk_new_arr_aligned, 2, (size: usize, align: usize) -> *mut c_void);
with_ra!(_ZnwmSt11align_val_tRKSt9nothrow_t, rt::tk_new_aligned_nothrow, 3, (size: usize, align: usize, nt: *const c_void) -> *mut c_void);
with_ra!(_ZnamSt11align_val_tRKSt9nothrow_t, rt::tk_new_aligned_nothrow, 3, (size: usize, align: usize, nt: *const c_void) -> *mut c_void);

macro_rules! freeing {
    ($($name:ident ($($arg:ident : $t:ty),*)),* $(,)?) => {$(
        #[cfg(not(test))]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(p: *mut c_void $(, $arg: $t)*) {
            $(let _ = $arg;)*
            rt::tk_free(p)
        }
    )*};
}
freeing!(
    free(),
    cfree(),
    _ZdlPv(),
    _ZdaPv(),
    _ZdlPvm(_s: usize),
    _ZdaPvm(_s: usize),
    _ZdlPvSt11align_val_t(_a: usize),
    _ZdaPvSt11align_val_t(_a: usize),
    _ZdlPvmSt11align_val_t(_s: usize, _a: usize),
    _ZdaPvmSt11align_val_t(_s: usize, _a: usize),
    _ZdlPvRKSt9nothrow_t(_n: *const c_void),
    _ZdaPvRKSt9nothrow_t(_n: *const c_void),
    _ZdlPvSt11align_val_tRKSt9nothrow_t(_a: usize, _n: *const c_void),
    _ZdaPvSt11align_val_tRKSt9nothrow_t(_a: usize, _n: *const c_void),
);

#[cfg(not(test))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        0
    } else {
        je::malloc_usable_size(p)
    }
}

/// Moves guided arena
/// `arena`'s pages to `node` and binds its range there. 0, or an errno.
#[unsafe(no_mangle)]
pub extern "C" fn tierkit_alloc_move_arena(arena: u32, node: i32) -> i32 {
    match arena::move_arena(arena as usize, node) {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// The guided arena holding `p`, or -1 (jemalloc's automatic arenas); for tests.
#[unsafe(no_mangle)]
pub extern "C" fn tierkit_alloc_arena_of(p: *const c_void) -> i32 {
    arena::arena_of(p as usize).map_or(-1, |a| a as i32)
}

// initialise once the library is loaded, before the program's constructors (the first
// malloc may come earlier: it initialises then)
#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = {
    extern "C" fn init() {
        rt::ensure_init();
        rt::start_sampler();
        rt::start_phases();
    }
    init
};
