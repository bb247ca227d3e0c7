// A share-group consumer (KIP-932) for the share suite: Apache Kafka 4.4.0's KafkaShareConsumer
// run as one process per consumer, driven by a JSON argument and reporting every event as one
// JSON line on stdout, so that Python can run several at once, kill them, and assert on what
// each one received and acknowledged. Compiled at test time (tests/share/share_driver.py).
//
//   java ShareDriver consume '<json>'
//
// JSON arguments (all but bootstrap/group/topic optional):
//   bootstrap, group, topic
//   mode          "explicit" (share.acknowledgement.mode=explicit: every record acknowledged by
//                 the rules below) or "implicit" (the default mode: records count as accepted
//                 when the next poll or commitSync runs)
//   rules         [{"match": regex on the value, "type": "ACCEPT"|"RELEASE"|"REJECT",
//                   "max_delivery": n}]; the first rule whose regex matches and whose
//                 max_delivery (if given) is >= the record's delivery count decides; else ACCEPT.
//                 E.g. {"match": "^r", "type": "RELEASE", "max_delivery": 1} releases the first
//                 delivery of values starting with r only.
//   commit        "sync" (commitSync after each non-empty batch, the default), "async", or
//                 "poll" (acknowledgements ride on the next poll)
//   end           "close" (the default: close() when a stop condition holds), "halt" (exit
//                 without close: the broker only learns from timeouts), "hold" (after the first
//                 non-empty batch: no acknowledgement, sleep until killed or max_seconds, then
//                 halt), "close_unacked" (after the first non-empty batch: close() without
//                 acknowledging anything)
//   stop_file     stop when this file exists
//   max_records   stop after this many deliveries
//   idle_ms       stop after this long without a record (counted once a record arrived, or from
//                 the start when idle_from_start is true)
//   max_seconds   hard bound (default 60): stop with {"event":"timeout"}
//   delay_ms      sleep this long per record (processing time, lets other members fetch)
//   poll_ms       poll timeout (default 500)
//   group_config  {"share.auto.offset.reset": "earliest", ...}: set on the group with
//                 Admin.incrementalAlterConfigs(GROUP) before subscribing, and waited for in
//                 describeConfigs
//   config        extra consumer properties
//
// Events: started, group_config, record {partition, offset, key, value, deliveryCount},
// ack {partition, offset, value, type}, commit {partition, error}, ack_committed
// {partition, offsets, error}, error {where, class, message}, holding, closing_unacked,
// timeout, closed, exit.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareDriver {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static synchronized void emit(String event, Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        m.put("t", System.currentTimeMillis());
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        try {
            System.out.println(JSON.writeValueAsString(m));
        } catch (Exception e) {
            System.out.println("{\"event\":\"error\",\"where\":\"emit\"}");
        }
        System.out.flush();
    }

    private static void error(String where, Throwable e) {
        emit("error", "where", where, "class", e.getClass().getName(), "message",
                String.valueOf(e.getMessage()));
    }

    private static final class Rule {
        final Pattern match;
        final AcknowledgeType type;
        final int maxDelivery;

        Rule(JsonNode n) {
            match = Pattern.compile(n.path("match").asText(".*"));
            type = AcknowledgeType.valueOf(n.path("type").asText("ACCEPT"));
            maxDelivery = n.path("max_delivery").asInt(Integer.MAX_VALUE);
        }
    }

    private static AcknowledgeType decide(List<Rule> rules, String value, int delivery) {
        for (Rule r : rules) {
            if (r.match.matcher(value == null ? "" : value).find() && delivery <= r.maxDelivery) {
                return r.type;
            }
        }
        return AcknowledgeType.ACCEPT;
    }

    private static void setGroupConfig(String bootstrap, String group, JsonNode cfg)
            throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            List<AlterConfigOp> ops = new ArrayList<>();
            for (Map.Entry<String, JsonNode> e : cfg.properties()) {
                ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue().asText()),
                        AlterConfigOp.OpType.SET));
            }
            admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
            // The change goes through the metadata log: wait until describeConfigs shows it, so
            // the share partitions are initialised with it.
            long deadline = System.currentTimeMillis() + 15_000;
            while (true) {
                Config got = admin.describeConfigs(List.of(res)).all().get().get(res);
                boolean all = true;
                for (Map.Entry<String, JsonNode> e : cfg.properties()) {
                    ConfigEntry ce = got.get(e.getKey());
                    all &= ce != null && e.getValue().asText().equals(ce.value());
                }
                if (all) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("group config not visible after 15 s: " + got);
                }
                Thread.sleep(100);
            }
        }
        emit("group_config", "group", group, "config", JSON.convertValue(cfg, Map.class));
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length != 2 || !argv[0].equals("consume")) {
            System.err.println("usage: ShareDriver consume '<json>'");
            System.exit(2);
        }
        JsonNode a = JSON.readTree(argv[1]);
        String bootstrap = a.path("bootstrap").asText();
        String group = a.path("group").asText();
        String topic = a.path("topic").asText();
        String mode = a.path("mode").asText("explicit");
        String commit = a.path("commit").asText("sync");
        String end = a.path("end").asText("close");
        String stopFile = a.hasNonNull("stop_file") ? a.get("stop_file").asText() : null;
        long maxRecords = a.path("max_records").asLong(Long.MAX_VALUE);
        long idleMs = a.path("idle_ms").asLong(0);
        boolean idleFromStart = a.path("idle_from_start").asBoolean(false);
        long maxSeconds = a.path("max_seconds").asLong(60);
        long delayMs = a.path("delay_ms").asLong(0);
        long pollMs = a.path("poll_ms").asLong(500);
        List<Rule> rules = new ArrayList<>();
        for (JsonNode r : a.path("rules")) {
            rules.add(new Rule(r));
        }
        boolean explicit = mode.equals("explicit");

        long start = System.currentTimeMillis();
        long hardDeadline = start + maxSeconds * 1000;
        if (a.has("group_config")) {
            setGroupConfig(bootstrap, group, a.get("group_config"));
        }

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", a.path("client_id").asText("share-driver"));
        p.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        for (Map.Entry<String, JsonNode> e : a.path("config").properties()) {
            p.put(e.getKey(), e.getValue().asText());
        }
        KafkaShareConsumer<String, String> consumer =
                new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
        consumer.setAcknowledgementCommitCallback((Map<TopicIdPartition, Set<Long>> offsets,
                                                   Exception exception) -> {
            for (Map.Entry<TopicIdPartition, Set<Long>> e : offsets.entrySet()) {
                emit("ack_committed", "topic", e.getKey().topic(),
                        "partition", e.getKey().partition(),
                        "offsets", new ArrayList<>(new TreeSet<>(e.getValue())),
                        "error", exception == null ? null : exception.getClass().getName() + ": "
                                + exception.getMessage());
            }
        });
        consumer.subscribe(List.of(topic));
        emit("started", "group", group, "topic", topic, "mode", mode);

        long received = 0;
        long lastRecord = System.currentTimeMillis();
        boolean anyRecord = false;
        String reason = null;
        try {
            while (reason == null) {
                long now = System.currentTimeMillis();
                if (now > hardDeadline) {
                    emit("timeout", "seconds", maxSeconds);
                    reason = "timeout";
                    break;
                }
                if (stopFile != null && new File(stopFile).exists()) {
                    reason = "stop_file";
                    break;
                }
                if (idleMs > 0 && (anyRecord || idleFromStart) && now - lastRecord > idleMs) {
                    reason = "idle";
                    break;
                }
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(pollMs));
                } catch (KafkaException e) {
                    error("poll", e);
                    Thread.sleep(200);
                    continue;
                }
                if (records.isEmpty()) {
                    continue;
                }
                anyRecord = true;
                lastRecord = System.currentTimeMillis();
                for (ConsumerRecord<String, String> r : records) {
                    received++;
                    emit("record", "topic", r.topic(), "partition", r.partition(),
                            "offset", r.offset(), "key", r.key(), "value", r.value(),
                            "deliveryCount", r.deliveryCount().map(Short::intValue).orElse(null));
                }
                if (end.equals("hold")) {
                    // Acquired, never acknowledged: only the acquisition lock timeout (or the
                    // member leaving) gives these records back.
                    emit("holding", "records", records.count());
                    while (System.currentTimeMillis() < hardDeadline) {
                        Thread.sleep(100);
                    }
                    emit("timeout", "seconds", maxSeconds);
                    System.out.flush();
                    Runtime.getRuntime().halt(0);
                }
                if (end.equals("close_unacked")) {
                    emit("closing_unacked", "records", records.count());
                    reason = "close_unacked";
                    break;
                }
                for (ConsumerRecord<String, String> r : records) {
                    if (delayMs > 0) {
                        Thread.sleep(delayMs);
                    }
                    int delivery = r.deliveryCount().map(Short::intValue).orElse(1);
                    AcknowledgeType type = explicit ? decide(rules, r.value(), delivery)
                            : AcknowledgeType.ACCEPT;
                    if (explicit) {
                        consumer.acknowledge(r, type);
                    }
                    emit("ack", "topic", r.topic(), "partition", r.partition(),
                            "offset", r.offset(), "value", r.value(), "type", type.name(),
                            "explicit", explicit);
                }
                if (commit.equals("sync")) {
                    try {
                        Map<TopicIdPartition, Optional<KafkaException>> res =
                                consumer.commitSync(Duration.ofSeconds(30));
                        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e :
                                res.entrySet()) {
                            emit("commit", "topic", e.getKey().topic(),
                                    "partition", e.getKey().partition(),
                                    "error", e.getValue().map(x -> x.getClass().getName() + ": "
                                            + x.getMessage()).orElse(null));
                        }
                    } catch (KafkaException e) {
                        error("commitSync", e);
                    }
                } else if (commit.equals("async")) {
                    consumer.commitAsync();
                }
                if (received >= maxRecords) {
                    reason = "max_records";
                }
            }
        } catch (Exception e) {
            error("loop", e);
            reason = "error";
        }
        if (end.equals("halt")) {
            emit("exit", "reason", reason, "received", received, "closed", false);
            System.out.flush();
            Runtime.getRuntime().halt(0);
        }
        try {
            consumer.close(Duration.ofSeconds(30));
            emit("closed");
        } catch (Exception e) {
            error("close", e);
        }
        emit("exit", "reason", reason, "received", received, "closed", true);
        System.out.flush();
        // Kafka's client threads are daemons, but a stuck one must not keep the JVM up.
        Runtime.getRuntime().halt(0);
    }
}
