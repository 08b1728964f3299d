# Usage errors exit 2 and name the problem.
for args in "" "only_one" "--to onnx in out" "--compress zstd in out" "--max-shard-size 5XB in out" "--memory 1K in out" "--bogus in out"; do
  # shellcheck disable=SC2086
  ckptconv zero-to-fp32 $args
  echo "exit $?"
done
