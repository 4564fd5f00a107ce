package main

// TLS and SASL for every kafka-go scenario (-tls/-ca/-cert/-key, -sasl/-user/-password:
// internal/secure): a kafka.Transport (Writer, Client) and a kafka.Dialer (Reader) with the TLS
// configuration and kafka-go's sasl/plain or sasl/scram mechanism.  The "secure" scenario:
// records of the round trip's shapes produced and read back byte-exact over the secured
// listener; or, when kafka-go cannot get in, its error and whether it is kafka-go's
// SASLAuthenticationFailed.

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/pykbroker/compat/go/internal/scen"
	"github.com/pykbroker/compat/go/internal/secure"
)

var sec = secure.Define()

func mechanism() sasl.Mechanism {
	var algo scram.Algorithm
	switch sec.SASL() {
	case "":
		return nil
	case "PLAIN":
		return plain.Mechanism{Username: *sec.User, Password: *sec.Password}
	case "SCRAM-SHA-256":
		algo = scram.SHA256
	case "SCRAM-SHA-512":
		algo = scram.SHA512
	default:
		scen.Fail("sasl mechanism %q: kafka-go has no such mechanism", *sec.Mechanism)
	}
	m, err := scram.Mechanism(algo, *sec.User, *sec.Password)
	if err != nil {
		scen.Fail("scram: %v", err)
	}
	return m
}

// transport is what Writers and Clients use: nil (kafka-go's DefaultTransport) unsecured.
func transport() kafka.RoundTripper {
	if !*sec.TLS && sec.SASL() == "" {
		return nil
	}
	return &kafka.Transport{TLS: sec.TLSConfig(), SASL: mechanism(), DialTimeout: 10 * time.Second}
}

// dialer is what Readers use: nil (kafka-go's DefaultDialer) unsecured.
func dialer() *kafka.Dialer {
	if !*sec.TLS && sec.SASL() == "" {
		return nil
	}
	return &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: sec.TLSConfig(), SASLMechanism: mechanism()}
}

func runSecure(ctx context.Context) any {
	topic := *common.Prefix + "-sec"
	if *sec.Create {
		createTopic(ctx, topic, 3)
	}
	base := time.Now()
	rs, want := scen.FreshRecords(*common.Records, base)
	// a refused writer retries (MaxAttempts) the errors kafka-go calls temporary only.  kafka-go
	// has no idempotence: a Produce it gives up on after WriteTimeout (10 s by default) and sends
	// again leaves a second copy in the log once the late first one is appended (seen on a
	// loaded machine).  This scenario checks security, not late answers: each Produce waits
	// for its answer as long as the scenario waits for the write, so what it retries is only
	// what the broker refused (nothing appended).
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	answerWait := 20 * time.Second
	err := write(pctx, topic, 0, rs, 3, answerWait)
	// kafka-go's Writer asks one broker for the topic's partition count before it writes and
	// does not retry that lookup: on a cluster, a broker that has not yet learned of the topic
	// just created (brokers learn of it asynchronously, Kafka's too) fails the write before
	// anything is sent.  Only that exact error, only for a topic made here, with a new Writer
	// (a fresh Transport: no cached metadata) each time.
	for tries := 0; *sec.Create && err == kafka.UnknownTopicOrPartition && tries < 20 && pctx.Err() == nil; tries++ {
		time.Sleep(100 * time.Millisecond)
		err = write(pctx, topic, 0, rs, 3, answerWait)
	}
	cancel()
	if err != nil {
		return secure.Classify(err, errors.Is(err, kafka.SASLAuthenticationFailed))
	}
	got := map[int32][]scen.Rec{}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for p := range want {
		got[p] = readPartition(rctx, topic, int(p), len(want[p]))
	}
	// kafka-go's reader hands out a zero-length key or value as nil: bytes compared only
	return map[string]any{"roundtrip": scen.Judge(want, got, scen.Flags{})}
}
