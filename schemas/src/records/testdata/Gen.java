// Writes the golden batches in this directory with the Java client's own encoder
// (kafka-clients 4.4.0 MemoryRecordsBuilder), deterministically:
//   CP=kafka-clients-4.4.0.jar:snappy-java.jar:lz4-java.jar:zstd-jni.jar:slf4j-api.jar (from ~/.m2)
//   java -cp $CP Gen.java schemas/src/records/testdata
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.*;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.internal.*;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

public class Gen {
    static String hex(ByteBuffer b) {
        StringBuilder sb = new StringBuilder();
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) sb.append(String.format("%02x", d.get()));
        return sb.toString();
    }
    public static void main(String[] args) throws Exception {
        Path out = Paths.get(args[0]);
        Map<String, Compression> codecs = new LinkedHashMap<>();
        codecs.put("none", Compression.NONE);
        codecs.put("gzip", Compression.gzip().build());
        codecs.put("snappy", Compression.snappy().build());
        codecs.put("lz4", Compression.lz4().build());
        codecs.put("zstd", Compression.zstd().build());
        for (Map.Entry<String, Compression> e : codecs.entrySet()) {
            ByteBuffer buf = ByteBuffer.allocate(1 << 16);
            MemoryRecordsBuilder b = MemoryRecords.builder(buf, RecordBatch.MAGIC_VALUE_V2, e.getValue(),
                TimestampType.CREATE_TIME, 0L, RecordBatch.NO_TIMESTAMP, 4242L, (short) 3, 17, false, RecordBatch.NO_PARTITION_LEADER_EPOCH);
            for (int i = 0; i < 5; i++) {
                byte[] key = i == 2 ? null : ("key-" + i).getBytes();
                byte[] value = i == 3 ? null : ("value-" + i + "-" + "x".repeat(40 * i)).getBytes();
                Header[] headers = i % 2 == 0
                    ? new Header[] { new RecordHeader("h1", ("v" + i).getBytes()), new RecordHeader("h2", null) }
                    : new Header[0];
                b.append(1700000000000L + i * 7, key, value, headers);
            }
            MemoryRecords recs = b.build();
            Files.writeString(out.resolve("java_" + e.getKey() + ".hex"), hex(recs.buffer()) + "\n");
        }
        MemoryRecords marker = MemoryRecords.withEndTransactionMarker(100L, 1700000000123L, 5, 4242L, (short) 3,
            new EndTransactionMarker(ControlRecordType.COMMIT, 9));
        Files.writeString(out.resolve("java_commit_marker.hex"), hex(marker.buffer()) + "\n");
        MemoryRecords leaderChange = MemoryRecords.withLeaderChangeMessage(42L, 1700000000456L, 8, ByteBuffer.allocate(256),
            new org.apache.kafka.common.message.LeaderChangeMessage().setLeaderId(1).setVoters(List.of(
                new org.apache.kafka.common.message.LeaderChangeMessage.Voter().setVoterId(1))));
        Files.writeString(out.resolve("java_leader_change.hex"), hex(leaderChange.buffer()) + "\n");
    }
}
