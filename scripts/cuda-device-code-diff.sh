#!/usr/bin/env bash
# Whether a change of kernels/cuda/ changed the code the GPU runs: compiles every kernels/cuda/*.cu of a git
# revision (default HEAD) and of the working tree with nvcc to PTX and to cubins for sm_90 and sm_121, and
# compares the PTX and each cubin's kernel sections (.text, .nv.info, .nv.shared, .nv.constant0), with the
# anonymous-namespace hash nvcc derives from the file's path normalised away. Host code is not compared.
# Usage: scripts/cuda-device-code-diff.sh [REVISION]     (exit status 1 when device code differs)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
revision=${1:-HEAD}
nvcc=${NVCC:-nvcc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git -C "$repo" archive "$revision" kernels support | tar -x -C "$work" --one-top-level=before
mkdir -p "$work/after"
(cd "$repo" && tar -c kernels support) | tar -x -C "$work/after"

compile() {  # compile TREE: device code of every .cu into TREE/out
  local tree=$1 source name arch
  mkdir -p "$tree/out"
  for source in "$tree"/kernels/cuda/*.cu; do
    name=$(basename "$source" .cu)
    for arch in 90 121; do
      "$nvcc" -std=c++20 -O3 -DNDEBUG -DNANOFORGE_HAVE_CUDA -DFMT_USE_CONSTEXPR=1 -I"$tree" \
        -arch=sm_$arch -cubin -o "$tree/out/$name.sm_$arch.cubin" "$source"
      "$nvcc" -std=c++20 -O3 -DNDEBUG -DNANOFORGE_HAVE_CUDA -DFMT_USE_CONSTEXPR=1 -I"$tree" \
        -arch=compute_$arch -ptx -o "$tree/out/$name.compute_$arch.ptx" "$source"
    done
  done
}
compile "$work/before"
compile "$work/after"

python3 - "$work/before/out" "$work/after/out" <<'EOF'
import os, re, struct, sys

def normalise(text):
    return re.sub(r'_GLOBAL__N__[0-9a-f]{8}', '_GLOBAL__N__', text)

def kernel_sections(path):
    data = open(path, 'rb').read()
    section_offset = struct.unpack_from('<Q', data, 0x28)[0]
    entry_size, count, names_index = struct.unpack_from('<HHH', data, 0x3A)
    sections = [struct.unpack_from('<IIQQQQ', data, section_offset + i * entry_size) for i in range(count)]
    names = sections[names_index]
    names = data[names[4]:names[4] + names[5]]
    kept = {}
    for name, kind, _, _, offset, size in sections:
        label = normalise(names[name:names.index(b'\0', name)].decode())
        if label.startswith(('.text.', '.nv.info.', '.nv.shared.', '.nv.constant0.')):
            kept[label] = size if kind == 8 else data[offset:offset + size]  # 8: NOBITS
    return kept

before, after = sys.argv[1], sys.argv[2]
differ = []
for name in sorted(set(os.listdir(before)) | set(os.listdir(after))):
    a, b = os.path.join(before, name), os.path.join(after, name)
    if not (os.path.exists(a) and os.path.exists(b)):
        differ.append(name + ' (only in one tree)')
    elif name.endswith('.ptx'):
        if normalise(open(a).read()) != normalise(open(b).read()):
            differ.append(name)
    elif kernel_sections(a) != kernel_sections(b):
        differ.append(name)
print('device code differs: ' + ', '.join(differ) if differ else 'device code identical (PTX and cubin kernel sections, sm_90 and sm_121)')
sys.exit(1 if differ else 0)
EOF
