# --to takes a format's name, an alias or an extension (the registry's spellings); a
# format that cannot be written, or no format at all, is a usage error.
for to in torch pt .pth pytorch st .safetensors pdparams paddle pdopt deepspeed_zero nope; do
  ckptconv convert -q --to "$to" "$TESTDATA/sample/tiny_llama.pt" "out_$to.weights"
  status=$?
  if [ -e "out_$to.weights" ]; then
    echo "$to: exit $status, $(ckptconv inspect --json "out_$to.weights" | python3 -c 'import json, sys; print(json.load(sys.stdin)["format"])')"
  else
    echo "$to: exit $status"
  fi
done
