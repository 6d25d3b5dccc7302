"""Speed of the per-page predictors of Kleio/Kleoniki (003 §3.2, §4): `make bench-learn`.

- training time of M page models (M = 250, 1,000, 4,000) on the CPU, in seconds per 1,000
  models, on synthetic class series of T = 256 periods (a third each: periodic with periods
  2-8; phase changes between 1-4 short patterns, 1-3 changes; uniformly random classes),
  K = 8, H = 16 and the default 60 epochs;
- the accuracy reached on each kind (classes predicted exactly for t >= K, on the training
  series: Kleio learns a page's pattern offline and replays it), and the share of periodic
  models that predict their whole series;
- inference per scheduling period (one prediction per page from its last K classes) for
  1,000 and 10,000 pages, served by the 1,000 models of the M = 1,000 run;
- the same on the GPU when CUDA is available.

Prints a table and writes bench/results/learn.json; bench/README.md keeps the latest figures.

Usage: python bench/learn.py [--sizes 250,1000,4000] [--repeats N] [--device cpu|cuda|both]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
from clock import Clock

from tierkit.learned import lstm as learn
from tierkit.learned.lstm import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
T = 256
KINDS = ("periodic", "phase", "random")


def synth(M: int, T: int, bins: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """M class series of T periods and their kind (0 periodic, 1 phase changes, 2 random)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((M, T), dtype=np.uint8)
    kind = np.arange(M) % 3
    for m in range(M):
        if kind[m] == 0:
            p = int(rng.integers(2, 9))
            out[m] = np.tile(rng.integers(0, bins + 1, p), T // p + 1)[:T]
        elif kind[m] == 1:
            cuts = np.sort(rng.choice(np.arange(16, T - 16), int(rng.integers(1, 4)), replace=False))
            for seg in np.split(np.arange(T), cuts):
                p = int(rng.integers(1, 5))
                out[m, seg] = np.tile(rng.integers(0, bins + 1, p), len(seg) // p + 1)[:len(seg)]
        else:
            out[m] = rng.integers(0, bins + 1, T)
    return out, kind


def best(f, repeats: int) -> tuple[float, float]:
    """Best wall and best CPU seconds (this process, every thread: PyTorch's included)."""
    t, c = [], []
    for _ in range(repeats):
        with Clock() as k:
            f()
        t.append(k.wall_s)
        c.append(k.cpu_s)
    return min(t), min(c)


def bench_device(device: str, sizes: list[int], repeats: int) -> dict:
    res: dict = {"device": device, "train": [], "predict": []}
    served = None
    for M in sizes:
        series, kind = synth(M, T, seed=M)
        cfg = TrainConfig(device=device)
        times, cpu, models = [], [], None
        for _ in range(repeats):
            with Clock() as k:
                models = learn.train(series, cfg)
            times.append(models.train_seconds)
            cpu.append(k.cpu_s)
        s = min(times)
        out = learn.predict(models, series)
        acc = (out[:, cfg.history:] == series[:, cfg.history:]).mean(1)
        row = {"models": M, "seconds": round(s, 2), "seconds_per_1000": round(s / M * 1000, 2), "cpu_seconds": round(min(cpu), 2),
               "distinct_windows_share": round(models.info["distinct_windows"] / models.info["windows"], 3),
               "chunks": models.info["chunks"]}
        for k, name in enumerate(KINDS):
            row[f"accuracy_{name}"] = round(float(acc[kind == k].mean()), 4)
        row["periodic_exact_share"] = round(float((acc[kind == 0] == 1).mean()), 4)
        res["train"].append(row)
        print(f"  [{device}] trained {M} models in {s:.1f} s ({min(cpu):.1f} CPU s)", file=sys.stderr, flush=True)
        if M == 1000 or served is None:
            served = models
    for P in (1000, 10000):
        x = synth(P, T, seed=P)[0][:, -(cfg.history + 1):]  # the last K periods, and the next
        owner = np.arange(P) % served.count
        learn.predict(served, x, owner)  # warm
        s, c = best(lambda: learn.predict(served, x, owner), max(repeats, 10))
        res["predict"].append({"pages": P, "models": served.count, "ms_per_period": round(s * 1e3, 2), "cpu_ms_per_period": round(c * 1e3, 2)})
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="250,1000,4000")
    ap.add_argument("--repeats", type=int, default=1, help="training runs per size (best is kept)")
    ap.add_argument("--device", choices=("cpu", "cuda", "both"), default="both",
                    help="both: the CPU, and the GPU when CUDA is available")
    a = ap.parse_args()
    import torch  # imported here so that its start-up is not timed

    sizes = [int(v) for v in a.sizes.split(",")]
    devices = ["cpu"] if a.device == "cpu" else ["cuda"] if a.device == "cuda" else ["cpu"]
    if a.device == "both" and torch.cuda.is_available():
        devices.append("cuda")
    out = {"machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                       "python": platform.python_version(),
                       "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
           "config": dataclasses.asdict(TrainConfig()), "periods": T, "runs": []}
    for dev in devices:
        out["runs"].append(bench_device(dev, sizes, a.repeats))
    for run in out["runs"]:
        print(f"\n{run['device']}: training (T={T}, K={out['config']['history']}, H={out['config']['hidden']}, "
              f"{out['config']['epochs']} epochs)")
        cols = list(run["train"][0])
        print("| " + " | ".join(cols) + " |")
        print("|" + " --- |" * len(cols))
        for r in run["train"]:
            print("| " + " | ".join(str(r[c]) for c in cols) + " |")
        print(f"\n{run['device']}: inference, one period for every page")
        for r in run["predict"]:
            print(f"  {r['pages']} pages ({r['models']} models): {r['ms_per_period']} ms")
    dest = ROOT / "bench" / "results" / "learn.json"
    dest.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
