package main

// franz-go's default producer (idempotent, acks=all) writing concurrently to 3 partitions with
// several batches in flight: every record read back exactly once, in produce order per partition,
// at the offset its produce result named, offsets dense from 0, all under one producer id.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pykbroker/compat/go/internal/scen"
)

type idemResult struct {
	scen.IdemCounts
	ProducerIDs []int64  `json:"producer_ids"`
	Problems    []string `json:"problems"`
}

func runIdempotent(ctx context.Context) any {
	topic := *common.Prefix + "-idem"
	admCl := newClient()
	defer admCl.Close()
	createTopic(ctx, kadm.NewClient(admCl), topic, 3)
	res := idemResult{Problems: []string{}, ProducerIDs: []int64{}}

	p := newClient(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1<<16), kgo.ProducerBatchMaxBytes(16<<10))
	var (
		mu       sync.Mutex
		produced = map[string]int64{} // value -> offset reported
		order    = map[int32][]string{}
		wg       sync.WaitGroup
	)
	var acked atomic.Int64
	for i := 0; i < *common.Records; i++ {
		if *pace > 0 {
			time.Sleep(*pace) // spread over time: a broker can be killed while records are in flight
		}
		part := int32(i % 3)
		v := fmt.Sprintf("idem-%06d-%s", i, string(make([]byte, 40)))
		mu.Lock()
		order[part] = append(order[part], v)
		mu.Unlock()
		wg.Add(1)
		p.Produce(ctx, &kgo.Record{Partition: part, Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				fail("produce: %v", err)
			}
			mu.Lock()
			produced[string(r.Value)] = r.Offset
			mu.Unlock()
			if n := acked.Add(1); n%100 == 0 {
				fmt.Fprintf(os.Stderr, "progress acked=%d\n", n)
			}
		})
	}
	wg.Wait()
	p.Close()
	res.Produced = len(produced)

	parts := map[int32]kgo.Offset{0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}
	c := newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	defer c.Close()
	got := map[int32][]*kgo.Record{}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	n := 0
	var quiet time.Time
	for rctx.Err() == nil {
		if n >= res.Produced {
			if quiet.IsZero() {
				quiet = time.Now().Add(time.Second) // a duplicate would arrive meanwhile
			} else if time.Now().After(quiet) {
				break
			}
		}
		pctx, pcancel := context.WithTimeout(rctx, 300*time.Millisecond)
		fs := c.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r); n++ })
	}
	res.Read = n
	pids := map[int64]bool{}
	seen := map[string]bool{}
	for part, want := range order {
		g := got[part]
		for j, r := range g {
			pids[r.ProducerID] = true
			v := string(r.Value)
			if seen[v] {
				res.Duplicates++
			}
			seen[v] = true
			if r.Offset != int64(j) || produced[v] != r.Offset {
				res.OffsetErrors++
			}
			if j < len(want) && want[j] != v {
				res.OutOfOrder++
			}
		}
	}
	for v := range produced {
		if !seen[v] {
			res.Missing++
		}
	}
	for pid := range pids {
		res.ProducerIDs = append(res.ProducerIDs, pid)
	}
	return res
}
