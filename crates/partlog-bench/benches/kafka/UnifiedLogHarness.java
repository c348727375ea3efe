// Kafka 4.4's own log layer (UnifiedLog), driven outside a broker, for benches/compare.rs.
//
// Why it exists: the system a partlog user would otherwise run is Kafka, and its log layer reads
// and writes the same files. This harness runs the workloads of benches/README.md's Kafka rows on
// UnifiedLog, with input bytes built once by partlog's BatchBuilder, so that both sides do the same
// work in the same run (A B A B, the JVM kept alive across pairs, JIT warm-up excluded).
//
// Protocol: one command per stdin line, `<workload> key=value ...`; one JSON line per measurement
// on stdout, then `{"done":"<workload>"}`; errors print `{"error":"..."}` and the harness goes on.
// `quit` ends it. Workloads (sizes and paths are arguments, never constants):
//
//   append  dir=D input=F [fsync=none|per_batch] [threads=N] [segment_bytes=B]
//   read    dir=D input=F mode=seq|random [count=K] [max_bytes=B] [seed=S]
//   open    dir=D input=F segments=N        (time of a reopen after a clean close)
//   recover dir=D input=F flushed=K          (reopen after an unclean stop; K batches synced)
//   recover dir=D reuse=true [recovery_point=O]   (time only the unclean reopen of a prepared log)
//   compact dir=D input=F                    (one cleaner pass over every sealed segment)
//
// `input` is a file of whole v2 record batches back to back (a partlog .log file is one).
// `dir` is a partition directory name (`<topic>-<partition>`); it is deleted and rebuilt by
// every workload that writes, so the reader of a measurement always knows what it measured.

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;
import java.util.stream.Stream;

import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.Records;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.storage.log.FetchIsolation;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.Cleaner;
import org.apache.kafka.storage.internals.log.FetchDataInfo;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.LogToClean;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.SkimpyOffsetMap;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.internals.utils.Throttler;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

public final class UnifiedLogHarness {
    // Kafka's broker defaults for what the harness does not vary.
    private static final int MAX_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000;
    private static final int PRODUCER_ID_EXPIRATION_MS = 86_400_000;
    private static final int PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000;
    private static final int LEADER_EPOCH = 0;

    private final KafkaScheduler scheduler = new KafkaScheduler(1, true, "harness-scheduler-");
    private final BrokerTopicStats topicStats = new BrokerTopicStats();
    private final Map<String, List<byte[]>> inputs = new HashMap<>();

    public static void main(String[] args) throws Exception {
        UnifiedLogHarness harness = new UnifiedLogHarness();
        harness.scheduler.startup();
        try {
            if (args.length > 0) {
                harness.command(String.join(" ", args));
            } else {
                java.io.BufferedReader stdin =
                    new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
                for (String line; (line = stdin.readLine()) != null; ) {
                    if (line.trim().equals("quit")) break;
                    if (!line.isBlank()) harness.command(line);
                }
            }
        } finally {
            harness.scheduler.shutdown();
        }
    }

    private void command(String line) {
        String[] words = line.trim().split("\\s+");
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i < words.length; i++) {
            int eq = words[i].indexOf('=');
            if (eq <= 0) {
                System.out.println("{\"error\":\"argument without '=': " + words[i] + "\"}");
                return;
            }
            args.put(words[i].substring(0, eq), words[i].substring(eq + 1));
        }
        try {
            switch (words[0]) {
                case "append" -> append(args);
                case "read" -> read(args);
                case "open" -> open(args);
                case "recover" -> recover(args);
                case "compact" -> compact(args);
                default -> throw new IllegalArgumentException("unknown workload " + words[0]);
            }
            System.out.println("{\"done\":\"" + words[0] + "\"}");
        } catch (Exception e) {
            String message = String.valueOf(e).replace("\\", "\\\\").replace("\"", "'");
            System.out.println("{\"error\":\"" + message + "\"}");
        }
        System.out.flush();
    }

    // ---- workloads -------------------------------------------------------------------------

    /** Appends every batch of the input to a new log; fsync per batch if asked (Kafka's flush). */
    private void append(Map<String, String> args) throws Exception {
        File dir = freshDir(args);
        List<byte[]> batches = input(args);
        boolean fsync = args.getOrDefault("fsync", "none").equals("per_batch");
        int threads = Integer.parseInt(args.getOrDefault("threads", "1"));
        // appendAsLeader rewrites offsets in place, so every rep gets its own copies, made
        // before the clock starts.
        ByteBuffer[] copies = new ByteBuffer[batches.size()];
        for (int i = 0; i < copies.length; i++) copies[i] = ByteBuffer.wrap(batches.get(i).clone());
        UnifiedLog log = create(dir, config(args), 0L, true);
        long start = System.nanoTime();
        if (threads <= 1) {
            for (ByteBuffer batch : copies) {
                log.appendAsLeader(MemoryRecords.readableRecords(batch), LEADER_EPOCH);
                if (fsync) log.flush(true);
            }
        } else {
            // Kafka's durable path under concurrency: every append and its flush under one lock,
            // as a broker with flush.messages=1 serialises them.
            Object lock = new Object();
            Thread[] workers = new Thread[threads];
            Exception[] failure = new Exception[1];
            for (int t = 0; t < threads; t++) {
                final int first = t;
                workers[t] = new Thread(() -> {
                    try {
                        for (int i = first; i < copies.length; i += threads) {
                            synchronized (lock) {
                                log.appendAsLeader(MemoryRecords.readableRecords(copies[i]), LEADER_EPOCH);
                                if (fsync) log.flush(true);
                            }
                        }
                    } catch (Exception e) {
                        synchronized (failure) { failure[0] = e; }
                    }
                });
                workers[t].start();
            }
            for (Thread worker : workers) worker.join();
            if (failure[0] != null) throw failure[0];
        }
        long nanos = System.nanoTime() - start;
        long end = log.logEndOffset();
        closeCleanly(log);
        emit("append", nanos, batches.size(), totalBytes(batches), "\"log_end_offset\":" + end);
    }

    /** Sequential or random reads of a log built from the input (built outside the clock). */
    private void read(Map<String, String> args) throws Exception {
        File dir = new File(args.get("dir"));
        List<byte[]> batches = input(args);
        UnifiedLog log;
        if (args.getOrDefault("reuse", "false").equals("true") && dir.isDirectory()) {
            log = create(dir, config(args), 0L, true);
        } else {
            log = build(dir, config(args), batches, batches.size(), 0);
        }
        String mode = args.getOrDefault("mode", "seq");
        int maxBytes = Integer.parseInt(args.getOrDefault("max_bytes", "1048576"));
        long logEnd = log.logEndOffset();
        ByteBuffer into = ByteBuffer.allocate(Math.max(maxBytes, largest(batches)));
        if (mode.equals("seq")) {
            long offset = 0;
            long bytes = 0;
            long fetched = 0;
            long start = System.nanoTime();
            while (offset < logEnd) {
                Records records = fetch(log, offset, maxBytes, into);
                bytes += into.remaining();
                long next = offset;
                for (RecordBatch batch : MemoryRecords.readableRecords(into).batches()) {
                    next = batch.nextOffset();
                    fetched++;
                }
                if (next == offset) throw new IOException("no progress at offset " + offset + " (" + records + ")");
                offset = next;
            }
            long nanos = System.nanoTime() - start;
            closeCleanly(log);
            emit("read_seq", nanos, fetched, bytes, "\"log_end_offset\":" + logEnd);
        } else {
            int count = Integer.parseInt(args.getOrDefault("count", "10000"));
            Random random = new Random(Long.parseLong(args.getOrDefault("seed", "1")));
            long[] latencies = new long[count];
            long bytes = 0;
            long start = System.nanoTime();
            for (int i = 0; i < count; i++) {
                long offset = (long) (random.nextDouble() * logEnd);
                long began = System.nanoTime();
                // max_bytes 1 with minOneMessage: exactly the batch holding the offset.
                fetch(log, offset, 1, into);
                latencies[i] = System.nanoTime() - began;
                bytes += into.remaining();
            }
            long nanos = System.nanoTime() - start;
            closeCleanly(log);
            Arrays.sort(latencies);
            emit("read_random", nanos, count, bytes,
                "\"p50_ns\":" + latencies[count / 2] + ",\"p99_ns\":" + latencies[Math.min(count - 1, count * 99 / 100)]);
        }
    }

    /** The time of UnifiedLog.create on a log closed cleanly with `segments` segments. */
    private void open(Map<String, String> args) throws Exception {
        File dir = freshDir(args);
        List<byte[]> batches = input(args);
        int segments = Integer.parseInt(args.getOrDefault("segments", "1000"));
        UnifiedLog built = build(dir, config(args), batches, batches.size(), segments);
        long end = built.logEndOffset();
        closeCleanly(built);
        long start = System.nanoTime();
        UnifiedLog log = create(dir, config(args), end, true);
        long nanos = System.nanoTime() - start;
        int opened = log.numberOfSegments();
        long reopenedEnd = log.logEndOffset();
        closeCleanly(log);
        if (reopenedEnd != end) throw new IOException("reopened at " + reopenedEnd + ", closed at " + end);
        emit("open", nanos, opened, 0, "\"segments\":" + opened);
    }

    /** Reopen after an unclean stop: everything past the first `flushed` batches is recovered. */
    private void recover(Map<String, String> args) throws Exception {
        if (args.getOrDefault("reuse", "false").equals("true")) {
            // A log the caller prepared (a copy of one this workload built, its pages dropped
            // so that recovery reads the disk, as partlog's recovery does): time the open only.
            File dir = new File(args.get("dir"));
            long recoveryPoint = Long.parseLong(args.getOrDefault("recovery_point", "0"));
            long start = System.nanoTime();
            UnifiedLog log = create(dir, config(args), recoveryPoint, false);
            long nanos = System.nanoTime() - start;
            long recoveredEnd = log.logEndOffset();
            closeCleanly(log);
            emit("recover", nanos, 0, 0, "\"log_end_offset\":" + recoveredEnd);
            return;
        }
        File dir = freshDir(args);
        List<byte[]> batches = input(args);
        int flushed = Integer.parseInt(args.getOrDefault("flushed", "0"));
        UnifiedLog built = create(dir, config(args), 0L, true);
        long recoveryPoint = 0;
        for (int i = 0; i < batches.size(); i++) {
            built.appendAsLeader(MemoryRecords.readableRecords(ByteBuffer.wrap(batches.get(i).clone())), LEADER_EPOCH);
            if (i + 1 == flushed) {
                built.flush(true);
                recoveryPoint = built.logEndOffset();
            }
        }
        long end = built.logEndOffset();
        closeCleanly(built);
        long start = System.nanoTime();
        UnifiedLog log = create(dir, config(args), recoveryPoint, false);
        long nanos = System.nanoTime() - start;
        long recoveredEnd = log.logEndOffset();
        closeCleanly(log);
        if (recoveredEnd != end) throw new IOException("recovered to " + recoveredEnd + ", wrote to " + end);
        emit("recover", nanos, batches.size() - flushed, 0,
            "\"log_end_offset\":" + recoveredEnd + ",\"recovery_point\":" + recoveryPoint);
    }

    /** One cleaner pass over every sealed segment of a compacted log built from the input. */
    private void compact(Map<String, String> args) throws Exception {
        File dir = freshDir(args);
        List<byte[]> batches = input(args);
        Map<String, String> props = new HashMap<>(args);
        props.put("cleanup_policy", "compact");
        LogConfig config = config(props);
        UnifiedLog log = build(dir, config, batches, batches.size(), 0);
        log.roll();
        long before = sizeOnDisk(dir);
        int mapBytes = Integer.parseInt(args.getOrDefault("map_bytes", String.valueOf(128 * 1024 * 1024)));
        Cleaner cleaner = new Cleaner(0, new SkimpyOffsetMap(mapBytes, "MD5"), 1024 * 1024, 10 * 1024 * 1024,
            0.9, new Throttler(Double.MAX_VALUE, 300, "cleaner-io", "bytes", Time.SYSTEM), Time.SYSTEM, tp -> { });
        long start = System.nanoTime();
        cleaner.clean(new LogToClean(log, 0L, log.activeSegment().baseOffset(), false));
        long nanos = System.nanoTime() - start;
        closeCleanly(log);
        emit("compact", nanos, batches.size(), before, "\"bytes_after\":" + sizeOnDisk(dir));
    }

    // ---- helpers ---------------------------------------------------------------------------

    private UnifiedLog create(File dir, LogConfig config, long recoveryPoint, boolean cleanShutdown) throws IOException {
        return UnifiedLog.create(dir, config, 0L, recoveryPoint, scheduler, topicStats, Time.SYSTEM,
            MAX_TRANSACTION_TIMEOUT_MS, new ProducerStateManagerConfig(PRODUCER_ID_EXPIRATION_MS, false),
            PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS, new LogDirFailureChannel(1), cleanShutdown, Optional.empty());
    }

    /**
     * A broker's clean shutdown of one log (LogManager.shutdown): flush, then trim the active
     * segment's preallocated indexes, then close. Without the trim a reopen takes the index's
     * zero-filled tail for entries, and every lookup past them scans the segment from its start.
     */
    private void closeCleanly(UnifiedLog log) throws Exception {
        log.flush(true);
        log.prepareActiveSegmentForClose();
        log.close();
        // A roll scheduled a flush of the old segment (and its checkpoints) on the scheduler,
        // which close does not wait for: one still running would write into the directory the
        // next workload deletes and rebuilds (leader-epoch-checkpoint.tmp vanished under a
        // walk once). The scheduler has one thread and runs tasks of equal delay in order, so
        // a no-op scheduled now runs after every task the log left behind.
        scheduler.scheduleOnce("harness-barrier", () -> { }).get();
    }

    /** A flushed log of the first `count` batches, rolled into `segments` segments if > 0. */
    private UnifiedLog build(File dir, LogConfig config, List<byte[]> batches, int count, int segments) throws Exception {
        deleteRecursively(dir.toPath());
        UnifiedLog log = create(dir, config, 0L, true);
        int perSegment = segments > 0 ? Math.max(1, count / segments) : Integer.MAX_VALUE;
        for (int i = 0; i < count; i++) {
            if (i > 0 && i % perSegment == 0 && log.numberOfSegments() < segments) log.roll();
            log.appendAsLeader(MemoryRecords.readableRecords(ByteBuffer.wrap(batches.get(i).clone())), LEADER_EPOCH);
        }
        log.flush(true);
        return log;
    }

    /** One fetch, copied into `into` (what an in-process consumer needs; sendfile is not in play). */
    private static Records fetch(UnifiedLog log, long offset, int maxBytes, ByteBuffer into) throws IOException {
        FetchDataInfo data = log.read(offset, maxBytes, FetchIsolation.LOG_END, true);
        into.clear();
        into.limit(data.records.sizeInBytes());
        if (data.records instanceof org.apache.kafka.common.record.internal.FileRecords file) {
            file.readInto(into, 0);
        } else if (data.records instanceof MemoryRecords memory) {
            into.put(memory.buffer().duplicate());
            into.flip();
        }
        return data.records;
    }

    private LogConfig config(Map<String, String> args) {
        Properties props = new Properties();
        props.put("segment.bytes", args.getOrDefault("segment_bytes", String.valueOf(1024 * 1024 * 1024)));
        props.put("index.interval.bytes", args.getOrDefault("index_interval_bytes", "4096"));
        props.put("cleanup.policy", args.getOrDefault("cleanup_policy", "delete"));
        props.put("retention.ms", "-1");
        props.put("message.timestamp.before.max.ms", String.valueOf(Long.MAX_VALUE));
        props.put("message.timestamp.after.max.ms", String.valueOf(Long.MAX_VALUE));
        props.put("max.message.bytes", String.valueOf(Integer.MAX_VALUE - 100));
        return new LogConfig(props);
    }

    private List<byte[]> input(Map<String, String> args) throws IOException {
        String path = args.get("input");
        if (path == null) throw new IllegalArgumentException("input=FILE is required");
        List<byte[]> cached = inputs.get(path);
        if (cached != null) return cached;
        ByteBuffer bytes = ByteBuffer.wrap(Files.readAllBytes(Path.of(path)));
        List<byte[]> batches = new ArrayList<>();
        while (bytes.remaining() >= 12) {
            int length = bytes.getInt(bytes.position() + 8);
            if (length <= 0 || bytes.remaining() < 12 + length) throw new IOException(path + ": torn batch at " + bytes.position());
            byte[] batch = new byte[12 + length];
            bytes.get(batch);
            // As a producer sends it: base offset 0 (the leader assigns offsets). The CRC does
            // not cover the base offset, so the batch stays valid.
            ByteBuffer.wrap(batch).putLong(0, 0L);
            batches.add(batch);
        }
        if (bytes.hasRemaining()) throw new IOException(path + ": " + bytes.remaining() + " trailing bytes");
        inputs.put(path, batches);
        return batches;
    }

    private static File freshDir(Map<String, String> args) throws IOException {
        String path = args.get("dir");
        if (path == null) throw new IllegalArgumentException("dir=DIR is required");
        File dir = new File(path);
        deleteRecursively(dir.toPath());
        return dir;
    }

    private static void deleteRecursively(Path path) throws IOException {
        if (!Files.exists(path)) return;
        try (Stream<Path> walk = Files.walk(path)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
        }
    }

    private static long sizeOnDisk(File dir) {
        File[] files = dir.listFiles((d, name) -> name.endsWith(".log"));
        long total = 0;
        if (files != null) for (File f : files) total += f.length();
        return total;
    }

    private static long totalBytes(List<byte[]> batches) {
        long total = 0;
        for (byte[] b : batches) total += b.length;
        return total;
    }

    private static int largest(List<byte[]> batches) {
        int max = 0;
        for (byte[] b : batches) max = Math.max(max, b.length);
        return max;
    }

    private static void emit(String workload, long nanos, long items, long bytes, String extra) {
        System.out.println("{\"workload\":\"" + workload + "\",\"nanos\":" + nanos + ",\"items\":" + items
            + ",\"bytes\":" + bytes + (extra.isEmpty() ? "" : "," + extra) + "}");
    }
}
