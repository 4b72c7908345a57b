#!/usr/bin/env python3
"""Times the reference tokenizers on the same input as `nanoforge bench tokenizer` / `tokenizer train`.

  encode: tiktoken's encode_ordinary, one document at a time on one thread (and encode_ordinary_batch on N
          threads), with a nanoforge tokenizer directory loaded into tiktoken.Encoding with nanochat's pattern;
          the documents are read and repeated exactly as `nanoforge bench tokenizer` does.
  train:  rustbpe (nanochat's trainer) and/or HF `tokenizers` (ByteLevel BPE behind nanochat's split regex,
          as nanochat's HuggingFaceTokenizer trains it) on the documents, cut to --doc-max-chars characters;
          --out DIR writes rustbpe's ranks as a nanoforge tokenizer directory, for comparison.

Documents: *.jsonl/*.ndjson ("text" field) and *.txt/*.text/*.md split into paragraphs at blank lines (lines
of only spaces, tabs or \\r), as data/documents/documents.h does. Needs: pip install tiktoken rustbpe tokenizers.
Usage: tools/dev/bench_tokenizer_reference.py encode --tokenizer DIR --input FILE[,FILE] [--bench-mb 16]
       tools/dev/bench_tokenizer_reference.py train --input FILE[,FILE] [--vocab-size 32768] [--trainer rustbpe,hf]
The last line printed is JSON.
"""
import argparse
import base64
import json
import os
import time

# nanochat/tokenizer.py SPLIT_PATTERN and SPECIAL_TOKENS.
SPLIT_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
SPECIAL_TOKENS = ["<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>",
                  "<|python_start|>", "<|python_end|>", "<|output_start|>", "<|output_end|>"]


def expand(inputs):
    paths = []
    for item in inputs.split(","):
        if os.path.isdir(item):
            paths += sorted(os.path.join(item, name) for name in os.listdir(item)
                            if name.lower().endswith((".jsonl", ".ndjson", ".txt", ".text", ".md")))
        else:
            paths.append(item)
    return paths


def documents(paths):
    for path in paths:
        if path.lower().endswith((".jsonl", ".ndjson")):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        yield json.loads(line)["text"]
        else:
            with open(path, "rb") as f:
                data = f.read().decode("utf-8", errors="surrogateescape")
            lines = data.split("\n")
            block = []
            for line in lines + [""]:
                if line.strip(" \t\r") == "":
                    if block:
                        text = "\n".join(block)
                        yield text[:-1] if text.endswith("\r") else text
                        block = []
                else:
                    block.append(line)


def load_encoding(directory):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    ranks = load_tiktoken_bpe(os.path.join(directory, "tokenizer.tiktoken"))
    specials = {}
    with open(os.path.join(directory, "special_tokens.txt"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                name, token_id = line.split()
                specials[name] = int(token_id)
    return tiktoken.Encoding("nanoforge", pat_str=SPLIT_PATTERN, mergeable_ranks=ranks, special_tokens=specials)


def bench_encode(args):
    import tiktoken
    encoding = load_encoding(args.tokenizer)
    target = args.bench_mb * 1000 * 1000
    docs, size = [], 0
    for text in documents(expand(args.input)):
        if size >= target:
            break
        docs.append(text)
        size += len(text.encode("utf-8", errors="surrogateescape"))
    distinct, input_bytes = len(docs), size
    i = 0
    while size < target:
        docs.append(docs[i % distinct])
        size += len(docs[-1].encode("utf-8", errors="surrogateescape"))
        i += 1
    for text in docs[:64]:
        encoding.encode_ordinary(text)
    best, tokens = None, 0
    for _ in range(args.passes):
        start = time.perf_counter()
        tokens = 0
        for text in docs:
            tokens += len(encoding.encode_ordinary(text))
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    threads = args.threads or os.cpu_count()
    best_batch = None
    for _ in range(args.passes):
        start = time.perf_counter()
        encoding.encode_ordinary_batch(docs, num_threads=threads)
        elapsed = time.perf_counter() - start
        best_batch = elapsed if best_batch is None else min(best_batch, elapsed)
    print(f"tiktoken {tiktoken.__version__}: {distinct} documents, {input_bytes / 1e6:.2f} MB repeated to "
          f"{size / 1e6:.1f} MB; {tokens} tokens")
    print(f"1 thread:   {size / 1e6 / best:8.2f} MB/s")
    print(f"{threads} threads: {size / 1e6 / best_batch:8.2f} MB/s (encode_ordinary_batch)")
    print(json.dumps({"bench": "tiktoken encode", "mb_per_s_1_thread": round(size / 1e6 / best, 3),
                      "mb_per_s_threads": round(size / 1e6 / best_batch, 3), "threads": threads, "bytes": size,
                      "tokens": tokens, "tiktoken": tiktoken.__version__}))


def cut_documents(args):
    total = 0
    for text in documents(expand(args.input)):
        if args.doc_max_chars > 0:
            text = text[:args.doc_max_chars]
        total += len(text)
        yield text
        if args.max_chars > 0 and total > args.max_chars:
            return


def bench_train(args):
    results = {"bench": "reference tokenizer training", "vocab_size": args.vocab_size}
    merges_vocab = args.vocab_size - len(SPECIAL_TOKENS)
    for trainer_name in args.trainer.split(","):
        start = time.perf_counter()
        if trainer_name == "rustbpe":
            import rustbpe
            trainer = rustbpe.Tokenizer()
            trainer.train_from_iterator(cut_documents(args), merges_vocab, pattern=SPLIT_PATTERN)
            elapsed = time.perf_counter() - start
            ranks = trainer.get_mergeable_ranks()
            if args.out:
                os.makedirs(args.out, exist_ok=True)
                with open(os.path.join(args.out, "tokenizer.tiktoken"), "w") as f:
                    for token, rank in ranks:
                        f.write(base64.b64encode(bytes(token)).decode() + " " + str(rank) + "\n")
                with open(os.path.join(args.out, "special_tokens.txt"), "w") as f:
                    for i, name in enumerate(SPECIAL_TOKENS):
                        f.write(f"{name} {len(ranks) + i}\n")
            distinct = len({bytes(token) for token, _ in ranks})
            print(f"rustbpe: {len(ranks)} ranks ({len(ranks) - distinct} duplicate byte strings) in {elapsed:.1f} s")
        elif trainer_name == "hf":
            from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
            tokenizer = Tokenizer(models.BPE(byte_fallback=True, unk_token=None, fuse_unk=False))
            tokenizer.normalizer = None
            tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(pattern=Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
            tokenizer.decoder = decoders.ByteLevel()
            trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, show_progress=False, min_frequency=0,
                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                          special_tokens=SPECIAL_TOKENS)
            tokenizer.train_from_iterator(cut_documents(args), trainer)
            elapsed = time.perf_counter() - start
            print(f"HF tokenizers: vocab {tokenizer.get_vocab_size()} in {elapsed:.1f} s")
        else:
            raise SystemExit(f"unknown trainer {trainer_name}: expected rustbpe or hf")
        results[f"{trainer_name}_seconds"] = round(elapsed, 2)
    print(json.dumps(results))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    encode = sub.add_parser("encode")
    encode.add_argument("--tokenizer", required=True)
    encode.add_argument("--input", required=True)
    encode.add_argument("--bench-mb", type=int, default=16)
    encode.add_argument("--passes", type=int, default=3)
    encode.add_argument("--threads", type=int, default=0)
    train = sub.add_parser("train")
    train.add_argument("--input", required=True)
    train.add_argument("--vocab-size", type=int, default=32768)
    train.add_argument("--max-chars", type=int, default=0)
    train.add_argument("--doc-max-chars", type=int, default=10000)
    train.add_argument("--trainer", default="rustbpe,hf")
    train.add_argument("--out", default="")
    args = parser.parse_args()
    bench_encode(args) if args.command == "encode" else bench_train(args)


if __name__ == "__main__":
    main()
