#!/usr/bin/env python3
"""The pieces of scripts/demo.sh's monitoring chain that are easier in Python than in bash.

    demo-chain.py scaled DURATION SCALE        DURATION ("5m", "15s") divided by SCALE, in ms
    demo-chain.py seconds DURATION             DURATION in whole seconds
    demo-chain.py rules SRC DST SCALE          the alert rules with every for:, keep_firing_for:
                                               and range window divided by SCALE
    demo-chain.py alertmanager SRC DST PORT SCALE
                                               alerts/alertmanager.example.yml with its routes,
                                               grouping and inhibitions, every receiver that has an
                                               integration sent to the webhook on PORT (path
                                               /<receiver>), group_wait and group_interval divided
                                               by SCALE
    demo-chain.py receiver PORT FILE           the webhook: one JSON line per notification in FILE
    demo-chain.py table FILE SIMULATOR_LOG [ALERTMANAGER_URL]
                                               the notifications per scenario: announced (carrying
                                               alerts firing) and resolved (only resolved alerts);
                                               with the URL also the alerts firing that the routes
                                               send nowhere (info, receiver observe)

Standard library only: the files are read and written as text (the example's layout is the
repository's own).
"""

import http.server
import json
import re
import sys
import time
import urllib.request

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def seconds(duration: str) -> float:
    return sum(int(n) * UNITS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w)", duration))


def scaled(duration: str, scale: int) -> str:
    """A duration divided by scale, in whole seconds where it is, else in milliseconds (100 at
    least): 30s / 20 is 1500ms, not a second rounded down."""
    ms = max(100, round(seconds(duration) * 1000 / scale))
    return "%ds" % (ms // 1000) if ms % 1000 == 0 else "%dms" % ms


def rules(src: str, dst: str, scale: int) -> None:
    text = open(src).read()
    if scale != 1:
        text = re.sub(
            r"^(\s*(?:for|keep_firing_for):\s*)(\S+)\s*$",
            lambda m: m.group(1) + scaled(m.group(2), scale),
            text,
            flags=re.M,
        )
        text = re.sub(
            r"\[(\d+[smhdw])(:\d+[smhdw])?\]",
            lambda m: "[%s%s]" % (scaled(m.group(1), scale),
                                  ":" + scaled(m.group(2)[1:], scale) if m.group(2) else ""),
            text,
        )
    open(dst, "w").write(text)


def alertmanager(src: str, dst: str, port: int, scale: int) -> None:
    text = open(src).read()
    head, receivers = text.split("\nreceivers:\n", 1)
    head = re.sub(
        r"^(\s*(?:group_wait|group_interval):\s*)(\S+)",
        lambda m: m.group(1) + scaled(m.group(2), scale),
        head,
        flags=re.M,
    )
    out = [head, "\nreceivers:\n"]
    # Each receiver: its name, and the webhook when the example gives it an integration.
    for block in re.split(r"\n(?=  - name: )", receivers.strip("\n")):
        lines = [l for l in block.splitlines() if l.strip() and not l.lstrip().startswith("#")]
        name = re.match(r"\s*- name: (\S+)", lines[0]).group(1)
        out.append(f"  - name: {name}\n")
        if len(lines) > 1:
            out.append("    webhook_configs:\n")
            out.append(f"      - url: http://127.0.0.1:{port}/{name}\n")
            out.append("        send_resolved: true\n")
    open(dst, "w").write("".join(out))


def receiver(port: int, path: str) -> None:
    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            line = {"at": time.time(), "receiver": self.path.strip("/"), "body": body}
            with open(path, "a") as f:
                f.write(json.dumps(line) + "\n")
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_args):
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Hook).serve_forever()


def unsent(alertmanager: str) -> list:
    """The alerts Alertmanager holds whose receivers have no integration (info: observe)."""
    try:
        with urllib.request.urlopen(alertmanager.rstrip("/") + "/api/v2/alerts", timeout=5) as r:
            alerts = json.load(r)
    except (OSError, ValueError):
        return []
    return [a for a in alerts if all(rc["name"] == "observe" for rc in a.get("receivers", []))]


def table(path: str, simulator_log: str, alertmanager: str = "") -> None:
    streams = {}  # stream -> scenario, from the simulator's "[scenario] starting on <stream>"
    for line in open(simulator_log):
        m = re.match(r"\[(\S+)\] starting on (\S+)", line)
        if m:
            streams[m.group(2)] = m.group(1)
    # Per scenario, then per group: a scenario with faults in two groups (trim) is two faults.
    counts = {}
    try:
        notifications = [json.loads(l) for l in open(path) if l.strip()]
    except FileNotFoundError:
        notifications = []
    for n in notifications:
        alerts = n["body"].get("alerts", [])
        labels = alerts[0]["labels"] if alerts else {}
        stream = labels.get("stream")
        scenario = streams.get(stream, "(other)" if stream else "(no stream)")
        per_group = counts.setdefault(scenario, {})
        row = per_group.setdefault(labels.get("group", ""), {"announced": 0, "resolved": 0, "alerts": set()})
        firing = [a for a in alerts if a["status"] == "firing"]
        if firing:
            row["announced"] += 1
            for a in firing:
                name = a["labels"]["alertname"].removeprefix("RedisStreams")
                row["alerts"].add(f'{name} ({n["receiver"]})')
        else:
            row["resolved"] += 1
    # Firing, and by the routes sent nowhere: said beside the scenario, never counted.
    quiet = {}
    for a in unsent(alertmanager) if alertmanager else []:
        stream = a["labels"].get("stream")
        scenario = streams.get(stream, "(other)" if stream else "(no stream)")
        quiet.setdefault(scenario, set()).add(a["labels"]["alertname"].removeprefix("RedisStreams"))
    rows = []
    for scenario in dict.fromkeys(list(streams.values()) + sorted(counts) + sorted(quiet)):
        groups = counts.get(scenario, {})
        said = []
        if scenario in quiet:
            said = ["firing, sent nowhere (observe): " + ", ".join(sorted(quiet[scenario]))]
        if not groups:
            rows.append((scenario, 0, 0, "; ".join(["-"] + said)))
        for group, r in sorted(groups.items()):
            name = f"{scenario} ({group})" if len(groups) > 1 else scenario
            alerts = [", ".join(sorted(r["alerts"])) or "-"] + said
            rows.append((name, r["announced"], r["resolved"], "; ".join(alerts)))
    width = max([len("scenario")] + [len(r[0]) for r in rows])
    print(f"\nNotifications per scenario ({len(notifications)} received by the demo's webhook):")
    print(f"{'scenario':<{width}}  announced  resolved  alerts announced (receiver)")
    for name, announced, resolved, alerts in rows:
        print(f"{name:<{width}}  {announced:>9}  {resolved:>8}  {alerts}")


def main() -> int:
    what, args = sys.argv[1], sys.argv[2:]
    if what == "scaled":
        print(scaled(args[0], int(args[1])))
    elif what == "seconds":
        print(int(seconds(args[0])))
    elif what == "rules":
        rules(args[0], args[1], int(args[2]))
    elif what == "alertmanager":
        alertmanager(args[0], args[1], int(args[2]), int(args[3]))
    elif what == "receiver":
        receiver(int(args[0]), args[1])
    elif what == "table":
        table(args[0], args[1], args[2] if len(args) > 2 else "")
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
