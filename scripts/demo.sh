#!/usr/bin/env bash
# Demo on loopback, in the foreground, without containers: redis-server, the exporter,
# Prometheus with the alert rules, Alertmanager with alerts/alertmanager.example.yml (its routes,
# grouping and inhibitions; its pager and ticket receivers sent to a webhook the demo runs), and
# the fault simulator driving every scenario of `redis-streams-simulator all` on streams named
# demo:*. When it stops (Ctrl-C, SIGTERM or --duration) it prints the notifications each
# scenario caused: one per fault, none for the healthy, batch, idle and NOACK-reader groups.
# Everything stops and the temporary directory is removed.
#
#   scripts/demo.sh                  # free ports, the shipped timings
#   scripts/demo.sh --fast --duration 10m
#   scripts/demo.sh --exporter-port 9763 --prometheus-port 9090 --alertmanager-port 9093
#   scripts/demo.sh --bin-dir /opt/rse/bin   # binaries from there, no cargo needed
#
# Options (each port defaults to a free one):
#   --redis-port N  --exporter-port N  --prometheus-port N  --alertmanager-port N
#   --scenarios "LIST"   simulator scenarios (default: all; see `--list` of the simulator)
#   --fast               every time divided by 20 alike: the exporter's schedule (its status
#                        window, learned cadences and orphan limits follow; its command budgets
#                        multiplied by 20), data_loss_hold, the batch job's period and read_every,
#                        the consumer outage of `recovered`,
#                        Prometheus's scrape and evaluation, every rule's for:, keep_firing_for:
#                        and range window, Alertmanager's group_wait and group_interval; so the
#                        notifications come in the order and number of the shipped timings
#                        (max_delay, what the business tolerates, stays)
#   --duration D         stop after D ("10m", "90s") and print the notification table
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
duration=""
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
    --duration) duration=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --print-binaries) print_binaries=1; shift ;;
    -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
webhook_port=$(free_port)
scale=1
[ "$fast" -eq 1 ] && scale=20
chain="$root/scripts/demo-chain.py"
# A shipped duration divided by the scale, in milliseconds (at least 100).
scaled() { python3 "$chain" scaled "$1" "$scale"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/redis-streams-demo.XXXXXX")
pids=()
cleanup() {
  trap - EXIT INT TERM
  if [ -f "$work/simulator.log" ]; then
    python3 "$chain" table "$work/notifications.jsonl" "$work/simulator.log" \
      "http://127.0.0.1:$alertmanager_port" || true
  fi
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

# The exporter on the shipped schedule (divided by 20 with --fast), every stream with a max_delay;
# the streams about delays with a shorter one, the batch job's with its read_every. A max_delay
# is what the business tolerates, not a window: it is not scaled (an outpacing group would page
# for its lag within the demo otherwise, as it would after hours of real time).
cat >"$work/exporter.toml" <<EOF
[web]
listen_address = "127.0.0.1:$exporter_port"

[[targets]]
name = "demo"
url = "redis://127.0.0.1:$redis_port"
patterns = ["demo:*"]

[schedule]
discovery = "$(scaled 5m)"
info = "$(scaled 1m)"
stream = "$(scaled 15s)"
pending_summary = "$(scaled 30s)"
consumers = "$(scaled 30s)"
pending_scan = "$(scaled 5m)"

[status]
data_loss_hold = "$(scaled 1h)"

# Rates scale the other way: 20 times the polls in the same second need 20 times the budget.
[limits]
commands_per_second = $((500 * scale))
pending_entries_per_second = $((50000 * scale))

[stream_defaults]
max_delay = "1h"
poison_delivery_count = 5

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

# The simulator's batch job runs every 4 minutes (scaled alike).
[[streams]]
match = "demo:batch"
read_every = "$(scaled 5m)"
EOF
"$exporter" --config "$work/exporter.toml" >"$work/exporter.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$exporter_port/healthz" exporter "${pids[-1]}"

# The webhook the example's pager and ticket receivers are sent to: one line per notification.
python3 "$chain" receiver "$webhook_port" "$work/notifications.jsonl" >"$work/webhook.log" 2>&1 &
pids+=($!)

# Alertmanager: the example's routes, grouping and inhibitions, its receivers sent to the webhook.
python3 "$chain" alertmanager "$root/alerts/alertmanager.example.yml" "$work/alertmanager.yml" \
  "$webhook_port" "$scale"
prometheus-alertmanager --config.file="$work/alertmanager.yml" \
  --storage.path="$work/alertmanager" --web.listen-address="127.0.0.1:$alertmanager_port" \
  --cluster.listen-address= >"$work/alertmanager.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$alertmanager_port/-/ready" alertmanager "${pids[-1]}"

# Prometheus with the shipped rules (scaled in time with --fast).
rules="$work/redis-streams.rules.yml"
python3 "$chain" rules "$root/alerts/redis-streams.rules.yml" "$rules" "$scale"
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: $(scaled 15s)
  scrape_timeout: $(scaled 15s)
  evaluation_interval: $(scaled 15s)
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

# The simulator (it writes to this Redis only), its log there before anything follows it.
: >"$work/simulator.log"
# shellcheck disable=SC2086 # the scenario list is split on purpose
"$simulator" --url "redis://127.0.0.1:$redis_port" --prefix demo: \
  --batch-every "$(scaled 4m)" --outage "$(scaled 30s)" $scenarios \
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
Alerts fire after their for: durations ($( [ "$fast" -eq 1 ] && echo "every time divided by 20: --fast" || echo "5 to 30 minutes; --fast divides every time by 20")),
  and Alertmanager sends them (the example's routes: pager, ticket) to the demo's webhook.
$( [ -n "$duration" ] && echo "Stops after $duration; " )Ctrl-C stops everything; the notifications per scenario are printed then.

EOF
tail -n +1 -f "$work/simulator.log" &
pids+=($!)
# Wait until Ctrl-C, --duration, or until a component exits.
started=$(date +%s)
limit=""
if [ -n "$duration" ]; then
  limit=$(python3 "$chain" seconds "$duration")
fi
while true; do
  for pid in "${pids[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "a component exited (pid $pid); see the logs in $work" >&2
      for log in "$work"/*.log; do echo "--- $log"; tail -n 5 "$log"; done >&2
      exit 1
    fi
  done
  if [ -n "$limit" ] && [ $(( $(date +%s) - started )) -ge "$limit" ]; then
    echo "demo: $duration elapsed"
    exit 0
  fi
  sleep 2
done
