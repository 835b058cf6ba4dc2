#!/usr/bin/env bash
# Checks and unit-tests the alerting rules of deploy/monitoring with promtool (built once
# per machine by hack/build-promtool.sh): `promtool check rules` on the PrometheusRule's
# groups, then `promtool test rules` on deploy/monitoring/tests/*.yaml. Run by make test-unit.
#
# promtool reads plain rule files, not the Prometheus Operator's PrometheusRule: the
# rule file is the PrometheusRule's spec (its `groups:`), written beside copies of the
# tests, which name it rules.yaml.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/hack/build-promtool.sh"
promtool="$root/_output/bin/promtool"
work="$root/_output/monitoring-tests"
rm -rf "$work" && mkdir -p "$work"

# spec: is the last top-level key of the PrometheusRule; its body, unindented, is the
# rule file.
sed -n '/^spec:$/,$p' "$root/deploy/monitoring/prometheusrule.yaml" | tail -n +2 | sed 's/^  //' >"$work/rules.yaml"
grep -q '^groups:$' "$work/rules.yaml" || { echo "test-rules: no spec.groups in deploy/monitoring/prometheusrule.yaml" >&2; exit 1; }
cp "$root"/deploy/monitoring/tests/*.yaml "$work/"
mapfile -t tests < <(cd "$root/deploy/monitoring/tests" && printf '%s\n' *.yaml)

"$promtool" check rules "$work/rules.yaml"
(cd "$work" && "$promtool" test rules "${tests[@]}")
