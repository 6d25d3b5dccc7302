//! Writes the seed corpora under `fuzz/seeds/TARGET/` (committed; docs/fuzzing.md):
//! native traces made by tierkit's own writer, a few lines of each text format, the preset
//! platforms in TOML with their YAML and JSON equivalents, a spec of every registered policy
//! with every parameter, cache specs, units, a guidance and a predictions file, and the raw
//! stream of the tracer's worked example.
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --example make_seeds
//!
//! Seeds found by fuzzing (crash regressions) are not made here: they are committed files
//! named `regression-*` next to these, and this program leaves them alone.

use std::path::{Path, PathBuf};
use tierkit_core::platform::{Platform, PRESETS};
use tierkit_core::policy::{self, Params, PolicySpec};
use tierkit_core::trace::tkt::{TktWriter, MAGIC, TRAILER_MAGIC};
use tierkit_core::trace::{Access, AllocFn, EventKind, MarkerKind, TraceMeta};

fn seeds() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds")
}

fn put(target: &str, name: &str, bytes: &[u8]) {
    let dir = seeds().join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn main() {
    native();
    text();
    champsim();
    drmemtrace();
    platforms();
    policies();
    small();
    println!("seeds written under {}", seeds().display());
}

/// A trace with every record kind and every optional column, made by the writer.
fn write_trace(path: &Path, meta: &TraceMeta, accesses: u64, events: bool) {
    let mut w = TktWriter::create(path, meta, true).unwrap();
    if events {
        w.write_event(
            0,
            0,
            0,
            &EventKind::Site {
                site: 1,
                frames: vec!["make_x (sites.c:10)".into(), "main (sites.c:200)".into()],
                keys: vec!["build-id:4f1c+0x11d7".into(), "file:sites+0x1300".into()],
            },
        )
        .unwrap();
        w.write_event(1, 5, 0, &EventKind::Alloc { addr: 0x10000, size: 8192, site: 1, func: AllocFn::Malloc }).unwrap();
    }
    for i in 0..accesses {
        let a = Access {
            addr: 0x10000 + (i * 72) % 8192 + if i % 7 == 0 { 0x40_0000 } else { 0 },
            write: i % 3 == 0,
            insn: 10 + i * 4,
            ns: if meta.time_ns { 20 + i * 9 } else { 0 },
            size: [8u16, 4, 64][(i % 3) as usize],
            tid: (i % 5 == 0) as u32,
            pc: if meta.has_pc { 0x401000 + (i % 11) * 4 } else { 0 },
        };
        w.write_access(&a).unwrap();
        if events && i == accesses / 2 {
            w.write_event(10 + i * 4, 0, 0, &EventKind::Marker { marker: MarkerKind::Slice, id: 1, label: "slice 1".into() }).unwrap();
            w.write_event(11 + i * 4, 0, 0, &EventKind::Realloc { old_addr: 0x10000, addr: 0x20000, size: 16384, site: 1 }).unwrap();
        }
    }
    if events {
        w.write_event(10 + accesses * 4, 0, 0, &EventKind::Free { addr: 0x20000 }).unwrap();
    }
    w.finish().unwrap();
}

fn native() {
    let tmp = std::env::temp_dir().join(format!("tierkit-seeds-{}.tkt", std::process::id()));
    let full = TraceMeta { time_insn: true, time_ns: true, has_pc: true, ..Default::default() };
    let cases: [(&str, TraceMeta, u64, bool); 4] = [
        ("events-pc-ns.tkt", full.clone(), 40, true),
        ("accesses-only.tkt", TraceMeta { time_insn: false, time_ns: false, has_pc: false, ..Default::default() }, 24, false),
        (
            "huge-pages-post-cache.tkt",
            TraceMeta { page_size: 1 << 21, line_size: 64, post_cache: true, cache_filter: Some("L1:32K:8:64".into()), ..full.clone() },
            16,
            true,
        ),
        ("no-records.tkt", TraceMeta::default(), 0, false),
    ];
    for (name, meta, n, events) in cases {
        write_trace(&tmp, &meta, n, events);
        put("tkt", name, &std::fs::read(&tmp).unwrap());
    }
    // a spec-valid empty data chunk (once taken for the end of the stream by the
    // read-ahead thread): the writer never makes one, so it is spliced into a trace of one
    // access before the end chunk, and the trailer's offset moved past it
    write_trace(&tmp, &TraceMeta::default(), 1, false);
    let t = std::fs::read(&tmp).unwrap();
    let end = u64::from_le_bytes(t[t.len() - 16..t.len() - 8].try_into().unwrap()) as usize;
    let raw = [0u8; 11]; // record count 0, then ten empty columns
    let comp = zstd::bulk::compress(&raw, 3).unwrap();
    let mut chunk = vec![b'D'];
    chunk.extend(0u32.to_le_bytes());
    chunk.extend((raw.len() as u32).to_le_bytes());
    chunk.extend((comp.len() as u32).to_le_bytes());
    chunk.extend(crc32fast::hash(&comp).to_le_bytes());
    chunk.extend(&comp);
    let mut out = t[..end].to_vec();
    out.extend(&chunk);
    out.extend(&t[end..t.len() - 16]);
    out.extend(((end + chunk.len()) as u64).to_le_bytes());
    out.extend(TRAILER_MAGIC);
    assert!(out.starts_with(MAGIC));
    put("tkt", "empty-data-chunk.tkt", &out);
    std::fs::remove_file(&tmp).ok();
}

fn text() {
    let files: &[(&str, &str, &str)] = &[
        ("text_hex", "pin-llc-misses.txt", "# Pin LLC misses\n0x7ffd1a2b3c40\n0x7ffd1a2b3c80 R\n0x601040 W\n601080 w\n0X601100 r\n"),
        ("text_ramulator", "cpu.trace", "3 20734016\n1 20846400 20734016\n10 0x13c7840\n0 20846464\n# comment\n\n7 0x7f00 0x8f00\n"),
        ("text_ramulator_nowb", "cpu-nowb.trace", "3 20734016\n1 20846400 20734016\n10 0x13c7840\n0 20846464\n"),
        ("text_hma4", "hma.trace", "5 0x7f3a00 0x400a10 1\n0 0x7f3a40 0x400a14 2\n12 8323072 4196884 1\n"),
        (
            "text_lackey",
            "lackey.out",
            "==1234== Lackey, an example Valgrind tool\nI  0108f0a0,3\n L 1ffefff8e0,8\n S 1ffefff8d8,8\n M 0030d048,4\nI  0108f0a3,5\n",
        ),
        ("text_dramsim3", "dramsim3.trace", "0x1000 READ 12\n0x1040 WRITE 20\n0x2000 read 31\n0x2040 P_MEM_WR 40\n"),
        ("text_ramulator2", "loadstore.trace", "LD 0x1234abcd\nST 0X1234ABCE\nLD 305441741\n# comment\n\nST 0100\n"),
        ("text_perf", "perf-mem.txt", PERF_SCRIPT),
    ];
    for (target, name, text) in files {
        let bytes = text.as_bytes();
        // the dramsim3 target takes its memory clock from the first two bytes: 625 ps
        let bytes: Vec<u8> = if *target == "text_dramsim3" { [&625u16.to_le_bytes()[..], bytes].concat() } else { bytes.to_vec() };
        put(target, name, &bytes);
    }
    // a gzip member: every text format is read through the decompressor when it is one
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, b"3 20734016\n1 20846400 20734016\n10 0x13c7840\n").unwrap();
    put("text_ramulator", "cpu.trace.gz", &gz.finish().unwrap());
}

/// `perf script --header -F tid,time,event,addr,data_src` after `perf mem record`, shortened
/// (docs/trace-format.md section 22).
const PERF_SCRIPT: &str = "# ========
# cmdline : /usr/bin/perf mem record -- ./a.out
# event : name = cpu/mem-loads,ldlat=30/P, , id = { 11 }, type = 4, size = 136, config = 0x1cd, { sample_period, sample_freq } = 4000, sample_type = IP|TID|TIME|ADDR|PERIOD|DATA_SRC, freq = 1, precise_ip = 3
# event : name = cpu/mem-stores/P, , id = { 12 }, type = 4, size = 136, config = 0x82d0, { sample_period, sample_freq } = 10007, sample_type = IP|TID|TIME|ADDR|PERIOD|DATA_SRC, precise_ip = 3
# ========
   4242  3678.072400: cpu/mem-loads,ldlat=30/P:     7ffd1a2b3c40         68100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A
4242/4243 [003]  3678.072410123: 10007 cpu/mem-stores/P:           601040          5080144 |OP STORE|LVL L1 hit|SNP N/A|TLB N/A|LCK N/A|BLK  N/A
   4243  3678.073400: cpu/mem-loads,ldlat=30/P:                0         68100142 |OP LOAD|LVL N/A
  3678.073500:         ibs_op//:     7f0000001000 1a0000042 |OP PFETCH|LVL L1 hit
";

fn platforms() {
    for (name, toml_text) in PRESETS {
        put("platform_toml", &format!("{name}.toml"), toml_text.as_bytes());
        let p: Platform = toml::from_str(toml_text).unwrap();
        let json = serde_json::to_string_pretty(&p).unwrap();
        put("platform_json", &format!("{name}.json"), json.as_bytes());
        let yaml = serde_yaml_ng::to_string(&p).unwrap();
        put("platform_yaml", &format!("{name}.yaml"), yaml.as_bytes());
    }
}

fn policies() {
    // every registered policy with every parameter at its default, as `canonical` prints it;
    // the first byte picks the --time-scale (0: none)
    for info in policy::REGISTRY {
        let p = Params::parse(info.name, info.params, &PolicySpec { name: info.name.into(), args: vec![] }).unwrap();
        let spec = p.canonical();
        put("policy_spec", &format!("{}.txt", info.name), &[&[0u8][..], spec.as_bytes()].concat());
        put("policy_spec", &format!("{}-short.txt", info.name), &[&[3u8][..], info.name.as_bytes()].concat());
    }
    put("policy_spec", "list.txt", b"\x01history:period=10ms,bins=8,oracle;otf:algorithm=2,first-touch");
    put("policy_spec", "guided-then.txt", b"\x00guided:guidance=g.json,then=otf,then.algorithm=1");
}

/// ChampSim records of both layouts (first byte: the target's mode): straight-line code with
/// loads and stores.
fn champsim() {
    let champ = |ip: u64, branch: bool, load: u64, store: u64| {
        let mut r = vec![0u8; 64];
        r[..8].copy_from_slice(&ip.to_le_bytes());
        r[8] = branch as u8;
        r[16..24].copy_from_slice(&store.to_le_bytes());
        r[32..40].copy_from_slice(&load.to_le_bytes());
        r
    };
    let recs: Vec<u8> = (0..12u64)
        .flat_map(|i| champ(0x401000 + 4 * i, i % 4 == 3, if i % 2 == 0 { 0x7ffe0000 + 64 * i } else { 0 }, if i % 3 == 0 { 0x601000 + 8 * i } else { 0 }))
        .collect();
    put("champsim", "input_instr", &[&[0u8][..], &recs].concat());
    put("champsim", "input_instr-gz", &[&[2u8][..], &recs].concat());
    let cloud = |ip: u64, load: u64, store: u64| {
        let mut r = vec![0u8; 96];
        r[..8].copy_from_slice(&ip.to_le_bytes());
        r[24..32].copy_from_slice(&store.to_le_bytes());
        r[56..64].copy_from_slice(&load.to_le_bytes());
        r[88] = 1;
        r
    };
    let recs: Vec<u8> = (0..8u64).flat_map(|i| cloud(0x10000 + 4 * i, 0x20000 + 64 * i, if i % 2 == 1 { 0x30000 + 64 * i } else { 0 })).collect();
    put("champsim", "cloudsuite_instr", &[&[1u8][..], &recs].concat());
}

/// drmemtrace records in each of the target's containers (first byte): two threads with
/// timestamps, instructions, loads, stores, a prefetch, markers and an encoding.
fn drmemtrace() {
    let e = |ty: u16, size: u16, addr: u64| tierkit_core::trace::drmemtrace::Entry { ty, size, addr }.bytes();
    let thread = |tid: u64, ts: [u64; 2], pc: u64| -> Vec<u8> {
        [
            e(25, 0, 5),
            e(28, 12, 5),
            e(28, 9, 0x240),
            e(22, 4, tid),
            e(24, 4, 100),
            e(28, 10, 64),
            e(28, 20, 10_000_000),
            e(28, 2, ts[0]),
            e(28, 3, 1),
            e(10, 4, pc),
            e(0, 8, 0x7f00 + tid),
            e(10, 3, pc + 4),
            e(1, 4, 0x7f40 + tid),
            e(3, 64, 0x8000),
            e(28, 2, ts[1]),
            e(47, 4, 0xc3),
            e(12, 2, pc + 7),
            e(0, 16, 0x9000 + tid),
            e(26, 0, 0),
        ]
        .concat()
    };
    let a = thread(101, [1000, 3000], 0x401000);
    let b = thread(102, [2000, 4000], 0x402000);
    put("drmemtrace", "plain", &[&[0u8][..], &a].concat());
    // an archive as raw2trace writes it: two chunks, deflated
    let zip_of = |chunks: &[&[u8]]| -> Vec<u8> {
        let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (i, c) in chunks.iter().enumerate() {
            let o = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
            z.start_file(format!("chunk.{i:04}"), o).unwrap();
            std::io::Write::write_all(&mut z, c).unwrap();
        }
        z.finish().unwrap().into_inner()
    };
    put("drmemtrace", "archive", &[&[1u8][..], &zip_of(&[&a[..12 * 9], &a[12 * 9..]])].concat());
    put("drmemtrace", "chunked", &[&[2u8, 0x80 | 7][..], &a].concat());
    put("drmemtrace", "two-threads", &[&[3u8, 19][..], &a, &b].concat());
}

fn small() {
    for (i, s) in ["none", "default", "small", "knl", "skylake-sp", "L1:32K:8,L2:1M:16,L3:8M:16", "L1:8K:4:32", "L1:48K:12,L2:1280K:20:64"].iter().enumerate() {
        put("cache_spec", &format!("spec-{i}.txt"), s.as_bytes());
    }
    for (i, s) in [
        "4096",
        "32K",
        "1.5GiB",
        "16GB",
        "0.125",
        "25%",
        "unlimited",
        "512M",
        "1000",
        "100K",
        "2.5M",
        "1M-insn",
        "1M-acc",
        "10ms",
        "3us",
        "3µs",
        "2000ns",
        "1s",
        "1e3",
        "1_000",
        "tkt",
        "ramulator-nowb",
        "detailed",
        "simple",
    ]
    .iter()
    .enumerate()
    {
        put("units", &format!("unit-{i}.txt"), s.as_bytes());
    }
    put("guidance", "per-phase.json", GUIDANCE_PER_PHASE.as_bytes());
    put("guidance", "static.json", GUIDANCE_STATIC.as_bytes());
    put("guidance", "v2-wrapper.json", GUIDANCE_V2.as_bytes());
    put("predictions", "kleio.json", PREDICTIONS.as_bytes());
    let raw: Vec<u8> = RAW_EXAMPLE.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect();
    put("raw", "worked-example.bin", &raw);
    let raw2: Vec<u8> = RAW_EXAMPLE_V2.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect();
    put("raw", "worked-example-v2.bin", &raw2);
}

/// The example of docs/guidance.md.
const GUIDANCE_PER_PHASE: &str = r#"{
 "format": "tierkit-guidance", "version": 1, "strategy": "thermos", "mode": "per-phase",
 "tiers": ["fast", "slow"], "capacity_bytes": [19660], "capacity_fraction": [0.4], "context": 1,
 "phases": {"count": 2, "slice_source": "insn", "slice_length": 1000000, "of_slice": [0, 0, 1, 1]},
 "arenas": [{"id": 0, "tiers": [0, 1]}, {"id": 1, "tiers": [1, 0]}, {"id": 2, "tiers": [1, 1]}],
 "sites": [
  {"frames": ["make_x (sites.c:10)", "main (sites.c:200)"], "arena": 0},
  {"frames": ["make_y (sites.c:20)", "main (sites.c:200)"], "arena": 1},
  {"frames": ["make_z (sites.c:30)", "main (sites.c:200)"], "arena": 2}
 ]
}
"#;

const GUIDANCE_STATIC: &str = r#"{"format": "tierkit-guidance", "version": 1, "mode": "static", "tiers": ["fast", "slow"], "context": 0,
 "phases": {"count": 1, "slice_source": "accesses", "slice_length": 0, "of_slice": []},
 "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}],
 "sites": [{"frames": ["make_x (sites.c:10)"], "arena": 0}, {"frames": ["make_y (sites.c:20)"], "arena": 1}]}
"#;

/// Version 2 (docs/guidance.md, "Site keys"): a wrapper allocator's sites told apart by their second frame key.
const GUIDANCE_V2: &str = r#"{"format": "tierkit-guidance", "version": 2, "mode": "per-phase", "tiers": ["fast", "slow"], "context": 2,
 "profile": {"trace_digest": "abc123"},
 "phases": {"count": 2, "slice_source": "insn", "slice_length": 1000, "of_slice": [0, 1], "made_from": {"trace_digest": "abc123", "insn": 2000, "accesses": 90}},
 "arenas": [{"id": 0, "tiers": [0, 1]}, {"id": 1, "tiers": [1, 0]}],
 "sites": [{"key": ["build-id:ab12+0x11bd", "build-id:ab12+0x11da"], "frames": ["wrap (w.c:3)", "hot (w.c:10)"], "arena": 0},
  {"key": ["build-id:ab12+0x11bd", "file:w+0x11ed"], "frames": ["wrap (w.c:3)", "cold (w.c:20)"], "arena": 1}]}
"#;

/// As docs/learned.md describes it.
const PREDICTIONS: &str = r#"{"format": "tierkit-predictions", "version": 1, "policy": "kleio", "period": 1000, "bins": 8, "models": 3,
 "trace_digest": "0f1e2d", "rows": {"0": "--12", "7": "8870", "4095": "-7--"}}
"#;

/// The worked example of the tool's stream in version 2 (frame paths and offsets; docs/trace-format.md §19.3).
const RAW_EXAMPLE_V2: &str = "54 4b 56 47 52 41 57 00 02 00 01 00 e8 07 04 01 80 80 02 08 40 06 33 2e 31 39 2e 30 d2 09 \
    84 f4 03 00 01 0c 6d 61 69 6e 20 28 61 2e 63 3a 35 29 08 2f 78 2f 61 2e 6f 75 74 c9 22 81 00 80 20 80 02 00 00 3f 80 40 03 80 01 7f 80 01 02 \
    85 ef 03 00 01 82 01 80 20 88 c7 01 bc 05 ac 02 01 e8 07 de 07 0a 02";

/// The worked example of the tool's stream in version 1 (tracer/tk_main.c, docs/trace-format.md §19).
const RAW_EXAMPLE: &str = "54 4b 56 47 52 41 57 00 01 00 01 00 e8 07 04 01 80 80 02 08 40 06 33 2e 31 39 2e 30 d2 09 \
    84 f4 03 00 01 0c 6d 61 69 6e 20 28 61 2e 63 3a 35 29 81 00 80 20 80 02 00 00 3f 80 40 03 80 01 7f 80 01 02 \
    85 ef 03 00 01 82 01 80 20 88 c7 01 bc 05 ac 02 01 e8 07 de 07 0a 02";
