//! Region sampling (`--regions FILE`, `--region-series OUT.csv`): the program names ranges of
//! its own memory in a text file it writes while it runs, and every observation counts the
//! program's present pages in each range on the fast and on the slow node.
//!
//! The file's lines: `region NAME 0xSTART BYTES` (the range [START, START+BYTES), NAME without
//! spaces) and `hot T_MS NAME [NAME...]` (for the analysis; not read here); any other line is
//! ignored. The file is read again at every observation: it may not exist yet (no regions),
//! and its last line, without its newline, is being written (ignored until it is complete).

use std::collections::HashMap;
use std::path::Path;

use tierkit_core::live::PageObs;
use tierkit_core::{Error, Result};

/// One named address range of the program's memory: [start, end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub name: String,
    pub start: u64,
    pub end: u64,
}

/// The regions of the complete lines of `bytes`, the text of the regions file at `path` (named
/// in errors). A line that is not ended by a newline is not read. A `region` line that cannot
/// be read is an error naming the file and the line (1-based). A name defined again takes its
/// new range and keeps its first place.
pub fn parse_regions(path: &Path, bytes: &[u8]) -> Result<Vec<Region>> {
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => &bytes[..=i],
        None => return Ok(Vec::new()),
    };
    let mut out: Vec<Region> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, line) in complete.split(|&b| b == b'\n').enumerate() {
        let line = String::from_utf8_lossy(line);
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first() != Some(&"region") {
            continue;
        }
        let bad = |msg: String| Error::at_line(&path.display().to_string(), i as u64 + 1, msg);
        if fields.len() != 4 {
            return Err(bad(format!("a region line is 'region NAME 0xSTART BYTES'; this one has {} fields", fields.len())));
        }
        let (name, start, bytes) = (fields[1], fields[2], fields[3]);
        let hex = start.strip_prefix("0x").or_else(|| start.strip_prefix("0X"));
        let start_addr = match hex.filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit())).map(|h| u64::from_str_radix(h, 16)) {
            Some(Ok(a)) => a,
            _ => return Err(bad(format!("region {name}: START '{start}' is not a hexadecimal address (0x...)"))),
        };
        let Some(len) = bytes.bytes().all(|b| b.is_ascii_digit()).then(|| bytes.parse::<u64>().ok()).flatten() else {
            return Err(bad(format!("region {name}: BYTES '{bytes}' is not a whole number")));
        };
        let Some(end) = start_addr.checked_add(len) else {
            return Err(bad(format!("region {name}: {start} + {bytes} bytes is past the end of the address space")));
        };
        let r = Region { name: name.to_string(), start: start_addr, end };
        match index.get(name) {
            Some(&k) => out[k] = r,
            None => {
                index.insert(name.to_string(), out.len());
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// The regions file's regions now: none while it does not exist.
pub fn read_regions(path: &Path) -> Result<Vec<Region>> {
    match std::fs::read(path) {
        Ok(b) => parse_regions(path, &b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// For each region, in order, the pages of `pages` in its range on the fast tier (0) and on
/// the slow tier (any other): (fast, slow). A page in several regions counts in each.
/// `pages` sorted by address (as observations give them) costs O(regions × log pages + the
/// pages counted); otherwise they are sorted here first.
pub fn count_pages(regions: &[Region], pages: &[PageObs]) -> Vec<(u64, u64)> {
    let sorted: std::borrow::Cow<'_, [PageObs]> = if pages.windows(2).all(|w| w[0].addr <= w[1].addr) {
        std::borrow::Cow::Borrowed(pages)
    } else {
        let mut v = pages.to_vec();
        v.sort_by_key(|p| p.addr);
        std::borrow::Cow::Owned(v)
    };
    regions
        .iter()
        .map(|r| {
            let lo = sorted.partition_point(|p| p.addr < r.start);
            let hi = lo + sorted[lo..].partition_point(|p| p.addr < r.end);
            let fast = sorted[lo..hi].iter().filter(|p| p.tier == 0).count() as u64;
            (fast, (hi - lo) as u64 - fast)
        })
        .collect()
}

/// A region name as a CSV field: quoted (RFC 4180) when it holds a comma or a quote.
pub fn csv_field(name: &str) -> std::borrow::Cow<'_, str> {
    if name.contains([',', '"']) {
        std::borrow::Cow::Owned(format!("\"{}\"", name.replace('"', "\"\"")))
    } else {
        std::borrow::Cow::Borrowed(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, start: u64, end: u64) -> Region {
        Region { name: name.into(), start, end }
    }

    #[test]
    fn complete_lines_are_read_and_a_partial_last_line_is_not() {
        let p = Path::new("regions.txt");
        let text = b"# comment\nregion a 0x1000 8192\nhot 10 a\n\nregion b 0X7f00 4096\nregion c 0x9000 40";
        assert_eq!(parse_regions(p, text).unwrap(), vec![r("a", 0x1000, 0x3000), r("b", 0x7f00, 0x8f00)]);
        // the same line, complete
        let mut t = text.to_vec();
        t.push(b'\n');
        assert_eq!(parse_regions(p, &t).unwrap().last(), Some(&r("c", 0x9000, 0x9028)));
        // a partial last line is not an error, even malformed as it is
        assert_eq!(parse_regions(p, b"region a 0x1000 4096\nregion b 0x").unwrap(), vec![r("a", 0x1000, 0x2000)]);
        assert!(parse_regions(p, b"region b 0x").unwrap().is_empty());
        assert!(parse_regions(p, b"").unwrap().is_empty());
        // hot lines and other lines are not checked
        assert!(parse_regions(p, b"hot x y z\nnonsense 0xzz\nregions a b\n").unwrap().is_empty());
    }

    #[test]
    fn a_name_defined_again_takes_its_new_range_in_its_first_place() {
        let p = Path::new("regions.txt");
        let v = parse_regions(p, b"region a 0x1000 4096\nregion b 0x5000 4096\nregion a 0x9000 4096\n").unwrap();
        assert_eq!(v, vec![r("a", 0x9000, 0xa000), r("b", 0x5000, 0x6000)]);
    }

    #[test]
    fn a_bad_complete_region_line_is_an_error_naming_the_file_and_line() {
        let p = Path::new("/tmp/run/regions.txt");
        for (line, what) in [
            ("region a 0xzz 4096", "START '0xzz'"),
            ("region a 1000 4096", "START '1000'"),
            ("region a 0x 4096", "START '0x'"),
            ("region a 0x10000000000000000 4096", "START"),
            ("region a 0x1000 4k", "BYTES '4k'"),
            ("region a 0x1000 -1", "BYTES '-1'"),
            ("region a 0x1000 99999999999999999999", "BYTES"),
            ("region a 0xffffffffffffffff 2", "past the end"),
            ("region a 0x1000", "3 fields"),
            ("region a 0x1000 4096 extra", "5 fields"),
        ] {
            let text = format!("hot 1 a\nregion ok 0x1000 4096\n{line}\n");
            let e = parse_regions(p, text.as_bytes()).unwrap_err().to_string();
            assert!(e.starts_with("/tmp/run/regions.txt: line 3: "), "{e}");
            assert!(e.contains(what) && !e.contains('\n'), "{line}: {e}");
        }
    }

    #[test]
    fn a_missing_file_has_no_regions() {
        let d = tempfile::tempdir().unwrap();
        assert!(read_regions(&d.path().join("none.txt")).unwrap().is_empty());
        let f = d.path().join("r.txt");
        std::fs::write(&f, "region a 0x1000 4096\nregion b 0x2000 4").unwrap();
        assert_eq!(read_regions(&f).unwrap(), vec![r("a", 0x1000, 0x2000)]);
        // a directory is not a regions file
        assert!(read_regions(d.path()).is_err());
    }

    fn page(addr: u64, tier: u8) -> PageObs {
        PageObs { addr, tier, referenced: false, dirty: false, accesses: 0 }
    }

    #[test]
    fn pages_count_in_every_region_whose_range_holds_them_by_tier() {
        let k = 0x1000;
        // pages 1..=10, odd ones fast, even ones slow
        let pages: Vec<PageObs> = (1..=10).map(|i| page(i * k, (i % 2 == 0) as u8)).collect();
        let regions = vec![
            r("first3", k, 4 * k),             // pages 1, 2, 3
            r("none", 20 * k, 30 * k),         // past every page
            r("below", 0, k),                  // before page 1: its end is not in it
            r("mid", 3 * k, 7 * k),            // 3..=6, overlaps first3
            r("all", 0, u64::MAX),             // every page
            r("inside", 5 * k + 1, 5 * k + 2), // within page 5 but not its start: not counted
            r("one", 10 * k, 10 * k + 1),      // page 10 (its address is the start)
            r("empty", 4 * k, 4 * k),
        ];
        let want = vec![(2, 1), (0, 0), (0, 0), (2, 2), (5, 5), (0, 0), (0, 1), (0, 0)];
        assert_eq!(count_pages(&regions, &pages), want);
        // the same pages in another order count the same
        let mut shuffled = pages.clone();
        shuffled.reverse();
        shuffled.swap(2, 7);
        assert_eq!(count_pages(&regions, &shuffled), want);
        assert!(count_pages(&[], &pages).is_empty());
        assert_eq!(count_pages(&regions[..1], &[]), vec![(0, 0)]);
    }

    #[test]
    fn names_with_commas_or_quotes_are_quoted_in_the_csv() {
        assert_eq!(csv_field("heap"), "heap");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
    }
}
