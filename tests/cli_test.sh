#!/usr/bin/env bash
# tests/cli_test.sh POSENC: the CLI end to end: every encoding in every format, --help on every
# subcommand, and bad arguments giving one line on stderr and exit status 2.
set -u
posenc="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() {  # check NAME EXPECTED_STATUS COMMAND...
  local name=$1 expected=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local status=$?
  if [ "$status" -ne "$expected" ]; then
    echo "FAIL $name: exit $status, expected $expected"; cat "$tmp/err"; failures=$((failures + 1)); return 1
  fi
  if [ "$expected" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
    echo "FAIL $name: expected a one-line error, got:"; cat "$tmp/err"; failures=$((failures + 1)); return 1
  fi
  return 0
}
expect_in() {  # expect_in NAME FILE TEXT
  if ! grep -qF -- "$3" "$2"; then
    echo "FAIL $1: '$3' not in output"; cat "$2"; failures=$((failures + 1))
  fi
}

check help 0 "$posenc" --help
check list_help 0 "$posenc" list --help
check encode_help 0 "$posenc" encode --help
expect_in encode_help "$tmp/out" "--positions"
check list 0 "$posenc" list
cp "$tmp/out" "$tmp/list"
# transformer_xl also by its alias, xl.
for name in none sinusoidal learned binary relative t5 alibi shaw transformer_xl xl rope; do
  expect_in list "$tmp/list" "$name"
  for format in table csv json; do
    check "encode_${name}_${format}" 0 "$posenc" encode "$name" -p 0:5 --format "$format"
  done
  check "encode_${name}_npy" 0 "$posenc" encode "$name" -p 0:5 --format npy -o "$tmp/$name.npy"
  # A valid .npy: magic, version 1.0, header dict with '<f4', 64-byte aligned data start.
  python3 - "$tmp/$name.npy" <<'PY' || { echo "FAIL npy $name"; failures=$((failures + 1)); }
import struct, sys
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x93NUMPY\x01\x00', b[:8]
n = struct.unpack('<H', b[8:10])[0]
header = b[10:10 + n].decode()
assert (10 + n) % 64 == 0 and header.endswith('\n') and "'descr': '<f4'" in header, header
shape = eval(header)['shape']
count = 1
for s in shape: count *= s
assert len(b) - 10 - n == 4 * count, (len(b), n, shape)
PY
done

# Values: the seed's worked example, T5 buckets, a json document.
check seed_example 0 "$posenc" encode sinusoidal --dim 4 -p 2 --format csv
python3 - "$tmp/out" <<'PY' || { echo "FAIL seed_example"; failures=$((failures + 1)); }
import math, sys
row = open(sys.argv[1]).read().splitlines()[1].split(',')
assert row[0] == '2', row
expected = [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)]
assert all(abs(float(a) - e) < 1e-6 for a, e in zip(row[1:], expected)), row
PY
check t5_buckets 0 "$posenc" encode t5 -p 0 --keys 1,16,-16,1000 --show buckets --format csv
expect_in t5_buckets "$tmp/out" "0,17,26,10,31"
check json 0 "$posenc" encode alibi --heads 8 -p 0:2 --format json
expect_in json "$tmp/out" '"block_label": "head"'

# Bad arguments: one line, exit 2, naming the argument.
check bad_encoding 2 "$posenc" encode bogus
expect_in bad_encoding "$tmp/err" "name = 'bogus'"
check bad_dim 2 "$posenc" encode sinusoidal --dim abc
expect_in bad_dim "$tmp/err" "--dim"
check odd_dim 2 "$posenc" encode sinusoidal --dim 5
expect_in odd_dim "$tmp/err" "dim = 5"
check odd_rotary 2 "$posenc" encode rope --head-dim 8 --rotary-dim 3
expect_in odd_rotary "$tmp/err" "rotary_dim = 3"
check past_table 2 "$posenc" encode learned --max-len 64 -p 0,64
expect_in past_table "$tmp/err" "position 64"
check bad_positions 2 "$posenc" encode sinusoidal -p 5:2
expect_in bad_positions "$tmp/err" "--positions"
check bad_format 2 "$posenc" encode sinusoidal --format xml
expect_in bad_format "$tmp/err" "--format = 'xml'"
check binary_overflow 2 "$posenc" encode binary --bits 8 -p 300
expect_in binary_overflow "$tmp/err" "needs 9 bits"
check bad_config 2 "$posenc" encode rope --config /nonexistent.json
check no_subcommand 2 "$posenc"
printf '{"hidden_size": 64, "num_attention_heads": 2, "rope_scaling": {"type": "linear"}}' >"$tmp/config.json"
check config_missing_factor 2 "$posenc" encode rope --config "$tmp/config.json"
expect_in config_missing_factor "$tmp/err" "'factor'"
check no_partial_output 2 "$posenc" encode learned --max-len 4 -p 0:9 --format csv -o "$tmp/partial.csv"
[ ! -e "$tmp/partial.csv" ] ||
  { echo "FAIL no_partial_output: file written on error"; failures=$((failures + 1)); }

# posenc attention: every encoding against the naive reference, forward and backward.
check attention_help 0 "$posenc" attention --help
for enc in none rope alibi t5 relative shaw xl rope+alibi rope+t5; do
  check "attention_$enc" 0 "$posenc" attention -e "$enc" --seq 70 --heads 2 --kv-heads 1 --dim 40 --causal \
    --backward --check --repeat 1 --format json
  python3 - "$tmp/out" <<'PY' || { echo "FAIL attention_$enc"; cat "$tmp/out"; failures=$((failures + 1)); }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["max_abs_error_vs_reference"] < 1e-5, r
assert r["forward_ms"] > 0 and r["backward_ms"] > 0, r
PY
done
# The score mechanisms and head shapes of today's families, against the reference.
for extra in "--softcap 2 --sinks --chunk 16" "--value-dim 24 --rope-offset 8" "--query-temperature llama4:0.1:8" \
  "--query-temperature qwen_logn:0:16 --kv-len 90"; do
  # shellcheck disable=SC2086
  check "attention $extra" 0 "$posenc" attention -e rope+alibi --seq 70 --heads 2 --dim 40 --causal --check \
    --repeat 1 --format json $extra
  python3 - "$tmp/out" <<'PY' || { echo "FAIL attention $extra"; cat "$tmp/out"; failures=$((failures + 1)); }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["max_abs_error_vs_reference"] < 1e-5, r
PY
done
check attention_bad_temperature 2 "$posenc" attention --query-temperature llama4:0.1
expect_in attention_bad_temperature "$tmp/err" "--query-temperature = 'llama4:0.1'"
check attention_bad_device 2 "$posenc" attention --device tpu
expect_in attention_bad_device "$tmp/err" "--device = 'tpu'"
check attention_offset_without_rope 2 "$posenc" attention -e alibi --rope-offset 4
expect_in attention_offset_without_rope "$tmp/err" "--rope-offset = 4"
if ! "$posenc" attention --seq 8 --dtype bf16 --device cuda --repeat 1 >/dev/null 2>&1; then
  # No CUDA device (or no CUDA backend) here: refused with a line that says so.
  check attention_cuda_refused 2 "$posenc" attention --seq 8 --dtype bf16 --device cuda
  expect_in attention_cuda_refused "$tmp/err" "--device cuda"
fi
check attention_table 0 "$posenc" attention --seq 8 --window 3
expect_in attention_table "$tmp/out" "GFLOP/s"
check attention_bad_encoding 2 "$posenc" attention -e bogus
expect_in attention_bad_encoding "$tmp/err" "--encoding = 'bogus'"
check attention_bad_heads 2 "$posenc" attention --heads 3 --kv-heads 2
expect_in attention_bad_heads "$tmp/err" "multiple of the key/value heads"
check attention_bad_seq 2 "$posenc" attention --seq 0
expect_in attention_bad_seq "$tmp/err" "--seq = 0"
# --dtype: 16-bit q, k, v, out; --check against the reference on the rounded inputs: within the
# out's own rounding (2^-8 |out| for bf16, |out| < 4 here) plus fp32 noise, far above fp32's 1e-6.
for dtype in bf16 fp16; do
  check "attention_$dtype" 0 "$posenc" attention --seq 70 --causal -e rope+alibi --check --dtype $dtype --format json
  python3 - "$tmp/out" "$dtype" <<'PY' || { echo "FAIL attention_$dtype"; failures=$((failures + 1)); }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["dtype"] == {"bf16": "bf16", "fp16": "f16"}[sys.argv[2]], r
bound = {"bf16": 4 * 2 ** -8, "fp16": 4 * 2 ** -11}[sys.argv[2]] + 1e-5
assert 0 < r["max_abs_error_vs_reference"] <= bound, r
PY
done
# --round-probabilities (bf16 only): within AttentionConfig's bound 2.02 u max|v| + u |out| + 1e-5 (u = 2^-8;
# |v| < 6 and |out| < 4 for these seeded normal inputs); anything but bf16 is refused by name.
check attention_round_probabilities 0 "$posenc" attention --seq 70 --causal -e rope+alibi --check \
  --dtype bf16 --round-probabilities --format json
python3 - "$tmp/out" <<'PY' || { echo "FAIL attention_round_probabilities"; failures=$((failures + 1)); }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["round_probabilities"] is True, r
assert 0 < r["max_abs_error_vs_reference"] <= 2.02 * 2 ** -8 * 6 + 4 * 2 ** -8 + 1e-5, r
PY
check attention_round_probabilities_fp32 2 "$posenc" attention --seq 8 --round-probabilities
expect_in attention_round_probabilities_fp32 "$tmp/err" \
  "round_probabilities = true needs bf16 keys and values"
check attention_dtype_backward 0 "$posenc" attention --dtype bf16 --backward --seq 40 --repeat 1
expect_in attention_dtype_backward "$tmp/out" "backward"
check attention_bad_dtype 2 "$posenc" attention --dtype int8
expect_in attention_bad_dtype "$tmp/err" "--dtype = 'int8' is invalid"
check attention_check_too_big 2 "$posenc" attention --seq 8192 --check
expect_in attention_check_too_big "$tmp/err" "too large"
# Hostile input: a base whose inverse overflows (not "mean |out| nan" with exit 0) and a 100,000-deep
# config.json (not a stack overflow) are one-line errors naming the bound.
# Ranges at the int64 limits: end - start and p += step overflowed (UB, caught by ubsan-clang).
check positions_int64_span 2 "$posenc" encode sinusoidal -p -9223372036854775808:9223372036854775807
expect_in positions_int64_span "$tmp/err" \
  "--positions = '-9223372036854775808:9223372036854775807' has 18446744073709551615 positions, more than the limit"
check positions_int64_end 2 "$posenc" encode sinusoidal -p 9223372036854775800:9223372036854775807:5
expect_in positions_int64_end "$tmp/err" "9223372036854775800"
check attention_tiny_base 2 "$posenc" attention -e rope --seq 8 --base 1e-310
expect_in attention_tiny_base "$tmp/err" "must be in [2^-16, 2^126]"
# Sizes beyond the machine's memory: refused by name before allocating (was "internal error:
# std::bad_alloc"); write errors: one line, nothing left half-written (was exit 0): status 2 when
# --output names the file, 1 for standard output.
for args in "--seq 100000000" "--dim 2000000000" "--heads 1000000000" "--batch 100000 --seq 100000"; do
  # shellcheck disable=SC2086
  check "attention_huge_${args// /_}" 2 "$posenc" attention $args
  expect_in "attention_huge_${args// /_}" "$tmp/err" "GiB of memory"
done
check positions_too_many 2 "$posenc" encode sinusoidal -p 0:1000001
expect_in positions_too_many "$tmp/err" "has 1000001 positions, more than the limit of 1000000"
check output_dev_full 2 "$posenc" encode sinusoidal -p 0:4 -o /dev/full
expect_in output_dev_full "$tmp/err" "--output: writing '/dev/full' failed: No space left on device"
"$posenc" encode sinusoidal -p 0:4 >/dev/full 2>"$tmp/err"
[ $? -eq 1 ] || { echo "FAIL stdout_dev_full: exit status"; failures=$((failures + 1)); }
expect_in stdout_dev_full "$tmp/err" "writing to standard output failed: No space left on device"
check output_missing_dir 2 "$posenc" encode sinusoidal -p 0:4 -o "$tmp/no/such/dir.csv"
[ ! -e "$tmp/no/such/dir.csv.tmp" ] || { echo "FAIL output_missing_dir: .tmp left"; failures=$((failures + 1)); }
python3 -c 'print("{\"head_dim\": 64, \"rope_theta\": " + "[" * 100000 + "]" * 100000 + "}")' >"$tmp/deep.json"
check config_deep 2 "$posenc" encode rope --config "$tmp/deep.json" -p 0:3
expect_in config_deep "$tmp/err" "more than 64 levels deep"

# posenc analyze: every encoding, three formats; bad flags.
check analyze_help 0 "$posenc" analyze --help
check analyze_table 0 "$posenc" analyze --length 64 --extrapolate-to 128 --dim 16
for name in none sinusoidal learned binary relative t5 alibi shaw transformer_xl rope; do
  expect_in analyze_table "$tmp/out" "| $name |"
done
expect_in analyze_table "$tmp/out" "Hamming(7, 8) = 4"
check analyze_json 0 "$posenc" analyze -e rope,alibi --length 64 --extrapolate-to 128 --format json
python3 - "$tmp/out" <<'PY' || { echo "FAIL analyze_json"; failures=$((failures + 1)); }
import json, sys
r = json.load(open(sys.argv[1]))
assert [e["encoding"] for e in r["encodings"]] == ["alibi", "rope"], r
assert len(r["encodings"][1]["decay"]["curve"]) == 8
PY
check analyze_csv 0 "$posenc" analyze -e t5 --length 64 --extrapolate-to 128 --format csv
expect_in analyze_csv "$tmp/out" "t5,"
check analyze_alias 0 "$posenc" analyze -e xl --length 64 --extrapolate-to 128 --format csv
expect_in analyze_alias "$tmp/out" "transformer_xl,"
check analyze_bad_length 2 "$posenc" analyze --length 1
expect_in analyze_bad_length "$tmp/err" "--length = 1"
check analyze_bad_extrapolate 2 "$posenc" analyze --length 64 --extrapolate-to 32
expect_in analyze_bad_extrapolate "$tmp/err" "--extrapolate-to = 32"
check analyze_bad_encoding 2 "$posenc" analyze -e rope,bogus
expect_in analyze_bad_encoding "$tmp/err" "bogus"
check analyze_bad_format 2 "$posenc" analyze --format xml
expect_in analyze_bad_format "$tmp/err" "--format = 'xml'"

# posenc lab on a tiny generated corpus: the table, n/a for the learned table, JSON, CSV, checkpoints.
for i in $(seq 1 200); do echo "one two three four five six seven $i"; done > "$tmp/corpus.txt"
lab_small=(--corpus "$tmp/corpus.txt" --steps 3 --batch 2 --train-len 8 --eval-lengths 8,16 --eval-tokens 64
           --layers 1 --heads 2 --mlp 16 --progress none)
check lab 0 "$posenc" lab "${lab_small[@]}" --d-model 16 --encodings rope,learned,alibi --rope-eval yarn \
  --seeds 1 --out "$tmp/lab" --save-checkpoints
expect_in lab "$tmp/out" "rope (yarn)"
expect_in lab "$tmp/out" "n/a for learned at 16: learned: position 8"
expect_in lab "$tmp/out" "predicted wall time"
expect_in lab "$tmp/out" "one seed: no interval"
expect_in lab "$tmp/out" "no ordering is called"
python3 - "$tmp/lab" <<'PY' || { echo "FAIL lab_json"; failures=$((failures + 1)); }
import csv, json, os, sys
r = json.load(open(os.path.join(sys.argv[1], "results.json")))
assert [run["label"] for run in r["runs"]] == ["rope", "rope (yarn)", "learned", "alibi"], r["runs"]
learned = r["runs"][2]["eval"]
assert learned[0]["ok"] and not learned[1]["ok"] and "max_len = 8" in learned[1]["error"], learned
assert [b["begin"] for b in r["runs"][0]["eval"][1]["buckets"]] == [0, 8]
assert len(r["runs"][0]["train_losses"]) == 3 and r["model"]["d_model"] == 16
rows = list(csv.DictReader(open(os.path.join(sys.argv[1], "results.csv"))))
assert {row["label"] for row in rows} == {"rope", "rope (yarn)", "learned", "alibi"}
for name in ("rope", "learned", "alibi"):
    with open(os.path.join(sys.argv[1], "checkpoints", name + "-seed1.safetensors"), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    assert "posenc-lab" == header["__metadata__"]["format"] and "wte.weight" in header, header.keys()
PY
check lab_seeds 0 "$posenc" lab "${lab_small[@]}" --d-model 16 --encodings none,alibi,rope --rope-eval none
expect_in lab_seeds "$tmp/out" "over 3 seeds (Student's t: 4.303 x std / sqrt(3))"  # three by default
expect_in lab_seeds "$tmp/out" "±"
expect_in lab_seeds "$tmp/out" "rule: holds if the whole interval is <= 1.02"
expect_in lab_seeds "$tmp/out" "ordering at 2x ('<' where the 95% intervals separate"
# --scale: a preset's sizes, explicit flags winning; the prediction alone with --dry-run.
check lab_scale 0 "$posenc" lab "${lab_small[@]}" --encodings rope --scale medium --dry-run
expect_in lab_scale "$tmp/out" "model: 1 layers, d_model 128, 2 heads, mlp 16, LayerNorm; train length 8,"
expect_in lab_scale "$tmp/out" ", 3 steps, AdamW"
expect_in lab_scale "$tmp/out" "AdamW lr 0.002"
expect_in lab_scale "$tmp/out" "scale: medium"
expect_in lab_scale "$tmp/out" "predicted wall time"
expect_in lab_scale "$tmp/out" "rope "
check lab_bad_scale 2 "$posenc" lab "${lab_small[@]}" --scale huge
expect_in lab_bad_scale "$tmp/err" "--scale = 'huge' is invalid: expected one of small, medium, large"
(cd "$tmp" && "$posenc" lab --encodings none >"$tmp/out" 2>"$tmp/err")
[ $? -eq 2 ] || { echo "FAIL lab_missing_corpus: exit status"; failures=$((failures + 1)); }
expect_in lab_missing_corpus "$tmp/err" "./scripts/prepare_corpus.sh"
check lab_bad_encoding 2 "$posenc" lab "${lab_small[@]}" --d-model 16 --encodings rope,alibi+t5
expect_in lab_bad_encoding "$tmp/err" "'t5' conflicts"
check lab_bad_norm 2 "$posenc" lab "${lab_small[@]}" --d-model 16 --norm batch
expect_in lab_bad_norm "$tmp/err" "--norm = 'batch'"
check lab_bad_length 2 "$posenc" lab "${lab_small[@]}" --d-model 16 --encodings none --eval-lengths 8,100000
expect_in lab_bad_length "$tmp/err" "fewer than the longest evaluation length"
lab_sizes=(--steps 3 --batch 2 --train-len 8 --eval-lengths 8,16 --eval-tokens 64 --progress none)
check lab_corpus_dev_zero 2 "$posenc" lab "${lab_sizes[@]}" --corpus /dev/zero
expect_in lab_corpus_dev_zero "$tmp/err" "corpus: '/dev/zero' is not a regular file"
mkfifo "$tmp/fifo"
check lab_corpus_fifo 2 timeout 10 "$posenc" lab "${lab_sizes[@]}" --corpus "$tmp/fifo"
expect_in lab_corpus_fifo "$tmp/err" "is not a regular file"
for args in "--batch 1000000000" "--layers 1000000" "--mlp 1000000000"; do
  # shellcheck disable=SC2086
  check "lab_huge_${args// /_}" 2 "$posenc" lab --corpus "$tmp/corpus.txt" --progress none $args
  expect_in "lab_huge_${args// /_}" "$tmp/err" "GiB of memory"
done
check lab_threads 2 "$posenc" lab "${lab_small[@]}" --threads 10000000000
expect_in lab_threads "$tmp/err" "--threads = 10000000000 is invalid: must be in [0, 1024]"
check lab_bad_width 2 "$posenc" lab "${lab_small[@]}" --d-model 15
expect_in lab_bad_width "$tmp/err" "divide d_model = 15"

# posenc lab --task: the exact-match tables, JSON and CSV with the task's scores, exclusive options.
lab_task=(--steps 2 --batch 2 --eval-lengths 24,48 --task-samples 3 --layers 1 --heads 2 --mlp 16 --d-model 16
          --progress none)
check lab_task 0 "$posenc" lab "${lab_task[@]}" --task passkey --train-len 24 --encodings rope,learned \
  --rope-eval ntk --seeds 1 --out "$tmp/task"
expect_in lab_task "$tmp/out" "exact match (%) on passkey, 3 samples per length"
expect_in lab_task "$tmp/out" "n/a for learned at 48"
python3 - "$tmp/task" <<'PY' || { echo "FAIL lab_task_json"; failures=$((failures + 1)); }
import csv, json, os, sys
r = json.load(open(os.path.join(sys.argv[1], "results.json")))
assert r["task"]["name"] == "passkey" and r["task"]["samples"] == 3, r["task"]
assert [run["label"] for run in r["runs"]] == ["rope", "rope (ntk)", "learned"], r["runs"]
first = r["runs"][0]["eval"][0]
assert first["ok"] and 0 <= first["exact_match"] <= first["token_accuracy"] <= 1, first
assert first["answers"] == 15, first
assert not r["runs"][2]["eval"][1]["ok"] and "max_len = 24" in r["runs"][2]["eval"][1]["error"]
assert r["summary"][0]["exact_match"][0]["n"] == 1
rows = list(csv.DictReader(open(os.path.join(sys.argv[1], "results.csv"))))
assert len(rows) == 6 and rows[0]["exact_match"] != "" and rows[5]["exact_match"] == "", rows
PY
check lab_task_corpus 2 "$posenc" lab "${lab_task[@]}" --task copy --corpus "$tmp/corpus.txt"
expect_in lab_task_corpus "$tmp/err" "excludes"
check lab_bad_task 2 "$posenc" lab "${lab_task[@]}" --task sort
expect_in lab_bad_task "$tmp/err" "task = 'sort' is invalid"
check lab_short_task 2 "$posenc" lab "${lab_task[@]}" --task passkey --train-len 8
expect_in lab_short_task "$tmp/err" "train_len = 8 is too short for passkey"

# posenc inspect: the per-layer plan of real config.json files (tests/data/hf_configs).
configs="$(cd "$(dirname "$0")" && pwd)/data/hf_configs"
check inspect_help 0 "$posenc" inspect --help
check inspect_gemma3 0 "$posenc" inspect "$configs/gemma3__gemma-3-27b-it.json"
expect_in inspect_gemma3 "$tmp/out" "layers 0-4, 6-10, 12-16"
expect_in inspect_gemma3 "$tmp/out" "sliding_attention, rope default base 10000 dims [0, 128) of 128 half, causal, window 1024"
expect_in inspect_gemma3 "$tmp/out" "layers 5, 11, 17"
# encode rope --config reads a planned model_type as its family (Cohere: pairs), refuses what one RoPE
# cannot describe (Gemma 3's two bases), reads a remote-code family posenc follows (ChatGLM: pairs on half the
# head) and warns where it falls back to the generic rules (Baichuan).
check encode_cohere 0 "$posenc" encode rope --config "$configs/cohere__c4ai-command-r-v01.json" -p 0:2
expect_in encode_cohere "$tmp/out" "layout interleaved"
check encode_gemma3 2 "$posenc" encode rope --config "$configs/gemma3__gemma-3-27b-it.json" -p 0:2
expect_in encode_gemma3 "$tmp/err" "rotate differently, which one RopeConfig cannot describe"
check encode_chatglm 0 "$posenc" encode rope --config "$configs/chatglm__chatglm2-6b.json" -p 0:2
expect_in encode_chatglm "$tmp/out" "layout interleaved"
echo '{"model_type": "internlm", "hidden_size": 4096, "num_attention_heads": 32}' >"$tmp/internlm.json"
check encode_internlm 0 "$posenc" encode rope --config "$tmp/internlm.json" -p 0:2
expect_in encode_internlm "$tmp/err" "posenc: warning: model_type 'internlm' is not supported"
check inspect_scout 0 "$posenc" inspect "$configs/llama4__Llama-4-Scout-17B-16E-Instruct.json"
expect_in inspect_scout "$tmp/err" "low_freq_factor == high_freq_factor"
expect_in inspect_scout "$tmp/out" "chunk 8192"
check inspect_dsv3_json 0 "$posenc" inspect "$configs/deepseek-v3__DeepSeek-V3.json" --format json --seq-len 4096
python3 - "$tmp/out" <<'PY' || { echo "FAIL inspect_dsv3_json"; failures=$((failures + 1)); }
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["model_type"] == "deepseek_v3" and d["num_layers"] == 61 and len(d["layers"]) == 61, d["model_type"]
l = d["layers"][0]
assert l["position"] == "rope" and l["rope"]["rotary_dims"] == [128, 192] and l["rope"]["layout"] == "interleaved", l
assert len(l["rope"]["inv_freq"]) == 32 and l["rope"]["rope_type"] == "yarn" and l["rope"]["attention_factor"] == 1.0
a = l["attention"]
assert a["causal"] and a["window"] is None and a["chunk"] is None and a["softcap"] is None and not a["sinks"], a
assert abs(a["softmax_scale"] - 192 ** -0.5 * (0.1 * math.log(40) + 1) ** 2) < 1e-12, a
assert d["warnings"] == []
PY
check inspect_gptoss_json 0 "$posenc" inspect "$configs/gpt-oss__gpt-oss-120b.json" --format json
python3 - "$tmp/out" <<'PY' || { echo "FAIL inspect_gptoss_json"; failures=$((failures + 1)); }
import json, sys
d = json.load(open(sys.argv[1]))
assert [l["attention"]["window"] for l in d["layers"][:3]] == [128, None, 128]
assert all(l["attention"]["sinks"] for l in d["layers"])
PY
check inspect_gptneo 0 "$posenc" inspect "$configs/gpt-neo__gpt-neo-125M.json"
expect_in inspect_gptneo "$tmp/out" "layers 1, 3, 5, 7, 9, 11: sliding_attention, learned, causal, window 256, scale 1"
expect_in inspect_gptneo "$tmp/out" "learned table: 2048 rows, position p reads row p + 0"
printf '{"model_type": "opt", "num_hidden_layers": 2}' > "$tmp/opt.json"
check inspect_opt_json 0 "$posenc" inspect "$tmp/opt.json" --format json
python3 - "$tmp/out" <<'PY' || { echo "FAIL inspect_opt_json"; failures=$((failures + 1)); }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["learned"] == {"table_rows": 2050, "position_offset": 2}, d["learned"]
assert [l["position"] for l in d["layers"]] == ["learned", "learned"]
PY
check inspect_t5 0 "$posenc" inspect "$configs/t5__t5-small.json"
expect_in inspect_t5 "$tmp/out" "layers 0-5: encoder, t5, bidirectional"
check inspect_whisper 0 "$posenc" inspect "$configs/whisper__whisper-large-v3.json"
expect_in inspect_whisper "$tmp/out" "max_position_embeddings 448 (encoder 1500)"
expect_in inspect_whisper "$tmp/out" "layers 0-31: encoder, sinusoidal, bidirectional, scale 0.125"
expect_in inspect_whisper "$tmp/out" "layers 32-63: decoder, learned, causal, scale 0.125"
check inspect_nllb_json 0 "$posenc" inspect "$configs/m2m_100__nllb-200-distilled-600M.json" --format json
python3 - "$tmp/out" <<'PY' || { echo "FAIL inspect_nllb_json"; failures=$((failures + 1)); }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["encoder_max_position_embeddings"] == 1024 and d["warnings"] == [], d
assert d["sinusoidal"] == {"dim": 1024, "base": 10000.0, "layout": "split", "frequencies": "half_dim_minus_one",
                           "position_offset": 2}, d["sinusoidal"]
assert [l["layer_type"] for l in d["layers"]] == ["encoder"] * 12 + ["decoder"] * 12
PY
check inspect_chatglm 0 "$posenc" inspect "$configs/chatglm__chatglm2-6b.json"
expect_in inspect_chatglm "$tmp/out" "remote code, planned from the authors' THUDM/chatglm2-6b"
expect_in inspect_chatglm "$tmp/out" "layers 0-27: full_attention, rope default base 10000 dims [0, 64) of 128 interleaved"
check inspect_qwen 0 "$posenc" inspect "$configs/qwen__Qwen-7B-Chat.json" --format json --seq-len 16385
python3 - "$tmp/out" <<'PY' || failures=$((failures + 1))
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["remote_code"].startswith("Qwen/Qwen-7B modeling_qwen.py"), d["remote_code"]
layer = d["layers"][0]
assert layer["attention"]["query_temperature"] == {"rule": "qwen_logn", "scale": 0.0, "floor_scale": 8192.0}, layer
# get_ntk_alpha at 16385 tokens: 2^ceil(log2(16385 / 8192) + 1) - 1 = 7
assert math.isclose(layer["rope"]["inv_freq"][1], (1e4 * 7 ** (128 / 126)) ** (-2 / 128), rel_tol=1e-12), layer
PY
check inspect_internlm 2 "$posenc" inspect "$tmp/internlm.json"
expect_in inspect_internlm "$tmp/err" "model_type 'internlm' is not supported"
check inspect_missing 2 "$posenc" inspect "$tmp/nope.json"
expect_in inspect_missing "$tmp/err" "cannot open config file"
echo '{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 0}' >"$tmp/bad.json"
check inspect_bad_key 2 "$posenc" inspect "$tmp/bad.json"
expect_in inspect_bad_key "$tmp/err" "num_attention_heads = 0 is invalid"
echo '{' >"$tmp/bad2.json"
check inspect_bad_json 2 "$posenc" inspect "$tmp/bad2.json"
check inspect_bad_format 2 "$posenc" inspect "$configs/t5__t5-small.json" --format csv

if [ "$failures" -ne 0 ]; then echo "$failures CLI checks failed"; exit 1; fi
echo "all CLI checks passed"
