package main

// A network fault for the exactly-once scenario: the answers to EndTxn requests are lost while
// the fault is armed.  The broker has received and processed each EndTxn (the connection is cut
// only once its answer arrives), the client never learns the outcome: after its retries it fails
// the producer id as "unconfirmed" and, when the application aborts as franz-go documents,
// re-runs InitProducerId with the producer id and the epoch it had *before* the EndTxn bumped it
// (KIP-360).  Kafka takes that for a retry and answers the current epoch.

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const endTxnKey = 26

type endTxnFault struct {
	armed atomic.Bool
	used  atomic.Bool  // the fault strikes once per run
	lost  atomic.Int64 // EndTxn answers dropped
}

type faultConn struct {
	net.Conn
	f        *endTxnFault
	poisoned atomic.Bool
}

// franz-go writes each request (size, header, body) with one Write.
func (c *faultConn) Write(b []byte) (int, error) {
	if c.f.armed.Load() && len(b) >= 8 && binary.BigEndian.Uint16(b[4:6]) == endTxnKey {
		c.poisoned.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *faultConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.poisoned.Load() {
		// the EndTxn's answer (or part of it) arrived: drop it and the connection
		c.f.lost.Add(1)
		c.Conn.Close()
		return 0, errors.New("injected fault: EndTxn answer lost")
	}
	return n, err
}

func (f *endTxnFault) opts() []kgo.Opt {
	d := &net.Dialer{Timeout: 10 * time.Second}
	return []kgo.Opt{
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, host)
			if err != nil {
				return nil, err
			}
			return &faultConn{Conn: c, f: f}, nil
		}),
		// give up on a lost EndTxn after a few retries instead of franz-go's default 30 s
		kgo.RetryTimeoutFn(func(key int16) time.Duration {
			if key == endTxnKey {
				return 2 * time.Second
			}
			return 30 * time.Second
		}),
	}
}
