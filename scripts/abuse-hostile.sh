# The cases of scripts/abuse.sh for a hostile kubelet, a hostile API
# server and /fields; sourced by it (it sets BIN, LOAD, PORT, OUT, want,
# field, start_gpuscope, stop_pid and STARTED). With ABUSE_OLD_BIN set,
# each case runs that binary first and then BIN, in the same run, and
# prints both. Each case is bounded in time, on loopback and unix sockets.

OLD_BIN=${ABUSE_OLD_BIN:-}
FIELDS_PAGES=${ABUSE_FIELDS_PAGES:-150}
KUBELET_FOR=${ABUSE_KUBELET_FOR:-30}
SILENT_FOR=${ABUSE_SILENT_FOR:-60}

hostile_bins() {
  [ -n "$OLD_BIN" ] && echo "old $OLD_BIN"
  echo "new $BIN"
}

# metric BASE NAME: the sum of the samples of a family on a gpuscope.
metric() {
  curl -fsS --max-time 10 "$1/metrics" 2>/dev/null | awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $2; f = 1 } END { if (f) print s; else print "absent" }'
}

fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }

# start_bin BIN PORT LOG ARGS...: start_gpuscope with another binary.
start_bin() {
  local b=$1
  shift
  BIN=$b start_gpuscope "$@"
}

declare -A hk
if want kubelet; then
  go build -o "$OUT/fakekubelet" ./internal/testkit/kubelettest/fakekubelet
  kport=$((PORT + 10))
  while read -r tag b; do
    for mode in containers device-ids silent ping-flood settings-flood; do
      dur=$KUBELET_FOR
      [ "$mode" = silent ] && dur=$SILENT_FOR
      echo "abuse: $tag gpuscope against a hostile kubelet: $mode, ${dur}s"
      sock="$OUT/kubelet-$tag-$mode.sock"
      "$OUT/fakekubelet" -socket "$sock" -hostile "$mode" >"$OUT/kubelet-$tag-$mode.log" 2>&1 &
      kp=$!
      STARTED+=("$kp")
      for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
      if ! start_bin "$b" "$kport" "$OUT/gpuscope-kubelet-$tag-$mode.log" --sim-gpus 2 --collectors "$OUT/counters.csv" \
        --kubernetes --kubernetes-pod-resources-socket "$sock" --kubernetes-refresh-interval 1s; then
        hk[$tag/$mode]="gpuscope did not start"
        stop_pid "$kp"
        continue
      fi
      gp=$STARTED_PID
      fd0=$(fds "$gp")
      g0=$(metric "http://127.0.0.1:$kport" go_goroutines)
      # A slow scraper samples the process's CPU and memory meanwhile.
      ld=$("$LOAD" -url "http://127.0.0.1:$kport/health" -c 1 -pause 1s -d "${dur}s" -pid "$gp" -sample 500ms -warmup 0s)
      base="http://127.0.0.1:$kport"
      hk[$tag/$mode]="cpu $(field "$ld" cpu_pct)% | RSS max $(field "$ld" rss_max_mib) MiB | fds $fd0 -> $(fds "$gp") | goroutines $g0 -> $(metric "$base" go_goroutines) | up $(metric "$base" gpuscope_kubernetes_up) | errors $(metric "$base" gpuscope_kubernetes_refresh_errors_total) | dropped $(metric "$base" gpuscope_kubernetes_connections_dropped_total)"
      stop_pid "$gp"
      stop_pid "$kp"
      rm -f "$sock"
    done
  done < <(hostile_bins)
fi

declare -A ha
if want apiserver; then
  # The binary reads the API server only from inside a pod: the service
  # account's files at their fixed paths. It runs in a mount namespace of
  # its own (unshare, as root) with a tmpfs over /run holding them.
  if [ "$(id -u)" != 0 ] || ! unshare -m --propagation private true 2>/dev/null; then
    ha[skipped]="needs root and unshare -m"
  else
    go build -o "$OUT/fakekubelet" ./internal/testkit/kubelettest/fakekubelet
    go build -o "$OUT/fakeapiserver" ./internal/testkit/apiservertest/fakeapiserver
    aport=$((PORT + 11)) sport=$((PORT + 12)) rport=$((PORT + 13))
    echo '[{"name":"train-0","namespace":"ml","containers":[{"name":"main","devices":[{"resource":"nvidia.com/gpu","ids":["nvidia0"]}]}]}]' >"$OUT/pods.json"
    while read -r tag b; do
      for mode in huge-labels list-410 redirect; do
        echo "abuse: $tag gpuscope against a hostile API server: $mode (at most 40s)"
        sa="$OUT/sa-$tag-$mode"
        mkdir -p "$sa"
        args=(-addr "127.0.0.1:$sport" -dir "$sa" -node node-1)
        case $mode in
          huge-labels) args+=(-huge-label 1048576) ;;
          list-410) args+=(-hostile list-410 -after 3s) ;;
          redirect) args+=(-hostile redirect -redirect-addr "127.0.0.1:$rport") ;;
        esac
        "$OUT/fakeapiserver" "${args[@]}" >"$OUT/apiserver-$tag-$mode.txt" 2>"$OUT/apiserver-$tag-$mode.log" &
        ap=$!
        STARTED+=("$ap")
        sock="$OUT/kubelet-$tag-$mode.sock"
        "$OUT/fakekubelet" -socket "$sock" -pods "$OUT/pods.json" >"$OUT/kubelet-pods-$tag-$mode.log" 2>&1 &
        kp=$!
        STARTED+=("$kp")
        for _ in $(seq 50); do [ -S "$sock" ] && [ -s "$sa/token" ] && break; sleep 0.1; done
        unshare -m --propagation private sh -c '
          mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount &&
          cp "$1/ca.crt" "$1/token" /run/secrets/kubernetes.io/serviceaccount/ && shift &&
          exec env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$1" "$2" --source sim --sim-gpus 2 \
            --address "127.0.0.1:$3" --collectors "$4" --kubernetes --kubernetes-pod-resources-socket "$5" \
            --kubernetes-refresh-interval 1s --kubernetes-pod-labels "team|huge-.*" --hostname node-1' \
          sh "$sa" "$sport" "$b" "$aport" "$OUT/counters.csv" "$sock" >"$OUT/gpuscope-apiserver-$tag-$mode.log" 2>&1 &
        gp=$!
        STARTED+=("$gp")
        base="http://127.0.0.1:$aport"
        for _ in $(seq 300); do curl -fsS -o /dev/null "$base/ready" 2>/dev/null && break; sleep 0.1; done
        case $mode in
          huge-labels)
            # Wait for the pod's labels to reach GPU 0's series.
            for _ in $(seq 100); do [ "$(metric "$base" gpuscope_kubernetes_pod_labels_pods)" = 1 ] && break; sleep 0.2; done
            sleep 2
            scr=$(curl -sS -o /dev/null --max-time 30 -w '%{size_download} %{time_total}' "$base/metrics" || true)
            ha[$tag/$mode]="/metrics $(awk '{ printf "%.2f MB in %.2f s", $1 / 1e6, $2 }' <<<"$scr") | RSS $(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$gp/status") MiB | dropped $(metric "$base" gpuscope_kubernetes_pod_labels_dropped_total)"
            ;;
          list-410)
            sleep 20
            ha[$tag/$mode]="up $(metric "$base" gpuscope_kubernetes_pod_labels_up) | errors $(metric "$base" gpuscope_kubernetes_pod_labels_api_errors_total)"
            ;;
          redirect)
            sleep 10
            ha[$tag/$mode]="up $(metric "$base" gpuscope_kubernetes_pod_labels_up) | errors $(metric "$base" gpuscope_kubernetes_pod_labels_api_errors_total)"
            ;;
        esac
        stop_pid "$gp"
        stop_pid "$kp"
        stop_pid "$ap"
        ha[$tag/$mode]+=" | server: $(cat "$OUT/apiserver-$tag-$mode.txt" 2>/dev/null)"
        rm -f "$sock"
      done
    done < <(hostile_bins)
  fi
fi

declare -A hf
if want fields; then
  fport=$((PORT + 14))
  while read -r tag b; do
    echo "abuse: $tag gpuscope: $FIELDS_PAGES /fields pages at once, every field ticked, while /metrics is scraped, then 2,000 bad /fields.csv (at most 2 min)"
    if ! start_bin "$b" "$fport" "$OUT/gpuscope-fields-$tag.log" --sim-gpus 8 --collectors "$OUT/counters.csv"; then
      hf[$tag]="gpuscope did not start"
      continue
    fi
    gp=$STARTED_PID
    base="http://127.0.0.1:$fport"
    sleep 3
    # Every field the page lists, and every statistic box it offers.
    page=$(curl -fsS --max-time 60 "$base/fields" || true)
    q=$(grep -o 'name="field" value="[A-Za-z0-9_]*"' <<<"$page" | sed 's/.*value="\(.*\)"/field=\1/' | paste -sd'&' -)
    q+="&$(grep -o 'name="stats\.[A-Za-z0-9_]*" value="\(max\|p99\)"' <<<"$page" | sed 's/name="\(.*\)" value="\(.*\)"/\1=\2/' | paste -sd'&' -)"
    rss0=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$gp/status")
    "$LOAD" -url "$base/metrics" -c 1 -pause 200ms -d 75s -pid "$gp" -sample 200ms -warmup 0s >"$OUT/fields-scrapes-$tag.txt" &
    sp=$!
    STARTED+=("$sp")
    sleep 2
    seq "$FIELDS_PAGES" | xargs -P "$FIELDS_PAGES" -I{} curl -sS -o /dev/null --max-time 60 -w '%{http_code} %{time_total}\n' "$base/fields?$q" >"$OUT/fields-codes-$tag.txt" 2>/dev/null || true
    wait "$sp" || true
    scr=$(cat "$OUT/fields-scrapes-$tag.txt")
    codes=$(awk '{ n[$1]++ } END { for (c in n) printf "%s:%d ", c, n[c] }' "$OUT/fields-codes-$tag.txt")
    ptime=$(sort -n -k2 "$OUT/fields-codes-$tag.txt" | awk '{ t[NR] = $2 } END { if (NR) printf "%.2f / %.2f s", t[int((NR + 1) / 2)], t[NR] }')
    hf[$tag]="pages ${codes}| page p50 / max $ptime | scrapes p50 / p99 / max $(field "$scr" p50_ms) / $(field "$scr" p99_ms) / $(field "$scr" max_ms) ms | RSS $rss0 -> max $(field "$scr" rss_max_mib) MiB | query $(wc -c <<<"$q") bytes"
    # A user's mistake, repeated: window statistics of counter fields.
    log="$OUT/gpuscope-fields-$tag.log"
    log0=$(stat -c %s "$log")
    csvq="field=DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION,DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
    csvq+="&stats.DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION=max&stats.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL=max&stats.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL=max"
    start=$(date +%s.%N)
    seq 2000 | xargs -P 50 -I{} curl -sS -o /dev/null --max-time 30 -w '%{http_code}\n' "$base/fields.csv?$csvq" >"$OUT/fields-csv-$tag.txt" 2>/dev/null || true
    end=$(date +%s.%N)
    csvcodes=$(awk '{ n[$1]++ } END { for (c in n) printf "%s:%d ", c, n[c] }' "$OUT/fields-csv-$tag.txt")
    hf[$tag/csv]="2,000 counter-statistics CSVs: ${csvcodes}in $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s, log +$(($(stat -c %s "$log") - log0)) bytes"
    stop_pid "$gp"
  done < <(hostile_bins)
fi

print_hostile_cases() {
  local k
  if want kubelet; then
    for k in $(printf '%s\n' "${!hk[@]}" | sort); do printf '%-34s %s\n' "kubelet $k" "${hk[$k]}"; done
  fi
  if want apiserver; then
    for k in $(printf '%s\n' "${!ha[@]}" | sort); do printf '%-34s %s\n' "apiserver $k" "${ha[$k]}"; done
  fi
  if want fields; then
    for k in $(printf '%s\n' "${!hf[@]}" | sort); do printf '%-34s %s\n' "fields $k" "${hf[$k]}"; done
  fi
  return 0
}
