#!/usr/bin/env bash
# Render an HTML report in headless Chromium to a PNG, to look at what `gpuaccept report --html`
# wrote (charts included). Needs Debian's chromium: apt-get install chromium.
# Usage: scripts/screenshot-html.sh REPORT.html OUT.png [WIDTHxHEIGHT]
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
page=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-1280x2400}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z "$browser" ]]; then
  echo "$0: no chromium on PATH (apt-get install chromium)" >&2
  exit 3
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# The background-networking flags keep Chromium from dialling out on a closed network.
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size="${size/x/,}" \
  --screenshot="$out" "file://$page" 2>/dev/null
test -s "$out"
echo "$out"
