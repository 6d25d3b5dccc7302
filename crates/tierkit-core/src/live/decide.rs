//! Daemon policies for `tierkit run`: which of the simulator's policies can decide on live
//! observations, and how they are built.

use super::LiveDecider;
use crate::error::{Error, Result};
use crate::policy::PolicySpec;

/// The policies that can run as a daemon, with the simulator's decision code.
pub const LIVE_POLICIES: &[&str] = &[];

/// Build a daemon policy from its spec, for a fast tier of at most `fast_budget_pages` pages
/// of `page_bytes` bytes.
pub fn build_decider(spec: &PolicySpec, fast_budget_pages: u64, page_bytes: u64) -> Result<Box<dyn LiveDecider>> {
    let _ = (fast_budget_pages, page_bytes);
    Err(Error::config("--policy", format!("'{}' cannot run as a daemon policy (daemon policies: {})", spec.name, LIVE_POLICIES.join(", "))))
}
