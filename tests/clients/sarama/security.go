package main

// Security settings of every sarama.Config a scenario makes: Net.TLS (a CA to verify the broker,
// a client certificate for mTLS) and Net.SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). sarama has
// no SCRAM implementation of its own: its users hand it a SCRAMClientGeneratorFunc, here one
// over github.com/xdg-go/scram.

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// scramClient adapts one xdg-go/scram conversation to sarama.SCRAMClient.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (s *scramClient) Begin(user, password, authzID string) error {
	c, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }

func (s *scramClient) Done() bool { return s.conv.Done() }

// applySecurity sets Net.TLS and Net.SASL from the --tls-* and --sasl-* flags (nothing when
// they are unset).
func (o *opts) applySecurity(c *sarama.Config) error {
	if o.tlsCA != "" || o.tlsCert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.tlsCA != "" {
			pem, err := os.ReadFile(o.tlsCA)
			if err != nil {
				return err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return fmt.Errorf("no certificate in %s", o.tlsCA)
			}
			cfg.RootCAs = pool
		}
		if o.tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
			if err != nil {
				return err
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = cfg
	}
	m := strings.ToUpper(o.saslMechanism)
	if m == "" {
		return nil
	}
	c.Net.SASL.Enable = true
	c.Net.SASL.Handshake = true
	c.Net.SASL.User = o.saslUser
	c.Net.SASL.Password = o.saslPassword
	switch m {
	case "PLAIN":
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case "SCRAM-SHA-256":
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
			return &scramClient{hash: scram.HashGeneratorFcn(sha256.New)}
		}
	case "SCRAM-SHA-512":
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
			return &scramClient{hash: scram.HashGeneratorFcn(sha512.New)}
		}
	default:
		return fmt.Errorf("unknown --sasl-mechanism %q", o.saslMechanism)
	}
	return nil
}

// scenarioConnect makes one ClusterAdmin (which fetches metadata on creation) and describes the
// cluster: with a wrong password the SASL failure is the answer, reported as data (errJSON)
// rather than as the driver's error. sarama wraps the broker's SaslAuthenticate error as
// Wrap(KError, message), which errors.As cannot reach (errJSON then names the outer
// ErrOutOfBrokers); errors.Is can, and is what a sarama user checks: sasl_failed.
func scenarioConnect(_ context.Context, o *opts) M {
	adm, err := o.admin()
	if err != nil {
		return M{"metadata_error": errJSON(err),
			"sasl_failed": errors.Is(err, sarama.ErrSASLAuthenticationFailed)}
	}
	defer adm.Close()
	brokers, _, err := adm.DescribeCluster()
	return M{"metadata_error": errJSON(err), "brokers": len(brokers),
		"sasl_failed": errors.Is(err, sarama.ErrSASLAuthenticationFailed)}
}
