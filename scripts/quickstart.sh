#!/usr/bin/env bash
# Fresh machine -> dependencies, build, and the main job on the bundled sample checkpoint:
# inspect it, convert it to safetensors, inspect the result, reshard it to TP 2 and verify
# the resharded checkpoint against it, layer by layer.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j"$(nproc)"

bin=build/ckptconv
sample=testdata/sample/tiny_llama.pt
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== ckptconv inspect $sample"
"$bin" inspect "$sample"
echo
echo "== ckptconv convert $sample tiny_llama.safetensors"
"$bin" convert "$sample" "$out/tiny_llama.safetensors"
echo
echo "== ckptconv inspect tiny_llama.safetensors"
"$bin" inspect "$out/tiny_llama.safetensors"
echo
echo "== ckptconv reshard $sample tiny_llama_tp2 --tp 2"
"$bin" reshard "$sample" "$out/tiny_llama_tp2" --tp 2
echo
echo "== ckptconv verify $sample tiny_llama_tp2 (both run layer by layer; TP ranks run as ranks)"
"$bin" verify "$sample" "$out/tiny_llama_tp2" --device cpu
