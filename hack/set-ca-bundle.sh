#!/usr/bin/env bash
# hack/set-ca-bundle.sh [NAMESPACE]: sets the CA bundle of every webhook of litepool's two
# configurations (litepool-webhook) to the CA of Secret litepool-ca in NAMESPACE
# (default litepool-system), and nothing else: the last step of replacing the CA with
# cert-manager (docs/webhook.md, "Rotating the certificates"). cert-manager's CA injector
# adds CAs to a bundle and never drops one before it expires, so dropping the old CA is
# an administrator's write. Run it as an administrator (the guard of the webhook
# configurations refuses litepool's identities and the injector a change of annotations,
# and RBAC gives them no such patch), and only once every replica serves a certificate of
# the new CA. test/e2e/certmanager (TestCAReplacementWithoutDowntime) runs it.
set -euo pipefail
ns=${1:-litepool-system}
ca=$(kubectl -n "$ns" get secret litepool-ca -o jsonpath='{.data.ca\.crt}')
if [ -z "$ca" ]; then
  echo "set-ca-bundle: Secret $ns/litepool-ca has no ca.crt; nothing changed" >&2
  exit 1
fi
for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
  ops=""
  i=0
  # Each entry's name is tested before its bundle is set: a configuration whose entries
  # changed since they were read is left as it is (the patch fails whole).
  for name in $(kubectl get "$kind" litepool-webhook -o jsonpath='{range .webhooks[*]}{.name}{" "}{end}'); do
    ops+="{\"op\":\"test\",\"path\":\"/webhooks/$i/name\",\"value\":\"$name\"},"
    ops+="{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/caBundle\",\"value\":\"$ca\"},"
    i=$((i + 1))
  done
  kubectl patch "$kind" litepool-webhook --type=json -p "[${ops%,}]"
done
