#!/usr/bin/env bash
# Rewrites the documentation's pictures from a running exporter: docs/images/landing.png, the
# README's picture of the landing page, is the page of an exporter watching the simulator's
# faults on a redis-server of its own (a crashed worker named with its claim line, poison, a
# stopped group, lost entries, a lagging and a warming-up group, healthy and idle ones), taken
# by headless Chromium. Review the picture, then commit it.
#
#   scripts/docs.sh                  # about two minutes
#   scripts/docs.sh --bin-dir DIR    # redis-streams-exporter and redis-streams-simulator from DIR
#
# The binaries: from --bin-dir, else target/release (built with `cargo build --release` when
# missing). Needs the Debian packages redis-server and chromium, and python3; everything listens on
# 127.0.0.1 on free ports and is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bin_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done

need() {
  command -v "$1" >/dev/null || { echo "$1 not found: install the Debian package $2" >&2; exit 1; }
}
need redis-server redis-server
need chromium chromium
need python3 python3
if [ -z "$bin_dir" ]; then
  cargo build --release --locked --bins
  bin_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release
fi
exporter="$bin_dir/redis-streams-exporter"
simulator="$bin_dir/redis-streams-simulator"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
redis_port=$(free_port)
exporter_port=$(free_port)
work=$(mktemp -d "${TMPDIR:-/tmp}/redis-streams-docs.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --notify-keyspace-events Etg >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
  sleep 0.1
done

# The shipped timings divided by 10, so that the faults are judged within a minute.
cat >"$work/exporter.toml" <<EOF
[web]
listen_address = "127.0.0.1:$exporter_port"

[[targets]]
name = "orders-redis"
url = "redis://127.0.0.1:$redis_port"
patterns = ["orders:*", "billing:*"]

[schedule]
discovery = "30s"
info = "6s"
stream = "1500ms"
pending_summary = "3s"
consumers = "3s"
pending_scan = "30s"

[stream_defaults]
max_delay = "1h"
poison_delivery_count = 5
consumer_inactive_after = "30s"

[[streams]]
match = "orders:stopped"
max_delay = "1m"

[[streams]]
match = "orders:outpace"
max_delay = "20s"

[[streams]]
match = "orders:batch"
read_every = "30s"
EOF
"$exporter" --config "$work/exporter.toml" >"$work/exporter.log" 2>&1 &
pids+=($!)
"$simulator" --url "redis://127.0.0.1:$redis_port" --prefix orders: --batch-every 24s \
  healthy crashed-consumer poison stopped outpace trim idle batch noack-reader \
  >"$work/simulator.log" 2>&1 &
pids+=($!)

# Wait for the crashed worker's claim line and the loss, then start a group that is still
# warming up when the picture is taken.
page() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "http://127.0.0.1:$exporter_port/" 2>/dev/null || true; }
for _ in $(seq 1 120); do
  text=$(page)
  if grep -q "XAUTOCLAIM" <<<"$text" && grep -q "data_loss (" <<<"$text" && grep -q "stopped (" <<<"$text" && grep -q "lagging (" <<<"$text"; then
    break
  fi
  sleep 1
done
"$simulator" --url "redis://127.0.0.1:$redis_port" --prefix billing: outpace >"$work/simulator-2.log" 2>&1 &
pids+=($!)
sleep 6

chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$work/chromium" --hide-scrollbars --window-size=1500,1000 \
  --screenshot="$root/docs/images/landing.png" "http://127.0.0.1:$exporter_port/" \
  >"$work/chromium.log" 2>&1
ls -l "$root/docs/images/landing.png"
