package main

// Security settings of every client a scenario makes: TLS (a CA to verify the broker, and a
// client certificate for mTLS) and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), as a franz-go
// user sets them: kgo.DialTLSConfig and kgo.SASL with the sasl/plain and sasl/scram packages.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// securityOpts are the kgo options for the --tls-* and --sasl-* flags (none when unset).
func (o *opts) securityOpts() ([]kgo.Opt, error) {
	var out []kgo.Opt
	if o.tlsCA != "" || o.tlsCert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.tlsCA != "" {
			pem, err := os.ReadFile(o.tlsCA)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("no certificate in %s", o.tlsCA)
			}
			cfg.RootCAs = pool
		}
		if o.tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
			if err != nil {
				return nil, err
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		// kgo sets ServerName from the seed's host when the config leaves it empty.
		out = append(out, kgo.DialTLSConfig(cfg))
	}
	switch m := strings.ToUpper(o.saslMechanism); m {
	case "":
	case "PLAIN":
		out = append(out, kgo.SASL(plain.Auth{User: o.saslUser, Pass: o.saslPassword}.AsMechanism()))
	case "SCRAM-SHA-256":
		out = append(out, kgo.SASL(scram.Auth{User: o.saslUser, Pass: o.saslPassword}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		out = append(out, kgo.SASL(scram.Auth{User: o.saslUser, Pass: o.saslPassword}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("unknown --sasl-mechanism %q", o.saslMechanism)
	}
	return out, nil
}

// scenarioConnect makes one client and asks for the cluster's metadata: with a wrong password
// the SASL failure is the answer, reported as data (errJSON) rather than as the driver's error.
func scenarioConnect(ctx context.Context, o *opts) M {
	adm, cl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer cl.Close()
	md, err := adm.BrokerMetadata(ctx)
	out := M{"metadata_error": errJSON(err)}
	if err == nil {
		out["brokers"] = len(md.Brokers)
	}
	return out
}
