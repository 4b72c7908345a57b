#!/usr/bin/env python3
"""Builds a reproducible English text corpus (JSONL, {"text": ...} per line) from Debian packages, for timing
tokenizer training on ~100 MB of real text on a machine without a downloaded data set.

Sources, in this order, until --mb megabytes (UTF-8) are written:
  1. the King James Bible, one document per chapter (`bible` from Debian's bible-kjv / bible-kjv-text)
  2. dictionaries for dictd: GCIDE (Webster's 1913 + additions), FOLDOC, the Jargon File, The Devil's
     Dictionary (dict-gcide, dict-foldoc, dict-jargon, dict-devil), one document per paragraph (paragraphs
     that are not UTF-8 skipped)
  3. fortune cookies (fortunes), one document per cookie
  4. package documentation under /usr/share/doc: NEWS*, README*, *.txt, then changelog* files (sorted by path,
     gzip-decompressed, files that are not UTF-8 skipped), one document per paragraph
Install the packages with: apt-get install bible-kjv dict-gcide dict-foldoc dict-jargon dict-devil fortunes
Usage: tools/dev/make_tokenizer_corpus.py --out /tmp/english_100mb.jsonl [--mb 100]
"""
import argparse
import fnmatch
import glob
import gzip
import json
import os
import subprocess


def paragraphs(text):
    block = []
    for line in text.split("\n"):
        if line.strip(" \t\r") == "":
            if block:
                yield "\n".join(block)
                block = []
        else:
            block.append(line)
    if block:
        yield "\n".join(block)


def kjv():
    text = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], capture_output=True, text=True, check=True).stdout
    chapter, key = [], None
    for line in text.splitlines():
        ref, _, verse = line.partition(" ")
        if ref.split(":")[0] != key and chapter:
            yield " ".join(chapter)
            chapter = []
        key = ref.split(":")[0]
        chapter.append(verse.strip())
    if chapter:
        yield " ".join(chapter)


def dictionaries():
    for name in ["gcide", "foldoc", "jargon", "devil"]:
        path = f"/usr/share/dictd/{name}.dict.dz"
        if os.path.exists(path):
            with gzip.open(path, "rb") as f:
                text = f.read().decode("utf-8", errors="surrogateescape")
            for paragraph in paragraphs(text):  # GCIDE has a few cp1252 bytes: skip those paragraphs
                try:
                    paragraph.encode("utf-8")
                except UnicodeEncodeError:
                    continue
                yield paragraph


def fortunes():
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if os.path.isfile(path) and not path.endswith((".dat", ".u8")) and not os.path.islink(path):
            try:
                with open(path, encoding="utf-8") as f:
                    cookies = f.read().split("\n%\n")
            except UnicodeDecodeError:
                continue
            yield from (cookie.strip("\n") for cookie in cookies if cookie.strip())


def package_docs():
    paths = []
    for root, _, files in os.walk("/usr/share/doc"):
        paths += [os.path.join(root, name) for name in files if not os.path.islink(os.path.join(root, name))]
    paths.sort()
    for patterns in (["NEWS*"], ["README*"], ["*.txt", "*.txt.gz"], ["changelog*"]):
        for path in paths:
            name = os.path.basename(path)
            if not any(fnmatch.fnmatch(name, pattern) for pattern in patterns):
                continue
            try:
                opener = gzip.open if path.endswith(".gz") else open
                with opener(path, "rt", encoding="utf-8", errors="strict") as f:
                    text = f.read()
            except (UnicodeDecodeError, OSError, EOFError):
                continue
            yield from paragraphs(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--mb", type=float, default=100)
    args = parser.parse_args()
    limit = int(args.mb * 1e6)
    written, documents, counts = 0, 0, {}
    with open(args.out, "w", encoding="utf-8") as out:
        for source_name, source in [("kjv", kjv), ("dictionaries", dictionaries), ("fortunes", fortunes),
                                    ("package docs", package_docs)]:
            for text in source():
                if written >= limit:
                    break
                out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
                size = len(text.encode("utf-8"))
                written += size
                documents += 1
                counts[source_name] = counts.get(source_name, 0) + size
    print(f"wrote {args.out}: {documents} documents, {written / 1e6:.1f} MB of text: " +
          ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in counts.items()))


if __name__ == "__main__":
    main()
