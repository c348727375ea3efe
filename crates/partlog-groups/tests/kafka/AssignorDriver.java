// Runs Kafka's own partition assignors on JSON cases, for partlog's differential test
// (tests/differential.rs) and benchmark comparison (benches/assignors.rs).
//
// stdin: one JSON case per line:
//   {"id": 7, "assignor": "range" | "roundrobin" | "sticky" | "cooperative-sticky",
//    "topics": {"t": 3, ...},
//    "members": [{"id": "m1", "instance": "i1" | null, "topics": ["t"], "owned": [["t", 0], ...],
//                 "generation": 4 (negative: none), "userData": "hex" | null,
//                 "history": [{"partitions": [["t", 0], ...], "generation": 3}, ...]}, ...],
//    "timeRuns": 0}
//   or a client alone: {"id": 7, "client": "sticky", "topics": ["t"], "history": [...]}
// stdout: one line per case, in order:
//   {"id": 7, "assignment": {"m1": [["t", 0], ...], ...}, "transfers": {...} | null,
//    "userData": {"m1": "hex" | null, ...}}
//   or {"id": 7, "error": "java.lang.IllegalStateException: ..."}
//   or, for a client alone, {"id": 7, "userData": "hex" | null}
// A member with a "history" is played by Kafka's own client side: a new assignor instance gets
// onAssignment for each assignment of the history in turn, each one as the member receives it
// (the leader's list through ConsumerProtocol's SyncGroup encoding), and the user data it then
// returns from subscriptionUserData replaces "userData"; "userData" in the output has it.
// With "timeRuns": n > 0, the case is assigned n times after as many warm-up runs, and the line
// also has "nanosPerRun".
// Members are put into a HashMap in the order given, as Kafka's ConsumerCoordinator does with the
// JoinGroup response. Each case gets a new assignor instance.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

public final class AssignorDriver {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Node NODE = new Node(0, "localhost", 9092);

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode c = JSON.readTree(line);
            ObjectNode result = JSON.createObjectNode();
            result.set("id", c.get("id"));
            try {
                if (c.has("client")) {
                    List<String> subscribed = new ArrayList<>();
                    for (JsonNode t : c.get("topics")) subscribed.add(t.asText());
                    result.put("userData", hex(clientUserData(c.get("client").asText(), c.get("history"), subscribed, "member")));
                } else {
                    run(c, result);
                }
            } catch (Throwable e) {
                result.put("error", e.toString());
            }
            out.println(JSON.writeValueAsString(result));
            out.flush();
        }
    }

    private static ConsumerPartitionAssignor assignor(String name) {
        switch (name) {
            case "range": return new RangeAssignor();
            case "roundrobin": return new RoundRobinAssignor();
            case "sticky": return new StickyAssignor();
            case "cooperative-sticky": return new CooperativeStickyAssignor();
            default: throw new IllegalArgumentException("unknown assignor " + name);
        }
    }

    private static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return b;
    }

    private static String hex(ByteBuffer data) {
        if (data == null) return null;
        ByteBuffer copy = data.duplicate();
        StringBuilder out = new StringBuilder();
        while (copy.hasRemaining()) out.append(String.format("%02x", copy.get()));
        return out.toString();
    }

    private static List<TopicPartition> partitions(JsonNode list) {
        List<TopicPartition> out = new ArrayList<>();
        for (JsonNode tp : list) out.add(new TopicPartition(tp.get(0).asText(), tp.get(1).asInt()));
        return out;
    }

    // What Kafka's client side of assignor `name` sends after the assignments of `history`: each
    // one reaches it as a consumer receives it, through ConsumerProtocol's SyncGroup encoding.
    private static ByteBuffer clientUserData(String name, JsonNode history, List<String> subscribed, String memberId) {
        ConsumerPartitionAssignor client = assignor(name);
        for (JsonNode h : history) {
            ConsumerPartitionAssignor.Assignment sent = new ConsumerPartitionAssignor.Assignment(partitions(h.get("partitions")));
            ConsumerPartitionAssignor.Assignment received =
                ConsumerProtocol.deserializeAssignment(ConsumerProtocol.serializeAssignment(sent));
            client.onAssignment(received, new ConsumerGroupMetadata("partlog", h.get("generation").asInt(), memberId, Optional.empty()));
        }
        return client.subscriptionUserData(new HashSet<>(subscribed));
    }

    private static void run(JsonNode c, ObjectNode result) {
        List<PartitionInfo> partitions = new ArrayList<>();
        Iterator<Map.Entry<String, JsonNode>> topics = c.get("topics").fields();
        while (topics.hasNext()) {
            Map.Entry<String, JsonNode> t = topics.next();
            for (int p = 0; p < t.getValue().asInt(); p++)
                partitions.add(new PartitionInfo(t.getKey(), p, NODE, new Node[] {NODE}, new Node[] {NODE}));
        }
        Cluster cluster = new Cluster("partlog", List.of(NODE), partitions, new HashSet<>(), new HashSet<>());

        String name = c.get("assignor").asText();
        Map<String, Subscription> subscriptions = new HashMap<>();
        ObjectNode sentUserData = null;
        for (JsonNode m : c.get("members")) {
            List<String> subscribed = new ArrayList<>();
            for (JsonNode t : m.get("topics")) subscribed.add(t.asText());
            List<TopicPartition> owned = partitions(m.get("owned"));
            JsonNode ud = m.get("userData");
            ByteBuffer userData = ud == null || ud.isNull() ? null : ByteBuffer.wrap(unhex(ud.asText()));
            if (m.has("history")) {
                userData = clientUserData(name, m.get("history"), subscribed, m.get("id").asText());
                if (sentUserData == null) sentUserData = result.putObject("userData");
                sentUserData.put(m.get("id").asText(), hex(userData));
            }
            Subscription s = new Subscription(subscribed, userData, owned, m.get("generation").asInt(), Optional.empty());
            JsonNode instance = m.get("instance");
            s.setGroupInstanceId(instance == null || instance.isNull() ? Optional.empty() : Optional.of(instance.asText()));
            subscriptions.put(m.get("id").asText(), s);
        }
        GroupSubscription group = new GroupSubscription(subscriptions);
        int timeRuns = c.has("timeRuns") ? c.get("timeRuns").asInt() : 0;
        if (timeRuns > 0) {
            for (int i = 0; i < timeRuns; i++) assignor(name).assign(cluster, group);
            long start = System.nanoTime();
            for (int i = 0; i < timeRuns; i++) assignor(name).assign(cluster, group);
            result.put("nanosPerRun", (System.nanoTime() - start) / timeRuns);
        }
        ConsumerPartitionAssignor a = assignor(name);
        Map<String, ConsumerPartitionAssignor.Assignment> assignment = a.assign(cluster, group).groupAssignment();
        ObjectNode members = result.putObject("assignment");
        for (Map.Entry<String, ConsumerPartitionAssignor.Assignment> e : assignment.entrySet()) {
            ArrayNode list = members.putArray(e.getKey());
            for (TopicPartition tp : e.getValue().partitions()) list.addArray().add(tp.topic()).add(tp.partition());
        }
        if (a instanceof AbstractStickyAssignor && ((AbstractStickyAssignor) a).partitionsTransferringOwnership() != null) {
            ObjectNode transfers = result.putObject("transfers");
            for (Map.Entry<TopicPartition, String> e : ((AbstractStickyAssignor) a).partitionsTransferringOwnership().entrySet())
                transfers.put(e.getKey().topic() + "-" + e.getKey().partition(), e.getValue());
        }
    }
}
