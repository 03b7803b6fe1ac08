# The fourth round's inputs for scripts/abuse.sh (case round4); sourced by
# it (it sets BIN, PORT, OUT, want, start_gpuscope, stop_pid and STARTED).
# With ABUSE_OLD_BIN set, each input runs against that binary first and
# then BIN, and both results are printed. Every process is ended by PID;
# each input is bounded in time. The report and profiling clients'
# inputs (items 8 to 14) need a hostile Prometheus and are covered by
# internal/client/report and cmd/gpuscope tests (docs/reliability.md).

declare -A r4
if want round4; then
  r4port=$((PORT + 40))
  r4dir="$OUT/round4"
  rm -rf "$r4dir" && mkdir -p "$r4dir/jobs"
  printf 'root:$6$salt$secretHASH4:19000:0:99999:7:::\n' >"$r4dir/shadow"
  chmod 600 "$r4dir/shadow"
  ln -sf "$r4dir/shadow" "$r4dir/jobs/0"
  printf 'jobA\njobA\n' >"$r4dir/jobs/1"
  printf 'job\033]0;owned\007\n' >"$r4dir/jobs/2"
  # A self-signed certificate for the TLS input.
  openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -days 1 \
    -keyout "$r4dir/key.pem" -out "$r4dir/cert.pem" >/dev/null 2>&1
  printf 'tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n' >"$r4dir/web.yml"
  for tb in $( (hostile_bins 2>/dev/null || echo "new $BIN") | tr ' ' ':'); do
    tag=${tb%%:*}
    b=${tb#*:}
    # Item 16: --sim-gpus -1 and 0.
    for n in -1 0; do
      set +e
      timeout 5 "$b" --source sim --sim-gpus "$n" --address "127.0.0.1:$r4port" >"$r4dir/simgpus-$tag.log" 2>&1
      rc=$?
      set -e
      res="exit $rc"
      [ "$rc" = 124 ] && res="ran (still serving after 5 s)"
      grep -q '^panic:' "$r4dir/simgpus-$tag.log" && res="panic, exit $rc"
      r4["$tag sim-gpus $n"]=$res
    done
    # Items 2 to 4: the HPC job mapping directory.
    echo "abuse: $tag gpuscope with a hostile HPC job directory"
    if BIN=$b start_gpuscope "$r4port" "$r4dir/hpc-$tag.log" --sim-gpus 4 --hpc-job-mapping-dir "$r4dir/jobs"; then
      sleep 6
      curl -fsS --max-time 10 "http://127.0.0.1:$r4port/metrics" >"$r4dir/hpc-$tag.prom" || true
      stop_pid "$STARTED_PID"
      r4["$tag hpc: secret lines / dup / ESC"]="$(grep -c secretHASH4 "$r4dir/hpc-$tag.prom" || true) / $(grep -v '^#' "$r4dir/hpc-$tag.prom" | sort | uniq -d | wc -l) / $(grep -c $'\033' "$r4dir/hpc-$tag.prom" || true)"
    else
      r4["$tag hpc: secret lines / dup / ESC"]="did not start"
    fi
    # Item 17: a form POST to the manual clock.
    if BIN=$b start_gpuscope "$r4port" "$r4dir/clock-$tag.log" --sim-gpus 2 --sim-clock manual; then
      code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 30 -X POST -H 'Content-Type: application/x-www-form-urlencoded' \
        -d by=1h "http://127.0.0.1:$r4port/api/v1/sim/advance?by=1h" || true)
      stop_pid "$STARTED_PID"
      r4["$tag sim advance, form POST"]=$code
    fi
    # Item 18: a client offering only CBC suites with SHA-1.
    "$b" --source sim --sim-gpus 1 --address "127.0.0.1:$r4port" --web-config-file "$r4dir/web.yml" >"$r4dir/tls-$tag.log" 2>&1 &
    tpid=$!
    STARTED+=("$tpid")
    for _ in $(seq 100); do
      curl -ksS -o /dev/null "https://127.0.0.1:$r4port/ready" 2>/dev/null && break
      sleep 0.1
    done
    if openssl s_client -connect "127.0.0.1:$r4port" -tls1_2 -cipher 'ECDHE-RSA-AES128-SHA:AES256-SHA' </dev/null >"$r4dir/tls-$tag.txt" 2>&1; then
      r4["$tag TLS CBC-SHA1 only client"]="accepted"
    else
      r4["$tag TLS CBC-SHA1 only client"]="refused"
    fi
    stop_pid "$tpid"
  done
fi

print_round4_cases() {
  local k
  if want round4; then
    for k in $(printf '%s\n' "${!r4[@]}" | sort | tr ' ' '~'); do printf '%-34s %s\n' "round4 ${k//\~/ }" "${r4[${k//\~/ }]}"; done
  fi
  return 0
}
