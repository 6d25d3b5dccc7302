"""Writes the sample traces in this directory, one per imported format, each made from its
format's documentation (docs/trace-format.md) rather than by the tool that normally writes it:

    python data/samples/make_samples.py [DIR]     # DIR: this directory by default

The same small program is written in every format: a loop that reads two 64 KiB arrays `a` and
`b` line by line and writes their sum to `c` (so 1,024 iterations, two loads and a store each),
then reads `a` again.

Deterministic: the same files every time (the xz and gzip headers carry no time stamp)."""
import gzip
import io
import lzma
import struct
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
A, B, C = 0x7F00_0000_0000, 0x7F00_0001_0000, 0x7F00_0002_0000
LINES = 1024
PC = 0x401000


def program():
    """(kind, address, instruction count, ns) for every access: kind 'R' or 'W'."""
    out, insn = [], 0
    for i in range(LINES):
        insn += 4
        out.append(("R", A + 64 * i, insn, insn // 2))
        out.append(("R", B + 64 * i, insn + 1, (insn + 1) // 2))
        out.append(("W", C + 64 * i, insn + 2, (insn + 2) // 2))
    for i in range(LINES):
        insn += 2
        out.append(("R", A + 64 * i, insn, insn // 2))
    return out


def ramulator2(acc):
    # section 21: `LD <addr>` / `ST <addr>`
    return "".join(f"{'LD' if k == 'R' else 'ST'} 0x{a:x}\n" for k, a, _, _ in acc)


def dramsim3(acc):
    # section 17: `<hex-addr> <READ|WRITE> <cycle>` (here one cycle per instruction)
    return "".join(f"0x{a:x} {'READ' if k == 'R' else 'WRITE'} {n}\n" for k, a, n, _ in acc)


def perf(acc):
    # section 22: `perf script --header -F tid,time,event,addr,data_src` after `perf mem record`;
    # a sample of every 16th access, as a sampling period would pick
    head = (
        "# ========\n"
        "# cmdline : /usr/bin/perf mem record -c 16 -- ./sum\n"
        "# event : name = cpu/mem-loads,ldlat=30/P, , id = { 11 }, type = 4, size = 136, config = 0x1cd, { sample_period, sample_freq } = 16, sample_type = IP|TID|TIME|ADDR|PERIOD|DATA_SRC\n"
        "# event : name = cpu/mem-stores/P, , id = { 12 }, type = 4, size = 136, config = 0x82d0, { sample_period, sample_freq } = 16, sample_type = IP|TID|TIME|ADDR|PERIOD|DATA_SRC\n"
        "# ========\n"
    )
    lines = []
    for k, a, _, ns in acc[::16]:
        t = 3678.0 + ns * 1e-9 * 1000  # a millisecond-scale run, microseconds printed
        if k == "R":
            lines.append(f"   4242  {t:.6f}: cpu/mem-loads,ldlat=30/P: {a:16x}         68100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A\n")
        else:
            lines.append(f"   4242  {t:.6f}:        cpu/mem-stores/P: {a:16x}          5080144 |OP STORE|LVL L1 hit|SNP N/A|TLB N/A|LCK N/A|BLK  N/A\n")
    return head + "".join(lines)


def champsim(acc):
    # section 24: 64-byte `input_instr` records; the loop's instructions with their memory slots
    recs = []
    by_insn = {}
    for k, a, n, _ in acc:
        by_insn.setdefault(n, []).append((k, a))
    last = max(by_insn)
    for n in range(1, last + 1):
        mem = by_insn.get(n, [])
        dst = [a for k, a in mem if k == "W"][:2]
        src = [a for k, a in mem if k == "R"][:4]
        dst += [0] * (2 - len(dst))
        src += [0] * (4 - len(src))
        ip = PC + 4 * ((n - 1) % 4)
        is_branch = 1 if n % 4 == 0 else 0
        recs.append(struct.pack("<QBB2B4B2Q4Q", ip, is_branch, is_branch, 0, 0, 0, 0, 0, 0, *dst, *src))
    return b"".join(recs)


def drmemtrace(acc):
    """Section 25: one thread file after raw2trace, a zip archive whose `chunk.0000` holds
    12-byte `trace_entry_t` records (u16 type, u16 size, u64 addr): the header (type 25,
    trace version 6), the thread and process ids (22, 24), version, file type and timestamp
    markers (28), then each instruction (10, INSTR, 4 bytes at its pc) followed by its memory
    accesses (0 READ, 1 WRITE, 8 bytes), and the footer (26)."""
    rec = lambda t, size, addr: struct.pack("<HHQ", t, size, addr)  # noqa: E731
    tid = 4242
    body = [rec(25, 0, 6), rec(22, 4, tid), rec(24, 4, tid), rec(28, 12, 6), rec(28, 9, 0x40), rec(28, 2, 13_000_000_000)]
    by_insn = {}
    for k, a, n, _ in acc:
        by_insn.setdefault(n, []).append((k, a))
    for n in range(1, max(by_insn) + 1):
        body.append(rec(10, 4, PC + 4 * ((n - 1) % 4)))
        body += [rec(0 if k == "R" else 1, 8, a) for k, a in by_insn.get(n, [])]
    body.append(rec(26, 0, 0))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        info = zipfile.ZipInfo("chunk.0000", date_time=(2026, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, b"".join(body))
    return buf.getvalue()


def main(out: Path = HERE):
    out.mkdir(parents=True, exist_ok=True)
    acc = program()
    (out / "sum.ramulator2").write_text(ramulator2(acc))
    (out / "sum.perf").write_text(perf(acc))
    raw = champsim(acc)
    (out / "sum.champsimtrace.xz").write_bytes(lzma.compress(raw, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64))
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as g:
        g.write(dramsim3(acc).encode())
    (out / "sum.dramsim3.gz").write_bytes(buf.getvalue())
    (out / "drmemtrace.sum.4242.trace.zip").write_bytes(drmemtrace(acc))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
