//! tierkit-core: trace formats and importers, cache filter, platform and timing models,
//! migration mechanics, access tracking, policies and the simulation engine.
//!
//! The layers follow `architecture.md`: [`trace`] knows nothing of tiers; [`platform`] and
//! [`timing`] know nothing of policies; [`mechanics`] carries out and accounts what policies
//! request; [`policy`] decides; [`engine`] runs the loop and checks the invariants.

pub mod cache;
pub mod error;
pub mod outfile;
pub mod trace;
pub mod units;

pub use error::{Error, Result};
pub mod engine;
pub mod heap;
pub mod live;
pub mod mechanics;
pub mod pagemap;
pub mod periods;
pub mod platform;
pub mod policy;
pub mod prefetch;
pub mod profile;
pub mod rng;
pub mod runspec;
pub mod sitekey;
pub mod timing;
pub mod tracking;
