# Every file real DeepSpeed wrote (ZeRO 1/2/3 model and optimizer states, zero_to_fp32
# outputs; torch 2.x zip layout) opens, and everything its pickles reference is known.
find "$TESTDATA/zero" \( -name '*.pt' -o -name '*.bin' \) | sort | while read -r f; do
  ckptconv inspect --json "$f" > out.json || { echo "cannot open $f"; continue; }
  python3 - "$f" <<'PY'
import json, sys
d = json.load(open("out.json"))
unknown = [g["module"] + "." + g["name"] for g in d["globals"] if not g["known"]]
if unknown:
    print(sys.argv[1], "references unknown globals:", unknown)
PY
done
echo "checked $(find "$TESTDATA/zero" \( -name '*.pt' -o -name '*.bin' \) | wc -l) files"
