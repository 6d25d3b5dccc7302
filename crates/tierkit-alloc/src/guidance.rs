//! Version-2 guidance (docs/guidance.md, "Matching sites") read into the classification
//! trie the runtime walks: the rule is the simulator's `guided` policy's, so both agree on
//! which allocation joins which arena.
//!
//! Rule: walk the allocation's frame keys innermost first; after j frames, S_j is the set of
//! guidance sites whose key starts with those j frames. S_j empty -> unmatched; all of S_j in
//! one arena -> that arena; otherwise one frame deeper; at j = context (or where the stack
//! ends), the site whose key equals the frames, if any.

use std::collections::HashMap;

use serde_json::Value;

/// What a trie node decides once the walk reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Every site below this node is in this arena.
    Arena(u32),
    /// The sites below are in more than one arena: the next frame decides.
    Deeper,
}

#[derive(Debug, Default)]
pub struct Node {
    pub children: HashMap<u32, u32>,
    /// The frames walked to reach this node (frame ids), innermost first.
    pub prefix: Vec<u32>,
    /// The sites whose key starts with `prefix` (indices into `Guidance::sites`).
    pub sites: Vec<u32>,
    /// The site whose key equals `prefix`, if any.
    pub exact: Option<u32>,
    pub decision: Option<Decision>,
}

#[derive(Debug)]
pub struct Site {
    pub key: Vec<String>,
    pub arena: u32,
}

#[derive(Debug)]
pub struct Guidance {
    pub context: usize,
    pub mode: String,
    pub tier_names: Vec<String>,
    /// Each arena's tier in phase 0 (where every run starts).
    pub arena_tiers: Vec<u32>,
    /// Each arena's tier in each phase (`phases` entries; one in static guidance).
    pub arena_phase_tiers: Vec<Vec<u32>>,
    pub phases: usize,
    /// Per-phase guidance's phase markers a run can see, in order: (position, phase). The
    /// position counts allocation calls twice: `2 i` is just before call `i` (from 0) is
    /// served, `2 i + 1` just after (docs/guidance.md, "Phase markers").
    pub markers: Vec<(u64, u32)>,
    /// Phase boundaries of the guidance that have no marker (no allocation call near them).
    pub unmarked: usize,
    pub sites: Vec<Site>,
    /// Frame key string -> frame id (ids index `frames`).
    pub frame_ids: HashMap<String, u32>,
    pub frames: Vec<String>,
    /// nodes[0] is the root (no frame walked).
    pub nodes: Vec<Node>,
    /// FNV-1a 64 of the file's bytes, "fnv1a64:<hex>".
    pub digest: String,
}

pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Is `s` a frame key of the contract's form: `build-id:<hex>+0x<hex>` or `file:<name>+0x<hex>`?
pub fn valid_frame_key(s: &str) -> bool {
    let Some((obj, off)) = s.rsplit_once("+0x") else { return false };
    let off_ok = !off.is_empty() && off.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
    let obj_ok = if let Some(h) = obj.strip_prefix("build-id:") {
        !h.is_empty() && h.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    } else if let Some(n) = obj.strip_prefix("file:") {
        !n.is_empty() && !n.contains('/')
    } else {
        false
    };
    off_ok && obj_ok
}

impl Guidance {
    /// Reads guidance from the bytes of `file` (named in errors). Errors are one line:
    /// `KEY: what is wrong`.
    pub fn parse(bytes: &[u8]) -> Result<Guidance, String> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON ({e})"))?;
        let o = v.as_object().ok_or("not a JSON object")?;
        if o.get("format").and_then(Value::as_str) != Some("tierkit-guidance") {
            return Err("format: not \"tierkit-guidance\"".into());
        }
        match o.get("version").and_then(Value::as_u64) {
            Some(2) => {}
            Some(1) => {
                return Err("version: 1 keys sites by symbolized frames (function, file:line), which a running program cannot compute; the runtime needs version-2 guidance (frame keys object+offset, docs/guidance.md)".into())
            }
            _ => return Err(format!("version: {} is not 2", o.get("version").unwrap_or(&Value::Null))),
        }
        let context = o.get("context").and_then(Value::as_u64).filter(|c| (1..=64).contains(c)).ok_or("context: not an integer from 1 to 64")? as usize;
        let mode = o.get("mode").and_then(Value::as_str).unwrap_or("static").to_string();
        if mode != "static" && mode != "per-phase" {
            return Err(format!("mode: '{mode}' is not static or per-phase"));
        }
        let tier_names: Vec<String> = match o.get("tiers") {
            None => vec!["fast".into(), "slow".into()],
            Some(t) => t
                .as_array()
                .and_then(|a| a.iter().map(|x| x.as_str().map(String::from)).collect::<Option<Vec<_>>>())
                .filter(|a| a.len() >= 2)
                .ok_or("tiers: not a list of at least two names")?,
        };
        let phases = o.get("phases").and_then(|p| p.get("count")).and_then(Value::as_u64).unwrap_or(1).max(1) as usize;
        let arenas = o.get("arenas").and_then(Value::as_array).ok_or("arenas: not a list")?;
        let mut arena_tiers = Vec::with_capacity(arenas.len());
        let mut arena_phase_tiers = Vec::with_capacity(arenas.len());
        // static guidance applies its one column; per-phase guidance needs one per phase
        let want = if mode == "per-phase" { phases } else { 1 };
        for (i, a) in arenas.iter().enumerate() {
            let tiers = a.get("tiers").and_then(Value::as_array).filter(|t| !t.is_empty()).ok_or_else(|| format!("arenas[{i}].tiers: not a non-empty list"))?;
            if tiers.len() < want {
                return Err(format!("arenas[{i}].tiers: {} entries for {want} phases", tiers.len()));
            }
            let mut ts = Vec::with_capacity(want);
            for (p, t) in tiers.iter().take(want).enumerate() {
                let t = t
                    .as_u64()
                    .filter(|t| (*t as usize) < tier_names.len())
                    .ok_or_else(|| format!("arenas[{i}].tiers[{p}]: not a tier index (0..{})", tier_names.len() - 1))?;
                ts.push(t as u32);
            }
            if let Some(id) = a.get("id") {
                if id.as_u64() != Some(i as u64) {
                    return Err(format!("arenas[{i}].id: {id} is not {i}"));
                }
            }
            arena_tiers.push(ts[0]);
            arena_phase_tiers.push(ts);
        }
        let (mut markers, mut unmarked) = (Vec::new(), 0);
        if mode == "per-phase" {
            let ms = o.get("phases").and_then(|p| p.get("markers"));
            for (i, m) in ms.and_then(Value::as_array).map(|v| v.as_slice()).unwrap_or(&[]).iter().enumerate() {
                let phase = m
                    .get("phase")
                    .and_then(Value::as_u64)
                    .filter(|p| (*p as usize) < phases)
                    .ok_or_else(|| format!("phases.markers[{i}].phase: not a phase (0..{})", phases - 1))?;
                let Some(at) = m.get("alloc").filter(|v| !v.is_null()) else {
                    unmarked += 1;
                    continue;
                };
                let at = at.as_u64().filter(|a| *a < 1 << 62).ok_or_else(|| format!("phases.markers[{i}].alloc: not a count or null"))?;
                let pos = match m.get("side").and_then(Value::as_str) {
                    Some("before") => 2 * at,
                    Some("after") => 2 * at + 1,
                    _ => return Err(format!("phases.markers[{i}].side: not \"before\" or \"after\"")),
                };
                if markers.last().is_some_and(|&(p, _)| p > pos) {
                    return Err(format!("phases.markers[{i}].alloc: {at} comes before the marker ahead of it"));
                }
                markers.push((pos, phase as u32));
            }
        }
        let sites_v = o.get("sites").and_then(Value::as_array).ok_or("sites: not a list")?;
        let mut g = Guidance {
            context,
            mode,
            tier_names,
            arena_tiers,
            arena_phase_tiers,
            phases,
            markers,
            unmarked,
            sites: Vec::new(),
            frame_ids: HashMap::new(),
            frames: Vec::new(),
            nodes: vec![Node::default()],
            digest: format!("fnv1a64:{:016x}", fnv1a64(bytes)),
        };
        let mut seen: HashMap<Vec<String>, usize> = HashMap::new();
        for (j, s) in sites_v.iter().enumerate() {
            let key = s
                .get("key")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().map(|x| x.as_str().map(String::from)).collect::<Option<Vec<_>>>())
                .ok_or_else(|| format!("sites[{j}].key: not a list of frame keys"))?;
            if key.is_empty() || key.len() > context {
                return Err(format!("sites[{j}].key: {} frames; give 1 to context ({context})", key.len()));
            }
            if let Some(bad) = key.iter().find(|k| !valid_frame_key(k)) {
                return Err(format!("sites[{j}].key: '{bad}' is not a frame key (build-id:HEX+0xOFFSET or file:NAME+0xOFFSET)"));
            }
            let arena = s.get("arena").and_then(Value::as_u64).ok_or_else(|| format!("sites[{j}].arena: not an integer"))?;
            if arena as usize >= g.arena_tiers.len() {
                return Err(format!("sites[{j}].arena: {arena} is not an arena id (0..{})", g.arena_tiers.len().saturating_sub(1)));
            }
            if let Some(prev) = seen.insert(key.clone(), j) {
                return Err(format!("sites[{j}].key: the same key as sites[{prev}]"));
            }
            g.sites.push(Site { key, arena: arena as u32 });
        }
        g.build_trie();
        Ok(g)
    }

    fn frame_id(&mut self, k: &str) -> u32 {
        if let Some(&i) = self.frame_ids.get(k) {
            return i;
        }
        let i = self.frames.len() as u32;
        self.frames.push(k.to_string());
        self.frame_ids.insert(k.to_string(), i);
        i
    }

    fn build_trie(&mut self) {
        for si in 0..self.sites.len() {
            let key = self.sites[si].key.clone();
            let mut n = 0usize;
            self.nodes[0].sites.push(si as u32);
            for k in &key {
                let f = self.frame_id(k);
                n = match self.nodes[n].children.get(&f) {
                    Some(&c) => c as usize,
                    None => {
                        let mut prefix = self.nodes[n].prefix.clone();
                        prefix.push(f);
                        self.nodes.push(Node { prefix, ..Node::default() });
                        let c = self.nodes.len() - 1;
                        self.nodes[n].children.insert(f, c as u32);
                        c
                    }
                };
                self.nodes[n].sites.push(si as u32);
            }
            self.nodes[n].exact = Some(si as u32);
        }
        for i in 1..self.nodes.len() {
            let a0 = self.sites[self.nodes[i].sites[0] as usize].arena;
            let one = self.nodes[i].sites.iter().all(|&s| self.sites[s as usize].arena == a0);
            self.nodes[i].decision = Some(if one { Decision::Arena(a0) } else { Decision::Deeper });
        }
    }

    /// One step of the rule: from node `n` (0 = root), the frame `frame` (None: not a frame of
    /// the guidance) leads to this node, or to unmatched (None).
    pub fn step(&self, n: u32, frame: Option<u32>) -> Option<u32> {
        self.nodes[n as usize].children.get(&frame?).copied()
    }

    /// Where the walk ends when the stack has no more frames at node `n` (Deeper): the site
    /// whose key equals the frames walked, if any.
    pub fn at_end(&self, n: u32) -> Option<u32> {
        self.nodes[n as usize].exact.map(|s| self.sites[s as usize].arena)
    }

    /// The whole rule over a list of frame keys (tests, and the log's cross-check).
    pub fn classify(&self, frames: &[&str]) -> Option<u32> {
        let mut n = 0u32;
        for f in frames.iter().take(self.context) {
            n = self.step(n, self.frame_ids.get(*f).copied())?;
            if let Some(Decision::Arena(a)) = self.nodes[n as usize].decision {
                return Some(a);
            }
        }
        self.at_end(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(sites: &[(&[&str], u32)], context: usize) -> Guidance {
        let s: Vec<Value> = sites.iter().map(|(k, a)| serde_json::json!({"key": k, "arena": a})).collect();
        let j = serde_json::json!({"format": "tierkit-guidance", "version": 2, "mode": "static", "context": context,
            "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}], "sites": s});
        Guidance::parse(serde_json::to_string(&j).unwrap().as_bytes()).unwrap()
    }

    // docs/guidance.md "Matching sites": decide from the immediate return address where that is unambiguous
    #[test]
    fn the_rule_decides_at_the_first_unambiguous_frame() {
        let w = "file:a+0x10"; // a wrapper reached from two callers of different arenas
        let gd = g(&[(&[w, "file:a+0x20"], 0), (&[w, "file:a+0x30"], 1), (&["file:a+0x40", "file:a+0x50"], 1)], 2);
        assert_eq!(gd.classify(&["file:a+0x40", "file:zz+0x1"]), Some(1)); // decided at depth 1
        assert_eq!(gd.classify(&[w, "file:a+0x20"]), Some(0));
        assert_eq!(gd.classify(&[w, "file:a+0x30"]), Some(1));
        assert_eq!(gd.classify(&[w, "file:a+0x99"]), None);
        assert_eq!(gd.classify(&["file:b+0x1"]), None);
        assert_eq!(gd.classify(&[w]), None); // the stack ends while ambiguous: no exact site
        let n = gd.step(0, gd.frame_ids.get(w).copied()).unwrap();
        assert_eq!(gd.nodes[n as usize].decision, Some(Decision::Deeper));
    }

    #[test]
    fn bad_guidance_is_one_line_naming_the_key() {
        let e = Guidance::parse(br#"{"format":"tierkit-guidance","version":1,"context":1,"arenas":[],"sites":[]}"#).unwrap_err();
        assert!(e.starts_with("version: 1") && !e.contains('\n'), "{e}");
        let e = Guidance::parse(
            br#"{"format":"tierkit-guidance","version":2,"context":1,"arenas":[{"id":0,"tiers":[0]}],"sites":[{"key":["f (a.c:1)"],"arena":0}]}"#,
        )
        .unwrap_err();
        assert!(e.starts_with("sites[0].key"), "{e}");
        let e = Guidance::parse(
            br#"{"format":"tierkit-guidance","version":2,"context":1,"arenas":[{"id":0,"tiers":[0]}],"sites":[{"key":["file:x+0x1"],"arena":3}]}"#,
        )
        .unwrap_err();
        assert!(e.starts_with("sites[0].arena"), "{e}");
        assert!(Guidance::parse(b"nope").unwrap_err().starts_with("not JSON"));
    }

    // per-phase guidance: each arena's tier per phase, and the markers a run can see as
    // positions on the allocation-call count (2 i before call i, 2 i + 1 after it)
    #[test]
    fn per_phase_markers_become_positions_in_order() {
        let doc = |markers: Value| {
            serde_json::json!({"format": "tierkit-guidance", "version": 2, "mode": "per-phase", "context": 1,
                "phases": {"count": 2, "markers": markers},
                "arenas": [{"id": 0, "tiers": [0, 1]}, {"id": 1, "tiers": [1, 0]}],
                "sites": [{"key": ["file:a+0x1"], "arena": 0}, {"key": ["file:a+0x2"], "arena": 1}]})
            .to_string()
        };
        let ms = serde_json::json!([{"phase": 1, "alloc": 3, "side": "after"}, {"phase": 0, "alloc": null, "side": null},
                                    {"phase": 0, "alloc": 4, "side": "before"}]);
        let gd = Guidance::parse(doc(ms).as_bytes()).unwrap();
        assert_eq!(gd.markers, vec![(7, 1), (8, 0)]);
        assert_eq!(gd.unmarked, 1);
        assert_eq!(gd.arena_phase_tiers, vec![vec![0, 1], vec![1, 0]]);
        assert_eq!(gd.arena_tiers, vec![0, 1]);
        let e = Guidance::parse(doc(serde_json::json!([{"phase": 1, "alloc": 4, "side": "before"}, {"phase": 0, "alloc": 3, "side": "after"}])).as_bytes())
            .unwrap_err();
        assert!(e.starts_with("phases.markers[1].alloc"), "{e}");
        let e = Guidance::parse(doc(serde_json::json!([{"phase": 2, "alloc": 4, "side": "before"}])).as_bytes()).unwrap_err();
        assert!(e.starts_with("phases.markers[0].phase"), "{e}");
        let e = Guidance::parse(doc(serde_json::json!([{"phase": 1, "alloc": 4, "side": "at"}])).as_bytes()).unwrap_err();
        assert!(e.starts_with("phases.markers[0].side"), "{e}");
    }

    #[test]
    fn frame_keys_follow_the_contract() {
        assert!(valid_frame_key("build-id:4f1ce2+0x11d7"));
        assert!(valid_frame_key("file:sort+0x4a10"));
        assert!(!valid_frame_key("file:/usr/bin/sort+0x4a10"));
        assert!(!valid_frame_key("build-id:4F1C+0x1"));
        assert!(!valid_frame_key("main (a.c:3)"));
    }
}
