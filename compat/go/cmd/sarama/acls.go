package main

// sarama's ClusterAdmin ACL calls (CreateACLs, ListAcls, DeleteACL) against a broker whose
// authorizer is on, in the phases of scen.RunACLPhase (-acl-phase create | delete | describe),
// reported as scen.ACLResult.
//
// sarama's CreateACLs returns one error for the request: its own summary of the bindings'
// errors.  ListAcls takes one filter, so a filter on two principals is two calls.

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
	alice, bob := scen.ACLPrincipals(p)
	adm, err := sarama.NewClusterAdmin(seeds(), config())
	if err != nil {
		scen.Fail("admin: %v", err)
	}
	defer adm.Close()
	str := func(s string) *string { return &s }
	anyF := sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
	with := func(edit func(*sarama.AclFilter)) sarama.AclFilter { f := anyF; edit(&f); return f }
	filters := map[string][]sarama.AclFilter{
		"alice_allow": {with(func(f *sarama.AclFilter) { f.Principal, f.PermissionType = str(alice), sarama.AclPermissionAllow })},
		"topic_match": {with(func(f *sarama.AclFilter) {
			f.ResourceType, f.ResourceName, f.ResourcePatternTypeFilter = sarama.AclResourceTopic, str(p+"-t"), sarama.AclPatternMatch
		})},
		"group_match": {with(func(f *sarama.AclFilter) {
			f.ResourceType, f.ResourceName, f.ResourcePatternTypeFilter = sarama.AclResourceGroup, str(p+"-g"), sarama.AclPatternMatch
		})},
		"group_prefixed_deny_bob": {with(func(f *sarama.AclFilter) {
			f.ResourceType, f.ResourcePatternTypeFilter = sarama.AclResourceGroup, sarama.AclPatternPrefixed
			f.Principal, f.PermissionType = str(bob), sarama.AclPermissionDeny
		})},
		"alice_bob": {with(func(f *sarama.AclFilter) { f.Principal = str(alice) }),
			with(func(f *sarama.AclFilter) { f.Principal = str(bob) })},
	}
	on := func(t sarama.AclResourceType, name string, pt sarama.AclResourcePatternType, acls ...*sarama.Acl) *sarama.ResourceAcls {
		return &sarama.ResourceAcls{Resource: sarama.Resource{ResourceType: t, ResourceName: name, ResourcePatternType: pt}, Acls: acls}
	}
	res, err := scen.RunACLPhase(*aclPhase, scen.ACLCalls{
		Describe: func(name string) []string {
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
			return got
		},
		Create: func() (created, errs []string) {
			creations := []*sarama.ResourceAcls{
				on(sarama.AclResourceTopic, p+"-t", sarama.AclPatternLiteral,
					&sarama.Acl{Principal: alice, Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow},
					&sarama.Acl{Principal: alice, Host: "*", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionAllow}),
				on(sarama.AclResourceTopic, p+"-", sarama.AclPatternPrefixed,
					&sarama.Acl{Principal: bob, Host: "127.0.0.1", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionDeny}),
				on(sarama.AclResourceGroup, p+"-g", sarama.AclPatternLiteral,
					&sarama.Acl{Principal: alice, Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow}),
				on(sarama.AclResourceGroup, p+"-", sarama.AclPatternPrefixed,
					&sarama.Acl{Principal: bob, Host: "*", Operation: sarama.AclOperationDescribe, PermissionType: sarama.AclPermissionDeny}),
			}
			if err := adm.CreateACLs(creations); err != nil {
				return nil, []string{err.Error()}
			}
			for _, ra := range creations {
				for _, a := range ra.Acls {
					created = append(created, saramaACLKey(ra.Resource, *a))
				}
			}
			return created, nil
		},
		CreateInvalid: func() string {
			if err := adm.CreateACLs([]*sarama.ResourceAcls{on(sarama.AclResourceTopic, p+"-bad", sarama.AclPatternLiteral,
				&sarama.Acl{Principal: scen.ACLInvalidPrincipal(p), Host: "*", Operation: sarama.AclOperationRead,
					PermissionType: sarama.AclPermissionAllow})}); err != nil {
				return err.Error()
			}
			return ""
		},
		Delete: func(name string) (deleted, errs []string) {
			ms, err := adm.DeleteACL(filters[name][0], false)
			if err != nil {
				scen.Fail("delete acls %s: %v", name, err)
			}
			for _, m := range ms {
				if m.Err != sarama.ErrNoError {
					errs = append(errs, m.Err.Error())
				}
				deleted = append(deleted, saramaACLKey(m.Resource, m.Acl))
			}
			return deleted, errs
		},
	})
	if err != nil {
		scen.Fail("%v", err)
	}
	return res
}
