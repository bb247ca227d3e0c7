// franz-driver runs one bounded franz-go scenario against a broker and prints exactly one JSON
// object on stdout describing what franz-go observed. tests/clients/test_franz.py builds it and
// asserts on that object; failures are data in the JSON, never panics, so a broker divergence
// shows up as a field value the test can name.
//
//	franz-driver <scenario> --bootstrap HOST:PORT [--topic T] [--group G] [--codec C] ...
//
// --log debug writes franz-go's own log to stderr, including every request it writes with its
// version ("wrote Produce v13"): the quickest way to see what the broker was asked.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// M is one JSON object of the output.
type M = map[string]any

type opts struct {
	bootstrap  string
	topic      string
	topic2     string
	group      string
	codec      string
	txnID      string
	protocol   string
	count      int
	partitions int
	size       int
	autoCreate bool
	regex      bool
	configs    string
	timeout    time.Duration
	logLevel   string
	// security (security.go)
	tlsCA, tlsCert, tlsKey                string
	saslMechanism, saslUser, saslPassword string
}

var scenarios = map[string]func(context.Context, *opts) M{
	"admin":              scenarioAdmin,
	"offsets":            scenarioOffsets,
	"produce-consume":    scenarioProduceConsume,
	"group":              scenarioGroup,
	"txn":                scenarioTxn,
	"txn-session":        scenarioTxnSession,
	"produce-unknown":    scenarioProduceUnknown,
	"fetch-out-of-range": scenarioFetchOutOfRange,
	"too-large":          scenarioTooLarge,
	"cgh-join":           scenarioCGHJoin,
	"produce-modes":      scenarioProduceModes,
	"cluster":            scenarioCluster,
	"fetch-limits":       scenarioFetchLimits,
	"group-autocommit":   scenarioGroupAutocommit,
	"group-static":       scenarioGroupStatic,
	"share":              scenarioShare,
	"group-config":       scenarioGroupConfig,
	"produce-restart":    scenarioProduceRestart,
	"connect":            scenarioConnect,
}

func main() {
	if len(os.Args) < 2 || scenarios[os.Args[1]] == nil {
		names := make([]string, 0, len(scenarios))
		for n := range scenarios {
			names = append(names, n)
		}
		sort.Strings(names)
		emit(M{"error": "usage: franz-driver <" + strings.Join(names, "|") + "> --bootstrap HOST:PORT ..."}, 2)
	}
	name := os.Args[1]
	o := &opts{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&o.bootstrap, "bootstrap", "", "broker HOST:PORT")
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.StringVar(&o.topic2, "topic2", "", "second topic (txn-session output)")
	fs.StringVar(&o.group, "group", "", "consumer group")
	fs.StringVar(&o.codec, "codec", "default", "default|none|gzip|snappy|lz4|zstd")
	fs.StringVar(&o.txnID, "txn-id", "", "transactional id")
	fs.StringVar(&o.protocol, "protocol", "classic", "group protocol: classic|consumer (KIP-848)")
	fs.IntVar(&o.count, "count", 100, "records")
	fs.IntVar(&o.partitions, "partitions", 1, "partitions of the topic the scenario creates")
	fs.IntVar(&o.size, "size", 0, "record value size")
	fs.BoolVar(&o.regex, "regex", false, "group: subscribe with a regular expression (kgo.ConsumeRegex)")
	fs.BoolVar(&o.autoCreate, "auto-create", false, "kgo.AllowAutoTopicCreation")
	fs.StringVar(&o.configs, "configs", "", "topic configs k=v,k=v for the topic the scenario creates")
	fs.DurationVar(&o.timeout, "timeout", 40*time.Second, "scenario deadline")
	fs.StringVar(&o.logLevel, "log", "none", "franz-go log level on stderr: none|error|warn|info|debug")
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

	// The scenario's own deadline bounds every wait inside it; the watchdog bounds what a
	// deadline cannot interrupt (a Close that waits on a group leave, a stuck callback).
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

// ---- clients -----------------------------------------------------------------------------

func (o *opts) logger() kgo.Opt {
	lvl := map[string]kgo.LogLevel{"error": kgo.LogLevelError, "warn": kgo.LogLevelWarn,
		"info": kgo.LogLevelInfo, "debug": kgo.LogLevelDebug}[o.logLevel]
	if lvl == kgo.LogLevelNone {
		return kgo.WithLogger(nil)
	}
	return kgo.WithLogger(kgo.BasicLogger(os.Stderr, lvl, func() string {
		return time.Now().Format("15:04:05.000 ")
	}))
}

func (o *opts) client(clientID string, extra ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{kgo.SeedBrokers(o.bootstrap), kgo.ClientID(clientID), o.logger()}
	sec, err := o.securityOpts()
	if err != nil {
		return nil, err
	}
	base = append(base, sec...)
	return kgo.NewClient(append(base, extra...)...)
}

// adminWithTopic is the opening of most scenarios: an admin client (and the kgo client under
// it, which the caller closes) with the scenario's topic (o.topic) created.
func (o *opts) adminWithTopic(ctx context.Context, partitions int, configs map[string]*string) (*kadm.Client, *kgo.Client, error) {
	adm, cl, err := o.admin()
	if err != nil {
		return nil, nil, err
	}
	if err := createTopic(ctx, adm, o.topic, partitions, configs); err != nil {
		cl.Close()
		return nil, nil, err
	}
	return adm, cl, nil
}

// numbered is record i of the group scenarios: key and value both the decimal i.
func numbered(i int) *kgo.Record {
	return &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}
}

func (o *opts) admin() (*kadm.Client, *kgo.Client, error) {
	cl, err := o.client("franz-admin")
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// ---- JSON helpers ------------------------------------------------------------------------

// errJSON names an error the way a franz-go user sees it: the Kafka error name and code when
// the broker sent one (kerr), else the client-side error text.
func errJSON(err error) any {
	if err == nil {
		return nil
	}
	m := M{"text": err.Error()}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		m["name"] = ke.Message
		m["code"] = ke.Code
	} else {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			m["name"] = "CONTEXT_DEADLINE"
		case errors.Is(err, kgo.ErrRecordTimeout):
			m["name"] = "RECORD_TIMEOUT"
		case errors.Is(err, kgo.ErrRecordRetries):
			m["name"] = "RECORD_RETRIES"
		default:
			m["name"] = "CLIENT_ERROR"
		}
	}
	return m
}

func bytesJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return base64.StdEncoding.EncodeToString(b)
}

func recordJSON(r *kgo.Record) M {
	hs := make([]any, 0, len(r.Headers))
	for _, h := range r.Headers {
		hs = append(hs, []any{h.Key, bytesJSON(h.Value)})
	}
	return M{
		"topic": r.Topic, "partition": r.Partition, "offset": r.Offset,
		"key": bytesJSON(r.Key), "value": bytesJSON(r.Value), "headers": hs,
		"timestamp": r.Timestamp.UnixMilli(), "timestamp_type": r.Attrs.TimestampType(),
		"codec": r.Attrs.CompressionType(), "transactional": r.Attrs.IsTransactional(),
		"producer_id": r.ProducerID, "producer_epoch": r.ProducerEpoch,
		"leader_epoch": r.LeaderEpoch,
	}
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

// ---- shared steps ------------------------------------------------------------------------

// createTopic creates the topic and waits until metadata shows every partition led, so the
// scenario's first produce doesn't race the broker's own propagation.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int,
	configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, int32(partitions), 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	return waitTopic(ctx, adm, topic, partitions)
}

func waitTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	for i := 0; i < 200; i++ {
		tds, err := adm.ListTopics(ctx, topic)
		if err == nil {
			td := tds[topic]
			ready := td.Err == nil && len(td.Partitions) == partitions
			for _, p := range td.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not ready: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("topic %s not ready after 200 polls", topic)
}

// consume polls until `want` records arrived, then polls once more briefly so that records
// which should not be there (aborted, duplicated) are seen too; stops at ctx's deadline.
// Fetch errors are collected rather than retried: they are what the tests look at.
func consume(ctx context.Context, cl *kgo.Client, want int, maxWait time.Duration) ([]*kgo.Record, []M) {
	ctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	var recs []*kgo.Record
	var errs []M
	extra := false
	for i := 0; i < 10000; i++ {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			errs = append(errs, M{"topic": fe.Topic, "partition": fe.Partition, "error": errJSON(fe.Err)})
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if ctx.Err() != nil || extra || len(errs) > 20 {
			break
		}
		if len(recs) >= want {
			extra = true // one more short poll
		}
	}
	return recs, errs
}

func recordsJSON(recs []*kgo.Record) []M {
	out := make([]M, 0, len(recs))
	for _, r := range recs {
		out = append(out, recordJSON(r))
	}
	return out
}

func listedJSON(lo kadm.ListedOffsets, err error) any {
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	lo.Each(func(l kadm.ListedOffset) {
		out[fmt.Sprint(l.Partition)] = M{"offset": l.Offset, "timestamp": l.Timestamp,
			"leader_epoch": l.LeaderEpoch, "error": errJSON(l.Err)}
	})
	return out
}

func produceResultsJSON(rs kgo.ProduceResults) []M {
	out := make([]M, 0, len(rs))
	for _, r := range rs {
		m := M{"error": errJSON(r.Err)}
		if r.Record != nil {
			m["partition"] = r.Record.Partition
			m["offset"] = r.Record.Offset
			m["producer_id"] = r.Record.ProducerID
			m["producer_epoch"] = r.Record.ProducerEpoch
			m["timestamp"] = r.Record.Timestamp.UnixMilli()
		}
		out = append(out, m)
	}
	return out
}
