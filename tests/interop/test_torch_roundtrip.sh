#!/usr/bin/env bash
# torch.save fixtures -> ckptconv convert -> .pt, loaded back by the real torch.load:
# everything must be equal (tensors bit for bit with views and shared storages, Parameters,
# Namespace args, rng states, BytesIO extra states, optimizer dicts). Inputs that torch's own
# weights_only loader accepts must give outputs it accepts too. Converting our own output
# again, with one thread, must reproduce it byte for byte.
# shellcheck source=tests/interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_torch

convert_one() {
    local src="$1" name dir unknown
    name=$(basename "$src" .pt)
    dir="$WORK/rt-$name"
    mkdir -p "$dir/out" "$dir/again"
    local flags=()
    unknown=$(unknown_globals "$src")
    if [ -n "$unknown" ]; then
        expect_refusal "$dir/out" "$dir/refusal" "${unknown%% *}" -- "$CKPTCONV" convert "$src" "$dir/out/$name.pt"
        flags=(--keep-unknown-objects)
        echo "globals outside the known set: $unknown (default refused; converting with ${flags[*]})"
    fi
    ckpt convert -q "${flags[@]}" "$src" "$dir/out/$name.pt"
    ckpt convert -q --threads 1 "${flags[@]}" "$dir/out/$name.pt" "$dir/again/$name.pt"
    cmp "$dir/out/$name.pt" "$dir/again/$name.pt"
    queue torch "$name.pt: torch.load of the output equals the input" roundtrip "$src" "$dir/out/$name.pt"
}

# The weights_only checks only bite if torch accepts these inputs that way.
for f in basic views scalars dtypes big_names legacy; do
    queue torch "$f.pt loads with weights_only=True (baseline)" weights_only "$TESTDATA/torch/$f.pt"
done
for src in "$TESTDATA"/torch/*.pt "$TESTDATA"/sample/*.pt; do
    case "$(basename "$src")" in unsafe_*) continue ;; esac
    case_run "convert $(basename "$src") -> .pt (and again, deterministic)" convert_one "$src"
done
run_batch torch
finish
