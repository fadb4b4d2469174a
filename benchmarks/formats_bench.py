"""Format-layer micro-benchmarks: the bloom filter and Avro log data blocks against a peer.

Each case is timed ``repeat`` times (best kept) next to a peer doing comparable work on the
same data in the same run, so the ratio stays meaningful on a busy machine:

- bloom filter build (Hudi's defaults: DYNAMIC_V0, 60k entries, fpp 1e-9, 30 hashes per key)
  of 1M uuid-like keys and of 1M short int keys vs ``pq.write_table`` of the same keys
  (snappy, one column): what writing the keys alone costs.
- Avro data block encode of 100k trip-like rows (Hudi meta columns, strings, longs, doubles,
  a timestamp, a decimal, a nullable date) vs fastavro's container ``writer`` of the same rows
  (``to_pylist`` included: the peer starts from Arrow too).
- Avro data block decode to Arrow vs fastavro's container ``reader`` of the same rows into
  ``pa.Table.from_pylist`` (the peer ends in Arrow too).
"""

from __future__ import annotations

import io
import json
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hudi_format.bloom import new_bloom_filter
from hudi_format.log.block import BlockType, HeaderKey, LogBlock
from hudi_format.log.encode import encode_avro_content
from hudi_format.avro_values import AvroArrowConverter, arrow_to_avro_storage
from hudi_format.schema import arrow_to_avro_schema


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def uuid_keys(n: int) -> pa.Array:
    """``n`` distinct 36-character uuid-shaped keys (digits), built column-wise."""
    idx = pa.array(range(n), pa.int64())

    def field(mult: int, width: int) -> pa.Array:
        h = pc.cast(pc.bit_wise_and(pc.multiply(idx, mult), (1 << 40) - 1), pa.string())
        return pc.utf8_slice_codeunits(pc.utf8_lpad(h, width, "0"), -width)
    last = pc.utf8_lpad(pc.cast(idx, pa.string()), 12, "0")     # keeps the keys distinct
    return pc.binary_join_element_wise(field(2654435761, 8), field(40503, 4), field(65599, 4),
                                       field(69069, 4), last, "-")


def int_keys(n: int) -> pa.Array:
    return pc.cast(pa.array(range(n), pa.int64()), pa.string())


def avro_rows(n: int) -> pa.Table:
    idx = pa.array(range(n), pa.int64())
    s = pc.cast(idx, pa.string())
    return pa.table({
        "_hoodie_commit_time": pa.repeat("20240101000000000", n),
        "_hoodie_commit_seqno": pc.binary_join_element_wise("20240101000000000_0_", s, ""),
        "_hoodie_record_key": pc.binary_join_element_wise("trip-", s, ""),
        "_hoodie_partition_path": pc.binary_join_element_wise("city-", pc.cast(pc.bit_wise_and(idx, 3), pa.string()), ""),
        "_hoodie_file_name": pa.repeat("9d2b6a4e-6f0b-4c1e-9a55-1f8f0b7b4e3c-0", n),
        "id": pc.binary_join_element_wise("trip-", s, ""),
        "ts": idx,
        "fare": pc.divide(pc.cast(pc.bit_wise_and(pc.multiply(idx, 7919), 65535), pa.float64()), 100.0),
        "distance": pc.cast(pc.bit_wise_and(pc.multiply(idx, 31), 1023), pa.int32()),
        "at": pc.cast(pc.multiply(idx, 1_000_003), pa.timestamp("us", tz="UTC")),
        "price": pc.cast(pc.divide(pc.cast(pc.bit_wise_and(idx, 1 << 20 - 1), pa.float64()), 100.0),
                         pa.decimal128(12, 2)),
        "day": pc.if_else(pc.equal(pc.bit_wise_and(idx, 7), 0), pa.scalar(None, pa.date32()),
                          pc.cast(pc.cast(pc.bit_wise_and(idx, 4095), pa.int32()), pa.date32())),
    })


def _avro_block(content: bytes, schema_json: str) -> LogBlock:
    return LogBlock(path="bench.log", offset=0, length=len(content), block_type=BlockType.AVRO_DATA,
                    version=1, header={HeaderKey.SCHEMA: schema_json}, footer={}, content_offset=0,
                    content_length=len(content), read=lambda o, k: content[o:o + k])


def run(bloom_rows: int = 1_000_000, avro_rows_n: int = 100_000, repeat: int = 3) -> list:
    import fastavro

    results = []
    for name, keys in (("uuid", uuid_keys(bloom_rows)), ("short int", int_keys(bloom_rows))):
        def build():
            bf = new_bloom_filter()
            bf.add_all(keys)
            bf.serialize()
        ours = _best(build, repeat)
        peer = _best(lambda: pq.write_table(pa.table({"k": keys}), pa.BufferOutputStream(),
                                            compression="snappy"), repeat)
        results.append((f"bloom build, {bloom_rows:,} {name} keys vs pq.write_table", ours, peer))

    table = avro_rows(avro_rows_n)
    schema = arrow_to_avro_schema(table.schema, "trip_record", "hoodie.trip")
    schema_json = json.dumps(schema)
    raw = fastavro.parse_schema(AvroArrowConverter(schema).raw_schema)

    def peer_write():
        buf = io.BytesIO()
        fastavro.writer(buf, raw, arrow_to_avro_storage(table, schema).to_pylist(), codec="null")
        return buf.getvalue()
    container = peer_write()
    content = encode_avro_content(table, schema)
    ours = _best(lambda: encode_avro_content(table, schema), repeat)
    peer = _best(peer_write, repeat)
    results.append((f"Avro block encode, {avro_rows_n:,} rows vs fastavro.writer", ours, peer))

    conv = AvroArrowConverter(schema)
    block = _avro_block(content, schema_json)
    ours = _best(lambda: block.records(), repeat)
    peer = _best(lambda: conv.raw_to_arrow(list(fastavro.reader(io.BytesIO(container)))), repeat)
    results.append((f"Avro block decode, {avro_rows_n:,} rows vs fastavro.reader", ours, peer))

    print(f"\nformats benchmark (best of {repeat})\n")
    print(f"| {'case':62} | hudi_format s | peer s | ratio |")
    print(f"|{'-' * 64}|---------------|--------|-------|")
    for name, ours, peer in results:
        print(f"| {name:62} | {ours:13.3f} | {peer:6.3f} | {ours / peer:5.2f} |")
    return results
