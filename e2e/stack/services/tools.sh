# shellcheck shell=bash
# Command-line tools the e2e tests run against the stack (no daemon):
# kcat, from Debian's packages, reads topics the way streaming teams do.

svc_tools_up() {
  command -v kcat >/dev/null 2>&1 || { log "installing kcat"; apt_install kcat; }
}

svc_tools_down() { :; }

svc_tools_status() {
  if command -v kcat >/dev/null 2>&1; then
    echo "tools: kcat $(kcat -V 2>/dev/null | sed -n 's/^Version \([^ ]*\).*/\1/p')"
  else
    echo "tools: kcat missing"
    return 1
  fi
}

svc_tools_env() { echo "HIVEDR_KCAT=$(command -v kcat)"; }
