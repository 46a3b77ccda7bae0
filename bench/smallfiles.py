#!/usr/bin/env python3
"""Small-file helper for bench/run.sh (no dependencies beyond the standard library).

  smallfiles.py create DIR N            create DIR and N files of 100 bytes, unique content each
  smallfiles.py touch DIR OUT [LIMIT]   open(f, 'r+b').write(b'y') once per file (the first LIMIT
                                        files in name order, default all); writes a summary of the
                                        per-file latency (open + write + close, in microseconds)
                                        to OUT as "key value" lines
  smallfiles.py verify DIR N            check that DIR holds exactly the N files `create` made,
                                        with their original content; exit 1 and say how many differ
"""
import os
import sys
import time


def content(i: int) -> bytes:
    return b"%0100d" % i  # 100 bytes, unique per file


def name(i: int) -> str:
    return f"f{i:05d}"


def create(d: str, n: int) -> None:
    os.mkdir(d)
    for i in range(n):
        with open(os.path.join(d, name(i)), "wb") as f:
            f.write(content(i))


def pct(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def touch(d: str, out: str, limit: int | None) -> None:
    names = sorted(os.listdir(d))
    if limit is not None:
        names = names[:limit]
    lat = []
    t_start = time.perf_counter()
    for nm in names:
        p = os.path.join(d, nm)
        t0 = time.perf_counter_ns()
        with open(p, "r+b") as f:
            f.write(b"y")
        lat.append((time.perf_counter_ns() - t0) / 1000.0)
    total = time.perf_counter() - t_start
    with open(out, "w") as f:
        f.write(f"n {len(lat)}\n")
        f.write(f"median_us {pct(lat, 50):.2f}\n")
        f.write(f"p90_us {pct(lat, 90):.2f}\n")
        f.write(f"p99_us {pct(lat, 99):.2f}\n")
        f.write(f"mean_us {sum(lat) / max(1, len(lat)):.2f}\n")
        f.write(f"total_s {total:.6f}\n")


def verify(d: str, n: int) -> int:
    bad = 0
    present = set(os.listdir(d))
    expected = {name(i) for i in range(n)}
    bad += len(present ^ expected)
    for i in range(n):
        nm = name(i)
        if nm not in present:
            continue
        with open(os.path.join(d, nm), "rb") as f:
            if f.read() != content(i):
                bad += 1
    if bad:
        print(f"verify {d}: {bad} of {n} files differ from their original content", file=sys.stderr)
        return 1
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "create":
        create(argv[2], int(argv[3]))
        return 0
    if len(argv) >= 4 and argv[1] == "touch":
        touch(argv[2], argv[3], int(argv[4]) if len(argv) > 4 else None)
        return 0
    if len(argv) >= 4 and argv[1] == "verify":
        return verify(argv[2], int(argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
