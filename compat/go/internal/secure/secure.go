// Package secure holds the TLS and SASL flags every Go client scenario takes and what the
// clients share of them: the TLS configuration (a CA to trust, a client certificate for mTLS)
// and the "secure" scenario's report, so franz-go, sarama and kafka-go are judged alike.
//
//	-tls -ca ca.pem [-cert client.pem -key client-key.pem]
//	-sasl PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|OAUTHBEARER -user u -password p [-oauth-token jwt]
package secure

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Flags are the security flags of a scenario command.
type Flags struct {
	TLS       *bool
	CA        *string
	Cert      *string
	Key       *string
	Mechanism *string
	User      *string
	Password  *string
	Token     *string
	// secure scenario: create its topic (false: the test made it, and the client's first
	// request is the produce's)
	Create *bool
}

// Define defines the security flags on the default flag set.
func Define() Flags {
	return Flags{
		TLS:       flag.Bool("tls", false, "connect with TLS (SSL or SASL_SSL listener)"),
		CA:        flag.String("ca", "", "tls: PEM file of the CA to trust (default: the system's)"),
		Cert:      flag.String("cert", "", "tls: PEM client certificate (mTLS)"),
		Key:       flag.String("key", "", "tls: PEM key of -cert"),
		Mechanism: flag.String("sasl", "", "SASL mechanism: PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER (empty: none)"),
		User:      flag.String("user", "", "sasl: user name"),
		Password:  flag.String("password", "", "sasl: password"),
		Token:     flag.String("oauth-token", "", "sasl OAUTHBEARER: the token (a JWT) sent"),
		Create:    flag.Bool("create", true, "secure: create the topic <prefix>-sec (false: it exists)"),
	}
}

// SASL is the upper-cased mechanism ("" without SASL).
func (f Flags) SASL() string { return strings.ToUpper(*f.Mechanism) }

// TLSConfig is the client's TLS configuration, nil without -tls.  A bad file ends the program
// (exit 2): a setup error, not an observation.
func (f Flags) TLSConfig() *tls.Config {
	if !*f.TLS {
		return nil
	}
	// the broker's certificate names localhost and 127.0.0.1: Go checks the address dialled
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if *f.CA != "" {
		pem, err := os.ReadFile(*f.CA)
		if err != nil {
			fail("ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fail("ca: no certificate in %s", *f.CA)
		}
		c.RootCAs = pool
	}
	if *f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(*f.Cert, *f.Key)
		if err != nil {
			fail("client certificate: %v", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}

// Failure is the report of a secure scenario the client could not run: the client's error
// text and what kind of error the client says it is.
type Failure struct {
	Error string `json:"error"`
	// the client's own authentication error (errors.Is with the client's sentinel)
	AuthFailed bool `json:"auth_failed"`
	// a TLS handshake or certificate error
	TLSFailed bool `json:"tls_failed"`
}

// Classify fills a Failure from err; authFailed is the client's own test.
func Classify(err error, authFailed bool) Failure {
	var cert *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var alert tls.AlertError
	var rec tls.RecordHeaderError
	text := err.Error()
	tlsFailed := errors.As(err, &cert) || errors.As(err, &unknown) || errors.As(err, &alert) || errors.As(err, &rec) ||
		strings.Contains(text, "tls: ") || strings.Contains(text, "x509: ")
	return Failure{Error: text, AuthFailed: authFailed, TLSFailed: tlsFailed}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}
