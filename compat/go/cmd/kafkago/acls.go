package main

// kafka-go's Client ACL calls (CreateACLs, DescribeACLs, DeleteACLs) against a broker whose
// authorizer is on: the bindings, filters and two phases of compat/go/cmd/franzgo/acls.go
// (-acl-phase create | delete), reported as scen.ACLResult.  kafka-go's filters take strings,
// "" sent as null (any); DescribeACLs takes one filter, so a filter on two principals is two calls.

import (
	"context"
	"flag"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/pykbroker/compat/go/internal/scen"
)

var aclPhase = flag.String("acl-phase", "create", "acls: create | delete | describe")

func kgoACLKey(t kafka.ResourceType, name string, pt kafka.PatternType, principal, host string,
	op kafka.ACLOperationType, perm kafka.ACLPermissionType) string {
	return scen.ACLKey(t.String(), name, pt.String(), principal, host, op.String(), perm.String())
}

func runACLs(ctx context.Context) any {
	p := *common.Prefix
	alice, bob := "User:"+p+"-alice", "User:"+p+"-bob"
	c := &kafka.Client{Addr: kafka.TCP(seeds()...), Timeout: 30 * time.Second, Transport: transport()}
	res := scen.NewACLResult()
	anyF := kafka.ACLFilter{ResourceTypeFilter: kafka.ResourceTypeAny, ResourcePatternTypeFilter: kafka.PatternTypeAny,
		Operation: kafka.ACLOperationTypeAny, PermissionType: kafka.ACLPermissionTypeAny}
	with := func(f kafka.ACLFilter, edit func(*kafka.ACLFilter)) kafka.ACLFilter { edit(&f); return f }
	topicMatch := with(anyF, func(f *kafka.ACLFilter) {
		f.ResourceTypeFilter, f.ResourceNameFilter, f.ResourcePatternTypeFilter = kafka.ResourceTypeTopic, p+"-t", kafka.PatternTypeMatch
	})
	filters := map[string][]kafka.ACLFilter{
		"alice_allow": {with(anyF, func(f *kafka.ACLFilter) { f.PrincipalFilter, f.PermissionType = alice, kafka.ACLPermissionTypeAllow })},
		"topic_match": {topicMatch},
		"group_prefixed_deny_bob": {with(anyF, func(f *kafka.ACLFilter) {
			f.ResourceTypeFilter, f.ResourcePatternTypeFilter = kafka.ResourceTypeGroup, kafka.PatternTypePrefixed
			f.PrincipalFilter, f.PermissionType = bob, kafka.ACLPermissionTypeDeny
		})},
		"alice_bob": {with(anyF, func(f *kafka.ACLFilter) { f.PrincipalFilter = alice }),
			with(anyF, func(f *kafka.ACLFilter) { f.PrincipalFilter = bob })},
	}
	describeOne := func(name string) []string {
		got := []string{}
		for _, f := range filters[name] {
			r, err := c.DescribeACLs(ctx, &kafka.DescribeACLsRequest{Filter: f})
			if err != nil {
				scen.Fail("describe acls %s: %v", name, err)
			}
			if r.Error != nil {
				scen.Fail("describe acls %s: %v", name, r.Error)
			}
			for _, rs := range r.Resources {
				for _, a := range rs.ACLs {
					got = append(got, kgoACLKey(rs.ResourceType, rs.ResourceName, rs.PatternType, a.Principal, a.Host,
						a.Operation, a.PermissionType))
				}
			}
		}
		return scen.Sorted(got)
	}
	describeAll := func() {
		for name := range filters {
			res.Described[name] = describeOne(name)
		}
	}
	// once the broker shows what the phase left (want: the run's bindings), every filter
	describe := func(want []string) {
		scen.ACLSettle(want, func() []string { return describeOne("alice_bob") })
		describeAll()
	}
	switch *aclPhase {
	case "create":
		entry := func(t kafka.ResourceType, name string, pt kafka.PatternType, principal, host string,
			op kafka.ACLOperationType, perm kafka.ACLPermissionType) kafka.ACLEntry {
			return kafka.ACLEntry{ResourceType: t, ResourceName: name, ResourcePatternType: pt, Principal: principal,
				Host: host, Operation: op, PermissionType: perm}
		}
		acls := []kafka.ACLEntry{
			entry(kafka.ResourceTypeTopic, p+"-t", kafka.PatternTypeLiteral, alice, "*", kafka.ACLOperationTypeRead, kafka.ACLPermissionTypeAllow),
			entry(kafka.ResourceTypeTopic, p+"-t", kafka.PatternTypeLiteral, alice, "*", kafka.ACLOperationTypeWrite, kafka.ACLPermissionTypeAllow),
			entry(kafka.ResourceTypeTopic, p+"-", kafka.PatternTypePrefixed, bob, "127.0.0.1", kafka.ACLOperationTypeWrite, kafka.ACLPermissionTypeDeny),
			entry(kafka.ResourceTypeGroup, p+"-g", kafka.PatternTypeLiteral, alice, "*", kafka.ACLOperationTypeRead, kafka.ACLPermissionTypeAllow),
			entry(kafka.ResourceTypeGroup, p+"-", kafka.PatternTypePrefixed, bob, "*", kafka.ACLOperationTypeDescribe, kafka.ACLPermissionTypeDeny),
		}
		r, err := c.CreateACLs(ctx, &kafka.CreateACLsRequest{ACLs: acls})
		if err != nil {
			scen.Fail("create acls: %v", err)
		}
		if len(r.Errors) != len(acls) {
			scen.Fail("create acls: %d results to %d creations", len(r.Errors), len(acls))
		}
		for i, a := range acls {
			k := kgoACLKey(a.ResourceType, a.ResourceName, a.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType)
			if r.Errors[i] != nil {
				res.CreateErr = append(res.CreateErr, k+": "+r.Errors[i].Error())
			} else {
				res.Created = append(res.Created, k)
			}
		}
		res.Created = scen.Sorted(res.Created)
		bad := []kafka.ACLEntry{entry(kafka.ResourceTypeTopic, p+"-bad", kafka.PatternTypeLiteral, scen.ACLInvalidPrincipal(p), "*",
			kafka.ACLOperationTypeRead, kafka.ACLPermissionTypeAllow)}
		switch r, err := c.CreateACLs(ctx, &kafka.CreateACLsRequest{ACLs: bad}); {
		case err != nil:
			res.InvalidCreate = err.Error()
		case len(r.Errors) == 1 && r.Errors[0] != nil:
			res.InvalidCreate = r.Errors[0].Error()
		}
		describe(res.Created)
	case "delete":
		del := func(f kafka.ACLFilter) kafka.DeleteACLsFilter {
			return kafka.DeleteACLsFilter{ResourceTypeFilter: f.ResourceTypeFilter, ResourceNameFilter: f.ResourceNameFilter,
				ResourcePatternTypeFilter: f.ResourcePatternTypeFilter, PrincipalFilter: f.PrincipalFilter,
				HostFilter: f.HostFilter, Operation: f.Operation, PermissionType: f.PermissionType}
		}
		for name, f := range map[string]kafka.ACLFilter{
			"topic_match": topicMatch,
			"group_match": with(anyF, func(f *kafka.ACLFilter) {
				f.ResourceTypeFilter, f.ResourceNameFilter, f.ResourcePatternTypeFilter = kafka.ResourceTypeGroup, p+"-g", kafka.PatternTypeMatch
			}),
		} {
			r, err := c.DeleteACLs(ctx, &kafka.DeleteACLsRequest{Filters: []kafka.DeleteACLsFilter{del(f)}})
			if err != nil {
				scen.Fail("delete acls %s: %v", name, err)
			}
			got := []string{}
			for _, fr := range r.Results {
				if fr.Error != nil {
					res.DeleteErr = append(res.DeleteErr, name+": "+fr.Error.Error())
				}
				for _, m := range fr.MatchingACLs {
					if m.Error != nil {
						res.DeleteErr = append(res.DeleteErr, name+": "+m.Error.Error())
					}
					got = append(got, kgoACLKey(m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host,
						m.Operation, m.PermissionType))
				}
			}
			res.Deleted[name] = scen.Sorted(got)
		}
		describe(nil)
	case "describe":
		describeAll()
	default:
		scen.Fail("unknown -acl-phase %q", *aclPhase)
	}
	return res
}
