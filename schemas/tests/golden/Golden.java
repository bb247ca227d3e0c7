// Encodes the golden frames in java_frames.txt (request/response header + body, no size prefix)
// with kafka-clients 4.4.0's own generated message classes:
//   CP=kafka-clients-4.4.0.jar:slf4j-api.jar:jackson-{databind,core,annotations}.jar (from ~/.m2)
//   java -cp $CP Golden.java $(cat ../../src/records/testdata/java_lz4.hex) > java_frames.txt
// The Produce frame carries the lz4 batch the Java client's MemoryRecordsBuilder wrote.
import java.nio.ByteBuffer;
import java.util.*;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.*;
import org.apache.kafka.common.protocol.*;
import org.apache.kafka.common.record.internal.MemoryRecords;

public class Golden {
    static String hex(ByteBuffer b) {
        StringBuilder sb = new StringBuilder();
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) sb.append(String.format("%02x", d.get()));
        return sb.toString();
    }
    static String frame(Message header, short hv, Message body, short v) {
        return hex(MessageUtil.toByteBufferAccessor(header, hv).buffer()) + hex(MessageUtil.toByteBufferAccessor(body, v).buffer());
    }
    static RequestHeaderData req(int key, int v, int corr) {
        return new RequestHeaderData().setRequestApiKey((short) key).setRequestApiVersion((short) v).setCorrelationId(corr).setClientId("golden-client");
    }
    public static void main(String[] a) throws Exception {
        System.out.println("api_versions_v0_request " + frame(req(18, 0, 1), (short) 1, new ApiVersionsRequestData(), (short) 0));
        System.out.println("api_versions_v3_request " + frame(req(18, 3, 2), (short) 2,
            new ApiVersionsRequestData().setClientSoftwareName("apache-kafka-java").setClientSoftwareVersion("4.4.0"), (short) 3));
        for (short v : new short[] {0, 3}) {
            ApiVersionsResponseData r = new ApiVersionsResponseData().setErrorCode((short) 0).setThrottleTimeMs(0);
            r.apiKeys().add(new ApiVersionsResponseData.ApiVersion().setApiKey((short) 0).setMinVersion((short) 0).setMaxVersion((short) 13));
            r.apiKeys().add(new ApiVersionsResponseData.ApiVersion().setApiKey((short) 18).setMinVersion((short) 0).setMaxVersion((short) 5));
            if (v >= 3) {
                r.supportedFeatures().add(new ApiVersionsResponseData.SupportedFeatureKey().setName("metadata.version").setMinVersion((short) 7).setMaxVersion((short) 29));
                r.setFinalizedFeaturesEpoch(42L);
                r.finalizedFeatures().add(new ApiVersionsResponseData.FinalizedFeatureKey().setName("metadata.version").setMinVersionLevel((short) 29).setMaxVersionLevel((short) 29));
                r.setZkMigrationReady(false);
            }
            System.out.println("api_versions_v" + v + "_response " + frame(new ResponseHeaderData().setCorrelationId(v), (short) 0, r, v));
        }
        MetadataRequestData m = new MetadataRequestData().setAllowAutoTopicCreation(true).setIncludeTopicAuthorizedOperations(false);
        m.setTopics(new ArrayList<>());
        m.topics().add(new MetadataRequestData.MetadataRequestTopic().setName("orders").setTopicId(Uuid.ZERO_UUID));
        m.topics().add(new MetadataRequestData.MetadataRequestTopic().setName(null).setTopicId(Uuid.fromString("q1Bz3V4RT1aAl_OcT9cdRg")));
        System.out.println("metadata_v12_request " + frame(req(3, 12, 3), (short) 2, m, (short) 12));
        byte[] batch = HexFormat.of().parseHex(a[0]);
        ProduceRequestData p = new ProduceRequestData().setAcks((short) -1).setTimeoutMs(30000).setTransactionalId(null);
        ProduceRequestData.TopicProduceData t = new ProduceRequestData.TopicProduceData().setName("orders");
        t.partitionData().add(new ProduceRequestData.PartitionProduceData().setIndex(0).setRecords(MemoryRecords.readableRecords(ByteBuffer.wrap(batch))));
        p.topicData().add(t);
        System.out.println("produce_v9_request " + frame(req(0, 9, 4), (short) 2, p, (short) 9));
    }
}
