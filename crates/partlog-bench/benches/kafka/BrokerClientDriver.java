// Kafka 4.4's own Java client against a real broker, for the broker rows of benches/compare.rs
// (benches/compare/broker.rs): transactions, idempotent sends, a consumer group's rebalance and
// commitSync, each timed here, in the JVM, so that the JVM's start and the broker's start stay
// outside the timed region and the JIT is warm after the first rep.
//
// Protocol (benches/kafka/harness.rs, as UnifiedLogHarness): one command per stdin line,
// `<command> key=value ...`; one JSON line per measurement on stdout, then `{"done":"<command>"}`;
// errors print `{"error":"..."}` and the driver goes on. `quit` ends it. A measurement is
// `{"workload":W,"nanos":N,"items":I,"bytes":B}`.
//
//   connect       bootstrap=H:P
//   broker-config <key>=<value> ...          cluster-wide dynamic defaults; waits until broker 1
//                                            reports every value
//   create-topic  name=T partitions=N [flush.messages=M]
//   topic-config  name=T key=K               prints the topic's K as `items` (a number)
//   txn-init      id=ID                      a transactional producer, initTransactions
//   txn           topic=T partitions=P records=R count=C   C transactions, one line each
//                                            (nanos: begin to commit; commit_nanos: the commit)
//   idem-init                                an idempotent producer (acks=all, Kafka's default)
//   idem          topic=T records=N keys=K   N keyed records, then flush: one line
//   group-start   group=G topic=T members=M heartbeat_ms=H poll_ms=Q
//   group-join                               one more member; time until every member's
//                                            assignment is in force (its listener ran)
//   group-leave                              the last member closes; time until the others
//                                            hold its partitions
//   group-stop
//   commit-init   group=G topic=T            a consumer assign()ed partition 0, no auto-commit
//   commit        count=C                    C commitSync calls of one offset, one line each
//
// Records are 100-byte values of 'v'; keys are `key-<i>`, as the partlog side's.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class BrokerClientDriver {
    /** How long any wait on the broker may take before the command fails. */
    private static final long WAIT_MS = 120_000;
    private static final byte[] VALUE = "v".repeat(100).getBytes();

    private String bootstrap;
    private Admin admin;
    private KafkaProducer<byte[], byte[]> transactional;
    private KafkaProducer<byte[], byte[]> idempotent;
    private Group group;
    private KafkaConsumer<byte[], byte[]> committer;
    private TopicPartition committed;
    private long nextOffset;

    public static void main(String[] args) throws Exception {
        // The client logs through slf4j-simple to stderr (a file): warnings only.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        BrokerClientDriver driver = new BrokerClientDriver();
        java.io.BufferedReader stdin =
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        try {
            for (String line; (line = stdin.readLine()) != null; ) {
                if (line.trim().equals("quit")) break;
                if (!line.isBlank()) driver.command(line);
            }
        } finally {
            driver.close();
        }
    }

    private void command(String line) {
        String[] words = line.trim().split("\\s+");
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i < words.length; i++) {
            int eq = words[i].indexOf('=');
            if (eq <= 0) {
                System.out.println("{\"error\":\"argument without '=': " + words[i] + "\"}");
                System.out.flush();
                return;
            }
            args.put(words[i].substring(0, eq), words[i].substring(eq + 1));
        }
        try {
            switch (words[0]) {
                case "connect" -> connect(args);
                case "broker-config" -> brokerConfig(args);
                case "create-topic" -> createTopic(args);
                case "topic-config" -> topicConfig(args);
                case "txn-init" -> txnInit(args);
                case "txn" -> txn(args);
                case "idem-init" -> idemInit();
                case "idem" -> idem(args);
                case "group-start" -> groupStart(args);
                case "group-join" -> groupJoin();
                case "group-leave" -> groupLeave();
                case "group-stop" -> groupStop();
                case "commit-init" -> commitInit(args);
                case "commit" -> commit(args);
                default -> throw new IllegalArgumentException("unknown command " + words[0]);
            }
            System.out.println("{\"done\":\"" + words[0] + "\"}");
        } catch (Exception e) {
            String message = String.valueOf(e).replace("\\", "\\\\").replace("\"", "'");
            System.out.println("{\"error\":\"" + message + "\"}");
        }
        System.out.flush();
    }

    private static void measurement(String workload, long nanos, long items, long bytes) {
        System.out.println("{\"workload\":\"" + workload + "\",\"nanos\":" + nanos
            + ",\"items\":" + items + ",\"bytes\":" + bytes + "}");
    }

    private static String need(Map<String, String> args, String key) {
        String value = args.get(key);
        if (value == null) throw new IllegalArgumentException("missing " + key + "=");
        return value;
    }

    private static int number(Map<String, String> args, String key) {
        return Integer.parseInt(need(args, key));
    }

    // ---- the cluster -----------------------------------------------------------------------

    private void connect(Map<String, String> args) {
        bootstrap = need(args, "bootstrap");
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        admin = Admin.create(props);
    }

    private void brokerConfig(Map<String, String> args) throws Exception {
        ConfigResource cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
        List<AlterConfigOp> ops = new ArrayList<>();
        for (Map.Entry<String, String> entry : args.entrySet()) {
            ops.add(new AlterConfigOp(new ConfigEntry(entry.getKey(), entry.getValue()),
                AlterConfigOp.OpType.SET));
        }
        admin.incrementalAlterConfigs(Map.of(cluster, ops)).all().get();
        // The broker applies a dynamic default when it reads the metadata record: wait for it.
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (true) {
            Config config = admin.describeConfigs(List.of(broker)).all().get().get(broker);
            boolean applied = args.entrySet().stream().allMatch(entry -> {
                ConfigEntry seen = config.get(entry.getKey());
                return seen != null && entry.getValue().equals(seen.value());
            });
            if (applied) return;
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("broker 1 did not apply " + args);
            }
            Thread.sleep(50);
        }
    }

    private void createTopic(Map<String, String> args) throws Exception {
        String name = need(args, "name");
        int partitions = number(args, "partitions");
        Map<String, String> configs = new HashMap<>(args);
        configs.remove("name");
        configs.remove("partitions");
        admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs)))
            .all().get();
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (true) {
            try {
                TopicDescription description =
                    admin.describeTopics(List.of(name)).allTopicNames().get().get(name);
                boolean led = description.partitions().size() == partitions
                    && description.partitions().stream().allMatch(p -> p.leader() != null);
                if (led) return;
            } catch (ExecutionException e) {
                // The broker may not have the new topic's metadata yet.
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) throw e;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException(name + " has partitions without a leader");
            }
            Thread.sleep(50);
        }
    }

    private void topicConfig(Map<String, String> args) throws Exception {
        ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, need(args, "name"));
        String key = need(args, "key");
        ConfigEntry entry = admin.describeConfigs(List.of(topic)).all().get().get(topic).get(key);
        if (entry == null) throw new IllegalStateException("no " + key + " on " + topic);
        measurement("config", 0, Long.parseLong(entry.value()), 0);
    }

    // ---- producers -------------------------------------------------------------------------

    private Properties producerProps() {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
            ByteArraySerializer.class.getName());
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        return props;
    }

    private void txnInit(Map<String, String> args) {
        Properties props = producerProps();
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, need(args, "id"));
        transactional = new KafkaProducer<>(props);
        transactional.initTransactions();
    }

    private void txn(Map<String, String> args) {
        String topic = need(args, "topic");
        int partitions = number(args, "partitions");
        int records = number(args, "records");
        int count = number(args, "count");
        for (int i = 0; i < count; i++) {
            long started = System.nanoTime();
            transactional.beginTransaction();
            for (int p = 0; p < partitions; p++) {
                for (int r = 0; r < records; r++) {
                    transactional.send(new ProducerRecord<>(topic, p, null, VALUE));
                }
            }
            long committing = System.nanoTime();
            transactional.commitTransaction();
            long ended = System.nanoTime();
            System.out.println("{\"workload\":\"txn\",\"nanos\":" + (ended - started)
                + ",\"items\":" + (long) partitions * records + ",\"bytes\":"
                + (long) partitions * records * VALUE.length + ",\"commit_nanos\":"
                + (ended - committing) + "}");
        }
    }

    private void idemInit() {
        idempotent = new KafkaProducer<>(producerProps());
    }

    private void idem(Map<String, String> args) {
        String topic = need(args, "topic");
        int records = number(args, "records");
        int keys = number(args, "keys");
        byte[][] keyBytes = new byte[keys][];
        for (int k = 0; k < keys; k++) keyBytes[k] = ("key-" + k).getBytes();
        long started = System.nanoTime();
        for (int i = 0; i < records; i++) {
            idempotent.send(new ProducerRecord<>(topic, keyBytes[i % keys], VALUE));
        }
        idempotent.flush();
        measurement("idem", System.nanoTime() - started, records, (long) records * VALUE.length);
    }

    // ---- the group -------------------------------------------------------------------------

    /** The members' assignments as their listeners last reported them, and a wait on them. */
    private static final class Group {
        final String groupId;
        final String topic;
        final int heartbeatMs;
        final int pollMs;
        final int partitions;
        final List<Member> members = new ArrayList<>();
        private final Map<Integer, Set<TopicPartition>> owned = new HashMap<>();
        private int wantMembers;
        private int wantEach;
        private long metAt;
        private int nextId;

        Group(String groupId, String topic, int heartbeatMs, int pollMs, int partitions) {
            this.groupId = groupId;
            this.topic = topic;
            this.heartbeatMs = heartbeatMs;
            this.pollMs = pollMs;
            this.partitions = partitions;
        }

        synchronized void change(int member, Collection<TopicPartition> add,
                                 Collection<TopicPartition> remove) {
            Set<TopicPartition> set = owned.computeIfAbsent(member, m -> new HashSet<>());
            set.removeAll(remove);
            set.addAll(add);
            check();
        }

        synchronized void join(int member) {
            owned.put(member, new HashSet<>());
            check();
        }

        synchronized void left(int member) {
            owned.remove(member);
            check();
        }

        /** From now, the first moment `members` members hold `partitions / members` each. */
        synchronized void expect(int members) {
            wantMembers = members;
            wantEach = partitions / members;
            metAt = 0;
            check();
        }

        /** When the expected state was reached (System.nanoTime), waiting for it. */
        synchronized long await() throws InterruptedException {
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (metAt == 0) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    throw new IllegalStateException("the group did not settle on " + wantMembers
                        + " members of " + wantEach + " partitions: " + owned);
                }
                wait(left);
            }
            return metAt;
        }

        private void check() {
            if (metAt != 0 || owned.size() != wantMembers) return;
            Set<TopicPartition> all = new HashSet<>();
            for (Set<TopicPartition> set : owned.values()) {
                if (set.size() != wantEach) return;
                all.addAll(set);
            }
            if (all.size() == wantMembers * wantEach) {
                metAt = System.nanoTime();
                notifyAll();
            }
        }
    }

    /** One consumer polling in its own thread, so that no member waits on another's poll. */
    private final class Member implements Runnable, ConsumerRebalanceListener {
        final Group group;
        final int id;
        final KafkaConsumer<byte[], byte[]> consumer;
        final Thread thread;
        volatile boolean stop;
        volatile Exception failure;

        Member(Group group, int id) {
            this.group = group;
            this.id = id;
            Properties props = new Properties();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group.groupId);
            props.put(ConsumerConfig.CLIENT_ID_CONFIG, "member-" + id);
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                CooperativeStickyAssignor.class.getName());
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
                String.valueOf(group.heartbeatMs));
            props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
                ByteArrayDeserializer.class.getName());
            props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                ByteArrayDeserializer.class.getName());
            consumer = new KafkaConsumer<>(props);
            thread = new Thread(this, "member-" + id);
            thread.setDaemon(true);
        }

        void start() {
            group.join(id);
            thread.start();
        }

        @Override
        public void run() {
            try {
                consumer.subscribe(List.of(group.topic), this);
                Duration poll = Duration.ofMillis(group.pollMs);
                while (!stop) consumer.poll(poll);
            } catch (Exception e) {
                failure = e;
            } finally {
                consumer.close();
                group.left(id);
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            group.change(id, List.of(), partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            group.change(id, partitions, List.of());
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            group.change(id, List.of(), partitions);
        }
    }

    private void groupStart(Map<String, String> args) throws Exception {
        String topic = need(args, "topic");
        TopicDescription description =
            admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        group = new Group(need(args, "group"), topic, number(args, "heartbeat_ms"),
            number(args, "poll_ms"), description.partitions().size());
        int members = number(args, "members");
        for (int i = 0; i < members; i++) group.members.add(new Member(group, group.nextId++));
        group.expect(members);
        long started = System.nanoTime();
        for (Member member : group.members) member.start();
        measurement("group_start", group.await() - started, members, 0);
    }

    private void groupJoin() throws Exception {
        Member member = new Member(group, group.nextId++);
        group.members.add(member);
        group.expect(group.members.size());
        long started = System.nanoTime();
        member.start();
        long nanos = group.await() - started;
        checkMembers();
        measurement("group_join", nanos, group.members.size(), 0);
    }

    private void groupLeave() throws Exception {
        Member member = group.members.remove(group.members.size() - 1);
        group.expect(group.members.size());
        long started = System.nanoTime();
        member.stop = true;
        long nanos = group.await() - started;
        member.thread.join(WAIT_MS);
        checkMembers();
        if (member.failure != null) throw member.failure;
        measurement("group_leave", nanos, group.members.size(), 0);
    }

    private void checkMembers() throws Exception {
        for (Member member : group.members) {
            if (member.failure != null) throw member.failure;
        }
    }

    private void groupStop() throws Exception {
        for (Member member : group.members) member.stop = true;
        for (Member member : group.members) member.thread.join(WAIT_MS);
        checkMembers();
        group = null;
    }

    // ---- commits ---------------------------------------------------------------------------

    private void commitInit(Map<String, String> args) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, need(args, "group"));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
            ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
            ByteArrayDeserializer.class.getName());
        committer = new KafkaConsumer<>(props);
        committed = new TopicPartition(need(args, "topic"), 0);
        committer.assign(List.of(committed));
    }

    private void commit(Map<String, String> args) {
        int count = number(args, "count");
        for (int i = 0; i < count; i++) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                Map.of(committed, new OffsetAndMetadata(nextOffset++));
            long started = System.nanoTime();
            committer.commitSync(offsets);
            measurement("commit", System.nanoTime() - started, 1, 0);
        }
    }

    private void close() {
        if (transactional != null) transactional.close();
        if (idempotent != null) idempotent.close();
        if (committer != null) committer.close();
        if (admin != null) admin.close();
    }
}
