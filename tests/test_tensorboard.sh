#!/bin/sh
# logging.logger: tensorboard (issue 24 item 6): the events files of a run
# that is resumed twice, the second time from an older checkpoint as after a
# kill, then started over, decoded with protoc's Python classes of TensorBoard's Event
# (tests/proto) and checked against metrics.jsonl by
# tests/tensorboard_events.py; logging.logger: none writes none. Skips (77)
# without protoc and /usr/bin/python3's protobuf (Debian's protobuf-compiler
# and python3-protobuf).
set -eu
python=/usr/bin/python3
command -v protoc >/dev/null && "$python" -c 'import google.protobuf' 2>/dev/null ||
    { echo "skipped: no protoc or protobuf for $python (apt-get install protobuf-compiler python3-protobuf)"; exit 77; }
src=$(cd "$(dirname "$0")/.." && pwd)
run="${ALPHAST_BUILD_DIR:-$src/_build}/alphast-run"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/alphast-tensorboard.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
protoc -I "$src/tests/proto" --python_out="$tmp" event.proto summary.proto

cat >"$tmp/tiny.yaml" <<YAML
training_mode: joint
data:
  path: $src/data/visium_prostate/visium_prostate.h5ad
  set_size: 16
  slice_key: sample
  cache_dir: null
  preprocessing: {position_key: spatial, cell_type_key: null}
diffusion: {diffusion_steps: 50}
training: {batch_size: 2, epochs: 1, steps_per_epoch: 3, val_sets: 2, val_t_points: 1, early_stopping: false}
mlp_in_expression_setting: {mlp_in_expression_dims: 8, mlp_out_expression_dims: 8}
mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 4, mlp_out_diffusion_time_dims: 4}
PositionMLP_setting: {hidden_dims: 4}
TransformerLayer_setting: {num_layers: 1, num_heads: 2, dim_ff_expression: 8, dim_ff_diffusion_time: 4}
mlp_out_expression_setting: {hidden_dims: 8}
mlp_out_position_norm_setting: {hidden_dims: 4}
monitors: [{name: grad_norm, every: 1}]
sampling: {num_steps: 2}
evaluation: {sets: 1}
logging: {logger: tensorboard}
YAML

train() {
    "$run" train -q --config "$tmp/tiny.yaml" --out "$tmp/run" "$@" >"$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; exit 1; }
}
# TensorBoard orders a directory's files by name, whose first part is the second they were opened in.
train
cp "$tmp/run/checkpoint.safetensors" "$tmp/epoch1.safetensors"
sleep 1.1
train training.epochs=2
cp "$tmp/epoch1.safetensors" "$tmp/run/checkpoint.safetensors" # killed before epoch 2's checkpoint
sleep 1.1
train training.epochs=2
"$python" "$src/tests/tensorboard_events.py" "$tmp/run" "$tmp" 3
sleep 1.1
train --fresh # the old run's points go
"$python" "$src/tests/tensorboard_events.py" "$tmp/run" "$tmp" 4

"$run" train -q --config "$tmp/tiny.yaml" --out "$tmp/none" logging.logger=none >"$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; exit 1; }
if ls "$tmp/none" | grep -q tfevents; then echo "logging.logger: none wrote $(ls "$tmp/none")"; exit 1; fi
