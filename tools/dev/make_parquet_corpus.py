#!/usr/bin/env python3
"""Writes a JSONL corpus as nanochat-style parquet shards, and the very same documents as JSONL, for timing
`nanoforge prep` on both (docs/data.md). The input is repeated until --mb megabytes of text; each repetition's
documents carry a "[copy N] " prefix so that no two documents are equal.

    tools/dev/make_tokenizer_corpus.py --out /tmp/corpus.jsonl
    tools/dev/make_parquet_corpus.py --input /tmp/corpus.jsonl --mb 1000 --out /tmp/bench

OUT/parquet/shard_NNNNN.parquet  a `text` column, row groups of 1024 documents, zstd level 3, ~250 MB of text per
                                 shard: what nanochat's dev/repackage_data_reference.py writes
OUT/jsonl/shard_NNNNN.jsonl      the same documents, one {"text": ...} per line
Needs pyarrow.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tools/
import build_python  # the build tree's Python when this one lacks the packages

build_python.require("pyarrow")
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

ROW_GROUP_DOCUMENTS = 1024
SHARD_TEXT_BYTES = 250_000_000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mb", type=float, default=1000)
    args = parser.parse_args()
    with open(args.input, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    for folder in ("parquet", "jsonl"):
        os.makedirs(os.path.join(args.out, folder), exist_ok=True)

    target, written, shard, copy = args.mb * 1e6, 0, 0, 0
    documents, shard_bytes = [], 0

    def flush():
        nonlocal documents, shard_bytes, shard
        name = f"shard_{shard:05d}"
        pq.write_table(pa.table({"text": documents}), os.path.join(args.out, "parquet", name + ".parquet"),
                       row_group_size=ROW_GROUP_DOCUMENTS, compression="zstd", compression_level=3)
        with open(os.path.join(args.out, "jsonl", name + ".jsonl"), "w", encoding="utf-8") as f:
            for text in documents:
                f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
        documents, shard_bytes, shard = [], 0, shard + 1

    while written < target:
        for text in texts:
            document = f"[copy {copy}] {text}"
            size = len(document.encode())
            documents.append(document)
            shard_bytes += size
            written += size
            if shard_bytes >= SHARD_TEXT_BYTES and len(documents) % ROW_GROUP_DOCUMENTS == 0:
                flush()
            if written >= target:
                break
        copy += 1
    if documents:
        flush()
    print(f"wrote {shard} shards, {written / 1e6:.1f} MB of text, under {args.out}/parquet and {args.out}/jsonl")


if __name__ == "__main__":
    main()
