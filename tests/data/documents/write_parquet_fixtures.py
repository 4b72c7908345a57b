"""Parquet test files written by pyarrow, and the same documents as JSON lines, for the parquet tests.

    python3 write_parquet_fixtures.py OUT_DIR     # exit 3 (and why on stderr) when pyarrow is missing

OUT_DIR/docs.parquet   43 rows in row groups of 5 (9 groups): non-ASCII texts, an empty text, a null, a long
                       text, newlines, special-token text; snappy pages with CRC checksums; a second column
OUT_DIR/docs.jsonl     the same documents, one JSON object per line, without the null row (which is no document)
OUT_DIR/large.parquet  the `text` column as large_string, no compression, one row group
OUT_DIR/ints.parquet   a `text` column of int64
OUT_DIR/corrupt.parquet  docs.parquet with bytes of row group 3's text dictionary page overwritten
OUT_DIR/corrupt_no_crc.parquet  the same damage in a file written without page checksums
OUT_DIR/truncated.parquet  docs.parquet cut in half (its footer is gone)
"""

import json
import os
import sys

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as error:
    print(f"pyarrow is not importable: {error}", file=sys.stderr)
    sys.exit(3)

ROWS_PER_GROUP = 5


def documents():
    texts = [
        "Plain ASCII document number one.",
        "Ünïcödé: façade, naïve, 日本語のテキスト, Ελληνικά, русский, العربية ١٢٣, emoji 👩‍👩‍👧 🇫🇷",
        "",
        None,
        "line one\nline two\r\nline three\n\n  indented after a blank line",
        "<|bos|> special-token text stays plain text <|user_start|>",
        "tabs\tand \"quotes\" and \\backslashes\\ and \u2028 a line separator",
        "x" * 70000,
    ]
    for i in range(35):
        texts.append(f"Document {i}: " + " ".join(f"word{(i * 31 + w) % 97}" for w in range(5 + (i * 7) % 40)))
    return texts


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    texts = documents()
    table = pa.table({"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())})
    docs = os.path.join(out, "docs.parquet")
    pq.write_table(table, docs, row_group_size=ROWS_PER_GROUP, compression="snappy", write_page_checksum=True)
    with open(os.path.join(out, "docs.jsonl"), "w", encoding="utf-8") as f:
        for text in texts:
            if text is not None:
                f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")

    large = pa.table({"text": pa.array(texts, pa.large_string())})
    pq.write_table(large, os.path.join(out, "large.parquet"), compression="none")
    pq.write_table(pa.table({"text": pa.array([1, 2, 3], pa.int64())}), os.path.join(out, "ints.parquet"))

    with open(docs, "rb") as f:
        data = bytearray(f.read())
    column = pq.ParquetFile(docs).metadata.row_group(3).column(1)
    # The middle of the dictionary page, which holds the row group's texts: past its header, into the values.
    start = (column.dictionary_page_offset + column.data_page_offset) // 2
    data[start:start + 16] = b"\xde\xad\xbe\xef" * 4
    with open(os.path.join(out, "corrupt.parquet"), "wb") as f:
        f.write(data)
    # The same damage in a file without page checksums: snappy or the decoder finds it.
    no_crc = os.path.join(out, "corrupt_no_crc.parquet")
    pq.write_table(table, no_crc, row_group_size=ROWS_PER_GROUP, compression="snappy")
    with open(no_crc, "rb") as f:
        plain = bytearray(f.read())
    column = pq.ParquetFile(no_crc).metadata.row_group(3).column(1)
    start = (column.dictionary_page_offset + column.data_page_offset) // 2
    plain[start:start + 16] = b"\xde\xad\xbe\xef" * 4
    with open(no_crc, "wb") as f:
        f.write(plain)
    with open(os.path.join(out, "truncated.parquet"), "wb") as f:
        f.write(data[: len(data) // 2])
    print(f"wrote {len(texts)} rows in {pq.ParquetFile(docs).num_row_groups} row groups under {out}")


if __name__ == "__main__":
    main()
