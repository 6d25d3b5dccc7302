"""The CLI gives clear errors: one line naming the file and offset/line or the key, exit 2,
no traceback."""
import json
import struct
import zlib

import pytest


def one_error_line(rc, out, err):
    assert rc == 2, (rc, out, err)
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("tierkit: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_truncated_trace_names_file_and_offset(cli, zipf_trace, tmp_path):
    data = zipf_trace.read_bytes()
    cut = tmp_path / "cut.tkt"
    cut.write_bytes(data[: len(data) // 2])
    for args in (["trace", "info", cut], ["simulate", cut, "-c", "0.2"]):
        line = one_error_line(*cli(*args))
        assert "cut.tkt" in line and "offset" in line and "truncated" in line, line


def test_corrupted_trace_names_file_and_offset(cli, zipf_trace, tmp_path):
    data = bytearray(zipf_trace.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.tkt"
    bad.write_bytes(bytes(data))
    line = one_error_line(*cli("simulate", bad, "-c", "0.2"))
    assert "bad.tkt" in line and "offset" in line and "corrupt" in line, line


def test_unparsable_text_line_names_line(cli, tmp_path):
    t = tmp_path / "t.hex"
    t.write_text("0x1000\n0x2000\nzzz-not-hex\n")
    line = one_error_line(*cli("simulate", t, "--format", "hex"))
    assert "t.hex" in line and "line 3" in line, line


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--platform", "hbm-ddr9"], "hbm-ddr9"),
        (["--policy", "frist-touch"], "frist-touch"),
        (["--policy", "interleave:wieghts=4/4"], "wieghts"),
        (["--fast-capacity", "1.5"], "--fast-capacity"),
        (["--fast-capacity", "0"], "--fast-capacity"),
        (["--timing", "cycle-accurate"], "cycle-accurate"),
        (["--format", "pin"], "pin"),
        (["--capacity", "NVM=0.5"], "NVM"),
    ],
)
def test_bad_names_and_values_name_the_key(cli, zipf_trace, args, needle):
    line = one_error_line(*cli("simulate", zipf_trace, "-c", "0.2", *args) if "--fast-capacity" not in args else cli("simulate", zipf_trace, *args))
    assert needle in line, line


def test_capacity_that_cannot_hold_the_footprint(cli, zipf_trace, tmp_path):
    plat = tmp_path / "tiny.toml"
    plat.write_text(
        'name = "tiny"\n'
        '[[tiers]]\nname = "A"\nread_latency_ns = 1\nwrite_latency_ns = 1\nread_bw_gb_per_s = 1\nwrite_bw_gb_per_s = 1\ncapacity = "64K"\n'
        '[[tiers]]\nname = "B"\nread_latency_ns = 2\nwrite_latency_ns = 2\nread_bw_gb_per_s = 1\nwrite_bw_gb_per_s = 1\ncapacity = "64K"\n'
    )
    line = one_error_line(*cli("simulate", zipf_trace, "--platform", plat))
    assert "capacity" in line and "cannot work" in line, line


def test_missing_file_and_usage_errors(cli, tmp_path):
    line = one_error_line(*cli("simulate", tmp_path / "nope.tkt"))
    assert "nope.tkt" in line
    line = one_error_line(*cli("simulate", tmp_path / "nope.tkt", "--no-such-option"))
    assert "--no-such-option" in line


def test_never_overwrites_without_force(cli, zipf_trace, tmp_path):
    out = tmp_path / "o.tkt"
    out.write_bytes(b"precious")
    line = one_error_line(*cli("trace", "convert", zipf_trace, out))
    assert "o.tkt" in line and "--force" in line
    assert out.read_bytes() == b"precious"
    line = one_error_line(*cli("trace", "synth", "zipf", "-n", "100", "--pages", "10", "-o", out))
    assert out.read_bytes() == b"precious"
    rc, _, err = cli("trace", "convert", zipf_trace, out, "--force")
    assert rc == 0, err


def test_report_dir_not_overwritten_without_force(cli, zipf_trace, tmp_path):
    d = tmp_path / "rep"
    rc, out, err = cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch", "--out", d)
    assert rc == 0, err
    line = one_error_line(*cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch", "--out", d))
    assert "--force" in line
    rc, out, err = cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch", "--out", d, "--force")
    assert rc == 0, err


# ---- hand-built native traces (docs/trace-format.md) that every consumer must
# accept or refuse alike, with one line naming the file, exit 2.


def _varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _zz(v):
    return _varint((v << 1) ^ (v >> 63) if v >= 0 else ((v << 1) ^ -1) & (2**64 - 1))


def _zstd_raw(data):
    """One zstd frame (RFC 8878) holding ``data`` in raw blocks: no compressor needed."""
    out = bytearray(b"\x28\xb5\x2f\xfd")
    out.append(0xA0)  # single segment, 4-byte content size, no checksum
    out += struct.pack("<I", len(data))
    blocks = [data[i:i + (1 << 17)] for i in range(0, len(data), 1 << 17)] or [b""]
    for k, b in enumerate(blocks):
        last = k == len(blocks) - 1
        out += struct.pack("<I", (len(b) << 3) | int(last))[:3]  # block type 0: raw
        out += b
    return bytes(out)


def _chunk(kind, n, raw):
    comp = _zstd_raw(raw)
    return bytes([kind]) + struct.pack("<IIII", n, len(raw), len(comp), zlib.crc32(comp)) + comp


def build_tkt(path, accesses=3000, header=None, edit_cols=None, summary_edit=None, empty_chunk=False):
    """A native trace of ``accesses`` line-aligned accesses with instruction counts, written
    byte by byte from the spec; the edits corrupt one part of it."""
    hdr = json.dumps(header if header is not None else {"time_insn": True}).encode()
    out = bytearray(b"\x89TKT\r\n\x1a\n\x01\x00\x00\x00") + struct.pack("<I", len(hdr)) + hdr + struct.pack("<I", zlib.crc32(hdr))
    addrs = [(((i * 7919) % 200) << 12) | (((i * 13) % 64) << 6) for i in range(accesses)]
    writes = [i % 4 == 0 for i in range(accesses)]
    pages = list(dict.fromkeys(a >> 12 for a in addrs))
    index = {p: k for k, p in enumerate(pages)}
    cols = [bytes(0x08 if w else 0 for w in writes),
            b"".join(_zz(p - q) for p, q in zip(pages, [0] + pages[:-1])),
            bytes(index[a >> 12] for a in addrs),
            bytes([6]) + bytes((a & 4095) >> 6 for a in addrs),
            b"".join(_zz(3) for _ in addrs),
            b"", b"", b"", b"", b""]
    if edit_cols:
        edit_cols(cols)
    payload = _varint(accesses) + b"".join(_varint(len(c)) + c for c in cols)
    out += _chunk(0x44, accesses, payload)
    if empty_chunk:
        out += _chunk(0x44, 0, _varint(0) + b"\x00" * 10)
    summary = {"records": accesses, "accesses": accesses, "reads": accesses - sum(writes), "writes": sum(writes),
               "pages": len(pages), "footprint_bytes": len(pages) * 4096, "page_size": 4096,
               "duration_insn": 3 * (accesses - 1), "threads": 1}
    if summary_edit:
        summary = summary_edit(summary)
    end = len(out)
    out += _chunk(0x45, 0, json.dumps(summary).encode())
    out += struct.pack("<Q", end) + b"TKTEND\x00\x01"
    path.write_bytes(bytes(out))
    return path


CONSUMERS = [
    ["simulate", "{t}", "-c", "0.2", "--timing", "simple", "-P", "first-touch"],
    ["simulate", "{t}", "-c", "0.2", "--timing", "detailed", "-P", "otf"],
    ["trace", "convert", "{t}", "{t}.out.tkt", "--force"],
]


def test_a_hand_built_trace_is_read_by_every_consumer(cli, tmp_path):
    """The builder itself is right: its trace passes everywhere, also with an empty data chunk
    (valid by the spec, §5), which must not end the stream (it did with read-ahead)."""
    for empty in (False, True):
        t = build_tkt(tmp_path / f"ok{int(empty)}.tkt", empty_chunk=empty)
        for args in CONSUMERS:
            rc, out, err = cli(*[a.format(t=t) for a in args])
            assert rc == 0, (args, err)
        rc, out, err = cli("simulate", t, "-c", "0.2", "--json")
        assert rc == 0 and json.loads(out)["accesses"] == 3000, err


def _corrupt_insn(cols):
    cols[4] = cols[4][:-1] + bytes([cols[4][-1] | 0x80])  # the last varint runs past its column


def _corrupt_offset(cols):
    cols[3] = cols[3][:5] + bytes([200]) + cols[3][6:]  # 64 units per page: 200 is past it


@pytest.mark.parametrize("edit,needle", [(_corrupt_insn, "instruction column"), (_corrupt_offset, "in-page offset")])
def test_corrupt_columns_are_refused_alike_by_every_consumer(cli, tmp_path, edit, needle):
    t = build_tkt(tmp_path / "bad.tkt", edit_cols=edit)
    lines = [one_error_line(*cli(*[a.format(t=t) for a in args])) for args in CONSUMERS]
    assert all(l == lines[0] for l in lines), lines
    assert "bad.tkt" in lines[0] and "offset" in lines[0] and needle in lines[0], lines[0]


@pytest.mark.parametrize(
    "header,needle",
    [({"time_insn": True, "line_size": 2**62}, "line_size"),
     ({"time_insn": True, "page_size": 2**40}, "page_size"),
     ([[1, 0], 4096, 64, True], "JSON object")],
)
def test_absurd_or_ill_typed_headers_are_refused(cli, tmp_path, header, needle):
    t = build_tkt(tmp_path / "hdr.tkt", header=header)
    for args in (["trace", "info", t], ["simulate", t, "-c", "0.2"]):
        line = one_error_line(*cli(*args))
        assert "hdr.tkt" in line and needle in line, line


@pytest.mark.parametrize(
    "edit,needle",
    [(lambda s: {**s, "accesses": s["accesses"] + 5, "reads": s["reads"] + 5, "records": s["records"] + 5}, "'accesses'"),
     (lambda s: {k: v for k, v in s.items() if k != "writes"}, "'writes'"),
     (lambda s: {k: v for k, v in s.items() if k != "accesses"}, "'accesses'"),
     (lambda s: list(s.values()), "JSON object")],
)
def test_summaries_that_disagree_are_input_errors(cli, tmp_path, edit, needle):
    t = build_tkt(tmp_path / "sum.tkt", summary_edit=edit)
    for args in (["simulate", t, "-c", "0.2"], ["simulate", t, "--fast-capacity", "256K", "-P", "history"]):
        line = one_error_line(*cli(*args))
        assert "sum.tkt" in line and needle in line, line


def test_absent_summary_keys_take_their_documented_default(cli, tmp_path):
    t = build_tkt(tmp_path / "d.tkt", summary_edit=lambda s: {k: v for k, v in s.items() if k not in ("threads", "duration_insn", "footprint_bytes")})
    rc, out, err = cli("simulate", t, "-c", "0.2", "--json")
    assert rc == 0 and json.loads(out)["accesses"] == 3000, err


def test_a_1mb_token_gives_a_short_line(cli, tmp_path):
    t = tmp_path / "big.hex"
    t.write_text("0x1000\n0x" + "f" * 8 + "g" * (1 << 20) + " W\n")
    line = one_error_line(*cli("simulate", t, "--format", "hex"))
    assert len(line) <= 250 and "big.hex" in line and "line 2" in line and "\u2026" in line, line[:400]


# --------------------------------------------------- bounded work, numbers (docs/limits.md)
# (the engine-side cases, every policy with a time period included, are in
# crates/tierkit-core/tests/bounded.rs)


def test_period_at_its_own_cost_ends_with_a_warning(cli, zipf_trace):
    """003 §3.1 (history on dram-pmem, 3 µs per period): a 3 µs period used to cascade
    forever; it now ends, at most one boundary per access, with a warning naming the period."""
    import json

    rc, out, err = cli("simulate", zipf_trace, "-p", "dram-pmem", "-P", "history:period=3us", "--json")
    assert rc == 0, err
    r = json.loads(out)
    r = r[0] if isinstance(r, list) else r
    assert r["stats"]["engine"]["boundaries"] <= r["accesses"]
    assert any("folded into the next" in w and "3 µs" in w for w in r["warnings"]), r["warnings"]


def test_cache_size_is_checked_before_allocating(cli, zipf_trace, tmp_path):
    """--cache L1:1T:16 asked for 128 GiB of tags and aborted with a backtrace."""
    line = one_error_line(*cli("trace", "convert", zipf_trace, tmp_path / "c.tkt", "--cache", "L1:1T:16"))
    assert "--cache" in line and "at most 16777216 lines" in line, line
    assert not (tmp_path / "c.tkt").exists()


def _platform(tmp_path, name, old, new):
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "platforms" / "dram-pmem.toml").read_text()
    assert old in text
    p = tmp_path / name
    p.write_text(text.replace(old, new, 1))
    return p


@pytest.mark.parametrize("old,new,key", [
    ("read_latency_ns = 50.0", "read_latency_ns = 1e308", "read_latency_ns"),
    ("read_bw_gb_per_s = 10.0", "read_bw_gb_per_s = 1e-300", "read_bw_gb_per_s"),
    ("per_page_ns = 1000.0", "per_page_ns = 1e300", "migration.per_page_ns"),
])
def test_extreme_platform_numbers_are_named(cli, zipf_trace, tmp_path, old, new, key):
    """A latency of 1e308 made the runtime infinite (--json printed null); every platform number
    is now checked against a documented range (docs/limits.md)."""
    p = _platform(tmp_path, "x.toml", old, new)
    line = one_error_line(*cli("simulate", zipf_trace, "-p", p, "--json"))
    assert "x.toml" in line and key in line and "out of range" in line, line


def test_deeply_nested_yaml_platform_is_rejected_at_once(cli, zipf_trace, tmp_path):
    """A 100,000-deep YAML platform took 97 s to a clean error; a pre-scan now stops it."""
    p = tmp_path / "deep.yaml"
    p.write_text("name: x\ntiers: " + "[" * 100_000 + "]" * 100_000 + "\n")
    line = one_error_line(*cli("simulate", zipf_trace, "-p", p))
    assert "deep.yaml" in line and "nested deeper" in line and "at most 32 levels" in line, line


@pytest.mark.parametrize("opt,value", [("--phases", "-3"), ("--seed", "-1"), ("--insn-per-access", "-2"),
                                       ("--seed", str(2**64)), ("--pages", "-5")])
def test_negative_synth_parameters_are_one_line(cli, tmp_path, opt, value):
    line = one_error_line(*cli("trace", "synth", "phases", "-n", "1000", "--pages", "10", "-o", tmp_path / "s.tkt", "-q",
                               opt, value))
    assert opt in line, line
    assert not (tmp_path / "s.tkt").exists()


@pytest.mark.parametrize("where,key", [("site", "sites[1].peak_bytes"), ("totals", "totals.peak_live_bytes"),
                                       ("reads", "sites[1].reads")])
def test_profile_with_absurd_sizes_is_one_line(cli, tmp_path, where, key):
    """000 §3.1 guidance from a profile whose sizes do not fit the strategies' int64 sums."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_guide import profile_dict

    p = profile_dict()
    if where == "site":
        p["sites"][1]["peak_bytes"] = 2**70
    elif where == "totals":
        p["totals"]["peak_live_bytes"] = 10**30
    else:
        p["sites"][1]["reads"] = 2**64
    f = tmp_path / "prof.json"
    f.write_text(json.dumps(p))
    line = one_error_line(*cli("guide", f, "-o", tmp_path / "g.json", "--capacity", "0.4"))
    assert "prof.json" in line and key in line and "2**48" in line, line


def test_version_and_no_arguments(cli):
    import tierkit

    rc, out, err = cli("--version")
    assert (rc, out.strip(), err) == (0, f"tierkit {tierkit.__version__}", "")
    # nothing after 'tierkit' (or a group): its help, not an error
    for args in ((), ("trace",)):
        rc, out, err = cli(*args)
        assert rc == 0 and out.startswith("Usage: tierkit") and "Commands:" in out and err == "", (args, rc, out, err)


def test_a_command_that_needs_pytorch_says_how_to_install_it(zipf_trace, tmp_path):
    # a lean install (make demo: no PyTorch) runs everything but the learned schedulers, which
    # say what to install, in one line
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "from tierkit.cli import main\n"
            f"sys.exit(main(['kleio', {str(zipf_trace)!r}, '-c', '0.2', '--quiet']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    line = one_error_line(p.returncode, p.stdout, p.stderr)
    assert "PyTorch is not installed" in line and "pip install 'torch>=2.2'" in line, line
