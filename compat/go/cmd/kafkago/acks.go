package main

// kafka-go's Writer (RequiredAcks all, asynchronous with a Completion callback, retries on the
// errors it calls temporary) writing paced records to 3 partitions while the test may kill a
// partition leader -9: every record kafka-go reported as written must be read back, at the
// offset kafka-go reported for it.  kafka-go's producer is not idempotent: a batch retried
// after a lost answer may be in the log twice, and a batch kafka-go gave up on may be there
// too; the report counts both, the judge allows them.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/pykbroker/compat/go/internal/scen"
)

type acksResult struct {
	Attempted int `json:"attempted"`
	Acked     int `json:"acked"`  // reported written (Completion without error)
	Failed    int `json:"failed"` // reported failed
	Read      int `json:"read"`   // records in the log, offset 0 to the end
	Missing   int `json:"missing"`
	// an acked record whose reported offset holds another record
	OffsetErrors int `json:"offset_errors"`
	// extra copies of a record in the log (retried batches); a failed record in the log
	Duplicates    int      `json:"duplicates"`
	FailedInLog   int      `json:"failed_in_log"`
	Errors        []string `json:"errors"` // the distinct errors kafka-go reported, sorted
	LogEndOffsets []int64  `json:"log_end_offsets"`
}

func runAcks(ctx context.Context) any {
	topic := *common.Prefix + "-acks"
	createTopic(ctx, topic, 3)
	res := acksResult{Errors: []string{}}
	var (
		mu     sync.Mutex
		acked  = map[string]kafka.Message{} // value -> the message as reported (partition, offset)
		failed = map[string]bool{}
		errs   = map[string]bool{}
	)
	tr := &kafka.Transport{TLS: sec.TLSConfig(), SASL: mechanism(), DialTimeout: 5 * time.Second,
		// a leader change is learnt from metadata: refreshed each second, not kafka-go's 6 s
		MetadataTTL: time.Second}
	w := &kafka.Writer{Addr: kafka.TCP(seeds()...), Topic: topic, Balancer: manual, RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond, BatchSize: 20, Async: true, Transport: tr, ErrorLogger: errorLogger(),
		MaxAttempts: 20, WriteBackoffMin: 100 * time.Millisecond, WriteBackoffMax: time.Second,
		Completion: func(ms []kafka.Message, err error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range ms {
				if err != nil {
					failed[string(m.Value)] = true
					errs[err.Error()] = true
				} else {
					acked[string(m.Value)] = m
				}
			}
			if err == nil {
				if n := len(acked); n/100 != (n-len(ms))/100 {
					fmt.Fprintf(os.Stderr, "progress acked=%d\n", n)
				}
			}
		}}
	for i := 0; i < *common.Records; i++ {
		if *pace > 0 {
			time.Sleep(*pace)
		}
		v := fmt.Sprintf("kg-acks-%06d", i)
		if err := w.WriteMessages(ctx, kafka.Message{Partition: i % 3, Value: []byte(v)}); err != nil {
			scen.Fail("write (async): %v", err)
		}
		res.Attempted++
	}
	if err := w.Close(); err != nil { // waits for every batch's Completion
		scen.Fail("close writer: %v", err)
	}
	res.Acked, res.Failed = len(acked), len(failed)
	for e := range errs {
		res.Errors = append(res.Errors, e)
	}
	sort.Strings(res.Errors)

	// the whole log of each partition, offset 0 to its end
	ends := logEnds(ctx, topic, 3)
	copies := map[string]int{}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for p := 0; p < 3; p++ {
		res.LogEndOffsets = append(res.LogEndOffsets, ends[p])
		got := readPartition(rctx, topic, p, int(ends[p]))
		at := map[int64]string{}
		for _, r := range got {
			at[r.Offset] = string(r.Value)
			copies[string(r.Value)]++
			res.Read++
		}
		for v, m := range acked {
			if m.Partition == p && at[m.Offset] != v {
				res.OffsetErrors++
			}
		}
	}
	for v := range acked {
		if copies[v] == 0 {
			res.Missing++
		}
	}
	for v, n := range copies {
		res.Duplicates += n - 1
		if failed[v] {
			res.FailedInLog++
		}
	}
	return res
}

// logEnds are the log end offsets of topic's partitions 0..n-1, asked again (fresh metadata)
// while a partition's leadership is moving (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE).
func logEnds(ctx context.Context, topic string, n int) map[int]int64 {
	var reqs []kafka.OffsetRequest
	for p := 0; p < n; p++ {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		tr := transport()
		if tr == nil {
			tr = &kafka.Transport{}
		}
		c := &kafka.Client{Addr: kafka.TCP(seeds()...), Timeout: 10 * time.Second, Transport: tr}
		lo, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
		ends := map[int]int64{}
		if err == nil {
			for _, po := range lo.Topics[topic] {
				if po.Error != nil {
					err = fmt.Errorf("partition %d: %w", po.Partition, po.Error)
					break
				}
				ends[po.Partition] = po.LastOffset
			}
		}
		if err == nil && len(ends) == n {
			return ends
		}
		if time.Now().After(deadline) {
			scen.Fail("list offsets: %v", err)
		}
	}
}
