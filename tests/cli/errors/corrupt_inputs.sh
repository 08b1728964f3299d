# Every damaged input: a one-line error naming the file, a non-zero exit, no output left.
# CRC damage is only looked for with --verify-crc; an unsafe pickle is listed by inspect
# and refused by convert.
for f in "$TESTDATA"/bad/*; do
  case "$f" in *.json) continue ;; esac
  name=$(basename "$f")
  flags=()
  case "$name" in *crc*) flags=(--verify-crc) ;; esac
  if ckptconv inspect "${flags[@]}" "$f" > /dev/null 2> err.txt; then
    echo "$name: inspect accepted it"
  else
    [ "$(wc -l < err.txt)" -eq 1 ] || echo "$name: inspect printed $(wc -l < err.txt) lines"
    grep -q "$name" err.txt || echo "$name: inspect error does not name the file: $(cat err.txt)"
  fi
  if ckptconv convert -q "${flags[@]}" "$f" out.safetensors 2> err.txt; then
    echo "$name: convert accepted it"
  else
    [ "$(wc -l < err.txt)" -eq 1 ] || echo "$name: convert printed $(wc -l < err.txt) lines"
    grep -q "$name" err.txt || echo "$name: convert error does not name the file: $(cat err.txt)"
    echo "$name: convert refused"
  fi
  rm -f out.safetensors
done
ls -A
