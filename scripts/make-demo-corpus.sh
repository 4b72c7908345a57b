#!/usr/bin/env bash
# Writes the demo corpus: the King James Bible (public domain; shipped by Debian's bible-kjv-text package and
# read with its `bible` program, both installed by scripts/install-deps.sh) as plain text, one chapter per
# paragraph-separated document (1,189 documents, ~4.3 MB). Verse references ("Ge1:1") are dropped.
# Usage: scripts/make-demo-corpus.sh OUT.txt
set -euo pipefail
out=${1:?usage: $0 OUT.txt}
if ! command -v bible >/dev/null; then
  echo "make-demo-corpus: the 'bible' program is missing; run scripts/install-deps.sh (Debian package bible-kjv)" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
# bible prints "Ge1:1 In the beginning ..."; a new chapter starts where the book or chapter changes.
bible -f "Genesis 1:1-Revelation 22:21" | awk '
  match($0, /^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ /) {
    ref = substr($0, 1, RLENGTH - 1)
    text = substr($0, RLENGTH + 1)
    split(ref, parts, ":")
    if (parts[1] != chapter && chapter != "") printf "\n\n"
    else if (chapter != "") printf " "
    chapter = parts[1]
    printf "%s", text
    next
  }
  { printf " %s", $0 }
  END { printf "\n" }' > "$out.partial"
mv "$out.partial" "$out"
echo "make-demo-corpus: wrote $out ($(wc -c < "$out") bytes, $(grep -c . "$out") chapters)"
