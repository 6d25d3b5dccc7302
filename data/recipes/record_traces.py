#!/usr/bin/env python3
"""Capture traces of real programs from Debian packages with tierkit's tracer (`make traces`).

A suite of programs of different kinds, each run on two inputs generated here from fixed
seeds: `train` (the smaller) and `ref` (other data, about 3-5 times the work), as SPEC CPU
names its inputs. Each run is recorded with `tierkit.record` (the default cache hierarchy
L1 32K/L2 1M/L3 8M, so post-cache accesses; allocation sites with 9 frames, enough for 002
Fig. 2's call-path depths up to 8 (`FRAMES`); a slice marker
every 100 M instructions) into `data/traces/real/PROGRAM-INPUT.tkt` (not committed), and
`data/traces/real/suite.json` lists what was recorded (`data/traces/README.md`, "The
suite of real programs", describes the inputs and gives the counts). Programs:

| program | kind                 | Debian package  | what runs (train / ref) |
| ------- | -------------------- | --------------- | ----------------------- |
| sqlite3 | database             | sqlite3         | `sqlite3 :memory: -init SQL .quit`: tables built by recursive CTEs, an index, joins, aggregates, an update (train: generated SQL, 70,000 rows each; ref: `sqlite3-orders.sql`, the demo trace's script) |
| xz      | compressor           | xz-utils        | `xz -3 -T1 -k -f text` on 2 / 8 MiB of generated text |
| bzip2   | compressor           | bzip2           | `bzip2 -9 -k -f text` on 2 / 8 MiB of generated text |
| imagick | image processing     | imagemagick     | `convert -size NxN -seed S plasma:fractal -blur 0x3 -resize 50% out.png` (N 500 / 1000) |
| perl    | interpreter          | perl-base       | `perl wordfreq.pl text`: hashes of words and bigrams, sorts, regexes on 0.5 / 2 MiB of text |
| python3 | interpreter          | python3-minimal | `python3 -S graph.py edges` with PYTHONMALLOC=malloc: Dijkstra, components, PageRank (6,000 / 20,000 nodes) |
| redis   | key-value server     | redis-server    | `redis-server` on a unix socket, loaded by `redis-cli --pipe` then `redis-benchmark`, shut down by `redis-cli shutdown nosave` |
| jq      | JSON tool            | jq              | `jq -c FILTER events.json`: group, sort and aggregate 15,000 / 60,000 generated events |
| dot     | graph layout         | graphviz        | `dot -Tsvg -o graph.svg graph.dot`: a generated layered graph (250 / 700 nodes) |

A program that is missing is installed with apt-get when `--install` is given (as root), and
otherwise skipped with one line on stderr naming its Debian package. `--only` takes program
names (both inputs) and trace names (`perl-train`). Real programs read the clock and their
environment, so two recordings differ slightly (redis the most: its clients interleave as
the scheduler lets them, and redis-benchmark draws its random keys from a clock seed);
`data/traces/sqlite3-orders.tkt`, the demo trace `make demo` compares policies on, is a
committed recording of the sqlite3 ref script and is never rewritten here. The suite's
first four programs were its single-input recipes (NAME.tkt); their names are program names
still, and their traces are NAME-train.tkt and NAME-ref.tkt. The whole suite records in about
6 minutes on two cores.

Usage: record_traces.py [--install] [--force] [--only NAME,...] [--out DIR]
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
INPUTS = ("train", "ref")
#: frames per allocation site: call-path depths 0..8, as the suite's guidance study sweeps them
#: (002 §III-A, Fig. 2; docs/experiments.md, "Guidance on real programs")
FRAMES = 9
# the names of the suite before it had two inputs per program (one trace each, NAME.tkt)
OLD_NAMES = ("sqlite3", "xz", "bzip2", "imagick")


# ---------------------------------------------------------------------------------------------
# inputs, each generated from a fixed seed (the same bytes every time)

def vocabulary(rng: random.Random, n: int) -> list[str]:
    """`n` distinct made-up words of one to three syllables, in an order drawn from `rng`."""
    onsets = "b c d f g h j k l m n p r s t v w z br cr dr fr gr pl pr sl st tr ch sh th".split()
    vowels = "a e i o u ai ea ee oo ou".split()
    codas = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(1, 3))) + rng.choice(codas))
    out = sorted(words)  # a set's order depends on the string hash's seed: sort first
    rng.shuffle(out)
    return out


def text(path: Path, nbytes: int = 2 << 20, seed: int = 42, words: int = 6000) -> None:
    """English-like text: sentences of 6-14 words from a made-up vocabulary, the words drawn
    with Zipf's law (rank r has weight 1/r), so it compresses and counts like prose."""
    rng = random.Random(seed)
    vocab = vocabulary(rng, words)
    cum, total = [], 0.0
    for r in range(1, len(vocab) + 1):
        total += 1.0 / r
        cum.append(total)
    out, size = [], 0
    while size < nbytes:
        w = rng.choices(vocab, cum_weights=cum, k=rng.randint(6, 14))
        line = w[0].capitalize() + " " + " ".join(w[1:]) + ".\n"
        out.append(line)
        size += len(line)
    path.write_text("".join(out)[:nbytes])


def orders_sql(path: Path, customers: int, orders: int, seed: int) -> None:
    """The sqlite3 recipe's script with its own table sizes and data: the same statements as
    `sqlite3-orders.sql`, whose columns come from multiplications modulo the sizes; the
    multipliers are primes drawn from `seed`."""
    rng = random.Random(seed)
    a, b, c = rng.sample([7919, 7927, 7933, 7937, 104723, 104729, 104743, 31337, 31357, 31379], 3)
    referenced = customers * 6 // 25  # the ref script's orders name 60,000 of its 250,000 customers
    path.write_text(f"""\
-- generated by data/recipes/record_traces.py (orders_sql, seed {seed}): {customers} customers,
-- {orders} orders naming {referenced} of them, an index, two aggregates over a join and a scan, an update
PRAGMA cache_size = -65536;
CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, city INTEGER);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, amount INTEGER, day INTEGER);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {customers})
INSERT INTO customers SELECT i, 'customer-' || i, (i * {a}) % 97 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {orders})
INSERT INTO orders SELECT i, (i * {b}) % {referenced} + 1, (i * {c}) % 1000, i % 365 FROM n;
CREATE INDEX orders_customer ON orders(customer);
SELECT city, count(*), sum(amount) FROM orders JOIN customers ON customers.id = orders.customer GROUP BY city ORDER BY 3 DESC LIMIT 5;
SELECT day, avg(amount) FROM orders GROUP BY day ORDER BY 2 DESC LIMIT 3;
UPDATE orders SET amount = amount + 1 WHERE day % 7 = 0;
SELECT count(*) FROM orders WHERE amount > 500;
""")


def edges(path: Path, nodes: int, seed: int) -> None:
    """A weighted graph as an edge list ("u v w"): each node joined to three nodes at most 40
    further on (a road-like mesh) and, one time in four, to any node; weights 1-100."""
    rng = random.Random(seed)
    out = []
    for u in range(nodes):
        for _ in range(3):
            out.append(f"{u} {(u + rng.randint(1, 40)) % nodes} {rng.randint(1, 100)}\n")
        if rng.random() < 0.25:
            out.append(f"{u} {rng.randrange(nodes)} {rng.randint(1, 100)}\n")
    path.write_text("".join(out))


def events(path: Path, n: int, seed: int) -> None:
    """A JSON array of `n` events: a user (Zipf-distributed over n/20 users), a kind, an
    amount, one to four tags, a location and a short note."""
    rng = random.Random(seed)
    vocab = vocabulary(rng, 800)
    users = [f"u{i:05d}" for i in range(max(1, n // 20))]
    cum, total = [], 0.0
    for r in range(1, len(users) + 1):
        total += 1.0 / r
        cum.append(total)
    kinds = ("view", "click", "buy", "return", "share")
    out = []
    for i in range(n):
        out.append({"id": i, "user": rng.choices(users, cum_weights=cum)[0], "kind": rng.choice(kinds),
                    "amount": round(rng.expovariate(1 / 40), 2), "tags": rng.sample(vocab[:60], rng.randint(1, 4)),
                    "geo": {"lat": round(rng.uniform(-60, 70), 4), "lon": round(rng.uniform(-180, 180), 4)},
                    "note": " ".join(rng.choices(vocab, k=rng.randint(3, 12)))})
    path.write_text(json.dumps(out, indent=1) + "\n")


# the jq recipe's program: per user, the events, the amount bought, the distinct tags and the
# last note; the 20 users who bought most; and a count per kind
JQ_FILTER = ("(group_by(.user) | map({user: .[0].user, events: length, bought: (map(select(.kind == \"buy\") | .amount) | add // 0),"
             " tags: (map(.tags[]) | unique | length), last: (max_by(.id) | .note)}) | sort_by(-.bought, .user) | .[:20]),"
             " (group_by(.kind) | map({(.[0].kind): length}) | add)")


def layered_graph(path: Path, nodes: int, seed: int) -> None:
    """A Graphviz digraph of `nodes` labelled nodes in layers of about 2*sqrt(nodes), each
    node with one to three edges into the next two layers (dot ranks it, orders each layer
    to cut crossings, and routes the edges as splines)."""
    rng = random.Random(seed)
    width = max(2, int(2 * nodes ** 0.5))
    layers = [list(range(i, min(i + width, nodes))) for i in range(0, nodes, width)]
    out = ["digraph suite {", "  node [shape=box, fontsize=10];"]
    out += [f'  n{i} [label="node {i}\\n{rng.randint(0, 99999)}"];' for i in range(nodes)]
    for k, layer in enumerate(layers[:-1]):
        below = layers[k + 1] + (layers[k + 2] if k + 2 < len(layers) else [])
        for u in layer:
            for v in sorted(set(rng.sample(below, min(len(below), rng.randint(1, 3))))):
                out.append(f"  n{u} -> n{v};")
    out.append("}")
    path.write_text("\n".join(out) + "\n")


def resp(*args: str) -> str:
    """One command in the Redis serialization protocol (redis.io, "RESP protocol spec")."""
    return f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)


def redis_commands(path: Path, keys: int, seed: int) -> None:
    """What `redis-cli --pipe` sends the server before the benchmark (redis.io, "Redis mass
    insertion"): `keys` strings `key:NNNNNNNNNNNN` (the names redis-benchmark's -r draws, so
    its GETs find them) with values of 16-1,000 bytes, a hash per 8 keys, 64 lists and a
    sorted set; then GETs, INCRs and DELs of keys drawn from `seed`."""
    rng = random.Random(seed)
    vocab = vocabulary(rng, 500)
    out = []
    for i in range(keys):
        size = min(1000, 16 + int(rng.paretovariate(1.2) * 24))
        out.append(resp("SET", f"key:{i:012d}", "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=size))))
        if i % 8 == 0:
            out.append(resp("HSET", f"user:{i // 8}", "name", rng.choice(vocab), "visits", str(rng.randint(0, 999)),
                            "city", rng.choice(vocab)))
        out.append(resp("LPUSH", f"queue:{i % 64}", " ".join(rng.choices(vocab, k=rng.randint(1, 6)))))
        out.append(resp("ZADD", "board", str(rng.randint(0, 10 ** 6)), f"player:{rng.randrange(keys)}"))
    for _ in range(keys // 2):
        k = f"key:{rng.randrange(keys):012d}"
        out.append(resp(rng.choice(("GET", "GET", "GET", "STRLEN", "DEL")), k))
    path.write_text("".join(out))


def copy(path: Path, source: Path) -> None:
    """A committed input (a script or SQL under data/recipes/)."""
    shutil.copyfile(source, path)


# ---------------------------------------------------------------------------------------------
# a server's load: the redis recipe

REDIS_CLI, REDIS_BENCHMARK = "/usr/bin/redis-cli", "/usr/bin/redis-benchmark"


def redis_load(work: Path, done: threading.Event, bench: tuple[str, ...]) -> None:
    """Wait until the server under the recorder answers PING on its socket, load it with
    `redis-cli --pipe < commands.resp`, run `redis-benchmark` against it, then shut it down
    without saving (`SHUTDOWN NOSAVE`, redis.io) so that the trace ends complete. Should the
    server not shut down, SIGTERM (its pidfile) asks it to exit; `done` is set when the
    recording has ended."""
    sock = str(work / "redis.sock")
    log = (work / "load.txt").open("w")
    try:
        deadline = time.monotonic() + 300
        while not done.is_set():
            p = subprocess.run([REDIS_CLI, "-s", sock, "ping"], capture_output=True, text=True, check=False)
            if p.stdout.strip() == "PONG":
                break
            if time.monotonic() > deadline:
                print(f"traces: redis-server did not answer on {sock} in 300 s", file=sys.stderr)
                return
            time.sleep(0.2)
        else:
            return
        with (work / "commands.resp").open("rb") as cmds:
            subprocess.run([REDIS_CLI, "-s", sock, "--pipe"], stdin=cmds, stdout=log, stderr=subprocess.STDOUT, check=False, timeout=600)
        subprocess.run([REDIS_BENCHMARK, "-s", sock, *bench], stdout=log, stderr=subprocess.STDOUT, check=False, timeout=600)
    finally:
        log.close()
        if not done.is_set():
            subprocess.run([REDIS_CLI, "-s", sock, "shutdown", "nosave"], capture_output=True, check=False, timeout=60)
        if not done.wait(60):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((work / "redis.pid").read_text()), 15)


# ---------------------------------------------------------------------------------------------
# the suite

@dataclass(frozen=True)
class Trace:
    """One recording: a program on one input."""
    program: str                              # the recipe's name (--only PROGRAM records both inputs)
    input: str                                # "train" or "ref"
    package: str                              # the Debian package whose version suite.json records
    needs: tuple[tuple[str, str], ...]        # (executable, the Debian package that installs it)
    argv: tuple[str, ...]                     # run in the trace's own work directory
    what: str                                 # the input, in words
    make: Callable[[Path], None]              # writes the input's files into the work directory
    env: tuple[tuple[str, str], ...] = ()     # set for the program
    load: Optional[Callable[[Path, threading.Event], None]] = None  # a server's load generator

    @property
    def name(self) -> str:
        return f"{self.program}-{self.input}"


def inputs(make: dict[str, Callable[[Path], None]]) -> Callable[[Path], None]:
    """A make function writing several files: {file name: writer(path)}."""
    def write(work: Path) -> None:
        for name, f in make.items():
            f(work / name)
    return write


def suite() -> list[Trace]:
    """Every recording, train before ref, in the order they are recorded."""
    convert = "/usr/bin/convert-im6.q16"
    t: list[Trace] = []

    def add(program: str, package: str, needs: tuple[tuple[str, str], ...], train: dict, ref: dict) -> None:
        for name, spec in (("train", train), ("ref", ref)):
            t.append(Trace(program, name, package, needs, **spec))

    sql = "/usr/bin/sqlite3"
    add("sqlite3", "sqlite3", ((sql, "sqlite3"),),
        dict(argv=(sql, ":memory:", "-init", "orders.sql", ".quit"), make=inputs({"orders.sql": functools.partial(orders_sql, customers=70_000, orders=70_000, seed=3)}),
             what="generated SQL: 70,000 customers, 70,000 orders naming 16,800 of them, other multipliers (seed 3)"),
        dict(argv=(sql, ":memory:", "-init", "sqlite3-orders.sql", ".quit"), make=inputs({"sqlite3-orders.sql": functools.partial(copy, source=HERE / "sqlite3-orders.sql")}),
             what="data/recipes/sqlite3-orders.sql: 250,000 customers, 250,000 orders naming 60,000 of them (the demo trace's script)"))
    xz = "/usr/bin/xz"
    add("xz", "xz-utils", ((xz, "xz-utils"),),
        dict(argv=(xz, "-3", "-T1", "-k", "-f", "text"), make=inputs({"text": functools.partial(text, nbytes=2 << 20, seed=1)}),
             what="2 MiB of generated text (seed 1)"),
        dict(argv=(xz, "-3", "-T1", "-k", "-f", "text"), make=inputs({"text": functools.partial(text, nbytes=8 << 20, seed=2, words=20000)}),
             what="8 MiB of generated text, a 20,000-word vocabulary (seed 2)"))
    bz = "/usr/bin/bzip2"
    add("bzip2", "bzip2", ((bz, "bzip2"),),
        dict(argv=(bz, "-9", "-k", "-f", "text"), make=inputs({"text": functools.partial(text, nbytes=2 << 20, seed=3)}),
             what="2 MiB of generated text (seed 3)"),
        dict(argv=(bz, "-9", "-k", "-f", "text"), make=inputs({"text": functools.partial(text, nbytes=8 << 20, seed=4, words=20000)}),
             what="8 MiB of generated text, a 20,000-word vocabulary (seed 4)"))
    add("imagick", "imagemagick", ((convert, "imagemagick"),),
        dict(argv=(convert, "-size", "500x500", "-seed", "7", "plasma:fractal", "-blur", "0x3", "-resize", "50%", "out.png"), make=inputs({}),
             what="a 500x500 plasma fractal drawn from seed 7, blurred, halved, written as PNG"),
        dict(argv=(convert, "-size", "1000x1000", "-seed", "11", "plasma:fractal", "-blur", "0x3", "-resize", "50%", "out.png"), make=inputs({}),
             what="a 1000x1000 plasma fractal drawn from seed 11, blurred, halved, written as PNG"))
    # perlrun: PERL_HASH_SEED=0 and PERL_PERTURB_KEYS=0 make the hashes' order the same each run
    perl, perl_env = "/usr/bin/perl", (("PERL_HASH_SEED", "0"), ("PERL_PERTURB_KEYS", "0"))
    wordfreq = functools.partial(copy, source=HERE / "wordfreq.pl")
    add("perl", "perl-base", ((perl, "perl-base"),),
        dict(argv=(perl, "wordfreq.pl", "text"), env=perl_env, make=inputs({"wordfreq.pl": wordfreq, "text": functools.partial(text, nbytes=1 << 19, seed=5)}),
             what="data/recipes/wordfreq.pl on 512 KiB of generated text (seed 5)"),
        dict(argv=(perl, "wordfreq.pl", "text"), env=perl_env, make=inputs({"wordfreq.pl": wordfreq, "text": functools.partial(text, nbytes=2 << 20, seed=6, words=20000)}),
             what="data/recipes/wordfreq.pl on 2 MiB of generated text, a 20,000-word vocabulary (seed 6)"))
    # Debian's interpreter, not one on PATH. PYTHONMALLOC=malloc (docs.python.org, "Command
    # line and environment"): CPython's own allocator (pymalloc) serves objects of up to 512
    # bytes from arenas it maps itself (1 MiB each on 64-bit platforms: the C API's "Memory
    # Management", "The pymalloc allocator"), so the tracer, which sees malloc, would see none
    # of the objects; with malloc every object is an allocation with its call stack.
    # PYTHONHASHSEED=0 fixes the string hash (and so the sets' and dicts' layout).
    py = "/usr/bin/python3"
    py_env = (("PYTHONMALLOC", "malloc"), ("PYTHONHASHSEED", "0"), ("PYTHONDONTWRITEBYTECODE", "1"))
    graph = functools.partial(copy, source=HERE / "graph.py")
    add("python3", "python3-minimal", ((py, "python3-minimal"),),
        dict(argv=(py, "-S", "graph.py", "edges"), env=py_env, make=inputs({"graph.py": graph, "edges": functools.partial(edges, nodes=6_000, seed=7)}),
             what="data/recipes/graph.py on a generated graph of 6,000 nodes and about 19,500 edges (seed 7)"),
        dict(argv=(py, "-S", "graph.py", "edges"), env=py_env, make=inputs({"graph.py": graph, "edges": functools.partial(edges, nodes=20_000, seed=8)}),
             what="data/recipes/graph.py on a generated graph of 20,000 nodes and about 65,000 edges (seed 8)"))
    server = ("/usr/bin/redis-server", "--port", "0", "--unixsocket", "redis.sock", "--unixsocketperm", "700", "--save", "",
              "--appendonly", "no", "--dir", ".", "--pidfile", "redis.pid", "--logfile", "redis.log", "--daemonize", "no")
    tests = "get,set,incr,lpush,lpop,sadd,hset,zadd"
    train_bench = ("-n", "15000", "-c", "4", "-r", "20000", "-d", "100", "-t", tests, "-q")
    ref_bench = ("-n", "50000", "-c", "4", "-r", "70000", "-d", "100", "-t", tests, "-q")
    redis_needs = (("/usr/bin/redis-server", "redis-server"), (REDIS_CLI, "redis-tools"), (REDIS_BENCHMARK, "redis-tools"))
    add("redis", "redis-server", redis_needs,
        dict(argv=server, make=inputs({"commands.resp": functools.partial(redis_commands, keys=20_000, seed=9)}),
             load=functools.partial(redis_load, bench=train_bench),
             what="redis-cli --pipe: 20,000 keys, hashes, lists, a sorted set (seed 9); redis-benchmark " + " ".join(train_bench)),
        dict(argv=server, make=inputs({"commands.resp": functools.partial(redis_commands, keys=70_000, seed=10)}),
             load=functools.partial(redis_load, bench=ref_bench),
             what="redis-cli --pipe: 70,000 keys, hashes, lists, a sorted set (seed 10); redis-benchmark " + " ".join(ref_bench)))
    jq = "/usr/bin/jq"
    add("jq", "jq", ((jq, "jq"),),
        dict(argv=(jq, "-c", JQ_FILTER, "events.json"), make=inputs({"events.json": functools.partial(events, n=15_000, seed=11)}),
             what="15,000 generated events (seed 11): per-user aggregates, the top 20, counts per kind"),
        dict(argv=(jq, "-c", JQ_FILTER, "events.json"), make=inputs({"events.json": functools.partial(events, n=60_000, seed=12)}),
             what="60,000 generated events (seed 12): per-user aggregates, the top 20, counts per kind"))
    dot = "/usr/bin/dot"
    add("dot", "graphviz", ((dot, "graphviz"),),
        dict(argv=(dot, "-Tsvg", "-o", "graph.svg", "graph.dot"), make=inputs({"graph.dot": functools.partial(layered_graph, nodes=250, seed=13)}),
             what="a generated layered digraph of 250 nodes (seed 13)"),
        dict(argv=(dot, "-Tsvg", "-o", "graph.svg", "graph.dot"), make=inputs({"graph.dot": functools.partial(layered_graph, nodes=700, seed=14)}),
             what="a generated layered digraph of 700 nodes (seed 14)"))
    return t


def select(todo: list[Trace], only: str) -> list[Trace]:
    """The traces `--only` names (program names and trace names, comma-separated); all
    without it. Raises ValueError naming the unknown names."""
    names = [x.strip() for x in only.split(",") if x.strip()]
    if not names:
        return todo
    known = {t.program for t in todo} | {t.name for t in todo}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown trace(s) {', '.join(unknown)} (programs: {', '.join(dict.fromkeys(t.program for t in todo))};"
                         f" traces: PROGRAM-{'/PROGRAM-'.join(INPUTS)})")
    return [t for t in todo if t.program in names or t.name in names]


# ---------------------------------------------------------------------------------------------
# recording

def missing(needs: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """The executables absent. They are named by their Debian paths: `python3` on PATH may be
    another interpreter, and ImageMagick's `convert` a wrapper script."""
    return [(p, pkg) for p, pkg in needs if not (os.path.isfile(p) and os.access(p, os.X_OK))]


_updated = False


def ensure(t: Trace, install: bool) -> bool:
    """Whether the trace's programs are there, after `apt-get install` with `install`."""
    absent = missing(t.needs)
    if absent and install and os.geteuid() == 0 and shutil.which("apt-get"):
        global _updated
        pkgs = sorted({pkg for _, pkg in absent})
        for attempt in range(2):
            r = subprocess.run(["apt-get", "install", "-y", "-q", *pkgs], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode == 0 or _updated or attempt:
                break
            # an install that fails may only lack the package lists (apt-get(8): update)
            _updated = True
            subprocess.run(["apt-get", "update", "-q"], check=False, stdout=subprocess.DEVNULL)
        absent = missing(t.needs)
    if absent:
        names = " ".join(sorted({pkg for _, pkg in absent}))
        how = "apt-get install failed" if install else "make traces INSTALL=1 installs it"
        print(f"traces: skipping {t.program}: {', '.join(p for p, _ in absent)} missing (Debian package {names}; {how})", file=sys.stderr)
        return False
    return True


def version(package: str) -> Optional[str]:
    """The installed Debian package's version (`dpkg-query -W -f '${Version}' PKG`)."""
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True, check=False)
    except OSError:
        return None
    return (r.stdout.strip() or None) if r.returncode == 0 else None


@contextlib.contextmanager
def environment(env: tuple[tuple[str, str], ...]) -> Iterator[None]:
    """The program's environment: ours, less any PYTHON*/PERL* settings (which would change
    what an interpreter does), with LC_ALL=C and the recipe's own variables."""
    saved = dict(os.environ)
    for k in list(os.environ):
        if k.startswith(("PYTHON", "PERL")):
            del os.environ[k]
    os.environ["LC_ALL"] = "C"
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def streams(work: Path) -> Iterator[None]:
    """The program's standard input from /dev/null and its standard output to `work/stdout`
    (what it prints is no part of the table); standard error stays ours."""
    sys.stdout.flush()
    saved_in, saved_out = os.dup(0), os.dup(1)
    with open(os.devnull, "rb") as devnull, (work / "stdout").open("wb") as out:
        os.dup2(devnull.fileno(), 0)
        os.dup2(out.fileno(), 1)
    try:
        yield
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


def record(t: Trace, work: Path, dest: Path, cache: Optional[str] = None) -> tuple[dict, float]:
    """Record `t` in `work` (its inputs written there first); the report and the seconds.
    `cache`: the tracer's cache (None: its default preset, as the suite is recorded)."""
    import tierkit

    t.make(work)
    done = threading.Event()
    driver = threading.Thread(target=t.load, args=(work, done), daemon=True) if t.load else None
    cwd = os.getcwd()
    start = time.monotonic()
    with environment(t.env), streams(work):
        os.chdir(work)
        try:
            if driver:
                driver.start()
            r = tierkit.record(t.argv[0], list(t.argv[1:]), dest, cache=cache, context=FRAMES, slice="100M", force=True)
        finally:
            os.chdir(cwd)
            done.set()
            if driver:
                driver.join()
    return r, time.monotonic() - start


def entry(t: Trace, dest: Path, summary: dict, instructions: int, seconds: Optional[float], status: Optional[str],
          pkg_version: Optional[str]) -> dict:
    """The trace's entry in suite.json."""
    return {"trace": t.name, "program": t.program, "input": t.input, "package": t.package, "version": pkg_version,
            "argv": list(t.argv), "env": dict(t.env), "what": t.what, "accesses": summary["accesses"], "pages": summary["pages"],
            "sites": summary["allocation_sites"], "allocs": summary["allocs"], "instructions": instructions,
            "bytes": dest.stat().st_size, "record_s": None if seconds is None else round(seconds, 1), "status": status}


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--install", action="store_true", help="apt-get install missing programs (as root)")
    ap.add_argument("--force", action="store_true", help="record again traces that exist")
    ap.add_argument("--only", default="", help="comma-separated program names (both inputs) or trace names (PROGRAM-train, PROGRAM-ref)")
    ap.add_argument("--out", default=str(ROOT / "data" / "traces" / "real"), help="output directory")
    a = ap.parse_args(argv)
    todo = suite()
    try:
        chosen = select(todo, a.only)
    except ValueError as e:
        print(f"traces: error: {e}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT / "python"))
    import tierkit

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in OLD_NAMES:
        if (out / f"{old}.tkt").exists():
            print(f"traces: note: {out / old}.tkt is the single-input suite's; the suite records {old}-train and {old}-ref now", file=sys.stderr)
    index = out / "suite.json"
    try:
        entries = {e["trace"]: e for e in json.loads(index.read_text())["traces"]}
    except (OSError, ValueError, KeyError, TypeError):
        entries = {}
    failed = False
    recorded: set[str] = set()
    skipped: set[str] = set()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tierkit-recipes-") as tmp:
        for t in chosen:
            dest = out / f"{t.name}.tkt"
            if dest.exists() and not a.force:
                known = entries.get(t.name)
                if not (known and known.get("bytes") == dest.stat().st_size and known.get("argv") == list(t.argv)):
                    # a trace recorded elsewhere: its figures from the trace (the recording's
                    # instruction count is its last record's), its status unknown
                    s = tierkit.trace_info(dest, progress=False)["summary"]
                    entries[t.name] = entry(t, dest, s, s["duration_insn"], None, None, version(t.package))
                print(f"traces: {dest} exists (kept; --force records it again)", file=sys.stderr)
                continue
            if t.program in skipped or not ensure(t, a.install):
                skipped.add(t.program)  # one line says so for both inputs
                continue
            work = Path(tmp) / t.name
            work.mkdir()
            try:
                r, seconds = record(t, work, dest)
            except tierkit.TierkitError as e:  # no tracer, no Valgrind: the others would fail too
                print(f"traces: {t.name}: {e}", file=sys.stderr)
                failed = True
                break
            status = "ok" if r["status"] == 0 and not r.get("incomplete") else f"status {r['status']}" + (f", incomplete: {r['incomplete']}" if r.get("incomplete") else "")
            if status != "ok":
                failed = True
                tail = (work / "stdout").read_text(errors="replace")[-2000:]
                print(f"traces: {t.name} failed ({status}); its output ended:\n{tail}", file=sys.stderr)
                dest.replace(dest.with_suffix(".failed.tkt"))
                entries.pop(t.name, None)
            else:
                entries[t.name] = entry(t, dest, r["summary"], r["instructions"], seconds, status, version(t.package))
                recorded.add(t.name)
            print(f"traces: {t.name}: {status} in {seconds:.0f} s", file=sys.stderr)
            shutil.rmtree(work)
    total = time.monotonic() - started
    # suite.json lists the suite's traces that are there, in the suite's order
    listed = [entries[t.name] for t in todo if t.name in entries and (out / f"{t.name}.tkt").exists()]
    index.write_text(json.dumps({"cache": "default (L1 32K/8, L2 1M/16, L3 8M/16, 64-byte lines)", "context": FRAMES, "slice": "100M",
                                 "traces": listed}, indent=1) + "\n")
    rows = [row for row in listed if row["trace"] in {t.name for t in chosen}]
    if rows:
        print(f"{'trace':<14} {'accesses':>12} {'pages':>8} {'sites':>6} {'instructions':>15} {'bytes':>12} {'record s':>9} status")
        for row in rows:
            secs = "" if row["record_s"] is None else f"{row['record_s']:.0f}"
            status = row["status"] if row["trace"] in recorded else "kept"
            print(f"{row['trace']:<14} {row['accesses']:>12,} {row['pages']:>8,} {row['sites']:>6} {row['instructions']:>15,} {row['bytes']:>12,}"
                  f" {secs:>9} {status}")
        print(f"{len(rows)} traces in {out}, {total:.0f} s; listed in {index}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
