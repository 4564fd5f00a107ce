// Command sarama runs IBM/sarama scenarios against a Kafka-protocol broker and prints one JSON
// report of what the client read back (see compat/go/internal/scen).
//
//	sarama -brokers host:port[,...] -scenario roundtrip|idempotent|group|txn|secure [-prefix p] [-records n] [-rf n]
//
// sarama speaks the API versions of its configured Kafka version (sarama.DefaultVersion,
// 2.8.0, unless -kafka-version says otherwise): old Produce/Fetch versions, its own consumer
// group client (JoinGroup/SyncGroup with client-side assignors).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/pykbroker/compat/go/internal/scen"
)

var (
	common   = scen.CommonFlags("sarama", "sa", "roundtrip | idempotent | group | txn | secure")
	strategy = flag.String("balancer", "range", "group: range | roundrobin | sticky")
	version  = flag.String("kafka-version", "", "sarama's Config.Version (default: sarama.DefaultVersion)")
	pace     = flag.Duration("pace", 0, "idempotent: pause between two records produced")
	perTxn   = flag.Int("per-txn", 10, "txn: at most this many records per consume-transform-produce transaction")
	txnHold  = flag.Duration("txn-hold", 10*time.Millisecond, "txn: how long each consume-transform-produce transaction stays open after its produces")
)

func config() *sarama.Config {
	c := sarama.NewConfig()
	if *version != "" {
		v, err := sarama.ParseKafkaVersion(*version)
		if err != nil {
			scen.Fail("kafka version: %v", err)
		}
		c.Version = v
	}
	c.ClientID = "pykbroker-compat-sarama"
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Consumer.Return.Errors = true
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	secureConfig(c)
	return c
}

// newGroup joins group as a member with manual commits from the oldest offset (c tuned by the
// caller), assigning partitions with bal.
func newGroup(group string, c *sarama.Config, bal sarama.BalanceStrategy) sarama.ConsumerGroup {
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{bal}
	g, err := sarama.NewConsumerGroup(seeds(), group, c)
	if err != nil {
		scen.Fail("group: %v", err)
	}
	return g
}

func seeds() []string { return common.Seeds() }

func createTopic(topic string, partitions int32) {
	adm, err := sarama.NewClusterAdmin(seeds(), config())
	if err != nil {
		scen.Fail("admin: %v", err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: int16(*common.RF)}, false); err != nil {
		scen.Fail("create topic %s: %v", topic, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := adm.DescribeTopics([]string{topic})
		if err == nil && len(md) == 1 && md[0].Err == sarama.ErrNoError && len(md[0].Partitions) == int(partitions) {
			ok := true
			for _, p := range md[0].Partitions {
				ok = ok && p.Leader >= 0
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			scen.Fail("topic %s never got leaders: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func bytesOrNil(b []byte) sarama.Encoder {
	if b == nil {
		return nil
	}
	return sarama.ByteEncoder(b)
}

func produce(c *sarama.Config, topic string, rs []scen.Rec) map[int32][]scen.Rec {
	p, err := sarama.NewSyncProducer(seeds(), c)
	if err != nil {
		scen.Fail("producer: %v", err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, len(rs))
	for i, r := range rs {
		m := &sarama.ProducerMessage{Topic: topic, Partition: r.Partition, Key: bytesOrNil(r.Key),
			Value: bytesOrNil(r.Value), Timestamp: r.Timestamp}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		msgs[i] = m
	}
	if err := p.SendMessages(msgs); err != nil {
		scen.Fail("produce: %v", err)
	}
	want := map[int32][]scen.Rec{}
	for i, m := range msgs {
		r := rs[i]
		r.Offset = m.Offset
		want[m.Partition] = append(want[m.Partition], r)
	}
	return want
}

func consumeAll(topic string, partitions int32, n int) map[int32][]scen.Rec {
	c, err := sarama.NewConsumer(seeds(), config())
	if err != nil {
		scen.Fail("consumer: %v", err)
	}
	defer c.Close()
	got := map[int32][]scen.Rec{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	total := 0
	deadline := time.After(30 * time.Second)
	done := make(chan struct{})
	for p := int32(0); p < partitions; p++ {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			scen.Fail("consume partition %d: %v", p, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.Close()
			for {
				select {
				case m := <-pc.Messages():
					r := scen.Rec{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp}
					for _, h := range m.Headers {
						r.Headers = append(r.Headers, scen.Header{Key: string(h.Key), Value: h.Value})
					}
					mu.Lock()
					got[m.Partition] = append(got[m.Partition], r)
					total++
					if total == n {
						close(done)
					}
					mu.Unlock()
				case err := <-pc.Errors():
					scen.Fail("consume: %v", err)
				case <-done:
					return
				case <-deadline:
					return
				}
			}
		}()
	}
	wg.Wait()
	return got
}

func runRoundtrip() any {
	out := map[string]*scen.CodecResult{}
	codecs := map[string]sarama.CompressionCodec{"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
		"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD}
	base := time.Now()
	for _, name := range scen.Codecs {
		topic := fmt.Sprintf("%s-rt-%s", *common.Prefix, name)
		createTopic(topic, 3)
		c := config()
		c.Producer.Compression = codecs[name]
		var rs []scen.Rec
		for i := 0; i < *common.Records; i++ {
			rs = append(rs, scen.Record(i, base))
		}
		want := produce(c, topic, rs)
		got := consumeAll(topic, 3, len(rs))
		// null and empty keys and values are told apart (sarama keeps a zero-length slice)
		out[name] = scen.Judge(want, got, scen.Flags{NullVsEmptyKey: true, NullVsEmptyValue: true})
	}
	return out
}

// The idempotent producer (Producer.Idempotent, acks=all, one request in flight as sarama
// requires), asynchronous, three partitions.
func runIdempotent() any {
	topic := *common.Prefix + "-idem"
	createTopic(topic, 3)
	c := config()
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	// a leader killed mid-run (tests/go): retried through the election (ZooKeeper's session
	// timeout, then the controller's choice), as franz-go retries without a limit
	c.Producer.Retry.Max = 200
	c.Producer.Retry.Backoff = 150 * time.Millisecond
	c.Metadata.Retry.Max = 100
	p, err := sarama.NewAsyncProducer(seeds(), c)
	if err != nil {
		scen.Fail("producer: %v", err)
	}
	order := map[int32][]string{}
	var omu sync.Mutex
	go func() {
		for i := 0; i < *common.Records; i++ {
			part := int32(i % 3)
			v := fmt.Sprintf("idem-%06d", i)
			omu.Lock()
			order[part] = append(order[part], v)
			omu.Unlock()
			p.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: part, Value: sarama.StringEncoder(v)}
			if *pace > 0 {
				time.Sleep(*pace)
			}
		}
	}()
	acked := map[string]int64{}
	for n := 1; n <= *common.Records; n++ {
		select {
		case m := <-p.Successes():
			v, _ := m.Value.Encode()
			acked[string(v)] = m.Offset
		case e := <-p.Errors():
			scen.Fail("produce: %v", e.Err)
		}
		if n%100 == 0 {
			fmt.Fprintf(os.Stderr, "progress acked=%d\n", n)
		}
	}
	if err := p.Close(); err != nil {
		scen.Fail("close: %v", err)
	}
	got := consumeAll(topic, 3, *common.Records)
	res := scen.IdemCounts{Produced: *common.Records}
	seen := map[string]int{}
	for part, recs := range got {
		for j, r := range recs {
			res.Read++
			seen[string(r.Value)]++
			if off, ok := acked[string(r.Value)]; !ok || off != r.Offset {
				res.OffsetErrors++
			}
			if j < len(order[part]) && order[part][j] != string(r.Value) || r.Offset != int64(j) {
				res.OutOfOrder++
			}
		}
	}
	for _, vs := range order {
		for _, v := range vs {
			if seen[v] == 0 {
				res.Missing++
			} else {
				res.Duplicates += seen[v] - 1
			}
		}
	}
	return res
}

type groupResult struct {
	scen.GroupResult
	CommittedAt int64 `json:"committed_total"` // the group's committed offsets summed
}

type handler struct {
	mu    *sync.Mutex
	seen  map[string]int
	n     int
	limit int
	stop  context.CancelFunc
	all   context.CancelFunc // every member: the whole topic was processed
	total func() int
	want  int
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit() // the session ends (a rebalance, or leaving): what was marked is committed first
	return nil
}
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		h.seen[string(m.Value)]++
		h.n++
		n := h.n
		h.mu.Unlock()
		s.MarkMessage(m, "")
		if n%20 == 0 {
			s.Commit()
		}
		if h.total() >= h.want {
			h.all()
		}
		if (h.limit > 0 && n >= h.limit) || h.total() >= h.want {
			s.Commit()
			h.stop()
			return nil
		}
	}
	return nil
}

// A consumer group with manual commits: member A processes a third and leaves, members B and
// C resume from A's commits; every record processed once.
func runGroup() any {
	topic, group := *common.Prefix+"-grp", *common.Prefix+"-grp-g"
	createTopic(topic, 3)
	rs := scen.GroupRecords(*common.Records)
	produce(config(), topic, rs)
	res := groupResult{GroupResult: scen.GroupResult{Produced: len(rs), Problems: []string{}}}
	var mu sync.Mutex
	seen := map[string]int{}
	total := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	member := func(ctx context.Context, all context.CancelFunc, limit int) int {
		var bal sarama.BalanceStrategy
		switch *strategy {
		case "range":
			bal = sarama.NewBalanceStrategyRange()
		case "roundrobin":
			bal = sarama.NewBalanceStrategyRoundRobin()
		case "sticky":
			bal = sarama.NewBalanceStrategySticky()
		default:
			scen.Fail("unknown balancer %q", *strategy)
		}
		g := newGroup(group, config(), bal)
		defer g.Close()
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		h := &handler{mu: &mu, seen: seen, limit: limit, stop: cancel, all: all, total: total, want: len(rs)}
		go func() {
			for e := range g.Errors() {
				mu.Lock()
				res.Problems = append(res.Problems, e.Error())
				mu.Unlock()
			}
		}()
		for mctx.Err() == nil {
			if err := g.Consume(mctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				mu.Lock()
				res.Problems = append(res.Problems, err.Error())
				mu.Unlock()
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return h.n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res.RunMembers(ctx, member)
	res.Tally(rs, seen)
	adm, err := sarama.NewClusterAdmin(seeds(), config())
	if err == nil {
		offs, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2}})
		if err == nil {
			for _, b := range offs.Blocks[topic] {
				res.CommittedAt += b.Offset
			}
		}
		adm.Close()
	}
	return res
}

func main() {
	flag.Parse()
	if *common.Verbose {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
	switch *common.Scenario {
	case "roundtrip":
		scen.Emit(runRoundtrip())
	case "idempotent":
		scen.Emit(runIdempotent())
	case "group":
		scen.Emit(runGroup())
	case "secure":
		scen.Emit(runSecure())
	case "txn":
		scen.Emit(runTxn())
	case "acls":
		scen.Emit(runACLs()) // acls.go
	default:
		scen.Fail("unknown scenario %q", *common.Scenario)
	}
}
