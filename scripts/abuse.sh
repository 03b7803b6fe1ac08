#!/usr/bin/env bash
# Repeats the adversarial run against the real binary on the sim source,
# on loopback only, and prints a table of what held. It is bounded (about
# 11 minutes for the first round's cases, and about 6 more for each binary
# the kubelet, apiserver and fields cases run: every case has a time limit
# and a count) and stops by itself; it ends only the processes it started,
# by PID.
# Figures: docs/reliability.md.
#
#   idle       2,000 idle keep-alive connections, one request each: are they
#              closed, and does memory come back?
#   slowloris  2,000 slowloris connections (headers one line a second, never done)
#   scrapers   500 concurrent scrapers for 60 s
#   hups       a storm of 900 SIGHUPs, then a scrape
#   readapi    200 reads of 16 fields' whole window from /api/v1/samples, 50 at
#              a time, while /metrics is scraped every 200 ms: answers,
#              refusals, scrape latency and memory
#   stream     8 HEAD requests on /api/v1/stream held open, then a GET stream
#   startup    gpuscope started 20 times and sent SIGHUP 1 to 10 ms after start
#   hostile    `gpuscope capture` against 8 broken or hostile servers
#              (gpuscope-load -hostile): does it end, how fast, with how much memory?
#   labels     a pod labelled like gpuscope's own labels, through the fake
#              kubelet and API server of the integration tests (the binary
#              reads the API server only from inside a pod)
#   kubelet    a hostile kubelet (fakekubelet -hostile): 8 MiB answers of
#              empty containers and of empty device IDs, one that never
#              answers, PING and SETTINGS floods; memory, CPU, descriptors
#   apiserver  a hostile API server (fakeapiserver): three 1 MiB pod labels,
#              every LIST answered 410 after the watch expires, a redirect
#              to plain HTTP; the binary runs in a mount namespace of its own
#              with the service-account files (needs root and unshare)
#   fields     150 /fields pages at once with every field ticked while
#              /metrics is scraped
#   round4     the fourth round (scripts/abuse-round4.sh): --sim-gpus -1 and
#              0; an HPC job directory with a link to a private file, a
#              repeated job and an escape sequence; a form POST to the
#              manual clock; a TLS client offering only CBC suites with SHA-1
#
# Settings (environment):
#   ABUSE_BIN        gpuscope binary to run instead of building this tree
#                    (to compare with an older build; its capture runs the
#                    gpuscope-client beside it, where there is one)     (build)
#   ABUSE_CASES      comma list of the cases above to run               (all)
#   ABUSE_PORT       loopback port; the cases use the next few too      (19500)
#   ABUSE_IDLE       idle connections                                   (2000)
#   ABUSE_IDLE_WAIT  how long they are held at most; above the server's
#                    2 min idle timeout                                 (150s)
#   ABUSE_SLOW       slowloris connections                              (2000)
#   ABUSE_SCRAPERS   concurrent scrapers                                (500)
#   ABUSE_SCRAPE_FOR length of the scrape run                           (60s)
#   ABUSE_HUPS       SIGHUPs in the storm                               (900)
#   ABUSE_SETTLE     seconds to wait, after the idle connections, before
#                    measuring memory again                             (150)
#   ABUSE_API_READS  /api/v1/samples reads in the readapi case          (200)
#   ABUSE_API_PAR    of them at once                                    (50)
#   ABUSE_STARTUPS   starts in the startup case                         (20)
#   ABUSE_CLIENT_WAIT  longest a client may run in the hostile case     (40)
#   ABUSE_OLD_BIN    an older gpuscope the kubelet, apiserver, fields and round4 cases
#                    run first, side by side with the one under test    (none)
#   ABUSE_KUBELET_FOR  seconds of each hostile-kubelet mode             (30)
#   ABUSE_SILENT_FOR   seconds of the kubelet that never answers        (60)
#   ABUSE_FIELDS_PAGES /fields pages at once                            (150)
#   ABUSE_OUT        folder for binaries, logs and raw results          (bin/abuse)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

PORT=${ABUSE_PORT:-19500}
IDLE=${ABUSE_IDLE:-2000}
IDLE_WAIT=${ABUSE_IDLE_WAIT:-150s}
SLOW=${ABUSE_SLOW:-2000}
SCRAPERS=${ABUSE_SCRAPERS:-500}
SCRAPE_FOR=${ABUSE_SCRAPE_FOR:-60s}
HUPS=${ABUSE_HUPS:-900}
CASES=${ABUSE_CASES:-all}
API_READS=${ABUSE_API_READS:-200}
API_PAR=${ABUSE_API_PAR:-50}
STARTUPS=${ABUSE_STARTUPS:-20}
CLIENT_WAIT=${ABUSE_CLIENT_WAIT:-40}
OUT=${ABUSE_OUT:-bin/abuse}
want() { [ "$CASES" = all ] || [[ ",$CASES," == *",$1,"* ]]; }
mkdir -p "$OUT"

# Both ends hold a descriptor per connection.
ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)"

BIN=${ABUSE_BIN:-}
if [ -z "$BIN" ]; then
  echo "abuse: building gpuscope and gpuscope-client (about a minute the first time)"
  go build -o "$OUT/gpuscope" ./cmd/gpuscope
  # gpuscope capture runs the gpuscope-client beside it.
  go build -o "$OUT/gpuscope-client" ./cmd/gpuscope-client
  BIN=$OUT/gpuscope
fi
go build -o "$OUT/gpuscope-load" ./cmd/gpuscope-load
LOAD=$OUT/gpuscope-load

cp etc/dcp-metrics.csv "$OUT/counters.csv"
PID=
# Every process the script starts is ended by its PID.
STARTED=()
cleanup() {
  for p in "${STARTED[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

"$BIN" --source sim --sim-gpus 8 --address "127.0.0.1:$PORT" --collectors "$OUT/counters.csv" >"$OUT/gpuscope.log" 2>&1 &
PID=$!
base="http://127.0.0.1:$PORT"
for _ in $(seq 300); do
  if curl -fsS -o /dev/null "$base/ready" 2>/dev/null; then break; fi
  kill -0 "$PID" 2>/dev/null || { echo "abuse: gpuscope exited; see $OUT/gpuscope.log" >&2; exit 1; }
  sleep 0.1
done
rss() { awk '/^VmRSS:/ { r = $2 } /^RssAnon:/ { a = $2 } END { printf "%.1f (anon %.1f)", r / 1024, a / 1024 }' "/proc/$PID/status"; }
field() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k { print $2 }'; }

rss_base=$(rss)
echo "abuse: gpuscope pid $PID, RSS ${rss_base} MiB"
if want idle; then
  echo "abuse: $IDLE idle connections for up to $IDLE_WAIT"
  idle=$("$LOAD" -url "$base/" -c 0 -pid "$PID" -idle "$IDLE" -d "$IDLE_WAIT")
  echo "$idle" >"$OUT/idle.txt"
  rss_after_idle=$(rss)
  # The Go runtime hands freed memory back to the kernel after its next
  # periodic collection (at most 2 minutes) and scavenging.
  echo "abuse: RSS for the next ${ABUSE_SETTLE:-150}s"
  for _ in $(seq "${ABUSE_SETTLE:-150}"); do sleep 1; done
  rss_settled=$(rss)
fi

if want slowloris; then
  echo "abuse: $SLOW slowloris connections for up to 60s"
  slow=$("$LOAD" -url "$base/" -c 0 -slowloris "$SLOW" -d 60s)
  echo "$slow" >"$OUT/slowloris.txt"
fi

if want scrapers; then
  echo "abuse: $SCRAPERS scrapers for $SCRAPE_FOR"
  scr=$("$LOAD" -url "$base/metrics" -c "$SCRAPERS" -d "$SCRAPE_FOR" -pid "$PID" -gzip -warmup 0s)
  echo "$scr" >"$OUT/scrapers.txt"
fi

if want hups; then
  echo "abuse: $HUPS SIGHUPs"
  for _ in $(seq "$HUPS"); do kill -HUP "$PID"; done
  alive=no
  kill -0 "$PID" 2>/dev/null && alive=yes
  # The signals coalesce; wait for the reloads they caused to be counted.
  reloads=0
  for _ in $(seq 50); do
    reloads=$(curl -fsS "$base/metrics" | awk '$1 ~ /^gpuscope_config_reloads_total/ { s += $2 } END { print s + 0 }')
    [ "$reloads" != 0 ] && break
    sleep 0.1
  done
  ok_after=$(curl -fsS -o /dev/null -w '%{http_code}' "$base/metrics" || true)
fi

source scripts/abuse-cases.sh
source scripts/abuse-hostile.sh
source scripts/abuse-round4.sh

printf '\n%-34s %s\n' "check" "result"
printf '%-34s %s\n' "RSS at start" "${rss_base} MiB"
want idle && printf '%-34s %s\n' "idle: opened / answered / 503" "$(field "$idle" opened) / $(field "$idle" answered) / $(field "$idle" refused_503)"
want idle && printf '%-34s %s\n' "idle: closed by the server" "$(field "$idle" closed_by_server), last after $(field "$idle" last_close_s) s, $(field "$idle" still_open) still open at the end"
want idle && printf '%-34s %s\n' "idle: RSS held / at end / +${ABUSE_SETTLE:-150}s" "$(field "$idle" rss_held_mib) / ${rss_after_idle} / ${rss_settled} MiB"
want slowloris && printf '%-34s %s\n' "slowloris: closed by the server" "$(field "$slow" closed_by_server) of $(field "$slow" opened), last after $(field "$slow" last_close_s) s"
want scrapers && printf '%-34s %s\n' "scrapers: scrapes / errors" "$(field "$scr" scrapes) / $(field "$scr" errors) ($(field "$scr" concurrency) concurrent, $SCRAPE_FOR)"
want scrapers && printf '%-34s %s\n' "scrapers: p50 / p99 / max" "$(field "$scr" p50_ms) / $(field "$scr" p99_ms) / $(field "$scr" max_ms) ms"
want scrapers && printf '%-34s %s\n' "scrapers: RSS max" "$(field "$scr" rss_max_mib) MiB"
want hups && printf '%-34s %s\n' "SIGHUP storm: alive, /metrics" "$alive, $ok_after ($reloads reloads counted)"
print_new_cases
print_hostile_cases
print_round4_cases
