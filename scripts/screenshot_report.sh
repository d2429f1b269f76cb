#!/usr/bin/env bash
# The night's page as a person sees it: Debian's Chromium, headless, renders report.html
# (one file, pictures inline) to a PNG, so a look at that PNG is a look at the page.
#   scripts/screenshot_report.sh state/runs/<night>/report.html [out.png]
# Needs `chromium` (apt-get install chromium); nothing is fetched: the page has no links
# to load, only data: images.
set -euo pipefail
page=$(realpath "${1:?usage: screenshot_report.sh REPORT_HTML [OUT_PNG]}")
out=$(realpath -m "${2:-${page%.html}.png}")
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "screenshot_report: no chromium here (apt-get install chromium)" >&2
    exit 2
fi
# --no-sandbox: containers without user namespaces; a fresh profile so nothing of a
# person's browser state is read or written
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$profile" --window-size=1100,6000 \
    --screenshot="$out" "file://$page" >/dev/null 2>&1
test -s "$out"
echo "$out"
