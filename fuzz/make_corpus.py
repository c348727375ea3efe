#!/usr/bin/env python3
"""Writes the fuzz seeds under fuzz/corpus/<target>/ from the committed fixtures.

Run from anywhere: python3 fuzz/make_corpus.py. Deterministic; every seed is a few KB at most.
The prefix bytes of index_open and segment_recover are the flags their bodies decode
(fuzz/src/bodies.rs): the seeds cover each mode.
"""
import struct
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
FIXTURES = FUZZ.parent / "tests" / "fixtures"
LOGS = [
    FIXTURES / "foreign" / "kafka_protocol.log",
    FIXTURES / "foreign" / "kafka_python.log",
    FIXTURES / "foreign" / "kafka_python_gaps_high_offsets.log",
    FIXTURES / "foreign" / "librdkafka.log",
    FIXTURES / "legacy" / "v0.log",
    FIXTURES / "legacy" / "v1.log",
    FIXTURES / "legacy" / "v1_high_offsets.log",
    FIXTURES / "kafka_tools" / "plain" / "00000000000000000000.log",
    FIXTURES / "kafka_tools" / "gaps-high-offsets" / "00000000005000000000.log",
    FIXTURES / "broker" / "partlog-fixture-0" / "00000000000000000000.log",
]


def frames(data):
    """(position, bytes) of each whole frame: v2 batches and legacy messages share the
    offset(8) + length(4) prefix."""
    position = 0
    while position + 12 <= len(data):
        (length,) = struct.unpack(">i", data[position + 8 : position + 12])
        end = position + 12 + length
        if length < 0 or end > len(data):
            break
        yield position, data[position:end]
        position = end


def v2_index_entries(data):
    """(relative offset, position, max timestamp) per v2 batch; legacy frames are skipped."""
    entries = []
    base = None
    for position, frame in frames(data):
        if len(frame) < 61 or frame[16] != 2:
            continue
        (batch_base,) = struct.unpack(">q", frame[0:8])
        (last_delta,) = struct.unpack(">i", frame[23:27])
        (max_timestamp,) = struct.unpack(">q", frame[35:43])
        if base is None:
            base = batch_base
        entries.append((batch_base + last_delta - base, position, max_timestamp))
    return entries


def write(target, name, data):
    directory = FUZZ / "corpus" / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(data)


def main():
    for log in LOGS:
        data = log.read_bytes()
        stem = f"{log.parent.name}-{log.stem}"
        batches = list(frames(data))
        # batch_decode: the first few frames one by one, the compressed ones and the last;
        # and a run of up to 4 KB of whole frames.
        picked = batches[:3] + [b for b in batches if len(b[1]) > 21 and b[1][16] == 2 and b[1][22] & 7] [:3] + batches[-1:]
        seen = set()
        for position, frame in picked:
            if position in seen:
                continue
            seen.add(position)
            write("batch_decode", f"{stem}-at-{position}", frame)
        run_end = max((p + len(f) for p, f in batches if p + len(f) <= 4096), default=0)
        write("batch_decode", f"{stem}-run", data[:run_end])

        # segment_recover: up to 4 KB of whole frames, then the same with a torn last frame, in
        # the read-write (0) and read-only (1) modes.
        write("segment_recover", f"{stem}-rw", b"\x00" + data[:run_end])
        write("segment_recover", f"{stem}-ro", b"\x01" + data[:run_end])
        if run_end > 20:
            write("segment_recover", f"{stem}-torn", b"\x00" + data[: run_end - 7])

        # index_open: the .index and .timeindex a writer with one entry per batch would keep for
        # this log's v2 batches, writable and sealed. Flags: bit 0 writable, bit 1 time index,
        # bit 2 a 64-byte index, bits 3.. the log size in hundreds of bytes.
        entries = v2_index_entries(data[:run_end])[:64]
        if entries:
            size_flag = min(run_end // 100 + 1, 31) << 3
            offsets = b"".join(struct.pack(">ii", rel, pos) for rel, pos, _ in entries)
            times = b"".join(struct.pack(">qi", ts, rel) for rel, _, ts in entries)
            for writable in (0, 1):
                write("index_open", f"{stem}-index-{writable}", bytes([size_flag | writable, 0]) + offsets)
                write("index_open", f"{stem}-timeindex-{writable}", bytes([size_flag | 2 | writable, 0]) + times)

    # Kafka's own time index from the broker fixture (one entry), and a zero-padded one as a
    # preallocating writer leaves after a crash.
    broker_time = (FIXTURES / "broker" / "partlog-fixture-0" / "00000000000000000000.timeindex").read_bytes()
    write("index_open", "broker-timeindex", bytes([(11 << 3) | 2, 0]) + broker_time)
    write("index_open", "zero-padded-index", bytes([(11 << 3) | 1, 0]) + struct.pack(">ii", 3, 200) + bytes(40))
    write("index_open", "empty-index", bytes([0, 0]))

    # log_ops: (op, arg[, size]) triples; ops are 0/1 append, 2 read, 3 truncate,
    # 4 delete_records_before, 5 reopen (see log_ops in bodies.rs).
    write("log_ops", "appends-read", bytes([0, 3, 10, 1, 1, 200, 2, 2, 0, 2, 5]))
    write("log_ops", "roll-truncate-reopen", bytes([0, 3, 120, 0, 3, 120, 0, 3, 120, 3, 6, 5, 0, 2, 2]))
    write("log_ops", "delete-before-reopen", bytes([0, 2, 50, 0, 1, 50, 4, 5, 5, 9, 2, 2, 4, 1, 2, 0]))
    write("log_ops", "too-large", bytes([0, 3, 255, 0, 0, 1, 2, 4]))


if __name__ == "__main__":
    main()
