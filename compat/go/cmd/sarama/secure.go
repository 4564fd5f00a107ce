package main

// TLS and SASL for every sarama scenario (-tls/-ca/-cert/-key, -sasl/-user/-password,
// -oauth-token: internal/secure) through sarama's Net.TLS and Net.SASL; SCRAM with the
// SCRAMClient sarama documents (SCRAMClientGeneratorFunc over github.com/xdg-go/scram);
// OAUTHBEARER with a TokenProvider handing sarama the -oauth-token JWT.  The "secure" scenario:
// records of the round trip's shapes produced and read back byte-exact over the secured
// listener; or, when sarama cannot get in, its error and whether it is sarama's
// ErrSASLAuthenticationFailed.

import (
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"github.com/pykbroker/compat/go/internal/scen"
	"github.com/pykbroker/compat/go/internal/secure"
)

var sec = secure.Define()

// xdgSCRAM is sarama's SCRAMClient over xdg-go/scram.
type xdgSCRAM struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, password, authzID string) error {
	c, err := x.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}

func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

// tokenProvider is sarama's AccessTokenProvider over a fixed token: the test makes the JWT
// (an unsecured one, as Kafka's default OAuthBearerUnsecuredValidator accepts) and its lifetime.
type tokenProvider string

func (t tokenProvider) Token() (*sarama.AccessToken, error) {
	return &sarama.AccessToken{Token: string(t)}, nil
}

func secureConfig(c *sarama.Config) {
	if t := sec.TLSConfig(); t != nil {
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = t
	}
	mech := sec.SASL()
	if mech == "" {
		return
	}
	c.Net.SASL.Enable = true
	c.Net.SASL.Handshake = true
	c.Net.SASL.User = *sec.User
	c.Net.SASL.Password = *sec.Password
	switch mech {
	case "PLAIN":
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case "SCRAM-SHA-256":
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: scram.HashGeneratorFcn(sha256.New)} }
	case "SCRAM-SHA-512":
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: scram.HashGeneratorFcn(sha512.New)} }
	case "OAUTHBEARER":
		c.Net.SASL.Mechanism = sarama.SASLTypeOAuth
		c.Net.SASL.TokenProvider = tokenProvider(*sec.Token)
	default:
		scen.Fail("sasl mechanism %q: not covered for sarama", mech)
	}
}

func runSecure() any {
	topic := *common.Prefix + "-sec"
	if *sec.Create {
		createTopic(topic, 3)
	}
	refused := func(err error) any {
		return secure.Classify(err, errors.Is(err, sarama.ErrSASLAuthenticationFailed))
	}
	c := config()
	// a refused client: sarama tries each seed Metadata.Retry.Max+1 times before giving up
	c.Metadata.Retry.Max = 1
	// idempotent, so that a produce retried on a loaded machine (a late answer) leaves no second
	// copy in either broker's log: the stored records are compared between the two brokers
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(seeds(), c)
	if err != nil {
		return refused(err)
	}
	base := time.Now()
	msgs := make([]*sarama.ProducerMessage, *common.Records)
	rs := make([]scen.Rec, *common.Records)
	for i := range msgs {
		r := scen.Record(i, base)
		m := &sarama.ProducerMessage{Topic: topic, Partition: r.Partition, Key: bytesOrNil(r.Key),
			Value: bytesOrNil(r.Value), Timestamp: r.Timestamp}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		msgs[i], rs[i] = m, r
	}
	err = p.SendMessages(msgs)
	p.Close()
	if err != nil {
		return refused(err)
	}
	want := map[int32][]scen.Rec{}
	for i, m := range msgs {
		r := rs[i]
		r.Offset = m.Offset
		want[m.Partition] = append(want[m.Partition], r)
	}
	got := consumeAll(topic, 3, len(rs))
	return map[string]any{"roundtrip": scen.Judge(want, got, scen.Flags{NullVsEmptyKey: true, NullVsEmptyValue: true})}
}
