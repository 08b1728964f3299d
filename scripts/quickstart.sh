#!/usr/bin/env bash
# Fresh machine -> dependencies, build, and the main job on the bundled sample checkpoint:
# inspect it, convert it to safetensors, inspect the result.
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
