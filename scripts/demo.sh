#!/usr/bin/env bash
# Demo on loopback, in the foreground, without containers: redis-server, the exporter,
# Prometheus with the alert rules, Alertmanager, and the fault simulator driving every scenario of
# `redis-streams-simulator all` on streams named demo:*.
# Ctrl-C stops everything and removes the temporary directory.
#
#   scripts/demo.sh                  # free ports
#   scripts/demo.sh --exporter-port 9763 --prometheus-port 9090 --alertmanager-port 9093
#   scripts/demo.sh --bin-dir /opt/rse/bin   # binaries from there, no cargo needed
#
# Options (each port defaults to a free one):
#   --redis-port N  --exporter-port N  --prometheus-port N  --alertmanager-port N
#   --scenarios "LIST"   simulator scenarios (default: all; see `--list` of the simulator)
#   --fast               load the rules with every for:/keep_firing_for:/range window divided
#                        by 20 (as the end-to-end test does), so alerts fire within minutes
#   --bin-dir DIR        take redis-streams-exporter and redis-streams-simulator from DIR
#   --print-binaries     print the two binaries the demo would run (building none) and exit
#
# The binaries: from --bin-dir, else from PATH (a .deb, `cargo install`), else built with
# `cargo build --release`; cargo is needed only for a binary found in neither place.
# Needs the Debian packages redis-server, prometheus and prometheus-alertmanager (scripts/test.sh
# installs them) and python3. Grafana is not started: import dashboards/*.json into a Grafana of
# yours with the printed Prometheus URL as data source, or use docker-compose.yml.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

redis_port="" exporter_port="" prometheus_port="" alertmanager_port=""
scenarios="all"
fast=0
bin_dir=""
print_binaries=0
while [ $# -gt 0 ]; do
  case "$1" in
    --redis-port) redis_port=$2; shift 2 ;;
    --exporter-port) exporter_port=$2; shift 2 ;;
    --prometheus-port) prometheus_port=$2; shift 2 ;;
    --alertmanager-port) alertmanager_port=$2; shift 2 ;;
    --scenarios) scenarios=$2; shift 2 ;;
    --fast) fast=1; shift ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --print-binaries) print_binaries=1; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done

need() {
  command -v "$1" >/dev/null || { echo "$1 not found: install the Debian package $2 (scripts/test.sh does)" >&2; exit 1; }
}

# The exporter and the simulator: given, installed, or built (only then is cargo needed).
find_binary() { # name; prints its path, or nothing when it has to be built
  if [ -n "$bin_dir" ]; then
    [ -x "$bin_dir/$1" ] || { echo "$bin_dir/$1 is not an executable (--bin-dir)" >&2; exit 2; }
    echo "$bin_dir/$1"
  else
    command -v "$1" || true
  fi
}
exporter=$(find_binary redis-streams-exporter)
simulator=$(find_binary redis-streams-simulator)
if [ -z "$exporter" ] || [ -z "$simulator" ]; then
  if [ "$print_binaries" -eq 1 ]; then
    echo "exporter=${exporter:-(to build with cargo)}"
    echo "simulator=${simulator:-(to build with cargo)}"
    exit 0
  fi
  command -v cargo >/dev/null || {
    echo "redis-streams-exporter and redis-streams-simulator are not on PATH and cargo is not installed:" >&2
    echo "install the binaries, pass --bin-dir DIR, or install Rust (https://rustup.rs)" >&2
    exit 1
  }
  echo "building what is not installed (cargo build --release)..."
  cargo build --release --locked --bins
  target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  : "${exporter:=$target_dir/release/redis-streams-exporter}"
  : "${simulator:=$target_dir/release/redis-streams-simulator}"
fi
if [ "$print_binaries" -eq 1 ]; then
  echo "exporter=$exporter"
  echo "simulator=$simulator"
  exit 0
fi

need redis-server redis-server
need prometheus prometheus
need prometheus-alertmanager prometheus-alertmanager
need python3 python3

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
: "${redis_port:=$(free_port)}"
: "${exporter_port:=$(free_port)}"
: "${prometheus_port:=$(free_port)}"
: "${alertmanager_port:=$(free_port)}"

work=$(mktemp -d "${TMPDIR:-/tmp}/redis-streams-demo.XXXXXX")
pids=()
cleanup() {
  trap - EXIT INT TERM
  echo
  echo "stopping..."
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
# Ctrl-C and SIGTERM stop everything alike (a demo started in the background from a script
# ignores SIGINT, which bash then cannot trap: stop it with SIGTERM).
trap 'exit 130' INT
trap 'exit 143' TERM

wait_for() { # url, name, pid
  for _ in $(seq 1 150); do
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$1" 2>/dev/null; then
      return 0
    fi
    kill -0 "$3" 2>/dev/null || { echo "$2 exited; its log:" >&2; cat "$work/$2.log" >&2; exit 1; }
    sleep 0.2
  done
  echo "$2 did not answer on $1" >&2
  exit 1
}

# Redis, publishing keyspace events for stream commands and DEL (E: keyevent channels, t:
# streams, g: generic commands): the exporter subscribes and polls a stream when a fault
# happens to it, so the simulator's one-off faults on freshly made streams (delete-unread,
# trim-catchup, rewind) are seen before discovery's next run. See docs/keyspace-events.md.
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --notify-keyspace-events Etg >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
  sleep 0.1
done

# The exporter, polling faster than its defaults so that the dashboards move within seconds.
cat >"$work/exporter.toml" <<EOF
[web]
listen_address = "127.0.0.1:$exporter_port"

[[targets]]
name = "demo"
url = "redis://127.0.0.1:$redis_port"
patterns = ["demo:*"]

[schedule]
discovery = "10s"
info = "10s"
stream = "5s"
pending_summary = "5s"
consumers = "5s"
pending_scan = "10s"

[stream_defaults]
max_delay = "1h"
poison_delivery_count = 5
consumer_inactive_after = "30s"

[[streams]]
match = "demo:healthy"
max_delay = "1m"
dead_letter = "{stream}:dlq"

[[streams]]
match = "demo:crashed"
max_delay = "1m"

[[streams]]
match = "demo:stopped"
max_delay = "1m"

[[streams]]
match = "demo:recovered"
max_delay = "1m"

[[streams]]
match = "demo:deadletter"
dead_letter = "{stream}:dlq"
EOF
"$exporter" --config "$work/exporter.toml" >"$work/exporter.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$exporter_port/healthz" exporter "${pids[-1]}"

# Alertmanager: the demo configuration of the compose stack (every alert stays in its UI).
prometheus-alertmanager --config.file="$root/deploy/alertmanager/alertmanager.yml" \
  --storage.path="$work/alertmanager" --web.listen-address="127.0.0.1:$alertmanager_port" \
  --cluster.listen-address= >"$work/alertmanager.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$alertmanager_port/-/ready" alertmanager "${pids[-1]}"

# Prometheus with the shipped rules (or a time-scaled copy with --fast).
rules="$root/alerts/redis-streams.rules.yml"
if [ "$fast" -eq 1 ]; then
  python3 - "$rules" "$work/redis-streams.rules.yml" <<'PY'
import re, sys
units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
def secs(d):
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d)", d))
def scaled(d):
    return "%ds" % max(1, secs(d) // 20)
text = open(sys.argv[1]).read()
text = re.sub(r"^(\s*(?:for|keep_firing_for):\s*)(\S+)\s*$", lambda m: m.group(1) + scaled(m.group(2)), text, flags=re.M)
text = re.sub(r"\[(\d+[smhd])\]", lambda m: "[" + scaled(m.group(1)) + "]", text)
open(sys.argv[2], "w").write(text)
PY
  rules="$work/redis-streams.rules.yml"
fi
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
  - $rules
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:$alertmanager_port"]
scrape_configs:
  - job_name: redis-streams-exporter
    static_configs:
      - targets: ["127.0.0.1:$exporter_port"]
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus" \
  --web.listen-address="127.0.0.1:$prometheus_port" >"$work/prometheus.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$prometheus_port/-/ready" prometheus "${pids[-1]}"

# The simulator (it writes to this Redis only).
# shellcheck disable=SC2086 # the scenario list is split on purpose
"$simulator" --url "redis://127.0.0.1:$redis_port" --prefix demo: $scenarios \
  >"$work/simulator.log" 2>&1 &
pids+=($!)

cat <<EOF

Redis Streams demo running (logs in $work):
  redis         redis://127.0.0.1:$redis_port          (redis-cli -p $redis_port)
  exporter      http://127.0.0.1:$exporter_port/        metrics: http://127.0.0.1:$exporter_port/metrics
  prometheus    http://127.0.0.1:$prometheus_port/alerts
  alertmanager  http://127.0.0.1:$alertmanager_port/
  one-shot:     $exporter --config $work/exporter.toml check
Keyspace events: on (redis-server --notify-keyspace-events Etg); the exporter polls a stream
  as soon as a fault happens to it (redis_streams_exporter_keyspace_events_total counts them).
  Against a server without notifications, polls keep their schedule and a fault on a stream
  created less than one discovery interval earlier is taken as its baseline, not counted.
Alerts fire after their for: durations ($( [ "$fast" -eq 1 ] && echo "divided by 20: --fast" || echo "5 to 30 minutes; --fast divides them by 20")).
Ctrl-C stops everything.

EOF
tail -n +1 -f "$work/simulator.log" &
pids+=($!)
# Wait until Ctrl-C, or until a component exits.
while true; do
  for pid in "${pids[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "a component exited (pid $pid); see the logs in $work" >&2
      for log in "$work"/*.log; do echo "--- $log"; tail -n 5 "$log"; done >&2
      exit 1
    fi
  done
  sleep 2
done
