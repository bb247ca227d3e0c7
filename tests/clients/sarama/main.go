// sarama-driver runs one bounded sarama scenario against a broker and prints exactly one JSON
// object on stdout describing what sarama observed. tests/clients/test_sarama.py builds it and
// asserts on that object; failures are data in the JSON, never panics, so a broker divergence
// shows up as a field value a test can name.
//
//	sarama-driver <scenario> --bootstrap HOST:PORT [--topic T] [--group G] [--version V] ...
//
// --version is the sarama Config.Version ("4.0.0", sarama.V4_0_0_0, by default, what a current user sets;
// "default" keeps sarama's own default, V2_8_0_0). It decides which request versions sarama
// sends. --log info|debug points sarama.Logger (and DebugLogger) at stderr.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// M is one JSON object of the output.
type M = map[string]any

type opts struct {
	bootstrap  string
	topic      string
	topic2     string
	group      string
	txnID      string
	version    string
	adminVer   string
	codec      string
	producer   string
	acks       string
	strategy   string
	configs    string
	count      int
	partitions int
	size       int
	idempotent bool
	autoCreate bool
	expire     bool
	timeout    time.Duration
	logLevel   string
	// security (security.go)
	tlsCA, tlsCert, tlsKey                string
	saslMechanism, saslUser, saslPassword string
}

var scenarios = map[string]func(context.Context, *opts) M{
	"admin":              scenarioAdmin,
	"produce-consume":    scenarioProduceConsume,
	"group":              scenarioGroup,
	"txn":                scenarioTxn,
	"txn-etl":            scenarioTxnETL,
	"produce-unknown":    scenarioProduceUnknown,
	"too-large":          scenarioTooLarge,
	"fetch-out-of-range": scenarioFetchOutOfRange,
	"fetch-limits":       scenarioFetchLimits,
	"group-static":       scenarioGroupStatic,
	"admin-extras":       scenarioAdminExtras,
	"group-protocols":    scenarioGroupProtocols,
	"txn-timeout":        scenarioTxnTimeout,
	"old-version":        scenarioOldVersion,
	"connect":            scenarioConnect,
}

func main() {
	if len(os.Args) < 2 || scenarios[os.Args[1]] == nil {
		names := make([]string, 0, len(scenarios))
		for n := range scenarios {
			names = append(names, n)
		}
		sort.Strings(names)
		emit(M{"error": "usage: sarama-driver <" + strings.Join(names, "|") + "> --bootstrap HOST:PORT ..."}, 2)
	}
	name := os.Args[1]
	o := &opts{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&o.bootstrap, "bootstrap", "", "broker HOST:PORT")
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.StringVar(&o.topic2, "topic2", "", "second topic (txn-etl output)")
	fs.StringVar(&o.group, "group", "", "consumer group")
	fs.StringVar(&o.txnID, "txn-id", "", "transactional id")
	fs.StringVar(&o.version, "version", "4.0.0", "sarama Config.Version (e.g. 4.0.0 = sarama.V4_0_0_0), or 'default'")
	fs.StringVar(&o.adminVer, "admin-version", "", "Config.Version of the ClusterAdmin only (default: --version)")
	fs.StringVar(&o.codec, "codec", "none", "none|gzip|snappy|lz4|zstd")
	fs.StringVar(&o.producer, "producer", "sync", "sync|async")
	fs.StringVar(&o.acks, "acks", "all", "1|all")
	fs.StringVar(&o.strategy, "strategy", "range", "range|roundrobin|sticky|cooperative-sticky")
	fs.StringVar(&o.configs, "configs", "", "topic configs k=v,k=v for the topic the scenario creates")
	fs.IntVar(&o.count, "count", 60, "records")
	fs.IntVar(&o.partitions, "partitions", 1, "partitions of the topic the scenario creates")
	fs.IntVar(&o.size, "size", 0, "record value size")
	fs.BoolVar(&o.idempotent, "idempotent", false, "Producer.Idempotent (with Net.MaxOpenRequests=1)")
	fs.BoolVar(&o.autoCreate, "auto-create", true, "Metadata.AllowAutoTopicCreation")
	fs.BoolVar(&o.expire, "expire", false, "group-static: also wait for a static member's session to expire")
	fs.DurationVar(&o.timeout, "timeout", 40*time.Second, "scenario deadline")
	fs.StringVar(&o.logLevel, "log", "none", "sarama log on stderr: none|info|debug")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "TLS: PEM CA file to verify the broker (turns TLS on)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "TLS: PEM client certificate (mTLS; turns TLS on)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "TLS: PEM private key of --tls-cert")
	fs.StringVar(&o.saslMechanism, "sasl-mechanism", "", "SASL: PLAIN|SCRAM-SHA-256|SCRAM-SHA-512")
	fs.StringVar(&o.saslUser, "sasl-user", "", "SASL user")
	fs.StringVar(&o.saslPassword, "sasl-password", "", "SASL password")
	if err := fs.Parse(os.Args[2:]); err != nil {
		emit(M{"error": err.Error()}, 2)
	}
	if o.bootstrap == "" {
		emit(M{"error": "--bootstrap is required"}, 2)
	}
	if o.logLevel == "info" || o.logLevel == "debug" {
		l := log.New(os.Stderr, "[sarama] ", log.Ltime|log.Lmicroseconds)
		sarama.Logger = l
		if o.logLevel == "debug" {
			sarama.DebugLogger = l
		}
	}

	// The scenario's deadline bounds every wait inside it; the watchdog bounds what a deadline
	// cannot interrupt (sarama's blocking calls take no context: a Close waiting on a group
	// leave, a SendMessage stuck in retries).
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	watchdog := time.AfterFunc(o.timeout+15*time.Second, func() {
		emit(M{"error": "watchdog: scenario did not finish", "scenario": name}, 3)
	})
	start := time.Now()
	out := runProtected(ctx, name, o)
	watchdog.Stop()
	out["scenario"] = name
	out["elapsed_ms"] = time.Since(start).Milliseconds()
	emit(out, 0)
}

func runProtected(ctx context.Context, name string, o *opts) (out M) {
	defer func() {
		if r := recover(); r != nil {
			out = M{"error": fmt.Sprintf("panic: %v", r)}
		}
	}()
	return scenarios[name](ctx, o)
}

var emitOnce sync.Mutex

func emit(m M, code int) {
	emitOnce.Lock() // the watchdog and main must not both print
	b, err := json.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(M{"error": "json: " + err.Error()})
	}
	os.Stdout.Write(append(b, '\n'))
	os.Exit(code)
}

// ---- configuration -------------------------------------------------------------------------

// config is the sarama.Config every client of a scenario starts from: the chosen Version and
// timings short enough that a failing broker shows up within the scenario's deadline.
func (o *opts) config(clientID string) (*sarama.Config, error) {
	c := sarama.NewConfig()
	if o.version != "default" {
		v, err := sarama.ParseKafkaVersion(o.version)
		if err != nil {
			return nil, err
		}
		c.Version = v
	}
	c.ClientID = clientID
	c.Net.DialTimeout = 5 * time.Second
	c.Metadata.Retry.Max = 5
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	c.Metadata.AllowAutoTopicCreation = o.autoCreate
	c.Admin.Timeout = 10 * time.Second
	c.Admin.Retry.Max = 3
	c.Admin.Retry.Backoff = 100 * time.Millisecond
	c.Producer.Return.Successes = true
	c.Producer.Retry.Backoff = 100 * time.Millisecond
	c.Consumer.Return.Errors = true
	c.Consumer.MaxWaitTime = 200 * time.Millisecond
	c.Consumer.Retry.Backoff = 200 * time.Millisecond
	if err := o.applySecurity(c); err != nil {
		return nil, err
	}
	return c, nil
}

// adminWithTopic is the opening of most scenarios: an admin client and the scenario's topic
// (o.topic) created with `partitions` and `configs`. The caller closes the admin.
func (o *opts) adminWithTopic(ctx context.Context, partitions int, configs map[string]*string) (sarama.ClusterAdmin, error) {
	adm, err := o.admin()
	if err != nil {
		return nil, err
	}
	if err := createTopic(ctx, adm, o.topic, partitions, configs); err != nil {
		adm.Close()
		return nil, err
	}
	return adm, nil
}

func (o *opts) admin() (sarama.ClusterAdmin, error) {
	c, err := o.config("sarama-admin")
	if err != nil {
		return nil, err
	}
	if o.adminVer != "" {
		if c.Version, err = sarama.ParseKafkaVersion(o.adminVer); err != nil {
			return nil, err
		}
	}
	return sarama.NewClusterAdmin([]string{o.bootstrap}, c)
}

// ---- JSON helpers --------------------------------------------------------------------------

// saramaErrors names sarama's own (client-side) sentinel errors.
var saramaErrors = []struct {
	err  error
	name string
}{
	{sarama.ErrOutOfBrokers, "SARAMA_OUT_OF_BROKERS"},
	{sarama.ErrClosedClient, "SARAMA_CLOSED_CLIENT"},
	{sarama.ErrIncompleteResponse, "SARAMA_INCOMPLETE_RESPONSE"},
	{sarama.ErrNotConnected, "SARAMA_NOT_CONNECTED"},
	{sarama.ErrShuttingDown, "SARAMA_SHUTTING_DOWN"},
	{sarama.ErrControllerNotAvailable, "SARAMA_CONTROLLER_NOT_AVAILABLE"},
	{sarama.ErrNoTopicsToUpdateMetadata, "SARAMA_NO_TOPICS_TO_UPDATE_METADATA"},
	{sarama.ErrTransactionNotReady, "SARAMA_TRANSACTION_NOT_READY"},
	{sarama.ErrTransitionNotAllowed, "SARAMA_TRANSITION_NOT_ALLOWED"},
	{sarama.ErrConsumerRetriesExhausted, "SARAMA_CONSUMER_RETRIES_EXHAUSTED"},
	{context.DeadlineExceeded, "CONTEXT_DEADLINE"},
}

// errJSON names an error the way a sarama user can tell it apart: the Kafka error name and
// code when the broker sent one (a KError anywhere in the chain), else sarama's sentinel, else
// the client-side text. A NONE KError is no error.
func errJSON(err error) any {
	if err == nil {
		return nil
	}
	var ke sarama.KError
	if errors.As(err, &ke) && ke == sarama.ErrNoError {
		return nil
	}
	// SendMessages reports every failed message; the first one's error names the failure.
	var pes sarama.ProducerErrors
	if errors.As(err, &pes) && len(pes) > 0 {
		out := errJSON(pes[0].Err)
		if m, ok := out.(M); ok {
			m["failed_messages"] = len(pes)
		}
		return out
	}
	m := M{"text": err.Error()}
	var pe sarama.PacketEncodingError
	var pd sarama.PacketDecodingError
	var ce sarama.ConfigurationError
	switch {
	case errors.As(err, &ke):
		m["code"] = int16(ke)
		if name, ok := kafkaErrorNames[int16(ke)]; ok {
			m["name"] = name
		} else {
			m["name"] = fmt.Sprintf("KAFKA_ERROR_%d", int16(ke))
		}
	case errors.As(err, &pe):
		m["name"] = "SARAMA_PACKET_ENCODING"
	case errors.As(err, &pd):
		m["name"] = "SARAMA_PACKET_DECODING"
	case errors.As(err, &ce):
		m["name"] = "SARAMA_CONFIGURATION"
	default:
		m["name"] = "CLIENT_ERROR"
		for _, s := range saramaErrors {
			if errors.Is(err, s.err) {
				m["name"] = s.name
				break
			}
		}
	}
	return m
}

// kerrJSON is errJSON for a bare error code field of a response.
func kerrJSON(k sarama.KError) any {
	if k == sarama.ErrNoError {
		return nil
	}
	return errJSON(k)
}

func bytesJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return base64.StdEncoding.EncodeToString(b)
}

func strp(s string) *string { return &s }

func parseConfigs(s string) map[string]*string {
	if s == "" {
		return nil
	}
	m := map[string]*string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = strp(v)
	}
	return m
}

func sortedInt32(ps []int32) []int32 {
	out := append([]int32{}, ps...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// ---- shared steps --------------------------------------------------------------------------

// createTopic creates the topic and waits until metadata shows every partition led, so the
// scenario's first produce doesn't race the broker's own propagation.
func createTopic(ctx context.Context, adm sarama.ClusterAdmin, topic string, partitions int,
	configs map[string]*string) error {
	err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(partitions),
		ReplicationFactor: 1, ConfigEntries: configs}, false)
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	return waitTopic(ctx, adm, topic, partitions)
}

func waitTopic(ctx context.Context, adm sarama.ClusterAdmin, topic string, partitions int) error {
	for i := 0; i < 200; i++ {
		tms, err := adm.DescribeTopics([]string{topic})
		if err == nil && len(tms) == 1 {
			tm := tms[0]
			ready := tm.Err == sarama.ErrNoError && len(tm.Partitions) == partitions
			for _, p := range tm.Partitions {
				ready = ready && p.Err == sarama.ErrNoError && p.Leader >= 0
			}
			if ready {
				return nil
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return fmt.Errorf("topic %s not ready: %w", topic, ctx.Err())
		}
	}
	return fmt.Errorf("topic %s not ready after 200 polls", topic)
}

// messageJSON is what a consumer saw of one record.
func messageJSON(m *sarama.ConsumerMessage) M {
	hs := make([]any, 0, len(m.Headers))
	for _, h := range m.Headers {
		hs = append(hs, []any{string(h.Key), bytesJSON(h.Value)})
	}
	return M{"partition": m.Partition, "offset": m.Offset, "key": bytesJSON(m.Key),
		"value": bytesJSON(m.Value), "headers": hs, "timestamp": m.Timestamp.UnixMilli()}
}

// readPartition consumes one partition from `from` with the given consumer until `want`
// messages arrived, then waits `extra` for any that should not be there; stops at maxWait.
// Consumer errors are collected, not retried: they are what the tests look at.
func readPartition(ctx context.Context, c sarama.Consumer, topic string, partition int32,
	from int64, want int, extra, maxWait time.Duration) M {
	pc, err := c.ConsumePartition(topic, partition, from)
	if err != nil {
		return M{"consume_error": errJSON(err), "messages": []M{}, "errors": nil}
	}
	defer pc.AsyncClose()
	ctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	msgs := []M{}
	var errs []any
	var quiet <-chan time.Time
	for i := 0; i < 100000; i++ {
		if len(msgs) >= want && quiet == nil {
			quiet = time.After(extra)
		}
		select {
		case m, ok := <-pc.Messages():
			if !ok {
				return M{"messages": msgs, "errors": errs, "closed": true}
			}
			msgs = append(msgs, messageJSON(m))
			continue
		case e, ok := <-pc.Errors():
			if ok {
				errs = append(errs, errJSON(e.Err))
				if len(errs) > 20 {
					return M{"messages": msgs, "errors": errs}
				}
			}
			continue
		case <-quiet:
		case <-ctx.Done():
		}
		break
	}
	return M{"messages": msgs, "errors": errs, "high_water_mark": pc.HighWaterMarkOffset()}
}

// listOffsetsJSON asks ListOffsets (through ClusterAdmin.ListOffsets) for one timestamp spec
// on each partition.
func listOffsetsJSON(adm sarama.ClusterAdmin, topic string, partitions int, spec int64,
	level sarama.IsolationLevel) M {
	req := map[int32]int64{}
	for p := 0; p < partitions; p++ {
		req[int32(p)] = spec
	}
	rs, err := adm.ListOffsets(map[string]map[int32]int64{topic: req},
		&sarama.ListOffsetsOptions{IsolationLevel: level})
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	for p, r := range rs[topic] {
		out[fmt.Sprint(p)] = M{"offset": r.Offset, "timestamp": r.Timestamp,
			"leader_epoch": r.LeaderEpoch, "error": errJSON(r.Err)}
	}
	return out
}
