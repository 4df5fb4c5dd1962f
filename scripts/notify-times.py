#!/usr/bin/env python3
"""Measures, end to end, the time from a fault to the notification it causes.

    redis-server (one per failure mode) <── consumers and producers of this script
         ▲ reads
    redis-streams-exporter (default schedule: 15 s stream polls) ── /metrics ──▶ Prometheus
    (alerts/redis-streams.rules.yml as shipped) ──▶ Alertmanager (alerts/alertmanager.example.yml,
    its receivers replaced by a webhook listener of this script on loopback)

Every failure mode runs at once, on its own Redis and its own target of one exporter. Each stream
gets 2 entries a second and healthy consumers for a warm-up (one status window and more), then
the script applies the fault and records the wall time until the first notification about that
target reaches the webhook, and which alert and receiver (pager or ticket) it was. The batch
consumer with `read_every` must produce no notification at all. For the lag above max_delay, the
script also records when the lag (the age of the oldest undelivered entry, read from Redis) first
exceeded the stream's max_delay, and times the notification from there too.

It is a measurement, not a test: it takes about 20 minutes of wall time and its figures depend on
the machine's load. Results go to stdout as a Markdown table (and --json to a file); copy them into
docs/notification-times.md with the command line used.

    python3 scripts/notify-times.py [--exporter target/debug/redis-streams-exporter]
        [--warmup 180] [--observe 900] [--interval 15] [--json results.json]

Needs redis-server, prometheus, prometheus-alertmanager (Debian packages) and PyYAML. Standard
library otherwise; everything listens on 127.0.0.1 on free ports and is stopped at the end.
"""

import argparse
import http.server
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
RULES = ROOT / "alerts" / "redis-streams.rules.yml"
ALERTMANAGER_EXAMPLE = ROOT / "alerts" / "alertmanager.example.yml"
PRODUCTION_PER_SECOND = 2.0
LAG_MAX_DELAY_SECONDS = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# A minimal RESP2 client: one connection, one command at a time.


class Redis:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.file = self.sock.makefile("rb")

    def __call__(self, *args):
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(f"${len(b)}\r\n".encode() + b + b"\r\n")
        self.sock.sendall(b"".join(out))
        return self._read()

    def _read(self):
        line = self.file.readline()
        if not line:
            raise ConnectionError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)[:-2]
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self._read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")

    def close(self):
        self.sock.close()


def read_ids(reply) -> list:
    """The entry IDs of an XREADGROUP reply."""
    ids = []
    for _stream, entries in reply or []:
        ids.extend(entry[0] for entry in entries)
    return ids


# ------------------------------------------------------------------------------------------------
# Workloads


class Scenario:
    """One failure mode: its Redis, its stream, its workload threads and its fault."""

    group = "workers"
    server_args = []

    def __init__(self, name: str, port: int, stop: threading.Event):
        self.name = name
        self.stream = name
        self.port = port
        self.stop = stop
        self.fault_at = None
        self.extra = {}
        self.paused = threading.Event()
        self.threads = []

    def conn(self) -> Redis:
        return Redis(self.port)

    def setup(self):
        r = self.conn()
        r("XGROUP", "CREATE", self.stream, self.group, "$", "MKSTREAM")
        r.close()
        self.spawn(self.produce)
        self.start_consumers()

    def spawn(self, target, *args):
        def run():
            try:
                target(*args)
            except (OSError, RuntimeError):
                if not self.stop.is_set():  # the servers going away at the end is expected
                    raise

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.threads.append(t)

    def produce(self):
        r = self.conn()
        step = 1.0 / PRODUCTION_PER_SECOND
        next_at = time.monotonic()
        while not self.stop.is_set():
            r("XADD", self.stream, "*", "n", "1")
            next_at += step
            time.sleep(max(0.0, next_at - time.monotonic()))

    def start_consumers(self):
        self.spawn(self.consume, "c1", None)

    def consume(self, name, quit_event, per_second=None, ack=lambda _id: True):
        """Reads and acknowledges; stops for good when quit_event is set; waits while paused."""
        r = self.conn()
        while not self.stop.is_set() and not (quit_event and quit_event.is_set()):
            if self.paused.is_set():
                time.sleep(0.05)
                continue
            count = 1 if per_second else 10
            reply = r("XREADGROUP", "GROUP", self.group, name, "COUNT", count, "BLOCK", 1000,
                      "STREAMS", self.stream, ">")
            for entry_id in read_ids(reply):
                if ack(entry_id):
                    r("XACK", self.stream, self.group, entry_id)
            if per_second:
                time.sleep(1.0 / per_second())

    def fault(self):
        raise NotImplementedError


class Crashed(Scenario):
    """Two consumers; one reads a batch and dies without acknowledging it."""

    description = "crashed consumer (orphaned pending)"

    def start_consumers(self):
        self.c1_quit = threading.Event()
        self.spawn(self.consume, "c1", self.c1_quit)
        self.spawn(self.consume, "c2", None)

    def fault(self):
        self.c1_quit.set()
        self.paused.set()  # c2 must not take the batch c1 dies with
        time.sleep(1.2)  # their last blocking reads return
        r = self.conn()
        for _ in range(5):
            r("XADD", self.stream, "*", "n", "1")
        reply = r("XREADGROUP", "GROUP", self.group, "c1", "COUNT", 5, "STREAMS", self.stream, ">")
        self.extra["held"] = len(read_ids(reply))
        r.close()
        self.paused.clear()


class Poison(Scenario):
    """One entry fails every time: the consumer reclaims and retries it, never acknowledging."""

    description = "poison entry"

    def start_consumers(self):
        self.poison_id = None
        self.armed = threading.Event()

        def ack(entry_id):
            if self.armed.is_set() and self.poison_id is None:
                self.poison_id = entry_id
            return entry_id != self.poison_id

        self.spawn(self.consume, "c1", None, None, ack)
        self.spawn(self.retry)

    def retry(self):
        r = self.conn()
        while not self.stop.is_set():
            time.sleep(5)
            if self.poison_id:
                r("XAUTOCLAIM", self.stream, self.group, "c1", 4000, "0-0", "COUNT", 10)

    def fault(self):
        self.armed.set()


class NeverAcks(Scenario):
    """The consumer keeps reading and never acknowledges again."""

    description = "consumer that never acks"

    def start_consumers(self):
        self.broken = threading.Event()
        self.spawn(self.consume, "c1", None, None, lambda _id: not self.broken.is_set())

    def fault(self):
        self.broken.set()


class Stopped(Scenario):
    """Every consumer exits (having acknowledged what it read) while production goes on."""

    description = "stopped group (no consumer reads, work waits)"

    def start_consumers(self):
        self.quit = threading.Event()
        self.spawn(self.consume, "c1", self.quit)

    def fault(self):
        self.quit.set()


class Trimmed(Scenario):
    """A burst the group has not read yet is trimmed away (XTRIM MAXLEN 10)."""

    description = "trim that loses unread entries"

    def fault(self):
        self.paused.set()
        time.sleep(1.2)
        r = self.conn()
        for _ in range(50):
            r("XADD", self.stream, "*", "n", "burst")
        removed = r("XTRIM", self.stream, "MAXLEN", 10)
        self.extra["trimmed"] = removed
        r.close()
        self.paused.clear()


class Deleted(Scenario):
    """Five entries of a burst the group has not read yet are deleted (XDEL)."""

    description = "XDEL of unread entries"

    def fault(self):
        self.paused.set()
        time.sleep(1.2)
        r = self.conn()
        ids = [r("XADD", self.stream, "*", "n", "burst") for _ in range(20)]
        self.extra["deleted"] = r("XDEL", self.stream, *ids[5:10])
        r.close()
        self.paused.clear()


class DeletedEvents(Deleted):
    """The same XDEL, on a server that publishes keyspace events (notify-keyspace-events Etg)."""

    description = "XDEL of unread entries, server publishing keyspace events (Etg)"
    server_args = ["--notify-keyspace-events", "Etg"]


class TrimmedEvents(Trimmed):
    """The same trim, on a server that publishes keyspace events (notify-keyspace-events Etg)."""

    description = "trim that loses unread entries, server publishing keyspace events (Etg)"
    server_args = ["--notify-keyspace-events", "Etg"]


class Batch(Scenario):
    """A healthy batch job: reads everything every 4 minutes (read_every = 5m). Must not notify."""

    description = "batch consumer every 4 min, read_every 5m (must not notify)"

    def start_consumers(self):
        self.spawn(self.batch)

    def batch(self):
        r = self.conn()
        while not self.stop.is_set():
            while True:
                ids = read_ids(r("XREADGROUP", "GROUP", self.group, "batch", "COUNT", 1000,
                                 "STREAMS", self.stream, ">"))
                if ids:
                    r("XACK", self.stream, self.group, *ids)
                if len(ids) < 1000:
                    break
            self.stop.wait(240)

    def fault(self):
        pass  # nothing breaks: the fault time is the start of observation


class BatchLearned(Batch):
    """The same batch job without read_every: the exporter learns its rhythm during the warm-up."""

    description = "batch consumer every 4 min, no read_every, rhythm learned in the warm-up (must not notify)"


class LongHandler(Scenario):
    """Two consumers whose handler takes 100 s per entry; one entry a minute. Must not notify."""

    description = "two consumers with a 100 s handler, one entry a minute (must not notify)"

    def produce(self):
        r = self.conn()
        while not self.stop.wait(60):
            r("XADD", self.stream, "*", "n", "1")

    def start_consumers(self):
        for name in ("h1", "h2"):
            self.spawn(self.handle, name)

    def handle(self, name):
        r = self.conn()
        while not self.stop.is_set():
            ids = read_ids(r("XREADGROUP", "GROUP", self.group, name, "COUNT", 1, "BLOCK", 1000,
                             "STREAMS", self.stream, ">"))
            for entry_id in ids:
                if self.stop.wait(100):
                    return
                r("XACK", self.stream, self.group, entry_id)

    def fault(self):
        pass


class NoAck(Scenario):
    """A consumer that reads with NOACK (nothing pending, ever). Must not notify."""

    description = "NOACK reader keeping up (must not notify)"

    def start_consumers(self):
        self.spawn(self.read_noack)

    def read_noack(self):
        r = self.conn()
        while not self.stop.is_set():
            r("XREADGROUP", "GROUP", self.group, "n1", "COUNT", 10, "BLOCK", 1000, "NOACK",
              "STREAMS", self.stream, ">")

    def fault(self):
        pass


class Healthy(Scenario):
    """Production and a consumer that keeps up. Must not notify."""

    description = "healthy consumer (must not notify)"

    def fault(self):
        pass


class Idle(Scenario):
    """A consumer blocked on a stream nobody writes to. Must not notify."""

    description = "idle stream, consumer waiting (must not notify)"

    def produce(self):
        self.stop.wait()

    def fault(self):
        pass


class Lag(Scenario):
    """The consumer slows to half the production rate; max_delay is 2 minutes."""

    description = f"lag above max_delay ({LAG_MAX_DELAY_SECONDS} s)"

    def start_consumers(self):
        self.slow = threading.Event()
        rate = lambda: PRODUCTION_PER_SECOND / 2 if self.slow.is_set() else 50.0  # noqa: E731
        self.spawn(self.consume, "c1", None, rate)
        self.spawn(self.watch_lag)

    def watch_lag(self):
        """When the oldest undelivered entry first gets older than max_delay (server clock)."""
        r = self.conn()
        while not self.stop.is_set():
            time.sleep(1)
            if not self.slow.is_set() or "lag_over_max_delay_at" in self.extra:
                continue
            groups = r("XINFO", "GROUPS", self.stream)
            fields = dict(zip(groups[0][::2], groups[0][1::2]))
            nxt = r("XRANGE", self.stream, "(" + fields["last-delivered-id"], "+", "COUNT", 1)
            if not nxt:
                continue
            seconds, micros = r("TIME")
            age = int(seconds) + int(micros) / 1e6 - int(nxt[0][0].split("-")[0]) / 1000
            if age > LAG_MAX_DELAY_SECONDS:
                self.extra["lag_over_max_delay_at"] = time.time()

    def fault(self):
        self.slow.set()


SCENARIOS = {
    "crashed": Crashed,
    "poison": Poison,
    "never-acks": NeverAcks,
    "stopped": Stopped,
    "trimmed": Trimmed,
    "deleted": Deleted,
    "deleted-events": DeletedEvents,
    "trimmed-events": TrimmedEvents,
    "batch": Batch,
    "batch-learned": BatchLearned,
    "long-handler": LongHandler,
    "noack-reader": NoAck,
    "healthy": Healthy,
    "idle": Idle,
    "lag": Lag,
}


# ------------------------------------------------------------------------------------------------
# The monitoring chain


class Hook(http.server.BaseHTTPRequestHandler):
    received = []
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        at = time.time()
        with Hook.lock:
            Hook.received.append((at, self.path.strip("/"), json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_args):
        pass


def alertmanager_config(hook_port: int) -> str:
    """The example's routes, timings and inhibitions; receivers with an integration -> the hook."""
    doc = yaml.safe_load(ALERTMANAGER_EXAMPLE.read_text())
    for receiver in doc["receivers"]:
        name = receiver["name"]
        integrations = len(receiver) > 1
        receiver.clear()
        receiver["name"] = name
        if integrations:
            receiver["webhook_configs"] = [
                {"url": f"http://127.0.0.1:{hook_port}/{name}", "send_resolved": True}
            ]
    return yaml.safe_dump(doc, sort_keys=False)


def exporter_config(port: int, servers: dict) -> str:
    """Default schedule, limits and status window; one target per failure mode."""
    out = [f'[web]\nlisten_address = "127.0.0.1:{port}"\n']
    for name, redis_port in servers.items():
        out.append(f'[[targets]]\nname = "{name}"\nurl = "redis://127.0.0.1:{redis_port}"\n'
                   f'streams = ["{name}"]\n')
    out.append(f'[[streams]]\nmatch = "lag"\nmax_delay = "{LAG_MAX_DELAY_SECONDS}s"\n')
    out.append('[[streams]]\nmatch = "batch"\nread_every = "5m"\n')  # batch-learned has none
    return "\n".join(out)


def prometheus_config(rules: pathlib.Path, am_port: int, exporter_port: int, every: int) -> str:
    return f"""global:
  scrape_interval: {every}s
  evaluation_interval: {every}s
rule_files:
  - {rules}
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:{am_port}"]
scrape_configs:
  - job_name: redis-streams-exporter
    static_configs:
      - targets: ["127.0.0.1:{exporter_port}"]
"""


def wait_http(url: str, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"{url} did not answer within {seconds} s")


def prometheus_alerts(prom_port: int) -> list:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/alerts", timeout=5) as r:
            return json.load(r)["data"]["alerts"]
    except OSError:
        return []


def fmt(seconds) -> str:
    if seconds is None:
        return "none"
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exporter", default=str(ROOT / "target" / "debug" / "redis-streams-exporter"))
    parser.add_argument("--warmup", type=int, default=180, help="seconds of healthy traffic first")
    parser.add_argument("--observe", type=int, default=900, help="seconds watched after the faults")
    parser.add_argument("--interval", type=int, default=15,
                        help="Prometheus scrape and evaluation interval, seconds")
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), help="a subset of modes")
    parser.add_argument("--json", type=pathlib.Path, help="write the raw results here")
    args = parser.parse_args()

    for binary in ("redis-server", "prometheus", "prometheus-alertmanager"):
        if not shutil.which(binary):
            raise SystemExit(f"{binary} not found (Debian packages redis-server, prometheus, "
                             "prometheus-alertmanager)")
    if not os.access(args.exporter, os.X_OK):
        raise SystemExit(f"{args.exporter}: not an executable (cargo build first)")

    work = pathlib.Path(tempfile.mkdtemp(prefix="notify-times-"))
    procs = []

    def start(name, argv):
        logf = open(work / f"{name}.log", "wb")
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, cwd=work)
        procs.append(p)
        return p

    stop = threading.Event()
    try:
        hook_port = free_port()
        hook = http.server.ThreadingHTTPServer(("127.0.0.1", hook_port), Hook)
        threading.Thread(target=hook.serve_forever, daemon=True).start()

        names = args.only or list(SCENARIOS)
        servers = {}
        for name in names:
            port = free_port()
            (work / name).mkdir()
            start(f"redis-{name}", ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                    "--save", "", "--appendonly", "no", "--dir", str(work / name),
                                    *SCENARIOS[name].server_args])
            servers[name] = port
        for port in servers.values():
            deadline = time.time() + 20
            while True:
                try:
                    Redis(port)("PING")
                    break
                except OSError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.2)
        scenarios = {n: SCENARIOS[n](n, servers[n], stop) for n in names}
        for s in scenarios.values():
            s.setup()

        am_port = free_port()
        (work / "alertmanager.yml").write_text(alertmanager_config(hook_port))
        start("alertmanager", ["prometheus-alertmanager",
                               f"--config.file={work / 'alertmanager.yml'}",
                               f"--storage.path={work / 'am-data'}",
                               f"--web.listen-address=127.0.0.1:{am_port}",
                               "--cluster.listen-address="])
        exporter_port = free_port()
        (work / "exporter.toml").write_text(exporter_config(exporter_port, servers))
        start("exporter", [args.exporter, "--config", str(work / "exporter.toml")])
        prom_port = free_port()
        (work / "prometheus.yml").write_text(
            prometheus_config(RULES, am_port, exporter_port, args.interval))
        start("prometheus", ["prometheus", f"--config.file={work / 'prometheus.yml'}",
                             f"--storage.tsdb.path={work / 'prom-data'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"])
        wait_http(f"http://127.0.0.1:{am_port}/-/ready", 30)
        wait_http(f"http://127.0.0.1:{exporter_port}/healthz", 30)
        wait_http(f"http://127.0.0.1:{prom_port}/-/ready", 60)
        log(f"chain up in {work}; warm-up {args.warmup} s")
        time.sleep(args.warmup)

        early = [(n, a) for _, _, body in Hook.received for a in body["alerts"]
                 for n in [a["labels"].get("target")] if n in scenarios]
        if early:
            log(f"notifications during warm-up (healthy traffic): {early}")

        for s in scenarios.values():
            s.fault_at = time.time()
            s.fault()
        log("faults applied: " + ", ".join(f"{n} {s.extra}" for n, s in scenarios.items()))

        firing_seen = {}
        end = time.time() + args.observe
        while time.time() < end:
            time.sleep(5)
            for alert in prometheus_alerts(prom_port):
                target = alert["labels"].get("target")
                if alert["state"] == "firing" and target in scenarios:
                    firing_seen.setdefault((target, alert["labels"]["alertname"]), time.time())
    finally:
        stop.set()
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()

    results = {}
    for name, s in scenarios.items():
        notes = []
        for at, receiver, body in Hook.received:
            for a in body["alerts"]:
                if a["labels"].get("target") == name and a["status"] == "firing":
                    notes.append({"after_fault": at - s.fault_at, "receiver": receiver,
                                  "alert": a["labels"]["alertname"],
                                  "severity": a["labels"].get("severity")})
        notes = sorted((n for n in notes if n["after_fault"] >= 0), key=lambda n: n["after_fault"])
        posts = [(at, receiver) for at, receiver, body in Hook.received
                 if any(a["labels"].get("target") == name for a in body["alerts"])]
        count = sum(1 for at, _ in posts if at >= s.fault_at)
        before = sum(1 for at, _ in posts if at < s.fault_at)
        seen = {}
        for note in notes:
            seen.setdefault((note["alert"], note["receiver"]), note)
        firing = {alert: at - s.fault_at for (t, alert), at in firing_seen.items() if t == name}
        results[name] = {"description": s.description, "extra": {
            k: (v - s.fault_at if k.endswith("_at") else v) for k, v in s.extra.items()},
            "notifications": list(seen.values()), "firing_in_prometheus": firing,
            "posts_after_fault": count, "posts_during_warmup": before}

    print("| failure mode | first notification after the fault | alert (receiver) | "
          "first page | notifications (during warm-up) | alerts firing in Prometheus (s after the fault) |")
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        first = r["notifications"][0] if r["notifications"] else None
        page = next((n for n in r["notifications"] if n["receiver"] == "pager"), None)
        firing = ", ".join(f"{a} {t:.0f}" for a, t in sorted(r["firing_in_prometheus"].items(),
                                                             key=lambda kv: kv[1]))
        extra = ""
        if "lag_over_max_delay_at" in r["extra"]:
            crossed = r["extra"]["lag_over_max_delay_at"]
            extra = f" (lag passed max_delay at {fmt(crossed)})"
        print(f"| {r['description']}{extra} | {fmt(first and first['after_fault'])} | "
              f"{first['alert'] + ' (' + first['receiver'] + ')' if first else 'none'} | "
              f"{fmt(page and page['after_fault'])}"
              f"{' ' + page['alert'] if page else ''} | {r['posts_after_fault']} "
              f"({r['posts_during_warmup']}) | {firing or 'none'} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    log(f"logs kept in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
