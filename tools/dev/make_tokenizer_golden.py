#!/usr/bin/env python3
"""Writes the tokenizer golden files under tests/data/tokenizer/golden/ (committed; rerun only to change them):
the ranks rustbpe (nanochat's trainer) trains with nanochat's split pattern on tokenizer_train.jsonl (KJV
chapters, from Debian's bible-kjv, and the multilingual parity text), written by tiktoken's dump_tiktoken_bpe;
nanochat's 9 specials; and the parity cases with tiktoken's encode_ordinary ids (docs/tokenizer.md, "Tests").

Needs: pip install tiktoken rustbpe; the `bible` program (Debian bible-kjv) to regenerate the training text.
Usage: tools/dev/make_tokenizer_golden.py [--out tests/data/tokenizer/golden] [--vocab-size 2048]
"""
import argparse
import base64
import json
import os
import subprocess

import rustbpe
import tiktoken
import tiktoken.load

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# nanochat/tokenizer.py SPLIT_PATTERN and SPECIAL_TOKENS.
SPLIT_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
SPECIAL_TOKENS = ["<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>",
                  "<|python_start|>", "<|python_end|>", "<|output_start|>", "<|output_end|>"]

# Varied text: each entry is a parity case of its own, and all of them joined is one more case.
PARITY_SNIPPETS = [
    "Hello world! The quick brown fox jumps over the lazy dog.",
    "I'LL go, you're here, WE'VE seen it, she'd say it's John's; DON'T Won't 'S 'Ll 'vE 'Re 'M 'D 'T 'ſ I'ſtop it'ſ",
    "Contractions without apostrophe: ill, were; curly ones: I’ll, it’s.",
    "Français: élève, où, garçon, cœur. Deutsch: Straße, Größe, Übermaß. Español: ¿Qué tal? ¡Olé!",
    "Ελληνικά: Καλημέρα κόσμε. Русский: Съешь же ещё этих мягких французских булок.",
    "עברית: שלום עולם. العربية: مرحبا بالعالم ١٢٣٤٥٦٧ ۱۲۳",
    "हिन्दी: नमस्ते दुनिया। தமிழ்: வணக்கம். ไทย: สวัสดีชาวโลก",
    "中文：你好，世界！日本語：こんにちは、世界。カタカナ。한국어: 안녕하세요 세계",
    "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ ✨🚀 and text🙂after",
    "Digits: 0 12 345 6789 1234567890 3.14159 1,000,000 -42 +7e-10 0x1F ２０２４ ²³ ½ Ⅻ ①②",
    "A long number: " + "31415926535897932384626433832795028841971693993751" * 4,
    "Whitespace:  two  spaces,   three,\ttab,\t\ttwo tabs, trailing   \n   leading, \u00a0nbsp\u00a0, "
    "\u3000ideographic\u3000, \u2028line sep, \u0085nel, \u180emongolian, \u200bzero-width",
    "Windows\r\nline\r\n\r\nendings\r\n and \rlone CR and \n\n\nnewline runs\n\n",
    " " * 300 + "after 300 spaces" + "\t" * 40 + "\n" * 30 + "x",
    "a" * 200 + " " + "ab" * 150 + " " + "Z" * 129,
    "def encode(self, text: str) -> list[int]:\n    return [self.ranks[b] for b in text.encode('utf-8')]\n",
    "int main(int argc, char** argv) {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v.size() > 2 ? 0 : 1;\n}\n",
    '{"key": "value", "list": [1, 2.5, null, true], "nested": {"a": "b"}} // JSON-ish; <tag attr="x">&amp;</tag>',
    "Punctuation!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} ||| \\\\ /// ~~~ ``` '''",
    "Special-token text is plain text: <|bos|> <|user_start|>hi<|user_end|> <|assistant_start|>"
    "ok<|assistant_end|> <|endoftext|>",
    "Combining: e\u0301 a\u0308 n\u0303; RTL mark\u200f; ZWJ\u200d; BOM\ufeff; control \x01\x02\x7f chars",
    "Mixed: abc123def 12abc a1b2c3 ab12 1a 'ab' \"quoted\" (paren) [bracket] {brace} snake_case camelCase",
    "Math: ∀x∈ℝ, ∃y: x² + y² ≤ 1 ⇒ |x| ≤ 1; ∑ᵢ aᵢ = ∫₀¹ f(t) dt ≈ π/4 ± ε",
    "End with spaces   ",
]


def kjv_chapters(max_chars):
    """KJV chapters as documents, in Bible order, until about max_chars characters."""
    text = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], capture_output=True, text=True, check=True).stdout
    chapters, current, current_key = [], [], None
    for line in text.splitlines():
        ref, _, verse = line.partition(" ")
        key = ref.split(":")[0]
        if key != current_key and current:
            chapters.append(" ".join(current))
            current = []
        current_key = key
        current.append(verse.strip())
    chapters.append(" ".join(current))
    out, total = [], 0
    for chapter in chapters:
        if total >= max_chars:
            break
        out.append(chapter)
        total += len(chapter)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "tests", "data", "tokenizer", "golden"))
    parser.add_argument("--vocab-size", type=int, default=2048, help="including the 9 specials")
    parser.add_argument("--train-chars", type=int, default=300_000)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    train_path = os.path.join(args.out, "tokenizer_train.jsonl")
    documents = kjv_chapters(args.train_chars) + PARITY_SNIPPETS
    with open(train_path, "w", encoding="utf-8", newline="") as f:
        for document in documents:
            f.write(json.dumps({"text": document}, ensure_ascii=False) + "\n")

    trainer = rustbpe.Tokenizer()
    trainer.train_from_iterator(iter(documents), args.vocab_size - len(SPECIAL_TOKENS), pattern=SPLIT_PATTERN)
    ranks_list = trainer.get_mergeable_ranks()
    ranks = {bytes(token): rank for token, rank in ranks_list}
    assert len(ranks) == len(ranks_list), "rustbpe made two tokens with the same bytes"
    assert sorted(ranks.values()) == list(range(len(ranks))), "ranks are not 0..N-1"
    tiktoken.load.dump_tiktoken_bpe(ranks, os.path.join(args.out, "tokenizer.tiktoken"))
    specials = {name: len(ranks) + i for i, name in enumerate(SPECIAL_TOKENS)}
    with open(os.path.join(args.out, "special_tokens.txt"), "w", encoding="utf-8", newline="") as f:
        for name, token_id in specials.items():
            f.write(f"{name} {token_id}\n")

    encoding = tiktoken.Encoding("nanoforge-golden", pat_str=SPLIT_PATTERN, mergeable_ranks=ranks,
                                 special_tokens=specials)
    cases = ["".join(PARITY_SNIPPETS), "\n\n".join(PARITY_SNIPPETS)] + PARITY_SNIPPETS
    with open(os.path.join(args.out, "parity_cases.txt"), "w", encoding="ascii", newline="") as f:
        for case in cases:
            ids = encoding.encode_ordinary(case)
            assert encoding.decode_bytes(ids) == case.encode("utf-8")
            f.write(base64.b64encode(case.encode("utf-8")).decode("ascii") + "\t" + " ".join(map(str, ids)) + "\n")
    total = sum(os.path.getsize(os.path.join(args.out, name)) for name in os.listdir(args.out))
    print(f"wrote {args.out}: {len(ranks)} ranks + {len(specials)} specials, {len(documents)} training documents, "
          f"{len(cases)} parity cases, {total} bytes in all (tiktoken {tiktoken.__version__})")


if __name__ == "__main__":
    main()
