package main

// The transactional scenario (-scenario txn): sarama's transactional producer
// (Producer.Transaction.ID) and its read_committed consumer.
//
// Part 1, begin/commit/abort: two transactional producers X and Y write into the same three
// partitions, their transactions open at the same time and their records interleaved in the
// log; per round one of them aborts (or neither), then a third producer commits one sentinel
// record per partition.  A read_committed consumer must hand out exactly the committed records,
// in produce order, at the offsets the producer was told; a read_uncommitted one every record
// written (the aborted ones were really in the log).
//
// Part 2, consume-transform-produce: a sarama consumer group (read_committed) consumes part 1's
// topic; for each claimed partition a transactional producer (transactional id per input
// partition, the pre-KIP-447 zombie fencing) writes "out-"+value to the same partition of an
// output topic and commits the consumed offsets in the same transaction (TxnOffsetCommit):
// AddMessageToTxnWithGroupMetadata with the session's member id and generation (KIP-447), and,
// for a transaction retried after an abort, AddOffsetsToTxn with the group id alone.  Every
// fourth transaction is first aborted and then retried; the first member's last transaction of
// each claim is aborted and the member leaves, so the next members must resume from the offsets
// committed before it (aborted output that became visible would duplicate records, a commit
// whose offsets did not take effect too).  sarama holds a transaction's offsets in the client
// and sends AddOffsetsToTxn and TxnOffsetCommit only at CommitTxn (AbortTxn drops them), so an
// aborted transaction's offsets never reach the broker; its output records do, and are aborted.
// The output read read_committed must be, per partition, exactly "out-"+value of the committed
// inputs in order; the group's committed offsets exactly one past each input partition's
// sentinel.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/pykbroker/compat/go/internal/scen"
)

const txnParts = 3

func txnConfig(id string) *sarama.Config {
	c := config()
	c.Producer.Idempotent = true
	c.Producer.Transaction.ID = id
	c.Producer.Transaction.Timeout = 30 * time.Second
	c.Net.MaxOpenRequests = 1 // sarama's requirement for an idempotent producer
	c.Producer.Retry.Max = 10
	c.Producer.Retry.Backoff = 200 * time.Millisecond
	return c
}

func txnProducer(id string) sarama.SyncProducer {
	p, err := sarama.NewSyncProducer(seeds(), txnConfig(id))
	if err != nil {
		scen.Fail("transactional producer %s: %v", id, err)
	}
	return p
}

// a value written in part 1, where the producer put it
type placed struct {
	Value  string
	Offset int64
}

// readPartitionsUntil reads every partition of topic from the start with the given isolation
// level until the value stop has been read from each (a sentinel committed after everything
// else: a consumer hands records out in offset order, so every record before it was seen).
func readPartitionsUntil(topic string, level sarama.IsolationLevel, stop string) (map[int32][]placed, error) {
	c := config()
	c.Consumer.IsolationLevel = level
	cons, err := sarama.NewConsumer(seeds(), c)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	out := map[int32][]placed{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, txnParts)
	for p := int32(0); p < txnParts; p++ {
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.Close()
			deadline := time.After(45 * time.Second)
			for {
				select {
				case m := <-pc.Messages():
					mu.Lock()
					out[m.Partition] = append(out[m.Partition], placed{string(m.Value), m.Offset})
					mu.Unlock()
					if string(m.Value) == stop {
						return
					}
				case e := <-pc.Errors():
					errs <- e
					return
				case <-deadline:
					errs <- fmt.Errorf("%s partition %d: no sentinel within 45s", topic, p)
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case e := <-errs:
		return out, e
	default:
		return out, nil
	}
}

type part1Result struct {
	Rounds            int             `json:"rounds"`
	Written           int             `json:"written"`
	CommittedWritten  int             `json:"committed_written"`
	AbortedWritten    int             `json:"aborted_written"`
	ReadCommitted     int             `json:"read_committed"`
	ReadCommittedSame bool            `json:"read_committed_equal"` // values, order and offsets as produced
	AbortedSeen       int             `json:"aborted_seen_read_committed"`
	Duplicates        int             `json:"duplicates_read_committed"`
	ReadUncommitted   int             `json:"read_uncommitted"`
	Mismatches        []string        `json:"mismatches"`
	SentinelOffsets   map[int32]int64 `json:"sentinel_offsets"`
}

type part2Result struct {
	CommittedTxns    int             `json:"committed_txns"`
	AbortedRetried   int             `json:"aborted_then_retried_txns"`
	FinalAborted     int             `json:"first_member_final_aborted_txns"`
	FirstProcessed   int             `json:"first_member_committed_records"`
	LaterProcessed   int             `json:"later_members_committed_records"`
	Generations      int             `json:"generations_seen"`
	OutputRead       int             `json:"output_read_committed"`
	OutputSame       bool            `json:"output_equal"` // per partition: out-+value of the committed inputs, in order
	OutputMismatches []string        `json:"output_mismatches"`
	GroupOffsets     map[int32]int64 `json:"group_offsets"`
	ExpectedOffsets  map[int32]int64 `json:"expected_group_offsets"`
	Problems         []string        `json:"problems"`
}

type txnResult struct {
	Part1 part1Result `json:"begin_commit_abort"`
	Part2 part2Result `json:"consume_transform_produce"`
}

const sentinel = "sentinel"

// Part 1.  Round r: X and Y begin; four chunks of `chunk` records each (X, Y, X, Y) spread over
// the partitions; then r%3==0: Y aborts and X commits, r%3==1: X aborts and Y commits,
// r%3==2: both commit.
func runPart1(topic string, res *part1Result) map[int32][]placed {
	x, y := txnProducer(*common.Prefix+"-txn-x"), txnProducer(*common.Prefix+"-txn-y")
	rounds := 5
	chunk := *common.Records / (rounds * 4)
	if chunk < 3 {
		chunk = 3
	}
	res.Rounds = rounds
	want := map[int32][]placed{}
	var committed []*sarama.ProducerMessage
	n := 0
	for r := 0; r < rounds; r++ {
		for _, p := range []sarama.SyncProducer{x, y} {
			if err := p.BeginTxn(); err != nil {
				scen.Fail("begin round %d: %v", r, err)
			}
		}
		var sent [2][]*sarama.ProducerMessage
		for c := 0; c < 4; c++ {
			who := c % 2
			var msgs []*sarama.ProducerMessage
			for i := 0; i < chunk; i++ {
				v := fmt.Sprintf("r%d-%s-%05d", r, "xy"[who:who+1], n)
				msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: int32(n % txnParts),
					Key: sarama.StringEncoder(fmt.Sprintf("k%d", n)), Value: sarama.StringEncoder(v)})
				n++
			}
			if err := []sarama.SyncProducer{x, y}[who].SendMessages(msgs); err != nil {
				scen.Fail("send round %d: %v", r, err)
			}
			sent[who] = append(sent[who], msgs...)
			res.Written += len(msgs)
		}
		abortX, abortY := r%3 == 1, r%3 == 0
		for who, p := range []sarama.SyncProducer{x, y} {
			abort := []bool{abortX, abortY}[who]
			var err error
			if abort {
				err = p.AbortTxn()
				res.AbortedWritten += len(sent[who])
			} else {
				err = p.CommitTxn()
				committed = append(committed, sent[who]...)
				res.CommittedWritten += len(sent[who])
			}
			if err != nil {
				scen.Fail("end round %d (abort=%v): %v", r, abort, err)
			}
		}
	}
	x.Close()
	y.Close()
	// the sentinels, committed after every other transaction ended
	ends := commitSentinels(*common.Prefix+"-txn-z", topic, "sentinel")
	committed = append(committed, ends...)
	res.Written += len(ends)
	// what a read_committed reader must see: the committed records of each partition in offset order
	sort.SliceStable(committed, func(i, j int) bool { return committed[i].Offset < committed[j].Offset })
	res.SentinelOffsets = map[int32]int64{}
	for _, m := range committed {
		v, _ := m.Value.Encode()
		want[m.Partition] = append(want[m.Partition], placed{string(v), m.Offset})
		if string(v) == sentinel {
			res.SentinelOffsets[m.Partition] = m.Offset
		}
	}

	got, err := readPartitionsUntil(topic, sarama.ReadCommitted, sentinel)
	if err != nil {
		res.Mismatches = append(res.Mismatches, "read_committed: "+err.Error())
	}
	res.ReadCommittedSame = true
	seen := map[string]int{}
	for p := int32(0); p < txnParts; p++ {
		for _, g := range got[p] {
			res.ReadCommitted++
			if g.Value == sentinel {
				continue // one per partition
			}
			seen[g.Value]++
			if seen[g.Value] > 1 {
				res.Duplicates++
			}
		}
		if fmt.Sprint(got[p]) != fmt.Sprint(want[p]) {
			res.ReadCommittedSame = false
			res.Mismatches = append(res.Mismatches, fmt.Sprintf("partition %d: read %d records, want %d; first read %v, want %v",
				p, len(got[p]), len(want[p]), head(got[p]), head(want[p])))
		}
	}
	committedSet := map[string]bool{}
	for _, ps := range want {
		for _, w := range ps {
			committedSet[w.Value] = true
		}
	}
	for v := range seen {
		if !committedSet[v] {
			res.AbortedSeen++
		}
	}
	all, err := readPartitionsUntil(topic, sarama.ReadUncommitted, sentinel)
	if err != nil {
		res.Mismatches = append(res.Mismatches, "read_uncommitted: "+err.Error())
	}
	for _, ps := range all {
		res.ReadUncommitted += len(ps)
	}
	return want
}

func head(ps []placed) []placed {
	if len(ps) > 3 {
		return ps[:3]
	}
	return ps
}

// ctp is the consumer group handler of part 2 (one per member).
type ctp struct {
	in, out, group string
	limit          int           // committed records after which the member aborts its last transactions and leaves
	hold           bool          // after its first commit in its first generation, wait for the next rebalance
	committedOnce  chan struct{} // closed at the member's first commit
	onceClose      sync.Once
	firstGen       int32
	leave          context.CancelFunc
	all            context.CancelFunc
	st             *ctpState
	mu             sync.Mutex
	n              int // records this member committed
	stopping       bool
}

type ctpState struct {
	mu          sync.Mutex
	res         *part2Result
	sentinels   map[int32]bool
	generations map[int32]bool
	txns        int
}

func (h *ctp) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	if h.firstGen == 0 {
		h.firstGen = s.GenerationID()
	}
	h.mu.Unlock()
	h.st.mu.Lock()
	h.st.generations[s.GenerationID()] = true
	h.st.mu.Unlock()
	return nil
}
func (h *ctp) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *ctp) problem(format string, args ...any) {
	h.st.mu.Lock()
	h.st.res.Problems = append(h.st.res.Problems, fmt.Sprintf(format, args...))
	h.st.mu.Unlock()
}

// one transaction: the batch's outputs and its offsets; abort or commit
func (h *ctp) transact(p sarama.SyncProducer, s sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage,
	abort, plainGroup bool) error {
	if err := p.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	var outs []*sarama.ProducerMessage
	for _, m := range batch {
		if string(m.Value) == sentinel {
			continue // the input's end marker: its offset is committed, nothing is produced
		}
		outs = append(outs, &sarama.ProducerMessage{Topic: h.out, Partition: m.Partition, Key: sarama.ByteEncoder(m.Key),
			Value: sarama.StringEncoder("out-" + string(m.Value))})
	}
	if len(outs) > 0 {
		if err := p.SendMessages(outs); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
	time.Sleep(*txnHold) // the transaction stays open a while (rebalances and other partitions' transactions meanwhile)
	last := batch[len(batch)-1]
	var err error
	if plainGroup {
		err = p.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{
			h.in: {{Partition: last.Partition, Offset: last.Offset + 1}}}, h.group)
	} else {
		err = p.AddMessageToTxnWithGroupMetadata(last, sarama.NewConsumerGroupMetadataFromSession(s, h.group, nil), nil)
	}
	if err != nil {
		return fmt.Errorf("offsets: %w", err)
	}
	if abort {
		return p.AbortTxn()
	}
	return p.CommitTxn()
}

func (h *ctp) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	part := claim.Partition()
	p, err := sarama.NewSyncProducer(seeds(), txnConfig(fmt.Sprintf("%s-txn-ctp-%d", *common.Prefix, part)))
	if err != nil {
		h.problem("producer for partition %d: %v", part, err)
		return err
	}
	defer p.Close()
	msgs := claim.Messages()
	for {
		m, ok := <-msgs
		if !ok {
			return nil
		}
		batch := []*sarama.ConsumerMessage{m}
	drain:
		for len(batch) < *perTxn {
			select {
			case m2, ok := <-msgs:
				if !ok {
					break drain
				}
				batch = append(batch, m2)
			case <-time.After(5 * time.Millisecond):
				break drain
			}
		}
		h.mu.Lock()
		final := h.limit > 0 && h.n >= h.limit
		h.mu.Unlock()
		if final {
			// the member is leaving: this transaction is aborted, its records are left for the next members
			if err := h.transact(p, s, batch, true, false); err != nil {
				h.problem("final abort, partition %d: %v", part, err)
			}
			h.st.mu.Lock()
			h.st.res.FinalAborted++
			h.st.mu.Unlock()
			h.leave()
			return nil
		}
		h.st.mu.Lock()
		h.st.txns++
		retry := h.st.txns%4 == 0
		h.st.mu.Unlock()
		if retry {
			if err := h.transact(p, s, batch, true, false); err != nil {
				h.problem("abort, partition %d: %v", part, err)
				return err
			}
		}
		if err := h.transact(p, s, batch, false, retry); err != nil {
			h.problem("commit, partition %d: %v", part, err)
			return err
		}
		done := false
		h.st.mu.Lock()
		h.st.res.CommittedTxns++
		if retry {
			h.st.res.AbortedRetried++
		}
		for _, b := range batch {
			if string(b.Value) == sentinel {
				h.st.sentinels[b.Partition] = true
			}
		}
		done = len(h.st.sentinels) == txnParts
		h.st.mu.Unlock()
		h.mu.Lock()
		for _, b := range batch {
			if string(b.Value) != sentinel {
				h.n++
			}
		}
		h.mu.Unlock()
		if done {
			h.all()
			return nil
		}
		h.onceClose.Do(func() { close(h.committedOnce) })
		if h.hold && s.GenerationID() == h.firstGen {
			// the next member joins now: this one commits no more in this generation, so the
			// rest of the input is processed after a rebalance, by both
			select {
			case <-s.Context().Done():
			case <-time.After(20 * time.Second):
				h.problem("no rebalance within 20s of the second member's start")
			}
			return nil
		}
	}
}

func runPart2(in, out string, want map[int32][]placed, sentinels map[int32]int64, res *part2Result) {
	group := *common.Prefix + "-txn-g"
	st := &ctpState{res: res, sentinels: map[int32]bool{}, generations: map[int32]bool{}}
	committedInputs := 0
	for _, ps := range want {
		committedInputs += len(ps) - 1
	}
	member := func(ctx context.Context, all context.CancelFunc, limit int, hold bool, first chan struct{}) int {
		c := config()
		c.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond // a rebalance is noticed quickly
		c.Consumer.IsolationLevel = sarama.ReadCommitted
		g := newGroup(group, c, sarama.NewBalanceStrategyRange())
		defer g.Close()
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		h := &ctp{in: in, out: out, group: group, limit: limit, leave: cancel, all: all, st: st, hold: hold,
			committedOnce: first}
		go func() {
			for e := range g.Errors() {
				st.mu.Lock()
				res.Problems = append(res.Problems, "group: "+e.Error())
				st.mu.Unlock()
			}
		}()
		for mctx.Err() == nil {
			if err := g.Consume(mctx, []string{in}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				st.mu.Lock()
				res.Problems = append(res.Problems, "consume: "+err.Error())
				st.mu.Unlock()
				break
			}
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res.FirstProcessed = member(ctx, func() {}, committedInputs/3, false, make(chan struct{}))
	later, all := context.WithCancel(ctx)
	var wg sync.WaitGroup
	counts := make([]int, 2)
	bFirst := make(chan struct{})
	wg.Add(2)
	go func() { defer wg.Done(); counts[0] = member(later, all, 0, true, bFirst) }()
	// C joins once B has committed in its generation (B then waits for the rebalance)
	select {
	case <-bFirst:
	case <-later.Done():
	}
	go func() { defer wg.Done(); counts[1] = member(later, all, 0, false, make(chan struct{})) }()
	wg.Wait()
	all()
	res.LaterProcessed = counts[0] + counts[1]
	res.Generations = len(st.generations)
	if ctx.Err() != nil {
		res.Problems = append(res.Problems, "part 2 timed out")
	}

	// the output's own sentinels, committed after the group finished
	commitSentinels(*common.Prefix+"-txn-zo", out, "output sentinel")
	got, err := readPartitionsUntil(out, sarama.ReadCommitted, sentinel)
	if err != nil {
		res.OutputMismatches = append(res.OutputMismatches, "read: "+err.Error())
	}
	res.OutputSame = true
	for p := int32(0); p < txnParts; p++ {
		var exp, have []string
		for _, w := range want[p] {
			if w.Value != sentinel {
				exp = append(exp, "out-"+w.Value)
			}
		}
		for _, g := range got[p] {
			if g.Value != sentinel {
				have = append(have, g.Value)
				res.OutputRead++
			}
		}
		if strings.Join(exp, ",") != strings.Join(have, ",") {
			res.OutputSame = false
			res.OutputMismatches = append(res.OutputMismatches, fmt.Sprintf("partition %d: read %d, want %d; first read %v",
				p, len(have), len(exp), have[:min(len(have), 4)]))
		}
	}
	res.ExpectedOffsets = map[int32]int64{}
	for p, o := range sentinels {
		res.ExpectedOffsets[p] = o + 1
	}
	adm, err := sarama.NewClusterAdmin(seeds(), config())
	if err != nil {
		res.Problems = append(res.Problems, "admin: "+err.Error())
		return
	}
	defer adm.Close()
	offs, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{in: {0, 1, 2}})
	if err != nil {
		res.Problems = append(res.Problems, "offsets: "+err.Error())
		return
	}
	res.GroupOffsets = map[int32]int64{}
	for p, b := range offs.Blocks[in] {
		res.GroupOffsets[p] = b.Offset
	}
}

func runTxn() any {
	in, out := *common.Prefix+"-txn-in", *common.Prefix+"-txn-out"
	createTopic(in, txnParts)
	createTopic(out, txnParts)
	res := txnResult{}
	res.Part1.Mismatches = []string{}
	res.Part2.Problems = []string{}
	res.Part2.OutputMismatches = []string{}
	want := runPart1(in, &res.Part1)
	runPart2(in, out, want, res.Part1.SentinelOffsets, &res.Part2)
	return res
}

// commitSentinels writes the sentinel to each of topic's txnParts partitions in one transaction
// of its own (transactional id txnID), committed: what names the end of a read_committed read.
// what names the sentinels in a failure.
func commitSentinels(txnID, topic, what string) []*sarama.ProducerMessage {
	z := txnProducer(txnID)
	defer z.Close()
	if err := z.BeginTxn(); err != nil {
		scen.Fail("begin %s: %v", what, err)
	}
	var ends []*sarama.ProducerMessage
	for p := int32(0); p < txnParts; p++ {
		ends = append(ends, &sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.StringEncoder(sentinel)})
	}
	if err := z.SendMessages(ends); err != nil {
		scen.Fail("send %s: %v", what, err)
	}
	if err := z.CommitTxn(); err != nil {
		scen.Fail("commit %s: %v", what, err)
	}
	return ends
}
