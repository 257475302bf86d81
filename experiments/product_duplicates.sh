#!/bin/bash
# `duplicates` over the product code alone (the package folders, not tests, benchmarks or
# experiments) at a commit: bash experiments/product_duplicates.sh [REV]   (default HEAD)
# The folders are copied out with git archive so that nothing else of the checkout is read.
set -euo pipefail
rev=${1:-HEAD}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
folders=()  # the package folders that exist at REV (serve/ came later than the others)
for f in core contracts model artifact export codegen runtime verify certify control serve; do
  if git cat-file -e "$rev:$f" 2>/dev/null; then folders+=("$f"); fi
done
git archive "$rev" "${folders[@]}" | tar -x -C "$d"
duplicates --repo "$d" --most 200 --seconds 120
