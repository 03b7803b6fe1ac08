# The cases of scripts/abuse.sh added with the read API, the clients and
# the label paths; sourced by it (it sets BIN, LOAD, PORT, OUT, base, want,
# field and STARTED). Each case is bounded in time and count, on loopback.

# start_gpuscope PORT LOG ARGS...: starts another gpuscope and waits until
# it is ready; its PID is in STARTED_PID.
start_gpuscope() {
  local port=$1 log=$2
  shift 2
  "$BIN" --source sim --address "127.0.0.1:$port" "$@" >"$log" 2>&1 &
  STARTED_PID=$!
  STARTED+=("$STARTED_PID")
  for _ in $(seq 300); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/ready" 2>/dev/null && return 0
    kill -0 "$STARTED_PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# The 16 fields the read-API case asks for: the counters file's first
# 16 that are not label fields.
api_fields=$(grep -v '^#' etc/dcp-metrics.csv | awk -F, 'NF >= 3 && $2 !~ /label/ { gsub(/ /, "", $1); print $1 }' | head -16 | paste -sd, -)

if want readapi; then
  api_port=$((PORT + 1))
  echo "abuse: read API: 8 GPUs with MIG, 16 fields, a 15 s window; $API_READS reads, $API_PAR at a time"
  if start_gpuscope "$api_port" "$OUT/readapi.log" --sim-gpus 8 --sim-mig 7x1g.10gb --window 15s --collectors "$OUT/counters.csv"; then
    api_pid=$STARTED_PID
    api_url="http://127.0.0.1:$api_port/api/v1/samples?field=$api_fields&since=1"
    # The first read gives the fields without window statistics a ring;
    # the window then fills.
    curl -fsS -o /dev/null "$api_url" || true
    sleep 16
    api_rss_before=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$api_pid/status")
    api_bytes=$(curl -sS -o /dev/null -w '%{size_download}' "$api_url" || true)
    api_for=$((API_READS / API_PAR * 4 + 10))s
    "$LOAD" -url "http://127.0.0.1:$api_port/metrics" -c 1 -pause 200ms -d "$api_for" -pid "$api_pid" -sample 200ms -warmup 0s >"$OUT/readapi-scrapes.txt" &
    scrape_pid=$!
    STARTED+=("$scrape_pid")
    sleep 1
    seq "$API_READS" | xargs -P "$API_PAR" -I{} curl -sS -o /dev/null --max-time 60 -w '%{http_code} %{time_total}\n' "$api_url" >"$OUT/readapi-codes.txt" 2>/dev/null || true
    wait "$scrape_pid" || true
    api_scr=$(cat "$OUT/readapi-scrapes.txt")
    api_codes=$(awk '{ n[$1]++ } END { for (c in n) printf "%s:%d ", c, n[c] }' "$OUT/readapi-codes.txt")
    api_time=$(sort -n -k2 "$OUT/readapi-codes.txt" | awk '{ t[NR] = $2 } END { if (NR) printf "%.2f / %.2f s", t[int((NR + 1) / 2)], t[NR] }')
    # One stream of the same 16 fields for 10 s: what it costs on the wire.
    stream_bytes=$(curl -sS -o /dev/null --max-time 10 -w '%{size_download}' "http://127.0.0.1:$api_port/api/v1/stream?field=$api_fields" 2>/dev/null || true)
    sleep 10
    api_rss_later=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$api_pid/status")
    stop_pid "$api_pid"
  else
    api_codes="gpuscope did not start; see $OUT/readapi.log"
  fi
fi

if want stream; then
  echo "abuse: 8 HEAD requests on /api/v1/stream held open, then a stream"
  stream_path="/api/v1/stream?field=DCGM_FI_PROF_SM_ACTIVE"
  head_codes=""
  for fd in 20 21 22 23 24 25 26 27; do
    eval "exec $fd<>/dev/tcp/127.0.0.1/$PORT"
    printf 'HEAD %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' "$stream_path" >&"$fd"
    IFS= read -r -t 5 status <&"$fd" || status="no answer"
    head_codes+="$(awk '{ print $2 }' <<<"$status") "
  done
  # curl ends the stream after 2 s (28: its timeout), having printed the status.
  stream_after=$(curl -sS -o /dev/null --max-time 2 -w '%{http_code}' "$base$stream_path" 2>/dev/null || true)
  for fd in 20 21 22 23 24 25 26 27; do eval "exec $fd>&-"; done
fi

if want startup; then
  echo "abuse: $STARTUPS starts, each sent SIGHUP 1 to 10 ms after start"
  up_port=$((PORT + 2))
  survived=0
  for i in $(seq "$STARTUPS"); do
    "$BIN" --source sim --sim-gpus 2 --address "127.0.0.1:$up_port" --collectors "$OUT/counters.csv" >"$OUT/startup-$i.log" 2>&1 &
    sp=$!
    STARTED+=("$sp")
    sleep "0.00$(((i - 1) % 9 + 1))"
    kill -HUP "$sp" 2>/dev/null || true
    ok=no
    for _ in $(seq 100); do
      if curl -fsS -o /dev/null "http://127.0.0.1:$up_port/ready" 2>/dev/null; then ok=yes; break; fi
      kill -0 "$sp" 2>/dev/null || break
      sleep 0.1
    done
    [ "$ok" = yes ] && survived=$((survived + 1))
    stop_pid "$sp"
  done
fi

# run_client MODE: runs capture against the hostile server of MODE and
# prints "rc seconds peak_MiB escapes", ending the client after CLIENT_WAIT.
run_client() {
  local mode=$1 hport=$((PORT + 3)) out="$OUT/hostile-$1"
  "$LOAD" -hostile "$mode" -url "http://127.0.0.1:$hport/" -d "$((CLIENT_WAIT + 20))s" >"$out.server.txt" 2>&1 &
  local hp=$!
  STARTED+=("$hp")
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$hport") 2>/dev/null && break; sleep 0.1; done
  local fmt=json dur=3s
  # A read of the rings (-d 0) for the answers, a stream for the silent
  # one; a stream longer than the wait for the silence after its headers.
  case $mode in
    extreme) fmt=png ;;
    huge | mismatched | negative | silent) dur=0s ;;
    silent-stream) dur=$((CLIENT_WAIT * 2))s ;;
  esac
  local start end cp peak=0 rc
  start=$(date +%s.%N)
  "$BIN" capture --address "127.0.0.1:$hport" -d "$dur" --field DCGM_FI_PROF_SM_ACTIVE --format "$fmt" -o "$out.$fmt" >"$out.stdout" 2>"$out.stderr" &
  cp=$!
  STARTED+=("$cp")
  local waited=0
  while kill -0 "$cp" 2>/dev/null; do
    local hwm
    hwm=$(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/$cp/status" 2>/dev/null || echo 0)
    [ -n "$hwm" ] && [ "$hwm" -gt "$peak" ] && peak=$hwm
    sleep 0.1
    waited=$((waited + 1))
    if [ "$waited" -ge $((CLIENT_WAIT * 10)) ]; then
      kill -TERM "$cp" 2>/dev/null || true
      sleep 2
      kill -KILL "$cp" 2>/dev/null || true
      break
    fi
  done
  rc=0
  wait "$cp" 2>/dev/null || rc=$?
  end=$(date +%s.%N)
  stop_pid "$hp"
  local esc=no
  grep -q $'\x1b' "$out.stderr" "$out.stdout" 2>/dev/null && esc=yes
  # A trace timestamp like 0.00/ is not JSON.
  if [ "$mode" = negative ] && grep -o '"ts":[^,}]*' "$out.json" 2>/dev/null | grep -qvE '^"ts":-?[0-9]+\.[0-9]{3}$'; then
    esc="$esc, invalid trace JSON"
  fi
  printf '%s %s %s %s' "$rc" "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')" "$peak" "$esc"
}

declare -A hostile_result
if want hostile; then
  for mode in mismatched endless-event silent silent-stream escapes huge extreme negative; do
    echo "abuse: capture against a hostile server: $mode (at most ${CLIENT_WAIT}s)"
    hostile_result[$mode]=$(run_client "$mode")
  done
fi

if want labels; then
  echo "abuse: a pod labelled like gpuscope's labels (integration test, at most 5 minutes)"
  if go test -count=1 -timeout 5m -run 'TestPodLabelNamedLikeAGpuscopeLabel' ./test/integration/ >"$OUT/labels.txt" 2>&1; then
    labels_result="the exposition parses, gpuscope's values kept"
  else
    labels_result="FAILED: see $OUT/labels.txt"
  fi
fi

print_new_cases() {
  if want readapi; then
    printf '%-34s %s\n' "read API: one answer" "${api_bytes:-?} bytes"
    printf '%-34s %s\n' "read API: status:count" "${api_codes:-}"
    printf '%-34s %s\n' "read API: read time p50 / max" "${api_time:-}"
    printf '%-34s %s\n' "read API: scrapes p50 / p99 / max" "$(field "${api_scr:-}" p50_ms) / $(field "${api_scr:-}" p99_ms) / $(field "${api_scr:-}" max_ms) ms"
    printf '%-34s %s\n' "read API: RSS before / max / +20s" "${api_rss_before:-?} / $(field "${api_scr:-}" rss_max_mib) / ${api_rss_later:-?} MiB"
    printf '%-34s %s\n' "stream of 16 fields: bytes in 10 s" "${stream_bytes:-?}"
  fi
  if want stream; then
    printf '%-34s %s\n' "stream: 8 HEADs answered" "${head_codes:-}"
    printf '%-34s %s\n' "stream: GET while they are open" "${stream_after:-}"
  fi
  want startup && printf '%-34s %s\n' "startup SIGHUP: survived" "$survived of $STARTUPS"
  if want hostile; then
    for mode in mismatched endless-event silent silent-stream escapes huge extreme negative; do
      # rc seconds peak escapes
      read -r rc secs peak esc <<<"${hostile_result[$mode]}"
      printf '%-34s %s\n' "hostile $mode: rc / s / peak" "$rc / $secs s / $peak MiB, escapes shown: $esc"
    done
  fi
  want labels && printf '%-34s %s\n' "labels: pod label bound=, stat=" "$labels_result"
  return 0
}
