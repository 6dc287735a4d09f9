#!/usr/bin/env bash
# Installs the tools the deployment checks in `make test` run (make tools):
#   helm     helm.sh/helm/v3 $HELM_VERSION, built with `go install` into $(go env GOBIN), or
#            $(go env GOPATH)/bin when GOBIN is unset (where deploy/tools_test.go looks)
#   promtool and prometheus, from Debian's `prometheus` package (2.42 on Debian 12);
#            TestAlert* and TestDashboard* run them. The package's service is not started.
#   gcc      a C compiler for cgo, which the race detector of `make unit` needs
#   py-consumer  a Python venv with confluent-kafka[avro,schemaregistry] (deploy/pyconsumer.sh),
#            for TestConsumer*
# Idempotent: a tool already there is left alone.
set -euo pipefail
HELM_VERSION=${HELM_VERSION:-v3.21.4}

gobin="$(go env GOBIN)"
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
if ! [ -x "$gobin/helm" ] && ! command -v helm >/dev/null 2>&1; then
  echo "tools: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (a few minutes on 2 cores)" >&2
  go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  echo "tools: apt-get install prometheus" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  # policy-rc.d keeps the package's own service from starting
  apt-get install -y -qq --no-install-recommends prometheus >&2
fi
# A C compiler: `make unit` runs the race detector, which needs cgo.
if ! command -v "$(go env CC)" >/dev/null 2>&1; then
  echo "tools: apt-get install gcc libc6-dev (cgo, for go test -race)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends gcc libc6-dev >&2
fi
# The Python consumer of TestConsumer* (confluent-kafka in a cached venv).
bash "$(dirname "$0")/pyconsumer.sh" >/dev/null
