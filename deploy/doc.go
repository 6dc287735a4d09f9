// Package deploy holds what runs hivedr outside this repository, and the
// tests that keep it true to the code: the image builder (deploy/image),
// the Helm chart (deploy/helm/hivedr), the Prometheus alert rules
// (deploy/prometheus) and the Grafana dashboard (deploy/grafana). The
// compose file of the whole topology is in compose/, checked here too.
//
// Its tests run helm and promtool (make tools installs them) and read the
// local stack's scripts (e2e/stack) to check the compose file against them.
package deploy
