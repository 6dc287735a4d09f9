#!/usr/bin/env bash
# Installs the Python consumer of the interoperability test (TestConsumer*):
# a venv with e2e/consumer/requirements.txt (confluent-kafka with its schema
# registry Avro deserializer), at $HIVEDR_PY_VENV (default
# ~/.cache/hivedr/py-consumer). Cached: the venv is rebuilt only when the
# requirements change. Prints the venv's python on stdout; the installed
# versions are in <venv>/versions.txt. Run by `make tools` (deploy/tools.sh)
# and by the test itself, which fails if this does.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
req="$here/e2e/consumer/requirements.txt"
venv="${HIVEDR_PY_VENV:-$HOME/.cache/hivedr/py-consumer}"
stamp="$(sha256sum "$req" | cut -d' ' -f1)"

if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements-sha256" 2>/dev/null)" = "$stamp" ]; then
  echo "$venv/bin/python"
  exit 0
fi
echo "pyconsumer: installing $req into $venv" >&2
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
py=python3
if ! "$py" -m venv "$venv" >&2 2>/dev/null; then
  # Debian's python3 needs python3-venv for ensurepip.
  rm -rf "$venv"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends python3-venv >&2
  py=/usr/bin/python3
  "$py" -m venv "$venv" >&2
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
"$venv/bin/pip" freeze --disable-pip-version-check > "$venv/versions.txt"
"$venv/bin/python" -c 'import confluent_kafka as ck; print("confluent-kafka", ck.version(), "librdkafka", ck.libversion()[0])' >> "$venv/versions.txt"
echo "$stamp" > "$venv/.requirements-sha256"
echo "$venv/bin/python"
