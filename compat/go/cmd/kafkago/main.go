// Command kafkago runs segmentio/kafka-go scenarios against a Kafka-protocol broker and prints
// one JSON report of what the client read back (see compat/go/internal/scen).
//
//	kafkago -brokers host:port[,...] -scenario roundtrip|group|secure|acks [-prefix p] [-records n] [-rf n]
//
// kafka-go speaks mostly old API versions (Produce v2/v3, Fetch v2-v10 by what it negotiates)
// and runs its own consumer group client; it has no idempotent or transactional producer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/pykbroker/compat/go/internal/scen"
)

var (
	common   = scen.CommonFlags("kafka-go", "kg", "roundtrip | group | secure | acks")
	strategy = flag.String("balancer", "range", "group: range | roundrobin")
	pace     = flag.Duration("pace", 0, "acks: pause between two records written")
	timeout  = flag.Duration("timeout", 150*time.Second, "whole-scenario deadline")
)

func seeds() []string { return common.Seeds() }

func errorLogger() kafka.Logger {
	if !*common.Verbose {
		return nil
	}
	return kafka.LoggerFunc(func(msg string, args ...any) { fmt.Fprintf(os.Stderr, msg+"\n", args...) })
}

func createTopic(ctx context.Context, topic string, partitions int) {
	c := &kafka.Client{Addr: kafka.TCP(seeds()...), Timeout: 30 * time.Second, Transport: transport()}
	r, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: partitions, ReplicationFactor: *common.RF}}})
	if err != nil {
		scen.Fail("create topic %s: %v", topic, err)
	}
	if e := r.Errors[topic]; e != nil {
		scen.Fail("create topic %s: %v", topic, e)
	}
	// CreateTopics answers once the controller committed the topic; each broker learns it from
	// the metadata log shortly after (Kafka's brokers and pykbroker's alike), so one broker's
	// Metadata listing it says nothing of the others, and kafka-go's Writer may take its first
	// metadata from any broker (then fails with UNKNOWN_TOPIC_OR_PARTITION).  Wait until every
	// broker the cluster lists answers with the topic's partitions and their leaders.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		if err = topicReadyEverywhere(ctx, c, topic, partitions); err == nil {
			return
		}
		if time.Now().After(deadline) {
			scen.Fail("topic %s never got leaders on every broker: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// topicReadyEverywhere asks each broker of the cluster (as a first Metadata lists them) for the
// topic and returns nil once each answers with its partitions, each with a leader.
func topicReadyEverywhere(ctx context.Context, c *kafka.Client, topic string, partitions int) error {
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return err
	}
	if len(md.Brokers) == 0 {
		return errors.New("metadata lists no broker")
	}
	for _, b := range md.Brokers {
		addr := kafka.TCP(fmt.Sprintf("%s:%d", b.Host, b.Port))
		one, err := c.Metadata(ctx, &kafka.MetadataRequest{Addr: addr, Topics: []string{topic}})
		if err != nil {
			return fmt.Errorf("broker %d: %w", b.ID, err)
		}
		if len(one.Topics) != 1 || one.Topics[0].Error != nil || len(one.Topics[0].Partitions) != partitions {
			return fmt.Errorf("broker %d does not list the topic's %d partitions yet", b.ID, partitions)
		}
		for _, p := range one.Topics[0].Partitions {
			if p.Leader.ID < 0 || p.Error != nil {
				return fmt.Errorf("broker %d: partition %d has no leader yet", b.ID, p.ID)
			}
		}
	}
	return nil
}

// the record names its partition (kafka-go's writer asks a Balancer)
var manual = kafka.BalancerFunc(func(m kafka.Message, partitions ...int) int { return m.Partition })

func produce(ctx context.Context, topic string, codec kafka.Compression, rs []scen.Rec) {
	if err := write(ctx, topic, codec, rs, 0, 0); err != nil {
		scen.Fail("produce: %v", err)
	}
}

// write produces rs (the partitions they name) with a Writer (acks all; attempts: kafka-go's
// default when 0; answerWait: how long one Produce waits for its answer, kafka-go's 10 s when 0)
// and returns WriteMessages' error.
func write(ctx context.Context, topic string, codec kafka.Compression, rs []scen.Rec, attempts int,
	answerWait time.Duration) error {
	w := &kafka.Writer{Addr: kafka.TCP(seeds()...), Topic: topic, Balancer: manual, Compression: codec,
		RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond, BatchSize: 50, ErrorLogger: errorLogger(),
		Transport: transport(), MaxAttempts: attempts, WriteTimeout: answerWait}
	defer w.Close()
	msgs := make([]kafka.Message, len(rs))
	for i, r := range rs {
		m := kafka.Message{Partition: int(r.Partition), Key: r.Key, Value: r.Value, Time: r.Timestamp}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
		msgs[i] = m
	}
	return w.WriteMessages(ctx, msgs...)
}

func readPartition(ctx context.Context, topic string, part int, n int) []scen.Rec {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: seeds(), Topic: topic, Partition: part, MinBytes: 1,
		MaxBytes: 1 << 20, MaxWait: 300 * time.Millisecond, ErrorLogger: errorLogger(), Dialer: dialer()})
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		scen.Fail("set offset: %v", err)
	}
	var out []scen.Rec
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return out
		}
		rec := scen.Rec{Partition: int32(m.Partition), Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Time}
		for _, h := range m.Headers {
			rec.Headers = append(rec.Headers, scen.Header{Key: h.Key, Value: h.Value})
		}
		out = append(out, rec)
	}
	return out
}

func runRoundtrip(ctx context.Context) any {
	out := map[string]*scen.CodecResult{}
	codecs := map[string]kafka.Compression{"none": 0, "gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4,
		"zstd": kafka.Zstd}
	base := time.Now()
	for _, name := range scen.Codecs {
		topic := fmt.Sprintf("%s-rt-%s", *common.Prefix, name)
		createTopic(ctx, topic, 3)
		rs, want := scen.FreshRecords(*common.Records, base)
		produce(ctx, topic, codecs[name], rs)
		got := map[int32][]scen.Rec{}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		for p := range want {
			got[p] = readPartition(rctx, topic, int(p), len(want[p]))
		}
		cancel()
		// kafka-go's reader hands out a zero-length key or value as nil (the log keeps the
		// difference: kcat reads the empty ones back with length 0): not compared
		out[name] = scen.Judge(want, got, scen.Flags{})
	}
	return out
}

// A consumer group (kafka-go's own group client, explicit CommitMessages): member A processes
// a third and leaves, members B and C resume from A's commits; every record once.
func runGroup(ctx context.Context) any {
	topic, group := *common.Prefix+"-grp", *common.Prefix+"-grp-g"
	createTopic(ctx, topic, 3)
	rs := scen.GroupRecords(*common.Records)
	produce(ctx, topic, 0, rs)
	res := scen.GroupResult{Produced: len(rs), Problems: []string{}}
	var mu sync.Mutex
	seen := map[string]int{}
	total := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	var bal kafka.GroupBalancer = kafka.RangeGroupBalancer{}
	if *strategy == "roundrobin" {
		bal = kafka.RoundRobinGroupBalancer{}
	}
	member := func(ctx context.Context, all context.CancelFunc, limit int) int {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: seeds(), GroupID: group, Topic: topic,
			GroupBalancers: []kafka.GroupBalancer{bal}, StartOffset: kafka.FirstOffset, MinBytes: 1,
			MaxBytes: 1 << 20, MaxWait: 300 * time.Millisecond, HeartbeatInterval: time.Second,
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second, ErrorLogger: errorLogger(),
			Dialer: dialer()})
		defer r.Close() // leaves the group
		n := 0
		for ctx.Err() == nil && (limit <= 0 || n < limit) && total() < len(rs) {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					mu.Lock()
					res.Problems = append(res.Problems, err.Error())
					mu.Unlock()
				}
				break
			}
			mu.Lock()
			seen[string(m.Value)]++
			mu.Unlock()
			n++
			if err := r.CommitMessages(ctx, m); err != nil && ctx.Err() == nil {
				mu.Lock()
				res.Problems = append(res.Problems, "commit: "+err.Error())
				mu.Unlock()
			}
			if total() >= len(rs) {
				all()
			}
		}
		return n
	}
	gctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	res.RunMembers(gctx, member)
	res.Tally(rs, seen)
	out := groupReport{GroupResult: res, Committed: map[string]int64{}}
	c := &kafka.Client{Addr: kafka.TCP(seeds()...), Timeout: 30 * time.Second, Transport: transport()}
	of, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0, 1, 2}}})
	if err == nil && of.Error != nil {
		err = of.Error
	}
	if err != nil {
		out.Problems = append(out.Problems, "offset fetch: "+err.Error())
		return out
	}
	for _, p := range of.Topics[topic] {
		out.Committed[fmt.Sprint(p.Partition)] = p.CommittedOffset
		out.CommittedTotal += p.CommittedOffset
	}
	return out
}

// groupReport: the group scenario's report and the group's committed offsets at the end
// (OffsetFetch through kafka-go's Client), per partition and summed.
type groupReport struct {
	scen.GroupResult
	Committed      map[string]int64 `json:"committed"`
	CommittedTotal int64            `json:"committed_total"`
}

func main() {
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch *common.Scenario {
	case "roundtrip":
		scen.Emit(runRoundtrip(ctx))
	case "group":
		scen.Emit(runGroup(ctx))
	case "secure":
		scen.Emit(runSecure(ctx))
	case "acks":
		scen.Emit(runAcks(ctx))
	case "acls":
		scen.Emit(runACLs(ctx)) // acls.go
	default:
		scen.Fail("unknown scenario %q", *common.Scenario)
	}
}
