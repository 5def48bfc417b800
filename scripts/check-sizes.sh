#!/usr/bin/env bash
# Reports library and CLI source files over the size limits of the style
# guide: a .c file over 900 lines, a function over 120 lines (a function is
# taken to run from a line that opens with '{' in column 0 to the next line
# that is exactly '}'). Exits 1 when any is found, so CI can hold the line.
# Usage: scripts/check-sizes.sh [DIR...]   (default: src)
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=("$@")
[ ${#dirs[@]} -eq 0 ] && dirs=(src)
status=0
while IFS= read -r file; do
  lines=$(wc -l <"$file")
  if [ "$lines" -gt 900 ]; then
    echo "$file: $lines lines (limit 900)"
    status=1
  fi
  if ! awk -v file="$file" '
    /^\{/ { start = NR; name = previous }
    /^\}$/ && start { if (NR - start > 120) { printf "%s:%d: function of %d lines (limit 120): %s\n", file, start, NR - start, name; bad = 1 } start = 0 }
    { if ($0 !~ /^[ \t]*$/) previous = $0 }
    END { exit bad }' "$file"; then
    status=1
  fi
done < <(find "${dirs[@]}" -name '*.c' | sort)
exit $status
