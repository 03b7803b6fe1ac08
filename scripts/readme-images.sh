#!/usr/bin/env bash
# Generates the README's images in docs/images: top.png, a screenshot of
# `gpuscope top`, capture.png, a chart of `gpuscope capture`, and
# fields.png, the /fields page in headless Chromium. It builds
# gpuscope, serves 8 simulated GPUs with pod labels and the profiling
# counters, runs `gpuscope top` in a detached tmux session of a fixed size,
# waits until the table shows 8 GPU rows in training, captures the pane with
# its colours and renders it with scripts/termpng; then records 6 seconds of
# three GPUs as a PNG chart; and shoots /fields. Needs tmux and chromium
# (Debian's packages; scripts/install-test-deps.sh installs them). About 30
# seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
dir="${1:-docs/images}"
command -v tmux >/dev/null || { echo "readme-images: tmux is missing (apt-get install tmux)" >&2; exit 1; }
command -v chromium >/dev/null || { echo "readme-images: chromium is missing (apt-get install chromium)" >&2; exit 1; }

work=$(mktemp -d)
sock="gpuscope-shot-$$"
exporter=""
cleanup() {
  tmux -L "$sock" kill-server >/dev/null 2>&1 || true
  if [ -n "$exporter" ]; then kill "$exporter" 2>/dev/null || true; wait "$exporter" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/" ./cmd/gpuscope ./cmd/gpuscope-client
go build -o "$work/termpng" ./scripts/termpng
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$work/gpuscope" --source=sim --sim-pods --sim-seed=3 --collectors=etc/dcp-metrics.csv \
  --address="127.0.0.1:$port" --hostname=gpu-node-17 --log-level=warn >"$work/exporter.log" 2>&1 &
exporter=$!

# Wait on conditions, each with a deadline.
wait_for() { # description, deadline in seconds, command...
  local what=$1 deadline=$((SECONDS + $2)); shift 2
  until "$@"; do
    if [ "$SECONDS" -ge "$deadline" ]; then echo "readme-images: timed out waiting for $what" >&2; cat "$work/exporter.log" >&2; exit 1; fi
    sleep 0.2
  done
}
ready() { curl -fsS "http://127.0.0.1:$port/ready" >/dev/null 2>&1; }
wait_for "the exporter" 30 ready

tmux -L "$sock" -f /dev/null new-session -d -s top -x 150 -y 22 \
  "TERM=xterm-256color COLORTERM= $work/gpuscope top --address 127.0.0.1:$port"
# The shot waits until the table shows 8 GPUs with every field (the 1 s
# fields included), two training GPUs computing (SM activity of 50% or
# more: in the default mixed workload the communication- and input-bound
# GPUs sit lower), and a full sparkline on GPU 0 (a line as wide as the pane; the free GPUs'
# sparklines stay blank, as nothing runs there).
training() {
  local screen; screen=$(tmux -L "$sock" capture-pane -p -t top)
  [ "$(grep -cE '^[0-7] +.* [0-9]+ C ' <<<"$screen")" -eq 8 ] || return 1
  [ "$(grep -E '^0 ' <<<"$screen" | awk '{ print length($0) }')" -ge 148 ] || return 1
  [ "$(grep -E '^[0-3] +ml-training' <<<"$screen" | awk '{ if ($3+0 >= 50) n++ } END { print n+0 }')" -ge 2 ]
}
wait_for "the training steps" 120 training
tmux -L "$sock" capture-pane -p -e -t top >"$work/screen.ans"
mkdir -p "$dir"
"$work/termpng" -o "$dir/top.png" <"$work/screen.ans"
echo "readme-images: wrote $dir/top.png"
"$work/gpuscope" capture --address "127.0.0.1:$port" --duration 6s --gpu 0 --gpu 2 --gpu 4 \
  --field DCGM_FI_PROF_SM_ACTIVE,DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,DCGM_FI_PROF_NVLINK_TX_BYTES -o "$dir/capture.png"
echo "readme-images: wrote $dir/capture.png"

# The /fields page as it opens: the profiling fields of dcp-metrics.csv
# ticked, with their sparklines, and the cost panel. The first visit gives
# the 100 ms fields without window statistics a ring; the shot waits until
# all twelve have a line.
sparklines() { [ "$(curl -fsS "http://127.0.0.1:$port/fields" | grep -c '<svg class="spark"')" -ge 12 ]; }
wait_for "the sparklines of /fields" 30 sparklines
sandbox=()
if [ "$(id -u)" -eq 0 ]; then sandbox=(--no-sandbox); fi
chromium --headless "${sandbox[@]}" --disable-gpu --hide-scrollbars --user-data-dir="$work/chromium" \
  --window-size=1500,1000 --screenshot="$dir/fields.png" "http://127.0.0.1:$port/fields" >"$work/chromium.log" 2>&1 ||
  { cat "$work/chromium.log" >&2; exit 1; }
echo "readme-images: wrote $dir/fields.png"
