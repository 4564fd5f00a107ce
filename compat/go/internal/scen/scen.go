// Package scen holds what the Go client scenarios share: the deterministic records of the
// round-trip scenarios (keys null / empty / binary, values null / empty / binary / 6 KiB,
// headers, out-of-order CreateTime timestamps) and the byte-exact comparison, so every client
// is judged on the same data.
package scen

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Common are the flags every client's command takes.
type Common struct {
	Brokers  *string
	Scenario *string
	Prefix   *string
	Records  *int
	RF       *int
	Verbose  *bool
}

// CommonFlags defines the common flags of the command of client (its default topic/group
// name prefix and the scenarios it runs named) on the default flag set.
func CommonFlags(client, prefix, scenarios string) Common {
	return Common{
		Brokers:  flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma separated"),
		Scenario: flag.String("scenario", "roundtrip", scenarios),
		Prefix:   flag.String("prefix", prefix, "topic/group name prefix"),
		Records:  flag.Int("records", 300, "records produced (per codec for roundtrip)"),
		RF:       flag.Int("rf", 1, "replication factor of the topics created"),
		Verbose:  flag.Bool("v", false, client+"'s log lines on stderr"),
	}
}

// Seeds are the bootstrap servers of -brokers.
func (c Common) Seeds() []string { return strings.Split(*c.Brokers, ",") }

// Header is a client-neutral record header.
type Header struct {
	Key   string
	Value []byte
}

// Rec is a client-neutral record as produced and as read back.
type Rec struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// Codecs every Go client of the matrix offers.
var Codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// Record i of a round-trip run (partition i % 3).
func Record(i int, base time.Time) Rec {
	r := Rec{Partition: int32(i % 3)}
	switch i % 4 {
	case 0:
		r.Key = nil
	case 1:
		r.Key = []byte{}
	default:
		r.Key = []byte{0x00, byte(i), 0xff, 'k'}
	}
	switch {
	case i%50 == 7:
		r.Value = bytes.Repeat([]byte{byte(i), 0x00, 0xfe}, 2048) // 6 KiB
	case i%9 == 3:
		r.Value = nil
	case i%9 == 4:
		r.Value = []byte{}
	default:
		r.Value = []byte(fmt.Sprintf("value-%d-\x00\xff", i))
	}
	if i%3 != 2 {
		r.Headers = []Header{
			{"h", []byte("first")},
			{"h", []byte("second")}, // duplicate key, order kept
			{"empty", []byte{}},
			{"ключ", []byte{0x00, 0x01, byte(i)}},
		}
	}
	ts := base.Add(time.Duration(i) * time.Millisecond)
	if i%2 == 1 {
		ts = ts.Add(-40 * time.Second) // out of order within a partition
	}
	r.Timestamp = ts.Truncate(time.Millisecond)
	return r
}

// FreshRecords are records 0..n-1 for a topic just created: all of them in produce order, and
// by partition with the offsets they get there (dense from 0).
func FreshRecords(n int, base time.Time) ([]Rec, map[int32][]Rec) {
	var rs []Rec
	want := map[int32][]Rec{}
	for i := 0; i < n; i++ {
		r := Record(i, base)
		r.Offset = int64(len(want[r.Partition]))
		want[r.Partition] = append(want[r.Partition], r)
		rs = append(rs, r)
	}
	return rs, want
}

// IdemCounts are what every idempotent-producer scenario reports (tests/go reads these keys).
type IdemCounts struct {
	Produced     int `json:"produced"`
	Read         int `json:"read"`
	Duplicates   int `json:"duplicates"`
	Missing      int `json:"missing"`
	OutOfOrder   int `json:"out_of_order"`
	OffsetErrors int `json:"offset_errors"` // read at another offset than its produce result named
}

// Flags tell which distinctions the client keeps: a client that cannot tell null from empty
// reports it, and the comparison then only requires equal bytes.
type Flags struct {
	NullVsEmptyKey   bool
	NullVsEmptyValue bool
}

func same(a, b []byte, nullMatters bool) bool {
	if nullMatters && (a == nil) != (b == nil) {
		return false
	}
	return bytes.Equal(a, b)
}

// Compare returns "" when got is want, else what differs.
func Compare(want, got Rec, f Flags) string {
	switch {
	case got.Offset != want.Offset:
		return fmt.Sprintf("offset %d != %d", got.Offset, want.Offset)
	case !same(want.Key, got.Key, f.NullVsEmptyKey):
		return fmt.Sprintf("key %q (nil %v) != %q (nil %v)", got.Key, got.Key == nil, want.Key, want.Key == nil)
	case !same(want.Value, got.Value, f.NullVsEmptyValue):
		return fmt.Sprintf("value of %d bytes (nil %v) != %d bytes (nil %v)", len(got.Value), got.Value == nil,
			len(want.Value), want.Value == nil)
	case !got.Timestamp.Equal(want.Timestamp):
		return fmt.Sprintf("timestamp %v != %v", got.Timestamp, want.Timestamp)
	case len(got.Headers) != len(want.Headers):
		return fmt.Sprintf("%d headers != %d", len(got.Headers), len(want.Headers))
	}
	for j := range want.Headers {
		if got.Headers[j].Key != want.Headers[j].Key || !bytes.Equal(got.Headers[j].Value, want.Headers[j].Value) {
			return fmt.Sprintf("header %d %q=%q != %q=%q", j, got.Headers[j].Key, got.Headers[j].Value,
				want.Headers[j].Key, want.Headers[j].Value)
		}
	}
	return ""
}

// CodecResult is the report of one codec's round trip.
type CodecResult struct {
	Produced   int      `json:"produced"`
	Read       int      `json:"read"`
	Mismatches []string `json:"mismatches"`
	Shapes
}

// Shapes counts the record shapes a round trip read back (null and empty keys, null values,
// the 6 KiB values, headers): the proof the test data's edge cases came back at all.
type Shapes struct {
	NullKeys   int `json:"null_keys_read"`
	EmptyKeys  int `json:"empty_keys_read"`
	NullValues int `json:"null_values_read"`
	BigValues  int `json:"big_values_read"`
	Headers    int `json:"headers_read"`
}

// Count adds one record read back.
func (s *Shapes) Count(key, value []byte, headers int) {
	switch {
	case key == nil:
		s.NullKeys++
	case len(key) == 0:
		s.EmptyKeys++
	}
	if value == nil {
		s.NullValues++
	}
	if len(value) == 6144 {
		s.BigValues++
	}
	s.Headers += headers
}

// Judge compares per partition, in order, and counts the record shapes read back.
func Judge(want, got map[int32][]Rec, f Flags) *CodecResult {
	res := &CodecResult{Mismatches: []string{}}
	for _, w := range want {
		res.Produced += len(w)
	}
	for part, w := range want {
		g := got[part]
		for j := range w {
			if j >= len(g) {
				res.Mismatches = append(res.Mismatches, fmt.Sprintf("p%d: only %d of %d records read", part, len(g), len(w)))
				break
			}
			if m := Compare(w[j], g[j], f); m != "" && len(res.Mismatches) < 10 {
				res.Mismatches = append(res.Mismatches, fmt.Sprintf("p%d[%d]: %s", part, j, m))
			}
		}
	}
	for _, g := range got {
		for _, r := range g {
			res.Read++
			res.Count(r.Key, r.Value, len(r.Headers))
		}
	}
	return res
}

// GroupResult is the report of the consumer-group scenario: member A processes a third of the
// records and leaves, members B and C resume from A's commits; every record once.
type GroupResult struct {
	Produced   int      `json:"produced"`
	First      int      `json:"first_member_processed"`
	Later      int      `json:"later_members_processed"`
	Duplicates int      `json:"duplicates"`
	Missing    int      `json:"missing"`
	Problems   []string `json:"problems"`
}

// GroupRecords are the n records of the group scenario: values g-00000..., partition i % 3.
func GroupRecords(n int) []Rec {
	rs := make([]Rec, 0, n)
	for i := 0; i < n; i++ {
		rs = append(rs, Rec{Partition: int32(i % 3), Value: []byte(fmt.Sprintf("g-%05d", i))})
	}
	return rs
}

// Member runs one group member until ctx ends, it has processed limit records (0: no limit)
// or every record is seen; it calls all() once every record is seen and returns how many it
// processed.
type Member func(ctx context.Context, all context.CancelFunc, limit int) int

// RunMembers runs member A alone for a third of the records, then B and C together until
// every record is seen (or ctx ends), and records their counts in res.
func (res *GroupResult) RunMembers(ctx context.Context, member Member) {
	res.First = member(ctx, func() {}, res.Produced/3)
	later, all := context.WithCancel(ctx)
	defer all()
	var wg sync.WaitGroup
	counts := make([]int, 2)
	for i := range counts {
		wg.Add(1)
		go func() { defer wg.Done(); counts[i] = member(later, all, 0) }()
	}
	wg.Wait()
	res.Later = counts[0] + counts[1]
}

// Tally counts the records of rs never seen and the extra times one was seen.
func (res *GroupResult) Tally(rs []Rec, seen map[string]int) {
	for _, r := range rs {
		switch n := seen[string(r.Value)]; {
		case n == 0:
			res.Missing++
		case n > 1:
			res.Duplicates += n - 1
		}
	}
}

// Emit prints the report as one JSON line.
func Emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Fail("json: %v", err)
	}
	os.Stdout.Write(append(b, '\n'))
}

// Fail reports a client failure (exit status 2).
func Fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}
