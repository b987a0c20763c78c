#!/usr/bin/env bash
# Copies KernelBench problems by number into an ignored folder that a device call carries (KernelBench never
# travels with the repo, and a fresh checkout has none of an earlier session's copies).
# Usage (here): bash bench/scripts/kb_subset.sh DEST LEVEL N [N ...]
#   e.g. bash bench/scripts/kb_subset.sh .kb/s25d level2 78 79 83 85 89 91 92 93 96 100
#   then on the device: bash bench/scripts/suite_h100.sh .kb/s25d default 3 (carry .kb).
# KERNELBENCH overrides ../shared/kernelbench.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [ $# -lt 3 ]; then
  echo "usage: $0 DEST LEVEL N [N ...]" >&2
  exit 2
fi
dest=$1 level=$2
shift 2
src=${KERNELBENCH:-../shared/kernelbench}/$level
[ -d "$src" ] || { echo "error: no KernelBench folder $src" >&2; exit 1; }
case "$dest" in
  .kb/*) grep -q '^/.kb/' .git/info/exclude 2>/dev/null || echo /.kb/ >> .git/info/exclude ;;
  *) echo "warning: $dest is not under .kb/ (ignored by git here); do not commit KernelBench's files" >&2 ;;
esac
mkdir -p "$dest/$level"
for n in "$@"; do
  matches=("$src/${n}_"*.py)
  [ -e "${matches[0]}" ] || { echo "error: no problem $n in $src" >&2; exit 1; }
  cp "${matches[@]}" "$dest/$level/"
done
ls "$dest/$level"
