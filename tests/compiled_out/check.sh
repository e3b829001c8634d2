#!/bin/bash
# Compares the machine code of checksum() in the instrumented (CHRONICLE_DISABLE) and plain
# objects, and checks that the instrumented one references no chronicle symbol.
set -euo pipefail
instrumented=$1 plain=$2
if nm -C "$instrumented" | grep -i chronicle; then
  echo "FAIL: the compiled-out object references chronicle symbols"; exit 1
fi
body() { objdump -d --no-show-raw-insn "$1" | awk '/<_Z8checksumPKii>:/{on=1;next} on&&/^$/{exit} on{sub(/^ *[0-9a-f]+:\t/,""); print}'; }
diff <(body "$instrumented") <(body "$plain") || { echo "FAIL: code differs"; exit 1; }
[ -n "$(body "$plain")" ] || { echo "FAIL: checksum() not found"; exit 1; }
echo "identical code: $(body "$plain" | wc -l) instructions, no chronicle symbol"
