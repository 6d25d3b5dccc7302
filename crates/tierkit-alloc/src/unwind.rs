//! The call stack above an allocation, cheaply (x86-64).
//!
//! Where the guidance needs more than the innermost frame (sites behind a shared allocation
//! wrapper), the library walks the program's stack. libgcc's `_Unwind_Backtrace` costs about
//! 1.8 µs a walk here: it starts in the library's own frames and interprets each frame's DWARF
//! call-frame information (CFI) anew on every call. This walk starts at the program's call
//! into the allocator instead (the exported functions pass the stack slot of their return
//! address, [`Caller`]) and keeps, per return address, what the CFI says there, read once with
//! gimli from the object's `.eh_frame_hdr` and `.eh_frame` (found with glibc's
//! `_dl_find_object`):
//!
//! * the canonical frame address (CFA) is the stack pointer plus a constant, and the return
//!   address is saved at CFA - 8: the usual rule of x86-64 code without a frame pointer, and of
//!   code with one at every point where no `alloca` or stack realignment moved the stack
//!   pointer (the CFI then says `rbp`, and the walk gives up: see below);
//! * the return address is undefined: the outermost frame (`_start`, a thread's start);
//! * anything else (a frame-pointer rule, a signal frame's expression, no CFI, no
//!   `_dl_find_object`): the walk gives up and the caller falls back to libgcc's unwinder,
//!   which handles every case.
//!
//! One step is then two loads: `cfa = sp + offset(pc)`, `pc = *(cfa - 8)`, `sp = cfa`.
//! `TIERKIT_ALLOC_CHECK_UNWIND=1` runs libgcc's walk beside every fast one and counts the walks
//! whose frames differ (the exit report's `unwind.mismatches`).

use std::sync::atomic::{AtomicUsize, Ordering::*};

/// What an exported allocation function passes to the implementation: on x86-64 the address
/// of the stack slot that holds its return address (the program's call site); elsewhere the
/// return address itself.
pub type Caller = usize;

/// The return address of the program's call into the allocator.
#[inline(always)]
pub fn caller_ra(c: Caller) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the slot of the exported function's own return address, alive during the call
        unsafe { *(c as *const usize) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        c
    }
}

/// A return address's CFI rule, as [`Rules`] keeps it.
const SLOW: u64 = 1;
const OUTERMOST: u64 = 2;
/// `RSP_BASE + offset`: CFA = sp + offset, return address at CFA - 8.
const RSP_BASE: u64 = 16;

/// Frames further than this above the frame before are not believed (a corrupt rule).
const MAX_FRAME: u64 = 1 << 20;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod cfi {
    use super::*;
    use gimli::{BaseAddresses, CfaRule, EhFrame, EhFrameHdr, NativeEndian, Pointer, RegisterRule, UnwindContext, UnwindSection, X86_64};
    use libc::{c_int, c_void};

    #[repr(C)]
    struct DlFindObject {
        flags: u64,
        map_start: *mut c_void,
        map_end: *mut c_void,
        link_map: *mut c_void,
        eh_frame: *mut c_void,
        reserved: [u64; 7],
    }
    type FindObject = unsafe extern "C" fn(*mut c_void, *mut DlFindObject) -> c_int;

    /// `_dl_find_object` (glibc 2.35), looked up once: 1 while unknown, 0 if absent.
    static FIND: AtomicUsize = AtomicUsize::new(1);

    fn find_object() -> Option<FindObject> {
        let mut f = FIND.load(Acquire);
        if f == 1 {
            // SAFETY: dlsym with a NUL-terminated name
            f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) } as usize;
            FIND.store(f, Release);
        }
        // SAFETY: the address of glibc's _dl_find_object, whose type this is
        (f != 0).then(|| unsafe { std::mem::transmute::<usize, FindObject>(f) })
    }

    /// The rule at return address `pc` (looked up at `pc - 1`, inside the call instruction: a
    /// call can be the last instruction of a function).
    pub fn rule(pc: usize) -> u64 {
        let Some(find) = find_object() else { return SLOW };
        if pc < 2 {
            return SLOW;
        }
        let mut o = DlFindObject {
            flags: 0,
            map_start: std::ptr::null_mut(),
            map_end: std::ptr::null_mut(),
            link_map: std::ptr::null_mut(),
            eh_frame: std::ptr::null_mut(),
            reserved: [0; 7],
        };
        // SAFETY: o is a dl_find_object as glibc lays it out on x86-64
        if unsafe { find((pc - 1) as *mut c_void, &mut o) } != 0 || o.eh_frame.is_null() {
            return SLOW;
        }
        let (hdr_at, end) = (o.eh_frame as usize, o.map_end as usize);
        if end <= hdr_at {
            return SLOW;
        }
        // SAFETY: the object's mapping; gimli reads the header, its search table and the one
        // FDE and CIE it finds, all inside the loaded sections
        let from = |at: usize| unsafe { std::slice::from_raw_parts(at as *const u8, end - at) };
        let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_at as u64);
        let Ok(hdr) = EhFrameHdr::new(from(hdr_at), NativeEndian).parse(&bases, 8) else { return SLOW };
        let Pointer::Direct(eh_at) = hdr.eh_frame_ptr() else { return SLOW };
        if eh_at as usize >= end || eh_at == 0 {
            return SLOW;
        }
        let bases = bases.set_eh_frame(eh_at);
        let eh = EhFrame::new(from(eh_at as usize), NativeEndian);
        let Some(table) = hdr.table() else { return SLOW };
        let mut ctx = Box::new(UnwindContext::new());
        let Ok(row) = table.unwind_info_for_address(&eh, &bases, &mut ctx, (pc - 1) as u64, EhFrame::cie_from_offset) else { return SLOW };
        match (row.cfa(), row.register(X86_64::RA)) {
            (_, RegisterRule::Undefined) => OUTERMOST,
            (CfaRule::RegisterAndOffset { register, offset }, RegisterRule::Offset(-8))
                if *register == X86_64::RSP && *offset >= 8 && (*offset as u64) < MAX_FRAME =>
            {
                RSP_BASE + *offset as u64
            }
            _ => SLOW,
        }
    }
}

/// Per return address, its rule (0: not looked up yet).
pub trait Rules {
    fn get(&self, pc: usize) -> u64;
    fn put(&self, pc: usize, rule: u64);
}

/// Walks the stack above the program's call into the allocator: calls `frame` with each return
/// address after the call's own, outwards, while it returns true (at most `max` of them).
/// Returns whether the walk ended cleanly (`frame` said stop, `max` frames, or the outermost
/// frame), or None where some frame's rule is not one this walk follows: the caller then
/// unwinds with libgcc (and `frame` may have seen a prefix of the frames).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub fn walk(c: Caller, rules: &impl Rules, max: usize, mut frame: impl FnMut(usize) -> bool) -> Option<()> {
    let mut pc = caller_ra(c);
    // the stack pointer in the calling function once the call returns
    let mut sp = c as u64 + 8;
    for _ in 0..max {
        let mut r = rules.get(pc);
        if r == 0 {
            r = cfi::rule(pc);
            rules.put(pc, r);
        }
        match r {
            OUTERMOST => return Some(()),
            SLOW => return None,
            _ => {}
        }
        let cfa = sp + (r - RSP_BASE);
        // SAFETY: by the CFI, the caller's return address lies at cfa - 8, in this thread's
        // stack above sp
        let next = unsafe { *((cfa - 8) as *const usize) };
        if next == 0 {
            return Some(());
        }
        if !frame(next) {
            return Some(());
        }
        pc = next;
        sp = cfa;
    }
    Some(())
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub fn walk(_c: Caller, _rules: &impl Rules, _max: usize, _frame: impl FnMut(usize) -> bool) -> Option<()> {
    None
}
