// Kafka 4.4's own group-coordinator classes, driven line by line from stdin for
// crates/partlog-groups/tests/kafka_classes.rs. One command per line, fields separated by one
// space; text travels as lowercase hex of its UTF-8 bytes. One output line per command:
//
//   hash HEX                  -> "<String.hashCode> <Utils.abs(hash) % 50>"
//   commit GROUP TOPIC PART OFFSET EPOCH META TS EXPIRE
//                             -> "<key hex> <value hex>" of GroupCoordinatorRecordSerde on
//                                GroupCoordinatorRecordHelpers.newOffsetCommitRecord (EPOCH -1:
//                                none; EXPIRE -1: none)
//   read KEYHEX VALUEHEX|-    -> "<type> <key json> <value version> <value json>|<DELETE>
//                                <reserialized key hex> <reserialized value hex>|-", or
//                                "error <exception class>"
//   sub HEX / asg HEX         -> the ConsumerProtocol blob read by ConsumerProtocol and written
//                                again at its version: "<version> <hex>", or "error <class>"

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.OptionalInt;
import java.util.OptionalLong;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ConsumerProtocolAssignment;
import org.apache.kafka.common.message.ConsumerProtocolSubscription;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordHelpers;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.OffsetAndMetadata;
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordJsonConverters;

public class GroupsDriver {
    private static final HexFormat HEX = HexFormat.of();
    private static final GroupCoordinatorRecordSerde SERDE = new GroupCoordinatorRecordSerde();

    private static String text(String hex) {
        return new String(HEX.parseHex(hex), StandardCharsets.UTF_8);
    }

    private static String commit(String[] f) {
        int epoch = Integer.parseInt(f[5]);
        long expire = Long.parseLong(f[8]);
        OffsetAndMetadata offset = new OffsetAndMetadata(
            Long.parseLong(f[4]),
            epoch == -1 ? OptionalInt.empty() : OptionalInt.of(epoch),
            text(f[6]),
            Long.parseLong(f[7]),
            expire == -1 ? OptionalLong.empty() : OptionalLong.of(expire),
            Uuid.ZERO_UUID);
        CoordinatorRecord record = GroupCoordinatorRecordHelpers.newOffsetCommitRecord(
            text(f[1]), text(f[2]), Integer.parseInt(f[3]), offset);
        return HEX.formatHex(SERDE.serializeKey(record)) + " " + HEX.formatHex(SERDE.serializeValue(record));
    }

    private static String read(String[] f) {
        try {
            ByteBuffer key = ByteBuffer.wrap(HEX.parseHex(f[1]));
            ByteBuffer value = f[2].equals("-") ? null : ByteBuffer.wrap(HEX.parseHex(f[2]));
            CoordinatorRecord record = SERDE.deserialize(key, value);
            short type = record.key().apiKey();
            StringBuilder out = new StringBuilder();
            out.append(type).append(' ')
               .append(CoordinatorRecordJsonConverters.writeRecordKeyAsJson(record.key()));
            if (record.value() == null) {
                out.append(" - <DELETE>");
            } else {
                out.append(' ').append(record.value().version()).append(' ')
                   .append(CoordinatorRecordJsonConverters.writeRecordValueAsJson(
                       record.value().message(), record.value().version()));
            }
            out.append(' ').append(HEX.formatHex(SERDE.serializeKey(record)));
            out.append(' ').append(record.value() == null ? "-" : HEX.formatHex(SERDE.serializeValue(record)));
            return out.toString();
        } catch (RuntimeException e) {
            return "error " + e.getClass().getSimpleName();
        }
    }

    private static String blob(String[] f) {
        try {
            ByteBuffer buffer = ByteBuffer.wrap(HEX.parseHex(f[1]));
            short version = buffer.getShort();
            if (f[0].equals("sub")) {
                ConsumerProtocolSubscription s = new ConsumerProtocolSubscription(new ByteBufferAccessor(buffer), version);
                return version + " " + HEX.formatHex(Utils.toArray(MessageUtil.toVersionPrefixedByteBuffer(version, s)));
            }
            ConsumerProtocolAssignment a = new ConsumerProtocolAssignment(new ByteBufferAccessor(buffer), version);
            return version + " " + HEX.formatHex(Utils.toArray(MessageUtil.toVersionPrefixedByteBuffer(version, a)));
        } catch (RuntimeException e) {
            return "error " + e.getClass().getSimpleName();
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ", -1);
            String answer;
            switch (f[0]) {
                case "hash": {
                    int h = text(f[1]).hashCode();
                    answer = h + " " + (Utils.abs(h) % 50);
                    break;
                }
                case "commit": answer = commit(f); break;
                case "read": answer = read(f); break;
                case "sub":
                case "asg": answer = blob(f); break;
                default: answer = "unknown command " + f[0];
            }
            System.out.println(answer);
        }
    }
}
