package main

// kadm, franz-go's admin client: create a topic with configs, describe its configs (values and
// sources), alter them incrementally, grow its partitions, list brokers and topics, delete it.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

type adminResult struct {
	Brokers          int               `json:"brokers"`
	Created          bool              `json:"created"`
	DuplicateErr     string            `json:"duplicate_create_error"`
	Described        map[string]string `json:"described"` // key -> value@source
	AfterAlter       map[string]string `json:"after_alter"`
	Partitions       []int             `json:"partitions"` // after create, after CreatePartitions
	Listed           bool              `json:"listed"`
	Deleted          bool              `json:"deleted"`
	ListedAfterDel   bool              `json:"listed_after_delete"`
	UnknownDescribed string            `json:"unknown_topic_describe_error"`
	// describes that did not yet show the created/altered configs, and their errors
	// (not judged: the configs reach the asked broker shortly after the controller applied them)
	DescribeRetries []string `json:"describe_retries"`
}

func configsOf(rcs kadm.ResourceConfigs, keys ...string) map[string]string {
	out := map[string]string{}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			for _, k := range keys {
				if c.Key == k && c.Value != nil {
					out[k] = *c.Value + "@" + c.Source.String()
				}
			}
		}
	}
	return out
}

func runAdmin(ctx context.Context) any {
	topic := *common.Prefix + "-adm"
	cl := newClient()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res := adminResult{DescribeRetries: []string{}}
	retried := func(what string, rcs kadm.ResourceConfigs) {
		for _, rc := range rcs {
			if len(res.DescribeRetries) < 20 {
				res.DescribeRetries = append(res.DescribeRetries, fmt.Sprintf("%s: %d configs, err %v", what, len(rc.Configs), rc.Err))
			}
		}
	}
	bs, err := adm.ListBrokers(ctx)
	if err != nil {
		fail("list brokers: %v", err)
	}
	res.Brokers = len(bs)
	ret, pol := "3600000", "compact"
	cr, err := adm.CreateTopic(ctx, 2, int16(*common.RF), map[string]*string{"retention.ms": &ret, "cleanup.policy": &pol}, topic)
	res.Created = err == nil && cr.Err == nil
	switch cr2, err := adm.CreateTopic(ctx, 2, int16(*common.RF), nil, topic); {
	case err != nil:
		res.DuplicateErr = err.Error()
	case cr2.Err != nil:
		res.DuplicateErr = cr2.Err.Error()
	}
	keys := []string{"retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes"}
	// the broker asked may learn of the new topic a moment after its controller created it
	var rcs kadm.ResourceConfigs
	for deadline := time.Now().Add(15 * time.Second); ; {
		rcs, err = adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			fail("describe configs: %v", err)
		}
		res.Described = configsOf(rcs, keys...)
		if len(res.Described) == len(keys) || time.Now().After(deadline) {
			break
		}
		retried("after create", rcs)
		time.Sleep(100 * time.Millisecond)
	}
	mmb := "2000000"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &mmb},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, topic); err != nil {
		fail("alter configs: %v", err)
	}
	// a cluster applies the change through its controller: every broker sees it shortly after
	for deadline := time.Now().Add(15 * time.Second); ; {
		rcs, err = adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			fail("describe configs: %v", err)
		}
		res.AfterAlter = configsOf(rcs, keys...)
		changed := len(res.AfterAlter) == len(keys) && res.AfterAlter["max.message.bytes"] != res.Described["max.message.bytes"]
		if changed || time.Now().After(deadline) {
			break
		}
		retried("after alter", rcs)
		time.Sleep(100 * time.Millisecond)
	}
	count := func() int {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return -1
		}
		return len(td[topic].Partitions)
	}
	res.Partitions = append(res.Partitions, count())
	if _, err := adm.CreatePartitions(ctx, 3, topic); err != nil {
		fail("create partitions: %v", err)
	}
	for deadline := time.Now().Add(15 * time.Second); count() != 5 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	res.Partitions = append(res.Partitions, count())
	td, err := adm.ListTopics(ctx)
	res.Listed = err == nil && td.Has(topic)
	dr, err := adm.DeleteTopic(ctx, topic)
	res.Deleted = err == nil && dr.Err == nil
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		td, err = adm.ListTopics(ctx)
		if err == nil && !td.Has(topic) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.ListedAfterDel = td.Has(topic)
	if rcs, err := adm.DescribeTopicConfigs(ctx, *common.Prefix+"-no-such-topic"); err == nil && len(rcs) == 1 && rcs[0].Err != nil {
		res.UnknownDescribed = rcs[0].Err.Error()
	} else if err != nil {
		res.UnknownDescribed = err.Error()
	}
	return res
}
