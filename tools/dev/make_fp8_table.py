"""Write tests/kernels/golden/fp8_table.txt: PyTorch's own float8 conversions (decoding, encoding as nanochat's
fp8.py quantises, and its tensorwise scale), the independent reference kernels/fp8_format.h is held to (the
table's lines and why: docs/fp8.md).

Usage: python3 tools/dev/make_fp8_table.py --out tests/kernels/golden/fp8_table.txt
Needs: torch >= 2.1 (the float8 dtypes; a CPU build is enough), numpy. Deterministic (fixed seed).
"""

import argparse

import numpy as np
import torch

FORMATS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
EPS = 1e-12  # nanochat/fp8.py EPS


def float_bits(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def decode_all(dtype):
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    values = codes.view(dtype).float().numpy()
    values = np.where(np.isnan(values), np.float32(np.nan), values).astype(np.float32)
    return values


def quantize_like_nanochat(values, dtype):
    fp8_max = torch.finfo(dtype).max
    x = torch.from_numpy(np.asarray(values, dtype=np.float32))
    return x.clamp(-fp8_max, fp8_max).to(dtype).view(torch.uint8).numpy()


def encode_inputs(dtype, rng):
    finite = decode_all(dtype)
    finite = np.unique(np.abs(finite[np.isfinite(finite)]))
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)  # exact: one more bit
    up = np.nextafter(mids, np.float32(np.inf))
    down = np.nextafter(mids, np.float32(0))
    fp8_max = np.float32(torch.finfo(dtype).max)
    beyond = np.array([fp8_max * 1.01, fp8_max * 1.0625, fp8_max * 2, 1e30, np.finfo(np.float32).max],
                      dtype=np.float32)
    special = np.array([0.0, np.inf, np.nan, 1e-45, 1e-40, 1e-38, 1.1754942e-38], dtype=np.float32)
    random = np.exp(rng.uniform(np.log(1e-12), np.log(1e6), 600)).astype(np.float32)
    positive = np.concatenate([finite, mids, up, down, beyond, special, random])
    return np.concatenate([positive, -positive]).astype(np.float32)


def tensorwise_scale(amax, dtype):
    fp8_max = torch.finfo(dtype).max
    amax_tensor = torch.tensor(amax, dtype=torch.float32)
    return (fp8_max / amax_tensor.double().clamp(min=EPS)).float().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rng = np.random.default_rng(20261206)
    # The path this tool had when the table was made, so that it regenerates byte for byte.
    lines = [f"# made by tools/make_fp8_table.py with torch {torch.__version__}; hex float32 bits"]
    amaxes = np.concatenate([np.array([0.0, 1e-13, 1e-12, 1e-11, 1.0, 3.1415927, 448.0, 57344.0, 1e30],
                                      dtype=np.float32),
                             np.exp(rng.uniform(np.log(1e-10), np.log(1e10), 200)).astype(np.float32)])
    for name, dtype in FORMATS.items():
        for code, bits in enumerate(float_bits(decode_all(dtype))):
            lines.append(f"{name} decode {code:02x} {bits:08x}")
        inputs = encode_inputs(dtype, rng)
        for bits, code in zip(float_bits(inputs), quantize_like_nanochat(inputs, dtype)):
            lines.append(f"{name} encode {bits:08x} {code:02x}")
        for amax in amaxes:
            scale = np.float32(tensorwise_scale(float(amax), dtype))
            lines.append(f"{name} scale {float_bits([amax])[0]:08x} {float_bits([scale])[0]:08x}")
    with open(args.out, "w") as out:
        out.write("\n".join(lines) + "\n")
    print(f"{args.out}: {len(lines) - 1} lines")


if __name__ == "__main__":
    main()
