package main

// kafka-go's Client ACL calls (CreateACLs, DescribeACLs, DeleteACLs) against a broker whose
// authorizer is on, in the phases of scen.RunACLPhase (-acl-phase create | delete | describe),
// reported as scen.ACLResult.  kafka-go's filters take strings, "" sent as null (any);
// DescribeACLs takes one filter, so a filter on two principals is two calls.

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
	alice, bob := scen.ACLPrincipals(p)
	c := &kafka.Client{Addr: kafka.TCP(seeds()...), Timeout: 30 * time.Second, Transport: transport()}
	anyF := kafka.ACLFilter{ResourceTypeFilter: kafka.ResourceTypeAny, ResourcePatternTypeFilter: kafka.PatternTypeAny,
		Operation: kafka.ACLOperationTypeAny, PermissionType: kafka.ACLPermissionTypeAny}
	with := func(edit func(*kafka.ACLFilter)) kafka.ACLFilter { f := anyF; edit(&f); return f }
	filters := map[string][]kafka.ACLFilter{
		"alice_allow": {with(func(f *kafka.ACLFilter) { f.PrincipalFilter, f.PermissionType = alice, kafka.ACLPermissionTypeAllow })},
		"topic_match": {with(func(f *kafka.ACLFilter) {
			f.ResourceTypeFilter, f.ResourceNameFilter, f.ResourcePatternTypeFilter = kafka.ResourceTypeTopic, p+"-t", kafka.PatternTypeMatch
		})},
		"group_match": {with(func(f *kafka.ACLFilter) {
			f.ResourceTypeFilter, f.ResourceNameFilter, f.ResourcePatternTypeFilter = kafka.ResourceTypeGroup, p+"-g", kafka.PatternTypeMatch
		})},
		"group_prefixed_deny_bob": {with(func(f *kafka.ACLFilter) {
			f.ResourceTypeFilter, f.ResourcePatternTypeFilter = kafka.ResourceTypeGroup, kafka.PatternTypePrefixed
			f.PrincipalFilter, f.PermissionType = bob, kafka.ACLPermissionTypeDeny
		})},
		"alice_bob": {with(func(f *kafka.ACLFilter) { f.PrincipalFilter = alice }),
			with(func(f *kafka.ACLFilter) { f.PrincipalFilter = bob })},
	}
	entry := func(t kafka.ResourceType, name string, pt kafka.PatternType, principal, host string,
		op kafka.ACLOperationType, perm kafka.ACLPermissionType) kafka.ACLEntry {
		return kafka.ACLEntry{ResourceType: t, ResourceName: name, ResourcePatternType: pt, Principal: principal,
			Host: host, Operation: op, PermissionType: perm}
	}
	res, err := scen.RunACLPhase(*aclPhase, scen.ACLCalls{
		Describe: func(name string) []string {
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
			return got
		},
		Create: func() (created, errs []string) {
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
					errs = append(errs, k+": "+r.Errors[i].Error())
				} else {
					created = append(created, k)
				}
			}
			return created, errs
		},
		CreateInvalid: func() string {
			bad := []kafka.ACLEntry{entry(kafka.ResourceTypeTopic, p+"-bad", kafka.PatternTypeLiteral, scen.ACLInvalidPrincipal(p), "*",
				kafka.ACLOperationTypeRead, kafka.ACLPermissionTypeAllow)}
			switch r, err := c.CreateACLs(ctx, &kafka.CreateACLsRequest{ACLs: bad}); {
			case err != nil:
				return err.Error()
			case len(r.Errors) == 1 && r.Errors[0] != nil:
				return r.Errors[0].Error()
			}
			return ""
		},
		Delete: func(name string) (deleted, errs []string) {
			f := filters[name][0]
			r, err := c.DeleteACLs(ctx, &kafka.DeleteACLsRequest{Filters: []kafka.DeleteACLsFilter{{
				ResourceTypeFilter: f.ResourceTypeFilter, ResourceNameFilter: f.ResourceNameFilter,
				ResourcePatternTypeFilter: f.ResourcePatternTypeFilter, PrincipalFilter: f.PrincipalFilter,
				HostFilter: f.HostFilter, Operation: f.Operation, PermissionType: f.PermissionType}}})
			if err != nil {
				scen.Fail("delete acls %s: %v", name, err)
			}
			for _, fr := range r.Results {
				if fr.Error != nil {
					errs = append(errs, fr.Error.Error())
				}
				for _, m := range fr.MatchingACLs {
					if m.Error != nil {
						errs = append(errs, m.Error.Error())
					}
					deleted = append(deleted, kgoACLKey(m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host,
						m.Operation, m.PermissionType))
				}
			}
			return deleted, errs
		},
	})
	if err != nil {
		scen.Fail("%v", err)
	}
	return res
}
