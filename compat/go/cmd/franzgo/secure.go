package main

// TLS, mTLS and SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) for every franz-go scenario
// (-tls/-ca/-cert/-key, -sasl/-user/-password/-oauth-token: internal/secure), and the "secure"
// scenario: records of the round trip's shapes produced and read back byte-exact over the
// secured listener; or, when the client cannot get in (a wrong password, no client
// certificate), the client's own error and whether franz-go calls it an authentication error.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/pykbroker/compat/go/internal/scen"
	"github.com/pykbroker/compat/go/internal/secure"
)

var sec = secure.Define()

func securityOpts() []kgo.Opt {
	var opts []kgo.Opt
	if c := sec.TLSConfig(); c != nil {
		opts = append(opts, kgo.DialTLSConfig(c))
	}
	user, pass := *sec.User, *sec.Password
	switch sec.SASL() {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	case "OAUTHBEARER":
		opts = append(opts, kgo.SASL(oauth.Auth{Token: *sec.Token}.AsMechanism()))
	default:
		fail("unknown SASL mechanism %q", *sec.Mechanism)
	}
	return opts
}

func runSecure(ctx context.Context) any {
	topic := *common.Prefix + "-sec"
	// A refused client's metadata loads fail; franz-go fails the buffered records (with the
	// load's error wrapped) after RecordRetries of them, else only at the context's end.  (Not
	// kgo.RecordDeliveryTimeout: franz-go measures it from the record's timestamp, 40 s in the
	// past for half of these.)
	opts := []kgo.Opt{kgo.RecordRetries(3), kgo.RequestRetries(2), kgo.RetryTimeout(5 * time.Second)}
	refused := func(err error) any {
		return secure.Classify(err, errors.Is(err, kerr.SaslAuthenticationFailed))
	}
	if *sec.Create {
		admCl := newClient()
		createTopic(ctx, kadm.NewClient(admCl), topic, 3)
		admCl.Close()
	}
	p := newClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	base := time.Now()
	var rs []*kgo.Record
	want := map[int32][]scen.Rec{}
	for i := 0; i < *common.Records; i++ {
		rs = append(rs, record(i, base))
	}
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	results := p.ProduceSync(pctx, rs...)
	pcancel()
	p.Close()
	if err := results.FirstErr(); err != nil {
		return refused(err)
	}
	for _, pr := range results {
		want[pr.Record.Partition] = append(want[pr.Record.Partition], toRec(pr.Record))
	}
	parts := map[int32]kgo.Offset{0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}
	cons := newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}), kgo.FetchMaxWait(300*time.Millisecond))
	defer cons.Close()
	got := map[int32][]scen.Rec{}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for n := 0; n < len(rs) && rctx.Err() == nil; {
		fs := cons.PollFetches(rctx)
		fs.EachError(func(t string, p int32, err error) {
			if rctx.Err() == nil {
				fail("fetch %s/%d: %v", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], toRec(r))
			n++
		})
	}
	return map[string]any{"roundtrip": scen.Judge(want, got, scen.Flags{NullVsEmptyKey: true, NullVsEmptyValue: true})}
}

func toRec(r *kgo.Record) scen.Rec {
	out := scen.Rec{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, scen.Header{Key: h.Key, Value: h.Value})
	}
	return out
}
