#!/usr/bin/env bash
# Job (vanilla universe): unpack a pixi-pack self-extracting environment, then run accept.sh.
# Usage: accept-vanilla.sh PACK [LEVEL]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

pack=${1:?usage: accept-vanilla.sh PACK [LEVEL]}
level=${2:-standard}
if [[ -f "$pack" ]]; then
  # pixi-pack's executable unpacks into ./env and writes ./activate.sh; no pixi needed here.
  bash "./$(basename "$pack")" || echo "job: unpacking $pack failed" >&2
else
  echo "job: environment pack $pack was not transferred" >&2
fi
# bash, not exec of the file: transferred inputs need not keep their executable bit.
GPUACCEPT_ACTIVATE="$PWD/activate.sh" exec bash "$here/accept.sh" "$level"
