package main

// Produce and consume with every codec franz-go has: keys (null, empty, binary), values (null,
// empty, binary, 6 KiB), headers (duplicate keys, empty value, non-ASCII key, binary value)
// and explicit CreateTime timestamps out of order, read back byte-exact per partition, in order,
// at the offsets the produce results reported.

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/pykbroker/compat/go/internal/scen"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

type codecResult struct {
	Produced     int      `json:"produced"`
	Read         int      `json:"read"`
	Mismatches   []string `json:"mismatches"`
	OffsetsDense bool     `json:"offsets_dense"`
	scen.Shapes
	Compressed    bool  `json:"compressed"`
	ProducerEpoch int16 `json:"producer_epoch"`
}

// record i of a round-trip run: the shared scenario's record (internal/scen), as a kgo.Record
func record(i int, base time.Time) *kgo.Record {
	sr := scen.Record(i, base)
	r := &kgo.Record{Partition: sr.Partition, Key: sr.Key, Value: sr.Value, Timestamp: sr.Timestamp}
	for _, h := range sr.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return r
}

func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func compare(want, got *kgo.Record) string {
	switch {
	case !sameBytes(want.Key, got.Key):
		return fmt.Sprintf("key %q (nil %v) != %q (nil %v)", got.Key, got.Key == nil, want.Key, want.Key == nil)
	case !sameBytes(want.Value, got.Value):
		return fmt.Sprintf("value of %d bytes (nil %v) != %d bytes (nil %v)", len(got.Value), got.Value == nil, len(want.Value), want.Value == nil)
	case !got.Timestamp.Equal(want.Timestamp):
		return fmt.Sprintf("timestamp %v != %v", got.Timestamp, want.Timestamp)
	case got.Attrs.TimestampType() != 0:
		return fmt.Sprintf("timestamp type %d, want CreateTime", got.Attrs.TimestampType())
	case len(got.Headers) != len(want.Headers):
		return fmt.Sprintf("%d headers != %d", len(got.Headers), len(want.Headers))
	}
	for j := range want.Headers {
		if got.Headers[j].Key != want.Headers[j].Key || !sameBytes(got.Headers[j].Value, want.Headers[j].Value) {
			return fmt.Sprintf("header %d %q=%q != %q=%q", j, got.Headers[j].Key, got.Headers[j].Value,
				want.Headers[j].Key, want.Headers[j].Value)
		}
	}
	return ""
}

func runRoundtrip(ctx context.Context) any {
	admCl := newClient()
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	out := map[string]*codecResult{}
	base := time.Now()
	for _, c := range codecs {
		topic := fmt.Sprintf("%s-rt-%s", *common.Prefix, c.name)
		createTopic(ctx, adm, topic, 3)
		res := &codecResult{Mismatches: []string{}, OffsetsDense: true}
		out[c.name] = res
		p := newClient(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(5*time.Millisecond))
		want := map[int32][]*kgo.Record{}
		var rs []*kgo.Record
		for i := 0; i < *common.Records; i++ {
			r := record(i, base)
			rs = append(rs, r)
		}
		results := p.ProduceSync(ctx, rs...)
		if err := results.FirstErr(); err != nil {
			fail("produce %s: %v", c.name, err)
		}
		for _, pr := range results {
			want[pr.Record.Partition] = append(want[pr.Record.Partition], pr.Record)
			res.Produced++
		}
		p.Close()
		for part, recs := range want {
			// ProduceSync's results keep each partition's order; offsets are the broker's
			for j, r := range recs {
				if r.Offset != int64(j) {
					res.OffsetsDense = false
					res.Mismatches = append(res.Mismatches, fmt.Sprintf("p%d produce offset %d at index %d", part, r.Offset, j))
					break
				}
			}
		}

		parts := map[int32]kgo.Offset{0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}
		cons := newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}), kgo.FetchMaxWait(300*time.Millisecond))
		got := map[int32][]*kgo.Record{}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		for res.Read < res.Produced && rctx.Err() == nil {
			fs := cons.PollFetches(rctx)
			fs.EachError(func(t string, p int32, err error) {
				if rctx.Err() == nil {
					fail("fetch %s/%d: %v", t, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				got[r.Partition] = append(got[r.Partition], r)
				res.Read++
			})
		}
		cancel()
		cons.Close()
		for part, recs := range want {
			g := got[part]
			for j, w := range recs {
				if j >= len(g) {
					res.Mismatches = append(res.Mismatches, fmt.Sprintf("p%d: only %d of %d records read", part, len(g), len(recs)))
					break
				}
				if g[j].Offset != w.Offset {
					res.Mismatches = append(res.Mismatches, fmt.Sprintf("p%d[%d]: offset %d != %d", part, j, g[j].Offset, w.Offset))
				} else if m := compare(w, g[j]); m != "" {
					res.Mismatches = append(res.Mismatches, fmt.Sprintf("p%d@%d: %s", part, w.Offset, m))
				}
				if len(res.Mismatches) > 10 {
					break
				}
			}
		}
		for _, g := range got {
			for _, r := range g {
				res.Compressed = res.Compressed || r.Attrs.CompressionType() != 0
				res.ProducerEpoch = r.ProducerEpoch
				res.Count(r.Key, r.Value, len(r.Headers))
			}
		}
	}
	return out
}
