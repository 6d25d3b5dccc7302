//! Site keys that survive real runs (docs/guidance.md, "Site keys"): an allocation
//! site is identified by its physical frames, each as `<object>+0x<offset>`, where
//! `<object>` is `build-id:<hex>` (the object's NT_GNU_BUILD_ID note) or, for an object
//! without one, `file:<basename>`, and `<offset>` is the frame's address (return address
//! minus 1) in the object's link-time address space. Neither the load address (ASLR), nor
//! the directory the program ran from, nor its symbols (a stripped copy keeps its build-id)
//! change a key.
//!
//! Also here: [`classify`], the rule that the simulator's `guided` policy and the runtime
//! library share to put an allocation in an arena from its frame keys.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The object identity of a frame whose address is in no known object.
pub const UNKNOWN_OBJECT: &str = "file:?";

/// One frame key: `<object>+0x<offset in lowercase hex>`.
pub fn frame_key(object: &str, offset: u64) -> String {
    format!("{object}+0x{offset:x}")
}

/// Whether `s` has the shape of a frame key (`build-id:HEX+0xHEX` or `file:NAME+0xHEX`).
pub fn is_frame_key(s: &str) -> bool {
    let Some((obj, off)) = s.rsplit_once("+0x") else { return false };
    let hex = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !hex(off) || off.len() > 16 {
        return false;
    }
    match obj.split_once(':') {
        Some(("build-id", h)) => hex(h),
        Some(("file", name)) => !name.is_empty() && !name.contains('/'),
        _ => false,
    }
}

/// How one frame of a site is shown to people (docs/guidance.md, "Site keys"): its display
/// frame, except where that names no function (`??? (in OBJECT)`, a stripped program), which
/// would show every site of the object alike: there the key tells them apart, as
/// `OBJECTNAME+0xOFFSET` (the object's file name, the key's offset); a bare `???` is shown as
/// its key. Without a key the display frame stays. The same rule as the Python side's
/// `tierkit.guidance.frame_label`.
pub fn frame_label(frame: &str, key: Option<&str>) -> String {
    let Some(key) = key.filter(|k| is_frame_key(k)) else { return frame.to_string() };
    let Some(rest) = frame.strip_prefix("???") else { return frame.to_string() };
    if rest.is_empty() {
        return key.to_string();
    }
    let Some(obj) = rest.strip_prefix(" (in ").and_then(|r| r.strip_suffix(')')) else { return frame.to_string() };
    let obj = obj.trim_end_matches('/');
    let name = obj.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or(obj);
    let off = key.rsplit_once("+0x").map(|(_, o)| o).unwrap_or("");
    format!("{name}+0x{off}")
}

/// A site's display frames through [`frame_label`], each with its key where the site has one.
pub fn site_labels(frames: &[String], keys: &[String]) -> Vec<String> {
    frames.iter().enumerate().map(|(i, f)| frame_label(f, keys.get(i).map(|k| k.as_str()))).collect()
}

/// Object identities by path, read once per path.
#[derive(Default)]
pub struct ObjectIds {
    cache: HashMap<String, String>,
}

impl ObjectIds {
    /// The identity of the object at `path`: `build-id:<hex>` when its ELF notes have a GNU
    /// build-id, else `file:<basename>` (also when the file cannot be read: the basename is
    /// the best that is left). An empty path is [`UNKNOWN_OBJECT`].
    pub fn id(&mut self, path: &str) -> &str {
        if !self.cache.contains_key(path) {
            let id = object_id(path);
            self.cache.insert(path.to_string(), id);
        }
        &self.cache[path]
    }
}

/// See [`ObjectIds::id`] (uncached).
pub fn object_id(path: &str) -> String {
    if path.is_empty() {
        return UNKNOWN_OBJECT.to_string();
    }
    if let Some(b) = read_build_id(Path::new(path)) {
        return format!("build-id:{}", hex(&b));
    }
    let base = path.rsplit('/').next().unwrap_or(path);
    if base.is_empty() {
        UNKNOWN_OBJECT.to_string()
    } else {
        format!("file:{base}")
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The NT_GNU_BUILD_ID note of an ELF file (32- or 64-bit, either byte order), from its
/// PT_NOTE segments (what a loaded object has in memory, where the runtime reads it), else
/// its SHT_NOTE sections. None when the file is not ELF, cannot be read, or has no build-id.
pub fn read_build_id(path: &Path) -> Option<Vec<u8>> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut ident = [0u8; 64];
    f.read_exact(&mut ident[..16]).ok()?;
    if &ident[..4] != b"\x7fELF" {
        return None;
    }
    let is64 = match ident[4] {
        1 => false,
        2 => true,
        _ => return None,
    };
    let le = match ident[5] {
        1 => true,
        2 => false,
        _ => return None,
    };
    let hlen = if is64 { 64 } else { 52 };
    f.read_exact(&mut ident[16..hlen]).ok()?;
    let h = &ident[..hlen];
    let u16_at = |b: &[u8], i: usize| {
        let v = [b[i], b[i + 1]];
        if le {
            u16::from_le_bytes(v)
        } else {
            u16::from_be_bytes(v)
        }
    };
    let u32_at = |b: &[u8], i: usize| {
        let v = [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if le {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        }
    };
    let u64_at = |b: &[u8], i: usize| {
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[i..i + 8]);
        if le {
            u64::from_le_bytes(v)
        } else {
            u64::from_be_bytes(v)
        }
    };
    let word = |b: &[u8], i: usize| if is64 { u64_at(b, i) } else { u32_at(b, i) as u64 };
    let (phoff, shoff) = if is64 { (u64_at(h, 32), u64_at(h, 40)) } else { (u32_at(h, 28) as u64, u32_at(h, 32) as u64) };
    let (phentsize, phnum, shentsize, shnum) =
        if is64 { (u16_at(h, 54), u16_at(h, 56), u16_at(h, 58), u16_at(h, 60)) } else { (u16_at(h, 42), u16_at(h, 44), u16_at(h, 46), u16_at(h, 48)) };
    let file_len = f.metadata().ok()?.len();
    let mut read_at = |off: u64, len: u64| -> Option<Vec<u8>> {
        if len > (16 << 20) || off.checked_add(len)? > file_len {
            return None;
        }
        f.seek(SeekFrom::Start(off)).ok()?;
        let mut v = vec![0u8; len as usize];
        f.read_exact(&mut v).ok()?;
        Some(v)
    };
    let find_in = |notes: &[u8]| -> Option<Vec<u8>> {
        let mut i = 0usize;
        while i + 12 <= notes.len() {
            let (nsz, dsz, ty) = (u32_at(notes, i) as usize, u32_at(notes, i + 4) as usize, u32_at(notes, i + 8));
            let name_at = i + 12;
            let desc_at = name_at + nsz.div_ceil(4) * 4;
            let end = desc_at.checked_add(dsz.div_ceil(4) * 4)?;
            if desc_at + dsz > notes.len() {
                return None;
            }
            // NT_GNU_BUILD_ID = 3, owner "GNU\0"
            if ty == 3 && nsz == 4 && &notes[name_at..name_at + 4] == b"GNU\0" && dsz > 0 {
                return Some(notes[desc_at..desc_at + dsz].to_vec());
            }
            i = end;
        }
        None
    };
    // program headers: PT_NOTE = 4
    if phnum > 0 && (phentsize as usize) >= if is64 { 56 } else { 32 } {
        if let Some(ph) = read_at(phoff, phentsize as u64 * phnum as u64) {
            for k in 0..phnum as usize {
                let e = &ph[k * phentsize as usize..];
                if u32_at(e, 0) != 4 {
                    continue;
                }
                let (off, size) = if is64 { (u64_at(e, 8), u64_at(e, 32)) } else { (u32_at(e, 4) as u64, u32_at(e, 16) as u64) };
                if let Some(id) = read_at(off, size).and_then(|n| find_in(&n)) {
                    return Some(id);
                }
            }
        }
    }
    // section headers: SHT_NOTE = 7 (an object without program headers, such as a
    // separate debug file)
    if shnum > 0 && (shentsize as usize) >= if is64 { 64 } else { 40 } {
        if let Some(sh) = read_at(shoff, shentsize as u64 * shnum as u64) {
            for k in 0..shnum as usize {
                let e = &sh[k * shentsize as usize..];
                if u32_at(e, 4) != 7 {
                    continue;
                }
                let (off, size) = if is64 { (word(e, 24), word(e, 32)) } else { (word(e, 16), word(e, 20)) };
                if let Some(id) = read_at(off, size).and_then(|n| find_in(&n)) {
                    return Some(id);
                }
            }
        }
    }
    None
}

// -------------------------------------------------------------------- classification

/// What [`classify`] decided for one allocation site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Class {
    /// The arena, decided after `depth` frames.
    Arena { arena: u16, depth: usize },
    /// No guidance site starts with the allocation's frames (after `depth` frames).
    Unmatched { depth: usize },
    /// The allocation's frames ran out after `have` frames while the guidance sites that
    /// start with them are in several arenas (`arenas`, ascending): the trace (or the
    /// unwinder) recorded too few frames to decide.
    TooFewFrames { have: usize, arenas: Vec<u16> },
}

/// The classification rule of guidance version 2 (docs/guidance.md; the same in the
/// simulator and the runtime): walk the allocation's frame keys innermost first; after j
/// frames, let S_j be the guidance sites whose key starts with those j frames. S_j empty:
/// unmatched. All of S_j in one arena: that arena (no deeper frame is looked at). Otherwise
/// one frame deeper; at j = `context`, the site whose key equals the frames, if any. When
/// the allocation has only j < `context` frames and S_j is still in several arenas, the
/// site whose key is exactly those j frames if there is one (a stack that is really that
/// short), else [`Class::TooFewFrames`].
///
/// `sites` are (key, arena) pairs; a key has at most `context` frames.
pub fn classify<K: AsRef<str>>(sites: &[(Vec<String>, u16)], context: usize, frames: &[K]) -> Class {
    let mut cand: Vec<usize> = (0..sites.len()).collect();
    let limit = context.max(1);
    for j in 1..=limit {
        if j > frames.len() {
            // frames ran out with candidates in several arenas
            if let Some(&i) = cand.iter().find(|&&i| sites[i].0.len() == frames.len()) {
                return Class::Arena { arena: sites[i].1, depth: frames.len() };
            }
            let mut arenas: Vec<u16> = cand.iter().map(|&i| sites[i].1).collect();
            arenas.sort_unstable();
            arenas.dedup();
            return Class::TooFewFrames { have: frames.len(), arenas };
        }
        let f = frames[j - 1].as_ref();
        cand.retain(|&i| sites[i].0.get(j - 1).map(|k| k == f).unwrap_or(false));
        let Some(&first) = cand.first() else { return Class::Unmatched { depth: j } };
        let a = sites[first].1;
        if cand.iter().all(|&i| sites[i].1 == a) {
            return Class::Arena { arena: a, depth: j };
        }
    }
    // at j = context and still several arenas: the exact key
    match cand.iter().find(|&&i| sites[i].0.len() == limit) {
        Some(&i) => Class::Arena { arena: sites[i].1, depth: limit },
        None => Class::Unmatched { depth: limit },
    }
}

#[cfg(test)]
mod tests {
    //! Seed 002 §III / 000 §3: the classification rule of docs/guidance.md, "Matching sites"
    //! (unit cases).
    use super::*;

    #[test]
    fn unnamed_frames_are_shown_by_their_keys() {
        let k = "build-id:ab12+0x11bd";
        assert_eq!(frame_label("??? (in /usr/bin/sort)", Some(k)), "sort+0x11bd");
        assert_eq!(frame_label("???", Some(k)), k);
        assert_eq!(frame_label("main (m.c:3)", Some(k)), "main (m.c:3)");
        assert_eq!(frame_label("??? (in /usr/bin/sort)", None), "??? (in /usr/bin/sort)");
        assert_eq!(frame_label("??? (in /usr/bin/sort)", Some("/usr/bin/sort+0x1")), "??? (in /usr/bin/sort)", "not a key");
        let two = site_labels(&["??? (in /lib/libx.so)".into(), "??? (in /lib/libx.so)".into()], &["file:libx.so+0x10".into(), "file:libx.so+0x20".into()]);
        assert_eq!(two, ["libx.so+0x10", "libx.so+0x20"]);
    }

    fn s(keys: &[&str], arena: u16) -> (Vec<String>, u16) {
        (keys.iter().map(|k| k.to_string()).collect(), arena)
    }

    #[test]
    fn an_unambiguous_first_frame_decides_at_depth_one() {
        let g = vec![s(&["a", "x"], 0), s(&["a", "y"], 0), s(&["b", "x"], 1)];
        assert_eq!(classify(&g, 2, &["a", "zzz"]), Class::Arena { arena: 0, depth: 1 });
        assert_eq!(classify(&g, 2, &["b"]), Class::Arena { arena: 1, depth: 1 });
        // one frame is enough even when the trace recorded only one
        assert_eq!(classify(&g, 2, &["a"]), Class::Arena { arena: 0, depth: 1 });
    }

    #[test]
    fn an_ambiguous_prefix_goes_deeper() {
        // a wrapper allocator: every site starts with the wrapper's frame
        let g = vec![s(&["w", "hot"], 0), s(&["w", "cold"], 1), s(&["w", "warm"], 2)];
        assert_eq!(classify(&g, 2, &["w", "cold"]), Class::Arena { arena: 1, depth: 2 });
        assert_eq!(classify(&g, 2, &["w", "hot", "main"]), Class::Arena { arena: 0, depth: 2 });
        // deeper than the context: the exact key
        let g3 = vec![s(&["w", "m", "p"], 0), s(&["w", "m", "q"], 1)];
        assert_eq!(classify(&g3, 3, &["w", "m", "q"]), Class::Arena { arena: 1, depth: 3 });
    }

    #[test]
    fn unmatched_when_no_site_starts_with_the_frames() {
        let g = vec![s(&["w", "hot"], 0), s(&["w", "cold"], 1)];
        assert_eq!(classify(&g, 2, &["v", "hot"]), Class::Unmatched { depth: 1 });
        assert_eq!(classify(&g, 2, &["w", "other"]), Class::Unmatched { depth: 2 });
        assert_eq!(classify::<&str>(&[], 2, &["w"]), Class::Unmatched { depth: 1 });
    }

    #[test]
    fn too_few_frames_is_not_a_silent_first_match() {
        // the review's reproducer: a trace recorded with --context 1 against context-2 guidance
        let g = vec![s(&["w", "hot"], 0), s(&["w", "cold"], 1)];
        assert_eq!(classify(&g, 2, &["w"]), Class::TooFewFrames { have: 1, arenas: vec![0, 1] });
        // a stack that really is that short (its key has one frame) is matched exactly
        let g2 = vec![s(&["w"], 1), s(&["w", "hot"], 0)];
        assert_eq!(classify(&g2, 2, &["w"]), Class::Arena { arena: 1, depth: 1 });
    }

    #[test]
    fn frame_keys_have_their_shape() {
        assert_eq!(frame_key("file:sort", 0x4a10), "file:sort+0x4a10");
        assert!(is_frame_key("build-id:4f1ce2+0x11d7"));
        assert!(is_frame_key("file:sort+0x4a10"));
        assert!(!is_frame_key("file:/usr/bin/sort+0x4a10"));
        assert!(!is_frame_key("main (a.c:3)"));
        assert!(!is_frame_key("file:sort+0x4A10"));
        assert_eq!(object_id(""), UNKNOWN_OBJECT);
        assert_eq!(object_id("/nonexistent/dir/prog"), "file:prog");
    }

    #[test]
    fn build_ids_come_from_the_elf_notes() {
        // the test binary itself is ELF; whether it has a build-id depends on the linker,
        // so compare with what the note section says when readelf is there
        let exe = std::env::current_exe().unwrap();
        let got = read_build_id(&exe).map(|b| hex(&b));
        if let Ok(out) = std::process::Command::new("readelf").arg("-n").arg(&exe).output() {
            let text = String::from_utf8_lossy(&out.stdout);
            let want = text.lines().find_map(|l| l.trim().strip_prefix("Build ID: ").map(|x| x.trim().to_string()));
            if out.status.success() {
                assert_eq!(got, want);
            }
        }
        assert_eq!(read_build_id(Path::new("/nonexistent")), None);
    }
}
