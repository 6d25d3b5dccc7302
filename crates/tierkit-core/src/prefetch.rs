//! Software prefetch. The engine knows a whole batch of addresses ahead of time; touching the
//! per-page state of access *i + d* while working on access *i* turns a chain of cache
//! misses into overlapping ones. A no-op on targets without a prefetch instruction.

/// Prefetch the cache line holding `p` for reading. Never dereferences `p`: any address,
/// even one out of bounds, is harmless.
#[inline(always)]
pub fn read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: _mm_prefetch is a hint that never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
