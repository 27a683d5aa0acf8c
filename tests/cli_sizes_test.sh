#!/usr/bin/env bash
# tests/cli_sizes_test.sh POSENC: every size argument of every subcommand at its extremes: 0, -1,
# 2^63 - 1, a value whose product with the other sizes overflows int64, and a value just too large
# for this machine's memory. Each refused value exits with status 2 and one line on stderr naming
# the argument (as its flag, or as the field it sets: --max-distance -> max_distance) and the value;
# refused for memory, the line also says the GiB needed and the machine's; no output file is
# created. A value with a meaning (0 = a default, a window longer than any sequence) must succeed.
set -u
posenc="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checks=0

# Refused commands run under a 4 GiB address-space limit, so that a size that escaped its check
# fails fast (std::bad_alloc, status 1) instead of filling the machine, and under a time limit, so
# that one that escaped into a long run fails too. AddressSanitizer reserves terabytes of address
# space at start, so its builds run without the address-space limit.
limit_kib=4194304
if grep -qa __asan_init "$posenc"; then limit_kib=unlimited; fi

mem=$(($(getconf _PHYS_PAGES) * $(getconf PAGESIZE)))  # what require_memory compares against
max=9223372036854775807                                 # 2^63 - 1
p53=9007199254740992                                    # 2^53, the largest size accepted
p40=1099511627776
out_csv="$tmp/table.csv"
out_lab="$tmp/lab"

# row EXPECT FLAG VALUE ARGS...: run posenc ARGS (which set FLAG to VALUE). EXPECT: refused (status
# 2), memory (refused for memory) or ok (status 0).
row() {
  local expect=$1 flag=$2 value=$3
  shift 3
  checks=$((checks + 1))
  local name=$1
  [[ $2 == -* ]] || name+=" $2"
  name+=" $flag $value"
  if [ "$expect" = ok ]; then
    timeout 120 "$posenc" "$@" >"$tmp/out" 2>"$tmp/err"
    local status=$?
    if [ $status -ne 0 ]; then
      echo "FAIL $name: exit $status, expected 0"; cat "$tmp/err"; failures=$((failures + 1))
    fi
    rm -rf "$out_csv" "$out_lab"
    return
  fi
  (ulimit -v "$limit_kib" && exec timeout 60 "$posenc" "$@") >"$tmp/out" 2>"$tmp/err"
  local status=$?
  local snake=${flag#--}
  snake=${snake//-/_}
  if [ $status -ne 2 ]; then
    echo "FAIL $name: exit $status, expected 2"; cat "$tmp/err"; failures=$((failures + 1))
  elif [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
    echo "FAIL $name: expected a one-line error, got:"; cat "$tmp/err"; failures=$((failures + 1))
  elif ! grep -qF -- "$flag" "$tmp/err" && ! grep -qF -- "$snake" "$tmp/err"; then
    echo "FAIL $name: the error does not name $flag:"; cat "$tmp/err"; failures=$((failures + 1))
  elif ! grep -qF -- "$value" "$tmp/err"; then
    echo "FAIL $name: the error does not name the value $value:"; cat "$tmp/err"; failures=$((failures + 1))
  elif grep -qF "internal error" "$tmp/err"; then
    echo "FAIL $name: internal error:"; cat "$tmp/err"; failures=$((failures + 1))
  elif [ "$expect" = memory ] &&
    ! grep -qE "needs [0-9.e+]+ GiB, more than this machine's [0-9.]+ GiB of memory" "$tmp/err"; then
    echo "FAIL $name: expected the GiB needed and the machine's:"; cat "$tmp/err"; failures=$((failures + 1))
  fi
  if [ -e "$out_csv" ] || [ -e "$out_lab" ]; then
    echo "FAIL $name: an output was written on error"; failures=$((failures + 1))
    rm -rf "$out_csv" "$out_lab"
  fi
}
# The first three extremes, refused by every size whose 0 has no meaning.
extremes() {  # extremes FLAG ARGS...: 0, -1 and 2^63 - 1 refused
  local flag=$1
  shift
  for v in 0 -1 $max; do row refused "$flag" "$v" "$@" "$flag" "$v"; done
}
extremes_but_zero() {  # extremes_but_zero FLAG ARGS...: -1 and 2^63 - 1 refused, 0 (a default) runs
  local flag=$1
  shift
  row ok "$flag" 0 "$@" "$flag" 0
  for v in -1 $max; do row refused "$flag" "$v" "$@" "$flag" "$v"; done
}
even() { echo $(($1 / 2 * 2 + 2)); }

# posenc encode: -p 0 makes one position, so one size alone sets the table; -p 0:1000000 (queries and
# keys) multiplies it by 10^6 (10^12 for pair encodings).
enc=(-p 0 -f csv -o "$out_csv")
many=(-p 0:1000000 -f csv -o "$out_csv")
for e in sinusoidal learned transformer_xl; do
  extremes --dim encode $e "${enc[@]}"
  row memory --dim 17592186044416 encode $e "${many[@]}" --dim 17592186044416  # 2^44 x 10^6 > 2^63
done
row memory --dim "$(even $((mem / 48)))" encode sinusoidal "${enc[@]}" --dim "$(even $((mem / 48)))"
row memory --dim "$(even $((mem / 48)))" encode transformer_xl "${enc[@]}" --dim "$(even $((mem / 48)))"
row memory --dim $((mem / 2048 + 1)) encode learned "${enc[@]}" --dim $((mem / 2048 + 1))  # 512 rows
extremes --max-len encode learned "${enc[@]}"
row memory --max-len $p40 encode learned "${enc[@]}" --dim $p40 --max-len $p40  # 2^80
row memory --max-len $((mem / 32 + 1)) encode learned "${enc[@]}" --max-len $((mem / 32 + 1))  # x 8 floats
extremes_but_zero --bits encode binary "${enc[@]}"
row refused --bits $p40 encode binary "${many[@]}" --bits $p40
row refused --bits 63 encode binary "${enc[@]}" --bits 63  # at most 62 bits: the size is not memory's
for e in relative t5 alibi; do
  extremes --heads encode $e "${enc[@]}"
done
for e in relative t5; do
  row memory --heads $p40 encode $e "${many[@]}" --heads $p40  # 2^40 x 10^12
  row memory --heads $((mem / 48 + 1)) encode $e "${enc[@]}" --heads $((mem / 48 + 1))
done
row refused --heads $p40 encode alibi "${many[@]}" --heads $p40  # at most 2^20 heads
row memory --heads $((mem / 48000000 + 1)) encode alibi -p 0:1000 -f csv -o "$out_csv" \
  --heads $((mem / 48000000 + 1))  # 10^6 pairs per head
extremes --num-buckets encode t5 "${enc[@]}"
row refused --num-buckets 1048577 encode t5 "${many[@]}" --num-buckets 1048577  # at most 2^20
for e in relative shaw t5; do
  extremes_but_zero --max-distance encode $e "${enc[@]}"
done
row refused --max-distance 1073741825 encode relative "${enc[@]}" --max-distance 1073741825  # 2^30 + 1
row refused --max-distance 1048577 encode shaw "${enc[@]}" --max-distance 1048577            # 2^20 + 1
row ok --max-distance $p53 encode t5 "${enc[@]}" --max-distance $p53  # where T5's log buckets end
extremes --head-dim encode rope "${enc[@]}"
row refused --head-dim 65537 encode rope "${enc[@]}" --head-dim 65537
extremes_but_zero --rotary-dim encode rope "${enc[@]}"
row refused --rotary-dim 10 encode rope "${enc[@]}" --rotary-dim 10  # more than head_dim = 8
for f in --max-position-embeddings --original-max; do
  extremes_but_zero $f encode rope "${enc[@]}"
  row refused $f $((p53 + 1)) encode rope "${enc[@]}" $f $((p53 + 1))
done

# posenc attention: sizes B = 1, Q = K = 512, H = Hkv = 8, D = 64 unless set; q, k, v and out take
# 16 Q H D bytes.
att=(attention --repeat 1)
small=(attention --repeat 1 --seq 8 --heads 2 --dim 8)
for f in --batch --seq --heads --dim; do
  extremes $f "${att[@]}"
done
row memory --batch $p53 "${att[@]}" --batch $p53  # 2^53 x 2^18
row memory --batch $((mem / 4194304 + 1)) "${att[@]}" --batch $((mem / 4194304 + 1))
row memory --seq $p53 "${att[@]}" --seq $p53
row memory --seq $((mem / 8192 + 1)) "${att[@]}" --seq $((mem / 8192 + 1))
row memory --heads $p53 "${att[@]}" --heads $p53
row memory --heads $((mem / 524288 + 1)) "${att[@]}" --heads $((mem / 524288 + 1))
row memory --dim $p53 "${att[@]}" --dim $p53
row memory --dim $((mem / 65536 + 1)) "${att[@]}" --dim $((mem / 65536 + 1))
extremes_but_zero --kv-len "${small[@]}"
row memory --kv-len $p53 "${att[@]}" --dim 1024 --kv-len $p53  # 2^53 x 8 x 2^10
row memory --kv-len $((mem / 4096 + 1)) "${att[@]}" --kv-len $((mem / 4096 + 1))
extremes_but_zero --kv-heads "${small[@]}"
row memory --kv-heads $p53 "${att[@]}" --kv-heads $p53
row memory --kv-heads $((mem / 262144 + 1)) "${att[@]}" --kv-heads $((mem / 262144 + 1))
row ok --window 0 "${small[@]}" --window 0
row refused --window -1 "${small[@]}" --window -1
row ok --window $max "${small[@]}" --window $max  # longer than any sequence: no window
extremes --repeat attention --seq 8 --heads 2 --dim 8
extremes_but_zero --value-dim "${small[@]}"
row memory --value-dim $p53 "${att[@]}" --value-dim $p53
row ok --chunk 0 "${small[@]}" --chunk 0
row refused --chunk -1 "${small[@]}" --chunk -1
row ok --chunk $max "${small[@]}" --chunk $max  # longer than any sequence: one chunk
row ok --rope-offset 0 "${small[@]}" --rope-offset 0
row refused --rope-offset -1 "${small[@]}" --rope-offset -1
row refused --rope-offset 8 "${small[@]}" --rope-offset 8  # RoPE needs at least one pair of the 8 dims
row refused --rope-offset $max "${small[@]}" --rope-offset $max
row refused --repeat 1000001 attention --seq 8 --heads 2 --dim 8 --repeat 1000001
extremes --num-buckets "${small[@]}" -e t5
row refused --num-buckets 1048577 "${small[@]}" -e t5 --num-buckets 1048577
row memory --num-buckets $((mem / 32 + 1)) "${att[@]}" -e t5 --num-buckets $((mem / 32 + 1))
extremes --max-distance "${small[@]}" -e t5
for e in shaw relative; do
  extremes_but_zero --clip "${small[@]}" -e $e
  row memory --clip $p53 "${att[@]}" -e $e --clip $p53
done
row memory --clip $((mem / 1024 + 1)) "${att[@]}" -e shaw --clip $((mem / 1024 + 1))  # 2 x 2k+1 rows of 64
row memory --clip $((mem / 64 + 1)) "${att[@]}" -e relative --clip $((mem / 64 + 1))  # 2k+1 rows of 8
extremes_but_zero --d-model "${small[@]}" -e xl
row memory --d-model $p53 "${att[@]}" -e xl --dim 1024 --d-model $p53  # 8 x 2^10 x 2^53
row memory --d-model $((mem / 2048 + 1)) "${att[@]}" -e xl --d-model $((mem / 2048 + 1))

# posenc analyze: fixed limits (its pairwise metrics are O(L^2)), memory is never the reason.
for f in --length --extrapolate-to --dim --horizon; do
  extremes $f analyze -e rope
done
row refused --length 8193 analyze -e rope --length 8193
row refused --extrapolate-to 65537 analyze -e rope --extrapolate-to 65537
row refused --dim 1026 analyze -e rope --dim 1026
row refused --horizon 512 analyze -e rope --horizon 512  # lags of [0, 512) end at 511

# posenc lab on a tiny corpus, every kind of encoding; each model holds 8192 tokens' activations.
for i in $(seq 1 200); do echo "one two three four five six seven $i"; done >"$tmp/corpus.txt"
lab=(lab --corpus "$tmp/corpus.txt" --progress none --encodings "rope,learned,alibi,t5,shaw,binary,relative,xl"
     --out "$out_lab")
lab_sizes() {  # lab_sizes FLAG...: the small sizes, less the flags given
  local -A skip=()
  for f in "$@"; do [ -z "$f" ] || skip[$f]=1; done
  local -a sizes=(--steps 2 --batch 2 --train-len 8 --eval-lengths "8,16" --eval-tokens 64 --layers 1 --heads 2
                  --mlp 16 --d-model 16)
  for ((i = 0; i < ${#sizes[@]}; i += 2)); do
    [ -n "${skip[${sizes[i]}]:-}" ] || printf '%s\n%s\n' "${sizes[i]}" "${sizes[i + 1]}"
  done
}
lab_row() {  # lab_row EXPECT FLAG VALUE [FLAG2 VALUE2]: the small lab with FLAG (and FLAG2) set
  local -a rest
  mapfile -t rest < <(lab_sizes "$2" "${4:-}")
  row "$1" "$2" "$3" "${lab[@]}" "${rest[@]}" "$2" "$3" ${4:+"$4" "$5"}
}
for f in --steps --batch --train-len --eval-lengths --eval-tokens --layers --d-model --heads --mlp --seeds \
  --t5-buckets --t5-max-distance --task-samples; do
  for v in 0 -1 $max; do lab_row refused $f "$v"; done
done
for f in --warmup --threads --binary-bits --max-distance; do
  for v in -1 $max; do lab_row refused $f "$v"; done
done
lab_row ok --warmup 0
lab_row ok --threads 0
lab_row ok --binary-bits 0
lab_row ok --max-distance 0
lab_row memory --steps $p53 --seeds 1048576  # 2^53 x 2^20 losses
lab_row memory --steps $((mem / 48 + 1))
lab_row memory --batch $p40 --train-len $p40
lab_row memory --batch $((mem / 32 + 1))
lab_row memory --train-len $p40 --batch $p40
lab_row memory --train-len $((mem / 8 + 1))
lab_row memory --eval-lengths $p53
lab_row memory --eval-lengths $((mem / 4 + 1))
lab_row memory --layers $p40 --d-model $p40
lab_row memory --layers $((mem / 16384 + 1))  # 16 bytes x 4 C^2 per layer
d_model=$(python3 -c "import math, sys; print(math.isqrt(int(sys.argv[1]) // 64) + 2)" "$mem")
lab_row memory --d-model $p40 --layers $p40
lab_row memory --d-model "$d_model"  # 16 bytes x 4 C^2
lab_row memory --heads $p53
lab_row memory --heads $((mem / 32768 + 1))  # 4 bytes x 8192 tokens per head
lab_row memory --mlp $p53
lab_row memory --mlp $((mem / 512 + 1))  # 16 bytes x 2 C F
lab_row memory --seeds $p53 --steps 1048576
lab_row memory --seeds $((mem / 96 + 1))  # 2 steps of 48 bytes per run
lab_row memory --t5-buckets $p53
lab_row memory --t5-buckets $((mem / 32 + 1))  # 16 bytes x 2 heads per bucket
lab_row memory --max-distance $p53
lab_row memory --max-distance $((mem / 64 + 1))  # 16 bytes x 2 heads x 2k+1 rows
lab_row refused --eval-tokens $((p53 + 1))
lab_row refused --threads 1025
lab_row refused --binary-bits 17  # more than d_model = 16
lab_row refused --task-samples 1000001

# posenc inspect: --seq-len picks the length that dynamic and longrope frequencies are shown at.
llama="$(cd "$(dirname "$0")" && pwd)/data/hf_configs/llama3__Llama-3.1-8B-Instruct.json"
extremes_but_zero --seq-len inspect "$llama"
row refused --seq-len $((p53 + 1)) inspect "$llama" --seq-len $((p53 + 1))
row ok --seq-len $p53 inspect "$llama" --seq-len $p53

if [ "$failures" -ne 0 ]; then echo "$failures of $checks size checks failed"; exit 1; fi
echo "all $checks size checks passed"
