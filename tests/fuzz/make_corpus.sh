#!/usr/bin/env bash
# Regenerates the committed seed corpora tests/fuzz/corpus/<target>/ from
# the project's own small inputs and the reliability reproducers
# (REPRO, default ../shared/repro next to the checkout; skipped when
# absent). Needs python3, a C compiler and libhdf5 (for the .h5ad seeds).
#   tests/fuzz/make_corpus.sh [REPRO]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
repro=${1:-$top/../shared/repro}
out=$here/corpus
cd "$top"
rm -rf "$out"
mkdir -p "$out"/{config,override,safetensors,csv,h5ad,sweep,h5ad_write,sweep_values,schedule,ledger}

# config: every YAML file of the tree, the reproducers' configs.
for f in configs/*.yaml bench/configs/*.yaml tests/data/reference_config.yaml tests/data/model/*.yaml \
  tests/data/faults/tiny.yaml tests/data/sweeps/tiny.yaml; do
  cp "$top/$f" "$out/config/$(echo "$f" | tr / _)"
done
if [ -d "$repro" ]; then
  cp "$repro/tiny.yaml" "$out/config/repro_tiny.yaml"
  cp "$repro/config/deep_nesting_30000.yaml" "$out/config/repro_deep_nesting_30000.yaml"
  cp "$repro/config/override-dump-hang.fuzz" "$out/override/repro_override_dump_hang"
  cp "$repro/config/sweep_nonutf8_key_double_free.lua" "$out/sweep/repro_nonutf8_key_double_free.lua"
  for f in "$repro"/lua/*.lua; do cp "$f" "$out/sweep/repro_$(basename "$f")"; done
  for f in "$repro"/forward/*.safetensors; do cp "$f" "$out/safetensors/repro_$(basename "$f")"; done
  for f in "$repro"/h5ad/*.h5ad "$repro"/h5ad/*.fuzz; do
    # libhdf5 1.10.8 itself loops forever on this one: ast_data_read_h5ad
    # bounds it with its helper process, the in-process fuzz target cannot.
    case $(basename "$f") in hdf5-hang-H5HG_read.h5ad) continue ;; esac
    cp "$f" "$out/h5ad/repro_$(basename "$f")"
  done
fi
for f in "$top"/tests/data/sweeps/*.lua; do
  # A string pattern that backtracks for hours inside one library call: by
  # design only the sweep's wall-clock backstop ends it, by ending the
  # process, which the fuzzer would report every time.
  case $(basename "$f") in pattern_bomb.lua) continue ;; esac
  cp "$f" "$out/sweep/$(basename "$f")"
done

# h5ad: tiny files in each encoding the reader knows.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2046 # flag lists
"${CC:-cc}" "$here/make_h5ad_seeds.c" $(pkg-config --cflags --libs hdf5) -o "$tmp/mk"
"$tmp/mk" "$out/h5ad"

python3 - "$top" "$out" "$repro" <<'PY'
import gzip, json, os, struct, sys
top, out, repro = sys.argv[1:]

def put(target, name, data):
    with open(os.path.join(out, target, name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())

# override: one KEY=VALUE per line.
put('override', 'scalars', 'training.learning_rate=1e-3\ntraining.epochs=7\nseed=3\ntraining.early_stopping=yes\n')
put('override', 'plugins', 'attention=gated\nattention.gate_type=elementwise\nffn={name: moe, num_experts: 4, top_k: 2}\n'
    'ffn.top_k=1\n')
put('override', 'monitors', 'monitors=[grad_norm, {name: x, every: 5}]\nmonitors=[]\n')
put('override', 'nested', 'training.scheduler={type: step, step_size: 2, gamma: 0.5}\ntraining.scheduler.type=cosine\n'
    'data.preprocessing.cell_type_key=cell_type\n')
put('override', 'strings', "logging.wandb_project='null'\ndata.path=\"x y.h5ad\"\nevaluation.protocol=region\n")
put('override', 'errors', 'training.lerning_rate=1\ntraining.epochs=abc\ntraining.epochs.x=1\ntraining.epochs=[1\nnoequals\n')
put('override', 'deep', 'attention=' + '[' * 100 + ']' * 100 + '\nffn.x=' + '{a: ' * 80 + '1' + '}' * 80 + '\n')

# safetensors: small files of each dtype, metadata, an empty file, scalars.
sizes = {'BOOL': 1, 'U8': 1, 'I8': 1, 'I16': 2, 'U16': 2, 'F16': 2, 'BF16': 2, 'I32': 4, 'U32': 4, 'F32': 4,
         'F64': 8, 'I64': 8, 'U64': 8}
def st(tensors, meta=None, pad=True):
    header, buf = {}, b''
    for name, dtype, shape, data in tensors:
        header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [len(buf), len(buf) + len(data)]}
        buf += data
    if meta is not None:
        header['__metadata__'] = meta
    h = json.dumps(header, separators=(',', ':')).encode()
    if pad:
        h += b' ' * (-len(h) % 8)
    return struct.pack('<Q', len(h)) + h + buf
f32 = lambda *v: struct.pack('<%df' % len(v), *v)
put('safetensors', 'f32_2x3', st([('w', 'F32', [2, 3], f32(1, 2, 3, 4, 5, 6))], {'format': 'pt'}))
put('safetensors', 'mixed', st([('a', 'F16', [2], struct.pack('<2H', 0x3c00, 0xc000)),
                                 ('b', 'BF16', [1, 2], struct.pack('<2H', 0x3f80, 0x4000)),
                                 ('c', 'I64', [3], struct.pack('<3q', -1, 0, 1 << 40)),
                                 ('d', 'I32', [], struct.pack('<i', 7)),
                                 ('e', 'F64', [1], struct.pack('<d', 0.25)),
                                 ('f', 'BOOL', [4], bytes([0, 1, 1, 0])),
                                 ('g', 'U8', [2], bytes([3, 4]))],
                                {'step': '12', 'epoch': '1', 'note': 'x'}))
put('safetensors', 'every_dtype', st([(d.lower(), d, [1, 1], bytes(range(s))) for d, s in sizes.items()]))
put('safetensors', 'empty_tensor', st([('z', 'F32', [0, 4], b''), ('y', 'F32', [1], f32(2))]))
put('safetensors', 'no_tensors', st([], {'k': 'v'}))
put('safetensors', 'unpadded', st([('w', 'F32', [2], f32(1, 2))], pad=False))
put('safetensors', 'nonfinite', st([('w', 'F32', [2], f32(float('nan'), 1))]))
# A metadata key written twice (refused since the fuzz target's write-back check found it).
dup = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"__metadata__":{"epoch":"1","epoch":"2"}}'
put('safetensors', 'dup_metadata_key', struct.pack('<Q', len(dup)) + dup + f32(0))
put('safetensors', 'checkpoint', st([('model.layers.0.attn.q.weight', 'F32', [2, 2], f32(1, 2, 3, 4)),
                                      ('model.layers.0.attn.q.bias', 'F32', [2], f32(0, 0)),
                                      ('optim.step', 'I64', [1], struct.pack('<q', 3))],
                                     {'epoch': '2', 'step': '80', 'metrics_bytes': '1024', 'best_val': '0.5'}))

# csv: two header bytes (tests/fuzz/README.md), then the file.
def csv(name, flags, text, cut=0):
    put('csv', name, bytes([flags, cut]) + (text if isinstance(text, bytes) else text.encode()))
cells = 'cell,x,y,z,Slc17a7,Mgp,Gad1\nc1,1.5,2,0,3,0,1\nc2,2,3.25,1,0,5,2\nc3,4,1,2,7,1,0\n'
csv('cells_by_genes.csv', 0, cells)
csv('cells_by_genes.tsv', 1, cells.replace(',', '\t'))
csv('white_space.txt', 2, 'x y A B\n0 0 1 2\n1 1 3 4\n')
csv('no_id_2d.csv', 3, 'x,y,A,B\n0,0,1,2\n1,1,3,4\n"2","3","5","6"\n')
csv('cells_by_genes.csv.gz', 4, cells)
csv('cells_by_genes_cut.csv.gz', 4 | 8, cells, 200)
csv('crlf.csv', 0, cells.replace('\n', '\r\n'))
# genes x cells (the STARmap layout): matrix, NUL, coordinate file.
with gzip.open(os.path.join(top, 'data/starmap3d/expr.txt.gz'), 'rt') as f:
    rows = [f.readline().split()[:7] for _ in range(6)]
with open(os.path.join(top, 'data/starmap3d/loc.txt')) as f:
    loc = ''.join(f.readline() for _ in range(6))
matrix = ' '.join(rows[0][:6]) + '\n' + ''.join(' '.join(r) + '\n' for r in rows[1:])
csv('starmap_genes_by_cells.txt', 2 | 16, matrix + '\0' + loc)
csv('starmap_genes_by_cells.txt.gz', 2 | 4 | 16, matrix + '\0' + loc)

# sweep_values: one sweep override per line (Hydra's multirun values).
put('sweep_values', 'lists', 'attention=linear,gated\nffn=choice(dense, moe)\n~monitors\n'
    'attention={name: gated, gate_type: headwise},linear\nmonitors=[grad_norm],[]\n'
    "data.path='a,b.h5ad',\"c,d\"\n+logging.note=x, y ,z\n")
put('sweep_values', 'ranges', 'training.epochs=range(1,4)\ntraining.learning_rate=range(0.001, 0.004, 0.001)\n'
    'seed.value=range(3)\ntraining.batch_size=range(8, 0, -2)\n')
put('sweep_values', 'errors', 'noequals\ntraining.epochs=range(a)\nx=1,,2\n=1\nx=range(1,2,3,4)\nx=range(0)\n')

# schedule: tables as alphast-run sweep writes them, and damaged ones.
table = {'alphast.schedule_table': '1', 'run': 'Gated-0123456789abcdef'}
put('schedule', 'lr', st([('lr', 'F32', [4], f32(1e-3, 8e-4, 5e-4, 1e-4))], table))
put('schedule', 'lr_and_named', st([('lr', 'F32', [3], f32(1e-3, 1e-3, 5e-4)),
                                    ('moe.router_noise', 'F32', [3], f32(1, 0.5, 0)),
                                    ('masking.ratio', 'F32', [3], f32(0.1, 0.2, 0.3))], table))
# the most columns a table holds: one renamed from lr is one too many
put('schedule', 'eight_named_and_lr', st([('lr', 'F32', [2], f32(1e-3, 1e-3))] +
                                          [('k%d' % i, 'F32', [2], f32(0.1, 0.2)) for i in range(8)], table))
put('schedule', 'named_only', st([('moe.load_balance_weight', 'F32', [2], f32(0.01, 0.02))], table))
put('schedule', 'lengths_differ', st([('lr', 'F32', [2], f32(1, 2)), ('masking.ratio', 'F32', [3], f32(1, 2, 3))], table))
put('schedule', 'negative', st([('lr', 'F32', [2], f32(1e-3, -1))], table))
put('schedule', 'no_metadata', st([('lr', 'F32', [1], f32(1e-3))]))
put('schedule', 'f64_column', st([('lr', 'F64', [2], struct.pack('<2d', 1e-3, 2e-3))], table))

# ledger: ledger.jsonl as runners append it, a torn last line, lines to skip.
def line(**kw):
    return json.dumps(kw, separators=(',', ':')) + '\n'
a = dict(run='Gated-8c1f0e2d9a3b4c5d', config_name='Gated', seed=1, hash='8c1f0e2d9a3b4c5d', dir='runs/Gated-8c1f0e2d9a3b4c5d')
b = dict(run='Base-0123456789abcdef', config_name='Base', seed=2, hash='0123456789abcdef', dir='runs/Base-0123456789abcdef')
put('ledger', 'sweep', line(time=1712345670.0, state='pending', **a) + line(time=1712345670.5, state='pending', **b) +
    line(time=1712345671.0, state='running', pid=4242, host='node3', job='1234_5', start=1712345671.0, gpu='1', **a) +
    line(time=1712345690.25, state='done', pid=4242, host='node3', job='1234_5', start=1712345671.0, end=1712345690.25,
         exit=0, **a) +
    line(time=1712345691.0, state='running', pid=4243, host='node3', **b) +
    line(time=1712345699.0, state='pending', reason='preempted', signal=10, exit=75, **b))
put('ledger', 'torn', line(time=1.0, state='running', pid=7, **a) + '{"time":2.0,"run":"Gated-8c1f0e2d9a3b4c5d","st')
put('ledger', 'skipped', '\n' + line(time=1.0, state='finished', **a) + '{"run":5,"state":"done"}\n[1,2]\n' +
    '{"run":"x","state":"failed","reason":"exit status 1","exit":1,"pid":1e300}\n')

# h5ad_write: frames in the target's byte layout (fuzz_h5ad_write.c).
def text(s):
    s = s.encode()
    return bytes([len(s)]) + s
def frame(cells, genes, dims, obs, obsm=None, uns=None):
    n, g = len(cells), len(genes)
    out = bytes([(n - 1) + 8 * (g - 1)]) + b''.join(map(text, genes)) + b''.join(map(text, cells))
    out += bytes((3 * i + k) % 64 for i in range(n) for k in range(g))
    out += bytes([(dims - 2) | (2 if obsm else 0) | (8 if uns else 0) | len(obs) << 4])
    out += bytes((7 * i + 3) % 256 for i in range(3 * n))
    if obsm:
        out += text(obsm)
    if uns:
        out += text(uns[0]) + text(uns[1])
    for name, kind, cats, values in obs:
        out += text(name) + bytes([kind, len(cats) - 1]) + b''.join(map(text, cats)) + bytes(values)
    return out
cells = ['c%d' % i for i in range(4)]
put('h5ad_write', 'plain_2d', frame(cells, ['Gja1', 'Vip', 'Sst'], 2, []))
put('h5ad_write', 'as_sample_writes', frame(cells, ['Gja1', 'Vip'], 3,
    [('region', 2, ['cortex', 'striatum'], [1, 2, 0, 1]), ('area', 1, ['-'], [4, 255, 8, 1]),
     ('cell', 0, ['-'], [0, 1, 2, 3]), ('set', 0, ['-'], [0, 0, 1, 1])],
    obsm='spatial_true', uns=('version', '0.1.0')))
put('h5ad_write', 'odd_names', frame(['\u00e9', '', 'a b', 'x\ty'], ['G\u00fcn', 'A,B'], 2,
    [('slice', 2, ['s 1', '\u00fc', ''], [1, 2, 3, 0])]))
if os.path.isdir(repro):
    for name in ('c10_negative_counts_nan.csv', 'c15_dup_x_col.csv'):
        csv('repro_' + name, 0, open(os.path.join(repro, 'csv', name), 'rb').read())
    csv('repro_c19_gzip_trunc_at_line.csv.gz', 32, open(os.path.join(repro, 'csv', 'c19_gzip_trunc_at_line.csv.gz'), 'rb').read())
    grow = open(os.path.join(repro, 'csv', 'ubsan-null-offset-grow.fuzz'), 'rb').read()
    csv('repro_ubsan_null_offset_grow', 0, grow)
    put('csv', 'repro_ubsan_null_offset_grow_raw', grow)
PY
echo "seed corpora written to $out:"
for d in "$out"/*/; do printf '  %-12s %3d files, %s\n' "$(basename "$d")" "$(find "$d" -type f | wc -l)" "$(du -sh "$d" | cut -f1)"; done
