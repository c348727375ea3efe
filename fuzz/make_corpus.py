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

    # checkpoint_decode: flags bit 0 recomputes CRCs, bit 1 the cleaner checkpoint, bit 2 a log
    # under the partlog.checkpoint (see checkpoint_decode in bodies.rs). The golden checkpoint
    # files as they are, with CRCs recomputed, under a log, and torn; a fresh (zeroed) file.
    for case in sorted((FIXTURES / "checkpoint").iterdir()):
        if not case.is_dir():
            continue
        data = (case / "partlog.checkpoint").read_bytes()
        write("checkpoint_decode", f"{case.name}", b"\x00" + data)
        write("checkpoint_decode", f"{case.name}-crc", b"\x01" + data)
        write("checkpoint_decode", f"{case.name}-log", b"\x05" + data)
        write("checkpoint_decode", f"{case.name}-torn", b"\x00" + data[:700])
    write("checkpoint_decode", "zeroed", b"\x00" + bytes(1024))
    write("checkpoint_decode", "zeroed-log", b"\x04" + bytes(1024))

    def slot(sequence, recovery_point, start, clean=None):
        flags = 1 if clean else 0
        body = b"PLCK" + struct.pack(">HHQqq", 1, flags, sequence, recovery_point, start)
        body += struct.pack(">qQq", *(clean or (0, 0, 0))) + bytes(452)
        return body + struct.pack(">I", crc32c(body))

    # Start offsets inside, at and beyond the 12 records the log holds, and the clean-shutdown
    # fields its close writes (the last segment: base 9, 694 bytes, end 12), so that opens take
    # the clean path too, with the other fields mutated around them.
    write("checkpoint_decode", "log-start-inside", b"\x05" + slot(9, 12, 4) + bytes(512))
    write("checkpoint_decode", "log-start-beyond", b"\x05" + slot(9, 12, 20) + bytes(512))
    write("checkpoint_decode", "log-clean-fields", b"\x05" + slot(9, 12, 0, (9, 694, 12)) + bytes(512))
    write("checkpoint_decode", "log-clean-start-inside", b"\x05" + slot(9, 3, 7, (9, 694, 12)) + bytes(512))
    write("checkpoint_decode", "log-clean-start-beyond", b"\x05" + bytes(512) + slot(9, 12, 13, (9, 694, 12)))
    write("checkpoint_decode", "max-sequence", b"\x00" + slot(2**64 - 1, 0, 0) + slot(1, 0, 0))
    # FORMAT.md §6.3's worked example, then the same record above the log end and negative.
    for name, first_dirty in (("cleaner-4", 4), ("cleaner-beyond", 40), ("cleaner-negative", -1)):
        body = b"PLCC" + struct.pack(">HHq", 1, 0, first_dirty)
        write("checkpoint_decode", name, b"\x02" + body + struct.pack(">I", crc32c(body)))
        write("checkpoint_decode", name + "-crc", b"\x03" + body + bytes(4))
    write("checkpoint_decode", "cleaner-short", b"\x03" + b"PLCC" + bytes(12))

    # legacy_message_set: bit 0 clear, a message set (bit 1: CRCs recomputed): each legacy
    # fixture's messages one by one and as a run. Bit 0 set, a wrapper built by the body from
    # the fields that follow: (mode, wrapper timestamp, first offset, offset choice, count,
    # then per message: step, timestamp, key length + key, value length + value).
    for log in LOGS:
        if log.parent.name != "legacy":
            continue
        data = log.read_bytes()
        for position, frame in frames(data):
            write("legacy_message_set", f"{log.stem}-at-{position}", b"\x00" + frame)
        run = list(frames(data))
        run_end = max((p + len(f) for p, f in run if p + len(f) <= 4096), default=0)
        write("legacy_message_set", f"{log.stem}-run", b"\x00" + data[:run_end])
        write("legacy_message_set", f"{log.stem}-run-crc", b"\x02" + data[:run_end])
    messages = bytes([2, 5, 1, ord("a"), 1, ord("1"), 2, 6, 255, 3]) + b"xyz" + bytes([3, 7, 1, ord("c"), 0])
    for magic in (0, 1):
        for codec in range(4):
            for extra in (0, 0x10):
                mode = 1 | (magic << 1) | (codec << 2) | (extra if magic else 0)
                write("legacy_message_set", f"wrapper-m{magic}-c{codec}-{extra:x}",
                      bytes([mode, 9, 3, 0, 3]) + messages)
    # The wrapper offset 0 and off by a few; a repeated inner offset; a nested wrapper; an
    # offset near i64's end; inner messages from raw bytes (a legacy fixture's run).
    write("legacy_message_set", "wrapper-offset-zero", bytes([1 | 2 | 12, 9, 3, 2, 3]) + messages)
    write("legacy_message_set", "wrapper-offset-low", bytes([1 | 2 | 12, 9, 3, 3 | (20 << 2), 3]) + messages)
    write("legacy_message_set", "wrapper-repeated", bytes([1 | 12, 9, 3, 0, 2, 2, 5, 1, 97, 1, 49, 0, 5, 1, 98, 1, 50]))
    write("legacy_message_set", "wrapper-nested", bytes([1 | 2 | 12, 9, 3, 0, 2, 2, 5, 1, 97, 1, 49, 255, 5, 1, 98, 1, 50]))
    write("legacy_message_set", "wrapper-high", bytes([1 | 2 | 12, 9, 255, 0, 3]) + messages)
    v1 = (FIXTURES / "legacy" / "v1.log").read_bytes()
    write("legacy_message_set", "wrapper-raw-inner", bytes([1 | 2 | 12 | 0x20, 9, 3, 0]) + v1[:300])
    # producer_snapshot_decode: the broker's snapshot as it is, CRC-recomputed, and stored beside
    # an older one; a partlog-layout snapshot with an open transaction; an empty one; a bad count.
    snapshot = (FIXTURES / "broker" / "partlog-fixture-0" / "00000000000000000018.snapshot").read_bytes()
    for flags in (0, 1, 2, 3):
        write("producer_snapshot_decode", f"broker-{flags}", bytes([flags]) + snapshot)
    entry = struct.pack(">qhiqiqiq", 7, 2, 9, 2020, 20, 2000, 3, 2000)
    body = struct.pack(">i", 1) + entry
    write("producer_snapshot_decode", "open-txn", bytes([2]) + struct.pack(">hI", 1, crc32c(body)) + body)
    empty = struct.pack(">i", 0)
    write("producer_snapshot_decode", "empty", bytes([2]) + struct.pack(">hI", 1, crc32c(empty)) + empty)
    write("producer_snapshot_decode", "bad-count", bytes([3]) + struct.pack(">hIi", 1, 0, 2) + entry)
    write("producer_snapshot_decode", "short", bytes([3, 0, 1, 0]))


def crc32c(data):
    """CRC-32C (Castagnoli), bit by bit."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


if __name__ == "__main__":
    main()
