package main

// sarama's ClusterAdmin ACL calls (CreateACLs, ListAcls, DeleteACL) against a broker whose
// authorizer is on: the bindings, filters and two phases of compat/go/cmd/franzgo/acls.go
// (-acl-phase create | delete), reported as scen.ACLResult.
//
// sarama's CreateACLs returns one error for the request: its own summary of the bindings'
// errors.  ListAcls takes one filter, so a filter on two principals is
// two calls.

import (
	"flag"

	"github.com/IBM/sarama"

	"github.com/pykbroker/compat/go/internal/scen"
)

var aclPhase = flag.String("acl-phase", "create", "acls: create | delete | describe")

func saramaACLKey(r sarama.Resource, a sarama.Acl) string {
	return scen.ACLKey(r.ResourceType.String(), r.ResourceName, r.ResourcePatternType.String(), a.Principal, a.Host,
		a.Operation.String(), a.PermissionType.String())
}

func runACLs() any {
	p := *common.Prefix
	alice, bob := "User:"+p+"-alice", "User:"+p+"-bob"
	adm, err := sarama.NewClusterAdmin(seeds(), config())
	if err != nil {
		scen.Fail("admin: %v", err)
	}
	defer adm.Close()
	res := scen.NewACLResult()
	str := func(s string) *string { return &s }
	anyF := sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
	with := func(f sarama.AclFilter, edit func(*sarama.AclFilter)) sarama.AclFilter { edit(&f); return f }
	topicMatch := with(anyF, func(f *sarama.AclFilter) {
		f.ResourceType, f.ResourceName, f.ResourcePatternTypeFilter = sarama.AclResourceTopic, str(p+"-t"), sarama.AclPatternMatch
	})
	filters := map[string][]sarama.AclFilter{
		"alice_allow": {with(anyF, func(f *sarama.AclFilter) { f.Principal, f.PermissionType = str(alice), sarama.AclPermissionAllow })},
		"topic_match": {topicMatch},
		"group_prefixed_deny_bob": {with(anyF, func(f *sarama.AclFilter) {
			f.ResourceType, f.ResourcePatternTypeFilter = sarama.AclResourceGroup, sarama.AclPatternPrefixed
			f.Principal, f.PermissionType = str(bob), sarama.AclPermissionDeny
		})},
		"alice_bob": {with(anyF, func(f *sarama.AclFilter) { f.Principal = str(alice) }),
			with(anyF, func(f *sarama.AclFilter) { f.Principal = str(bob) })},
	}
	describeOne := func(name string) []string {
		got := []string{}
		for _, f := range filters[name] {
			ras, err := adm.ListAcls(f)
			if err != nil {
				scen.Fail("list acls %s: %v", name, err)
			}
			for _, ra := range ras {
				for _, a := range ra.Acls {
					got = append(got, saramaACLKey(ra.Resource, *a))
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
		res2 := func(t sarama.AclResourceType, name string, pt sarama.AclResourcePatternType, acls ...*sarama.Acl) *sarama.ResourceAcls {
			return &sarama.ResourceAcls{Resource: sarama.Resource{ResourceType: t, ResourceName: name, ResourcePatternType: pt}, Acls: acls}
		}
		creations := []*sarama.ResourceAcls{
			res2(sarama.AclResourceTopic, p+"-t", sarama.AclPatternLiteral,
				&sarama.Acl{Principal: alice, Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow},
				&sarama.Acl{Principal: alice, Host: "*", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionAllow}),
			res2(sarama.AclResourceTopic, p+"-", sarama.AclPatternPrefixed,
				&sarama.Acl{Principal: bob, Host: "127.0.0.1", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionDeny}),
			res2(sarama.AclResourceGroup, p+"-g", sarama.AclPatternLiteral,
				&sarama.Acl{Principal: alice, Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow}),
			res2(sarama.AclResourceGroup, p+"-", sarama.AclPatternPrefixed,
				&sarama.Acl{Principal: bob, Host: "*", Operation: sarama.AclOperationDescribe, PermissionType: sarama.AclPermissionDeny}),
		}
		if err := adm.CreateACLs(creations); err != nil {
			res.CreateErr = append(res.CreateErr, err.Error())
		} else {
			for _, ra := range creations {
				for _, a := range ra.Acls {
					res.Created = append(res.Created, saramaACLKey(ra.Resource, *a))
				}
			}
		}
		res.Created = scen.Sorted(res.Created)
		if err := adm.CreateACLs([]*sarama.ResourceAcls{res2(sarama.AclResourceTopic, p+"-bad", sarama.AclPatternLiteral,
			&sarama.Acl{Principal: scen.ACLInvalidPrincipal(p), Host: "*", Operation: sarama.AclOperationRead,
				PermissionType: sarama.AclPermissionAllow})}); err != nil {
			res.InvalidCreate = err.Error()
		}
		describe(res.Created)
	case "delete":
		for name, f := range map[string]sarama.AclFilter{
			"topic_match": topicMatch,
			"group_match": with(anyF, func(f *sarama.AclFilter) {
				f.ResourceType, f.ResourceName, f.ResourcePatternTypeFilter = sarama.AclResourceGroup, str(p+"-g"), sarama.AclPatternMatch
			}),
		} {
			ms, err := adm.DeleteACL(f, false)
			if err != nil {
				scen.Fail("delete acls %s: %v", name, err)
			}
			got := []string{}
			for _, m := range ms {
				if m.Err != sarama.ErrNoError {
					res.DeleteErr = append(res.DeleteErr, name+": "+m.Err.Error())
				}
				got = append(got, saramaACLKey(m.Resource, m.Acl))
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
