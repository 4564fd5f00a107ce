// Command franzgo runs franz-go (github.com/twmb/franz-go/pkg/kgo, kadm) scenarios against a
// Kafka-protocol broker and prints one JSON object with what the client read back.
//
//	franzgo -brokers host:port[,...] -scenario roundtrip|idempotent|group|eos|admin|secure [flags]
//
// Exit status 0 with the JSON on stdout when the scenario ran (the caller judges the
// observations); 2 with the error on stderr when the client failed.  Every topic name is
// prefixed by -prefix so runs do not collide.  -v logs franz-go's own lines to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pykbroker/compat/go/internal/scen"
)

var (
	common     = scen.CommonFlags("franz-go", "fg", "roundtrip | idempotent | group | eos | admin | secure")
	balancer   = flag.String("balancer", "range", "eos/group: range | cooperative-sticky | sticky | consumer (KIP-848, server side)")
	static     = flag.Bool("static", false, "eos: static members (group.instance.id)")
	workers    = flag.Int("workers", 3, "eos: transact sessions")
	timeout    = flag.Duration("timeout", 90*time.Second, "whole-scenario deadline")
	perTxn     = flag.Int("per-txn", 50, "eos: at most this many records per transaction")
	txnHold    = flag.Duration("txn-hold", 30*time.Millisecond, "eos: how long each transaction stays open after its produces")
	txnPrefix  = flag.String("txn-prefix", "", "eos: transactional id prefix (default: -prefix)")
	loseEndTxn = flag.Int("lose-end-txn", 0, "eos: worker 0 never gets the answers to its Nth EndTxn (0: no fault)")
	pace       = flag.Duration("pace", 0, "idempotent: pause between two records produced")
	txnTimeout = flag.Duration("txn-timeout", 20*time.Second, "eos: transaction.timeout.ms")
)

func seeds() []string { return common.Seeds() }

func baseOpts() []kgo.Opt {
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds()...), kgo.MetadataMinAge(250 * time.Millisecond)}, securityOpts()...)
	if *common.Verbose {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string {
			return time.Now().Format("15:04:05.000 ")
		})))
	}
	return opts
}

func newClient(extra ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append(baseOpts(), extra...)...)
	if err != nil {
		fail("new client: %v", err)
	}
	return cl
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "franzgo %s: "+format+"\n", append([]any{*common.Scenario}, args...)...)
	os.Exit(2)
}

// createTopic creates a topic with kadm and waits until every partition has a leader.
// producePlain produces n records to topic with franz-go's default producer (idempotent,
// acks=all) and waits for all of them: record i has the key keyFmt % (i % keys) and the value
// valueFmt % i.  The values, in produce order; what names the records in a failure.
func producePlain(ctx context.Context, topic string, n int, keyFmt string, keys int, valueFmt, what string) []string {
	p := newClient(kgo.DefaultProduceTopic(topic))
	defer p.Close()
	var values []string
	for i := 0; i < n; i++ {
		v := fmt.Sprintf(valueFmt, i)
		values = append(values, v)
		p.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf(keyFmt, i%keys)), Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				fail("produce %s: %v", what, err)
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		fail("flush %s: %v", what, err)
	}
	return values
}

func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32) {
	resp, err := adm.CreateTopic(ctx, partitions, int16(*common.RF), nil, topic)
	if err != nil || resp.Err != nil {
		fail("create topic %s: %v %v", topic, err, resp.Err)
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if t, ok := md.Topics[topic]; ok && t.Err == nil && len(t.Partitions) == int(partitions) {
				ready := true
				for _, p := range t.Partitions {
					if p.Leader < 0 || p.Err != nil {
						ready = false
					}
				}
				if ready {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			fail("topic %s never got leaders: %v", topic, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail("json: %v", err)
	}
	os.Stdout.Write(append(b, '\n'))
}

func main() {
	flag.Parse()
	if *txnPrefix == "" {
		*txnPrefix = *common.Prefix
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch *common.Scenario {
	case "roundtrip":
		emit(runRoundtrip(ctx))
	case "idempotent":
		emit(runIdempotent(ctx))
	case "group":
		emit(runGroup(ctx))
	case "eos":
		emit(runEOS(ctx))
	case "admin":
		emit(runAdmin(ctx))
	case "secure":
		emit(runSecure(ctx))
	case "acls":
		emit(runACLs(ctx)) // acls.go
	default:
		fail("unknown scenario")
	}
}
