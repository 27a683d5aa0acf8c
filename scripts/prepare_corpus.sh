#!/usr/bin/env bash
# scripts/prepare_corpus.sh: the lab's default corpus, the King James Bible from Debian's
# bible-kjv-text, decoded by the `bible` program of bible-kjv into data/kjv.txt: one verse per
# line, verse numbers stripped (31,102 lines, 4,137,850 bytes, 63 distinct characters).
# The line width is pinned (-l1000, wider than any verse) so no verse is wrapped.
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/kjv.txt
if [ -s "$out" ]; then exit 0; fi
if ! command -v bible >/dev/null || [ ! -f /usr/lib/bible.data ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq bible-kjv bible-kjv-text >/dev/null
fi
mkdir -p data
bible -l1000 -p /usr/lib "gen1:1-rev22:21" | sed -n -E 's/^ +[0-9]+ //p' > "$out.tmp"
lines=$(wc -l < "$out.tmp")
if [ "$lines" -ne 31102 ]; then
  echo "prepare_corpus: expected 31102 verses, got $lines" >&2
  rm -f "$out.tmp"
  exit 1
fi
mv "$out.tmp" "$out"
echo "prepared $out ($lines verses, $(wc -c < "$out") bytes)"
