//! Predictions files (`kleio:predictions=FILE`, `kleoniki:predictions=FILE`, made by the
//! Python front end; docs/learned.md), read as the learned policies read them, then queried
//! and the policy built from them as `simulate` builds it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tierkit_core::policy::learned::Predictions;
use tierkit_core::policy::{self, PolicySpec};
use tierkit_fuzz::ok;

fuzz_target!(|data: &[u8]| {
    let path = tierkit_fuzz::scratch("json", data);
    let Some(pr) = ok(Predictions::load(&path, "kleio:predictions")) else { return };
    assert!(pr.period > 0 && (1..=35).contains(&pr.bins));
    let pages = pr.pages();
    assert!(pages.windows(2).all(|w| w[0] <= w[1]), "pages out of order");
    for &page in pages.iter().take(64) {
        for period in 0..4 {
            if let Some(c) = pr.class(page, period) {
                assert!(c as u32 <= pr.bins, "class {c} of page {page} beyond {} bins", pr.bins);
            }
        }
    }
    ok(pr.check_pages(1000, "kleio:predictions"));
    for name in ["kleio", "kleoniki"] {
        let spec = format!("{name}:predictions={},period={},bins={}", path.display(), pr.period, pr.bins);
        if let Some(spec) = ok(PolicySpec::parse(&spec)) {
            ok(policy::build(&spec));
        }
    }
});
