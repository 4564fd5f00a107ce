package main

// A consumer group with committed offsets across members and restarts: member A consumes part
// of the topic, commits what it processed and leaves; members B and C then join (a rebalance
// between them) and resume from A's committed offsets.  Commits are explicit
// (CommitUncommittedOffsets after processing, and in OnPartitionsRevoked, with
// BlockRebalanceOnPoll), so every record is processed exactly once across A, B and C.  The
// group's committed offsets must end at the topic's end offsets (kadm).

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type groupResult struct {
	Produced       int      `json:"produced"`
	FirstMember    int      `json:"first_member_processed"`
	Later          []int    `json:"later_members_processed"`
	Duplicates     int      `json:"duplicates"`
	Missing        int      `json:"missing"`
	CommittedAtEnd bool     `json:"committed_at_end"`
	FirstCommitted int64    `json:"offsets_committed_by_first"`
	Problems       []string `json:"problems"`
	Balancer       string   `json:"balancer"`
}

func runGroup(ctx context.Context) any {
	topic, group := *common.Prefix+"-grp", *common.Prefix+"-grp-g"
	admCl := newClient()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	createTopic(ctx, adm, topic, 3)
	res := groupResult{Problems: []string{}, Later: []int{}, Balancer: *balancer}

	all := producePlain(ctx, topic, *common.Records, "%d", 11, "g-%05d", "records")
	res.Produced = len(all)

	var mu sync.Mutex
	seen := map[string]int{}
	total := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }

	member := func(mctx context.Context, name string, limit int) int {
		opts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.BlockRebalanceOnPoll(),
			kgo.SessionTimeout(10 * time.Second), kgo.FetchMaxWait(300 * time.Millisecond),
			kgo.OnPartitionsRevoked(func(rctx context.Context, cl *kgo.Client, _ map[string][]int32) {
				if err := cl.CommitUncommittedOffsets(rctx); err != nil {
					mu.Lock()
					res.Problems = append(res.Problems, fmt.Sprintf("%s commit on revoke: %v", name, err))
					mu.Unlock()
				}
			})}
		opts = append(opts, groupBalancerOpts()...)
		c := newClient(opts...)
		defer c.Close() // leaves the group
		n := 0
		for mctx.Err() == nil && (limit <= 0 || n < limit) && total() < len(all) {
			pctx, cancel := context.WithTimeout(mctx, 500*time.Millisecond)
			fs := c.PollRecords(pctx, 25)
			cancel()
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)]++
				mu.Unlock()
				n++
			})
			if fs.NumRecords() > 0 {
				if err := c.CommitUncommittedOffsets(mctx); err != nil {
					mu.Lock()
					res.Problems = append(res.Problems, fmt.Sprintf("%s commit: %v", name, err))
					mu.Unlock()
				}
			}
			c.AllowRebalance()
			if limit <= 0 {
				time.Sleep(20 * time.Millisecond) // B and C share the work: both hold partitions for a while
			}
		}
		return n
	}

	// A: part of the topic, then leaves
	res.FirstMember = member(ctx, "A", len(all)/3)
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		fail("fetch offsets: %v", err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.At > 0 {
			res.FirstCommitted += o.At
		}
	})
	// B and C: the rest, from A's commits
	var wg sync.WaitGroup
	later := make([]int, 2)
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for i, name := range []string{"B", "C"} {
		wg.Add(1)
		go func() { defer wg.Done(); later[i] = member(rctx, name, 0) }()
	}
	wg.Wait()
	res.Later = later
	for _, v := range all {
		switch seen[v] {
		case 0:
			res.Missing++
		case 1:
		default:
			res.Duplicates += seen[v] - 1
		}
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		fail("end offsets: %v", err)
	}
	offs, err = adm.FetchOffsets(ctx, group)
	if err != nil {
		fail("fetch offsets: %v", err)
	}
	res.CommittedAtEnd = true
	ends.Each(func(lo kadm.ListedOffset) {
		if o, ok := offs.Lookup(lo.Topic, lo.Partition); !ok || o.At != lo.Offset {
			res.CommittedAtEnd = false
		}
	})
	return res
}
