#!/bin/sh
# Checks that two builds of `chronicle merge` write the same bytes and say the same things:
# the merged directories (diff -r), the stdout and warnings (paths made alike), and `chronicle
# dump` of the outputs. Each set of inputs is merged as given, then again with damaged copies
# (bytes overwritten at a few places in each input's largest stream file), so that the damage
# reports are compared too.
#   bench/merge_same_output.sh OLD_CHRONICLE NEW_CHRONICLE SCRATCH "A B" "C D" ...
set -eu
old=$1 new=$2 scratch=$3
shift 3
mkdir -p "$scratch"
failed=0

# Overwrites 4 bytes at 3/7, 1/2 and 8/9 of the file with a pattern no event header starts with.
damage() {
  file=$1
  size=$(stat -c %s "$file")
  for at in $((size * 3 / 7)) $((size / 2)) $((size * 8 / 9)); do
    printf '\377\377\377\377' | dd of="$file" bs=1 seek="$at" conv=notrunc status=none
  done
}

compare() {
  label=$1
  shift
  for build in old new; do
    rm -rf "$scratch/out-$build"
    eval "binary=\$$build"
    "$binary" merge "$@" -o "$scratch/out-$build" >"$scratch/stdout-$build" 2>"$scratch/stderr-$build" || true
    sed -i "s|$scratch/out-$build|OUT|g" "$scratch/stdout-$build" "$scratch/stderr-$build"
    "$binary" dump "$scratch/out-$build" 2>&1 | sed "s|$scratch/out-$build|OUT|g" | md5sum >"$scratch/dump-$build"
  done
  if diff -r "$scratch/out-old" "$scratch/out-new" >/dev/null && cmp -s "$scratch/stdout-old" "$scratch/stdout-new" &&
    cmp -s "$scratch/stderr-old" "$scratch/stderr-new" && cmp -s "$scratch/dump-old" "$scratch/dump-new"; then
    echo "same: $label ($(wc -l <"$scratch/stderr-new") warning lines)"
  else
    echo "DIFFERENT: $label"
    failed=1
  fi
  rm -rf "$scratch/out-old" "$scratch/out-new"
}

for inputs in "$@"; do
  # shellcheck disable=SC2086
  compare "$inputs" $inputs
  damaged=""
  for input in $inputs; do
    copy="$scratch/damaged-$(basename "$input")"
    rm -rf "$copy"
    cp -r "$input" "$copy"
    damage "$(ls -S "$copy"/thread-* | head -1)"
    damaged="$damaged $copy"
  done
  # shellcheck disable=SC2086
  compare "damaged copies of $inputs" $damaged
  # shellcheck disable=SC2086
  rm -rf $damaged
done
exit $failed
