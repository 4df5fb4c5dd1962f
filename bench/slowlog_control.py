#!/usr/bin/env python3
"""SLOWLOG control for the benchmark: what does this machine log as slow
when nothing but cheap commands run?

Starts redis-server the way bench/run.py does (free loopback port, nice -10,
pinned to the last CPU, this script on the others), loads phase A's data
(1,000,000 string keys + 200 streams), then sends only O(1) commands
(XINFO STREAM, XRANGE ... COUNT 1, TIME, PING, EXISTS) in pipelines of five,
about 500 a second, for the given number of seconds, and prints every
SLOWLOG entry over 1 ms and each command's average cost from INFO
commandstats. If this prints entries, the machine itself puts commands over
1 ms; if not, the slow commands of the benchmark are the ones touching a lot
of memory. bench/run.py runs the same loop as its phase S, on its own data.

  python3 bench/slowlog_control.py [seconds]   (default 300)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 300.0
    procs = bench.Procs()
    port = bench.free_port()
    try:
        redis = procs.start(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--enable-debug-command", "yes", "--daemonize", "no"],
            Path(os.devnull),
        )
        os.setpriority(os.PRIO_PROCESS, redis.pid, -10)
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) >= 2:
            os.sched_setaffinity(redis.pid, {cpus[-1]})
            os.sched_setaffinity(0, set(cpus[:-1]))
        deadline = time.monotonic() + 20
        while True:
            try:
                r = bench.Redis(port)
                r.call("PING")
                break
            except (OSError, bench.RedisError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        r.call("DEBUG", "POPULATE", "1000000")
        r.pipeline([("XADD", f"{bench.STREAM_PREFIX}{i}", "*", "f", "v") for i in range(200)])
        r.call("CONFIG", "SET", "slowlog-log-slower-than", "1000")
        r.call("CONFIG", "SET", "slowlog-max-len", "100000")
        r.call("SLOWLOG", "RESET")
        out = bench.o1_control(r, seconds, 200)
        entries = r.call("SLOWLOG", "GET", "100000") or []
        print(f"{out['sent']:,} O(1) commands in {seconds:.0f} s; SLOWLOG entries over 1 ms: {len(entries)}")
        for e in entries:
            print(f"  {e[2]} µs  {' '.join(a.decode(errors='replace') for a in e[3][:4])}")
        for name, d in out["per_command"].items():
            each = "n/a" if d["usec_per_call"] is None else f"{d['usec_per_call']:.1f} µs each"
            print(f"  {name}: {d['calls']:,} calls, {each}")
        return 0
    finally:
        procs.stop_all()


if __name__ == "__main__":
    sys.exit(main())
