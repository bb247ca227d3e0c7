// Reads batches written by kactor (hex files from the ignored `export_for_java_check` test in
// schemas/tests/records_batch.rs) with the Java client, checks their CRCs and prints the records:
//   KACTOR_RECORDS_EXPORT=/tmp/x cargo test -p kactor-protocol --test records_batch -- --ignored
//   java -cp $CP Check.java /tmp/x/*.hex
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.HexFormat;
import org.apache.kafka.common.record.internal.*;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.header.Header;

// Reads hex batch files written by kactor's codec and prints what the Java client sees.
public class Check {
    public static void main(String[] args) throws Exception {
        for (String f : args) {
            byte[] bytes = HexFormat.of().parseHex(Files.readString(Paths.get(f)).trim());
            MemoryRecords recs = MemoryRecords.readableRecords(ByteBuffer.wrap(bytes));
            for (RecordBatch batch : recs.batches()) {
                batch.ensureValid();
                StringBuilder sb = new StringBuilder();
                sb.append(f).append(": codec=").append(batch.compressionType()).append(" base=").append(batch.baseOffset())
                  .append(" last=").append(batch.lastOffset()).append(" pid=").append(batch.producerId())
                  .append(" seq=").append(batch.baseSequence()).append(" maxTs=").append(batch.maxTimestamp())
                  .append(" tsType=").append(batch.timestampType()).append(" txn=").append(batch.isTransactional())
                  .append(" control=").append(batch.isControlBatch()).append(" records=[");
                for (org.apache.kafka.common.record.internal.Record r : batch) {
                    r.ensureValid();
                    sb.append(r.offset()).append("@").append(r.timestamp()).append(":")
                      .append(r.hasKey() ? new String(toArr(r.key())) : "null").append("=")
                      .append(r.hasValue() ? new String(toArr(r.value())).length() + "B" : "null");
                    for (Header h : r.headers()) sb.append(" ").append(h.key()).append("=").append(h.value() == null ? "null" : new String(h.value()));
                    sb.append("; ");
                }
                System.out.println(sb.append("]"));
            }
        }
    }
    static byte[] toArr(ByteBuffer b) { byte[] a = new byte[b.remaining()]; b.duplicate().get(a); return a; }
}
