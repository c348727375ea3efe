// Kafka's own functions and generated classes, driven line by line from stdin for
// crates/partlog-engine/tests/kafka_classes.rs. One command per line, fields separated by one
// space; text travels as lowercase hex of its UTF-8 bytes. One output line per command:
//
//   hash HEX                  -> "<String.hashCode> <Utils.abs(hash) % 50>"
//   murmur2 HEX               -> "<Utils.murmur2> <Utils.toPositive> <partitionForKey for 3 6 10 12 50 100>"
//   key HEX                   -> hex of TransactionLog.keyToBytes(id)
//   value V PID PREV NEXT EPOCH NEXT_EPOCH TIMEOUT STATE LAST START CTV PARTS
//                             -> hex of MessageUtil.toVersionPrefixedBytes(V, TransactionLogValue),
//                                or "error <exception class>"
//   transit TV PID PREV NEXT EPOCH LAST_EPOCH TIMEOUT STATE START LAST PARTS
//                             -> hex of TransactionLog.valueToBytes(TxnTransitMetadata, TV)
//   read KEYHEX VALUEHEX|-    -> what TransactionLog.read makes of the bytes (see describe())
//
// PARTS is "-" for null, "." for an empty list, else "topicHex:p,p;topicHex:p" (a topic without
// partitions is "topicHex:").

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.coordinator.transaction.TransactionLog;
import org.apache.kafka.coordinator.transaction.TransactionMetadata;
import org.apache.kafka.coordinator.transaction.TransactionState;
import org.apache.kafka.coordinator.transaction.TxnTransitMetadata;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogValue;
import org.apache.kafka.server.common.TransactionVersion;

public class EngineDriver {
    private static final HexFormat HEX = HexFormat.of();

    private static String text(String hex) {
        return new String(HEX.parseHex(hex), StandardCharsets.UTF_8);
    }

    private static List<TransactionLogValue.PartitionsSchema> parts(String field) {
        if (field.equals("-")) return null;
        List<TransactionLogValue.PartitionsSchema> out = new ArrayList<>();
        if (field.equals(".")) return out;
        for (String topic : field.split(";")) {
            String[] pieces = topic.split(":", -1);
            List<Integer> ids = new ArrayList<>();
            if (!pieces[1].isEmpty()) {
                for (String id : pieces[1].split(",")) ids.add(Integer.parseInt(id));
            }
            out.add(new TransactionLogValue.PartitionsSchema().setTopic(text(pieces[0])).setPartitionIds(ids));
        }
        return out;
    }

    private static String value(String[] f) {
        TransactionLogValue value = new TransactionLogValue()
            .setProducerId(Long.parseLong(f[2]))
            .setPreviousProducerId(Long.parseLong(f[3]))
            .setNextProducerId(Long.parseLong(f[4]))
            .setProducerEpoch(Short.parseShort(f[5]))
            .setNextProducerEpoch(Short.parseShort(f[6]))
            .setTransactionTimeoutMs(Integer.parseInt(f[7]))
            .setTransactionStatus(Byte.parseByte(f[8]))
            .setTransactionLastUpdateTimestampMs(Long.parseLong(f[9]))
            .setTransactionStartTimestampMs(Long.parseLong(f[10]))
            .setClientTransactionVersion(Short.parseShort(f[11]))
            .setTransactionPartitions(parts(f[12]));
        try {
            return HEX.formatHex(MessageUtil.toVersionPrefixedBytes(Short.parseShort(f[1]), value));
        } catch (RuntimeException e) {
            return "error " + e.getClass().getSimpleName();
        }
    }

    private static String transit(String[] f) {
        TransactionVersion tv = TransactionVersion.fromFeatureLevel(Short.parseShort(f[1]));
        HashSet<TopicPartition> partitions = new HashSet<>();
        List<TransactionLogValue.PartitionsSchema> schemas = parts(f[11]);
        if (schemas != null) {
            for (TransactionLogValue.PartitionsSchema s : schemas) {
                for (int id : s.partitionIds()) partitions.add(new TopicPartition(s.topic(), id));
            }
        }
        TxnTransitMetadata metadata = new TxnTransitMetadata(
            Long.parseLong(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]),
            Short.parseShort(f[5]), Short.parseShort(f[6]), Integer.parseInt(f[7]),
            TransactionState.fromId(Byte.parseByte(f[8])), partitions,
            Long.parseLong(f[9]), Long.parseLong(f[10]), tv);
        try {
            return HEX.formatHex(TransactionLog.valueToBytes(metadata, tv));
        } catch (RuntimeException e) {
            return "error " + e.getClass().getSimpleName();
        }
    }

    // One canonical line: "txn ID PID PREV NEXT EPOCH TIMEOUT STATE LAST START CTV PARTS" with
    // the partitions sorted (Kafka keeps them in a set), "tombstone ID", "unknown-key V",
    // "unknown-value V", or "error <class>".
    private static String describe(String keyHex, String valueHex) {
        try {
            ByteBuffer key = ByteBuffer.wrap(HEX.parseHex(keyHex));
            ByteBuffer value = valueHex.equals("-") ? null : ByteBuffer.wrap(HEX.parseHex(valueHex));
            TransactionLog.ReadResult result = TransactionLog.read(key, value);
            if (result instanceof TransactionLog.TxnTombstone t) {
                return "tombstone " + HEX.formatHex(t.transactionId().getBytes(StandardCharsets.UTF_8));
            } else if (result instanceof TransactionLog.UnknownKeyVersion u) {
                return "unknown-key " + u.version();
            } else if (result instanceof TransactionLog.UnknownValueVersion u) {
                return "unknown-value " + u.version();
            }
            TransactionLog.TxnRecord record = (TransactionLog.TxnRecord) result;
            TransactionMetadata m = record.metadata();
            TreeMap<String, TreeSet<Integer>> sorted = new TreeMap<>();
            for (TopicPartition tp : m.topicPartitions()) {
                sorted.computeIfAbsent(HEX.formatHex(tp.topic().getBytes(StandardCharsets.UTF_8)), k -> new TreeSet<>()).add(tp.partition());
            }
            StringBuilder parts = new StringBuilder();
            for (var e : sorted.entrySet()) {
                if (parts.length() > 0) parts.append(';');
                parts.append(e.getKey()).append(':');
                StringBuilder ids = new StringBuilder();
                for (int id : e.getValue()) {
                    if (ids.length() > 0) ids.append(',');
                    ids.append(id);
                }
                parts.append(ids);
            }
            return "txn " + HEX.formatHex(record.transactionId().getBytes(StandardCharsets.UTF_8))
                + " " + m.producerId() + " " + m.prevProducerId() + " " + m.prepareNoTransit().nextProducerId()
                + " " + m.producerEpoch() + " " + m.txnTimeoutMs() + " " + m.state().id()
                + " " + m.txnLastUpdateTimestamp() + " " + m.txnStartTimestamp()
                + " " + m.clientTransactionVersion().featureLevel()
                + " " + (parts.length() == 0 ? "." : parts.toString());
        } catch (RuntimeException e) {
            return "error " + e.getClass().getSimpleName();
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        int[] counts = {3, 6, 10, 12, 50, 100};
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ", -1);
            switch (f[0]) {
                case "hash": {
                    int h = text(f[1]).hashCode();
                    out.append(h).append(' ').append(Utils.abs(h) % 50);
                    break;
                }
                case "murmur2": {
                    byte[] key = HEX.parseHex(f[1]);
                    int h = Utils.murmur2(key);
                    out.append(h).append(' ').append(Utils.toPositive(h));
                    for (int n : counts) out.append(' ').append(BuiltInPartitioner.partitionForKey(key, n));
                    break;
                }
                case "key":
                    out.append(HEX.formatHex(TransactionLog.keyToBytes(text(f[1]))));
                    break;
                case "value":
                    out.append(value(f));
                    break;
                case "transit":
                    out.append(transit(f));
                    break;
                case "read":
                    out.append(describe(f[1], f[2]));
                    break;
                default:
                    out.append("error unknown command ").append(f[0]);
            }
            out.append('\n');
        }
        System.out.print(out);
        System.out.flush();
    }
}
