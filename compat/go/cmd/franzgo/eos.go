package main

// The exactly-once consume-transform-produce loop of franz-go: kgo.GroupTransactSession
// (a transactional producer whose transactions carry the group's offsets, TxnOffsetCommit)
// with -workers sessions in one group.  Members join and leave while transactions are open
// (worker 0 starts alone, the others join after its first commits, one leaves mid-run), so
// the group rebalances under open transactions.  The output topic is then read with a
// read_committed consumer: it must hold exactly one "out-"+value per input record.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type eosResult struct {
	Input         []string `json:"input"`
	Output        []string `json:"output"`
	Committed     int64    `json:"committed_txns"`
	Aborted       int64    `json:"aborted_txns"`
	EndErrors     []string `json:"end_errors"`
	ProduceErrors []string `json:"produce_errors"`
	// -lose-end-txn: EndTxn answers dropped, sessions that recovered, recovery failures
	LostEndTxnAnswers int64    `json:"lost_end_txn_answers"`
	Recovered         int64    `json:"recovered"`
	RecoverErrors     []string `json:"recover_errors"`
	Balancer          string   `json:"balancer"`
	Static            bool     `json:"static"`
	GroupDone         bool     `json:"group_caught_up"`
	Rebalances        int64    `json:"revocations"`
}

func groupBalancerOpts() []kgo.Opt {
	switch *balancer {
	case "range":
		return []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}
	case "sticky":
		return []kgo.Opt{kgo.Balancers(kgo.StickyBalancer())}
	case "cooperative-sticky":
		return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}
	case "consumer":
		// KIP-848: the broker's group coordinator assigns (ConsumerGroupHeartbeat)
		return []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer()}
	}
	fail("unknown balancer %q", *balancer)
	return nil
}

func runEOS(ctx context.Context) eosResult {
	in, out, group := *common.Prefix+"-in", *common.Prefix+"-out", *common.Prefix+"-g"
	admCl := newClient()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	createTopic(ctx, adm, in, 3)
	createTopic(ctx, adm, out, 3)

	res := eosResult{Balancer: *balancer, Static: *static, EndErrors: []string{}, ProduceErrors: []string{}, RecoverErrors: []string{}}
	// the input, produced plainly (idempotent acks=all, franz-go's default)
	res.Input = producePlain(ctx, in, *common.Records, "k-%d", 17, "v-%05d", "input")

	var (
		committed, aborted, revocations atomic.Int64
		errMu                           sync.Mutex
	)
	addErr := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(res.EndErrors) < 20 {
			res.EndErrors = append(res.EndErrors, err.Error())
		}
	}

	addProduceErr := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(res.ProduceErrors) < 20 {
			res.ProduceErrors = append(res.ProduceErrors, err.Error())
		}
	}

	var fault *endTxnFault
	if *loseEndTxn > 0 {
		fault = &endTxnFault{}
	}
	var recovered atomic.Int64
	addRecoverErr := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		res.RecoverErrors = append(res.RecoverErrors, err.Error())
	}

	// worker runs one transact session; true: restart it (a new session, same transactional id)
	worker := func(wctx context.Context, i int, firstCommit chan<- struct{}) bool {
		opts := append(baseOpts(),
			kgo.TransactionalID(fmt.Sprintf("%s-txn-%d", *txnPrefix, i)),
			kgo.TransactionTimeout(*txnTimeout),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(in),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
			kgo.SessionTimeout(10*time.Second),
			kgo.RebalanceTimeout(20*time.Second),
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) { revocations.Add(1) }),
		)
		opts = append(opts, groupBalancerOpts()...)
		if fault != nil && i == 0 {
			opts = append(opts, fault.opts()...)
		}
		if *static {
			opts = append(opts, kgo.InstanceID(fmt.Sprintf("%s-member-%d", *common.Prefix, i)))
		}
		s, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			fail("session: %v", err)
		}
		defer s.Close()
		signalled := false
		ends := 0
		for wctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(wctx, time.Second)
			fs := s.PollRecords(pctx, *perTxn)
			pcancel()
			if wctx.Err() != nil {
				return false
			}
			if fs.NumRecords() == 0 {
				continue
			}
			if err := s.Begin(); err != nil {
				addErr(fmt.Errorf("worker %d begin: %w", i, err))
				return false
			}
			fs.EachRecord(func(r *kgo.Record) {
				s.Produce(wctx, &kgo.Record{Topic: out, Key: r.Key, Value: append([]byte("out-"), r.Value...)},
					func(_ *kgo.Record, err error) {
						if err != nil && wctx.Err() == nil {
							addProduceErr(fmt.Errorf("worker %d produce: %w", i, err))
						}
					})
			})
			// keep the transaction open a little: rebalances land while it is
			time.Sleep(*txnHold)
			ends++
			lose := fault != nil && i == 0 && ends == *loseEndTxn && fault.used.CompareAndSwap(false, true)
			if lose {
				fault.armed.Store(true)
			}
			ok, err := s.End(wctx, kgo.TryCommit)
			if lose {
				fault.armed.Store(false)
				if err == nil {
					addRecoverErr(fmt.Errorf("worker %d: End succeeded although every EndTxn answer was lost", i))
					return false
				}
				// The outcome is unknown to the client.  franz-go's documented recovery: end
				// again with an abort, which re-runs InitProducerId with the id/epoch it had
				// (KIP-360); then a fresh session resumes from the group's committed offsets.
				if _, aerr := s.End(wctx, kgo.TryAbort); aerr != nil {
					addRecoverErr(fmt.Errorf("worker %d: abort after a lost EndTxn answer: %w", i, aerr))
					return false
				}
				// franz-go ends that abort without an error even when the reload failed; the
				// producer id then holds the error, and every later produce of this session
				// fails with it ("fatal InitProducerID error, failing all buffered records")
				if _, _, perr := s.Client().ProducerID(wctx); perr != nil {
					addRecoverErr(fmt.Errorf("worker %d: producer id after the recovery: %w", i, perr))
					return false
				}
				recovered.Add(1)
				return true
			}
			if err != nil {
				if wctx.Err() != nil {
					return false
				}
				addErr(fmt.Errorf("worker %d end: %w", i, err))
				return false
			}
			if ok {
				committed.Add(1)
				if !signalled && firstCommit != nil {
					signalled = true
					close(firstCommit)
				}
			} else {
				aborted.Add(1)
			}
		}
		return false
	}

	var (
		wg      sync.WaitGroup
		cmu     sync.Mutex
		cancels = map[int]context.CancelFunc{}
		stopped bool
	)
	start := func(i int, ch chan struct{}) {
		cmu.Lock()
		defer cmu.Unlock()
		if stopped {
			return
		}
		wctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			for worker(wctx, i, ch) && wctx.Err() == nil {
				ch = nil
			}
		}()
	}
	stop := func(i int) {
		cmu.Lock()
		defer cmu.Unlock()
		if c := cancels[i]; c != nil {
			c()
		}
	}
	first := make(chan struct{})
	start(0, first)
	select {
	case <-first:
	case <-ctx.Done():
	}
	for i := 1; i < *workers; i++ {
		start(i, nil) // joins: a rebalance while worker 0's transactions run
	}
	// one member leaves mid-run (a clean close: LeaveGroup; a static member just stops) and
	// comes back with the same transactional id (and instance id): InitProducerId fences its
	// previous incarnation, the group rebalances again
	if *workers > 2 {
		go func() {
			time.Sleep(3 * time.Second)
			stop(1)
			time.Sleep(2 * time.Second)
			start(1, nil)
		}()
	}

	// done when the group's committed offsets reach the input's end offsets
	ends, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		fail("end offsets: %v", err)
	}
	for ctx.Err() == nil {
		errMu.Lock()
		nerr := len(res.EndErrors) + len(res.RecoverErrors)
		errMu.Unlock()
		if nerr > 0 {
			break
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			all := true
			ends.Each(func(lo kadm.ListedOffset) {
				o, ok := offs.Lookup(lo.Topic, lo.Partition)
				if !ok || o.At < lo.Offset {
					all = false
				}
			})
			if all {
				res.GroupDone = true
				break
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	cmu.Lock()
	stopped = true
	for _, c := range cancels {
		c()
	}
	cmu.Unlock()
	wg.Wait()
	res.Committed, res.Aborted, res.Rebalances = committed.Load(), aborted.Load(), revocations.Load()
	res.Recovered = recovered.Load()
	if fault != nil {
		res.LostEndTxnAnswers = fault.lost.Load()
	}

	// the output, read_committed, from the start of every partition: until every input record
	// has an output and then 2 s more (a duplicate would show up there)
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	res.Output = readAll(rctx, out, 3, true, len(res.Input), 2*time.Second)
	return res
}

// readAll reads a topic's partitions from the start (read_committed or not) until want
// values arrived and then quiet more; the values in the order read.
func readAll(ctx context.Context, topic string, partitions int32, committed bool, want int, quiet time.Duration) []string {
	parts := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		parts[p] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts})}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	c := newClient(opts...)
	defer c.Close()
	got := []string{}
	var until time.Time
	for ctx.Err() == nil {
		if len(got) >= want {
			if until.IsZero() {
				until = time.Now().Add(quiet)
			} else if time.Now().After(until) {
				break
			}
		}
		pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := c.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}
