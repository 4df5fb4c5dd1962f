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
of memory.

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
        before = bench.commandstats(r)
        sent, i, t0 = 0, 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            key = f"{bench.STREAM_PREFIX}{i % 200}"
            i += 1
            r.pipeline([("XINFO", "STREAM", key), ("XRANGE", key, "-", "+", "COUNT", "1"),
                        ("TIME",), ("PING",), ("EXISTS", key)])
            sent += 5
            time.sleep(0.01)
        entries = r.call("SLOWLOG", "GET", "100000") or []
        diff = bench.stats_diff(bench.commandstats(r), before)
        print(f"{sent:,} O(1) commands in {seconds:.0f} s; SLOWLOG entries over 1 ms: {len(entries)}")
        for e in entries:
            print(f"  {e[2]} µs  {' '.join(a.decode(errors='replace') for a in e[3][:4])}")
        for name in ("xinfo|stream", "xrange", "time", "ping", "exists"):
            d = diff.get(name, {"calls": 0, "usec": 0})
            print(f"  {name}: {d['calls']:,} calls, {d['usec'] / max(d['calls'], 1):.1f} µs each")
        return 0
    finally:
        procs.stop_all()


if __name__ == "__main__":
    sys.exit(main())
