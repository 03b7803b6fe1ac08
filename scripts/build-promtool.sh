#!/usr/bin/env bash
# Prints the path of the promtool 3 that runs the rule tests with
# native-histogram input series (deploy/prometheus/tests/native-histograms),
# which Debian's promtool 2.42 cannot read. scripts/build-prometheus.sh builds
# it with the Prometheus 3 server in one cached step.
#
#   scripts/build-promtool.sh              # build or reuse
#   PROMTOOL_BIN=/path/to/promtool ...     # use a binary built elsewhere
exec "$(dirname "$0")/build-prometheus.sh" promtool
