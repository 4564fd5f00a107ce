package main

// kadm's ACL calls (CreateACLs / DescribeACLs / DeleteACLs with an ACLBuilder) against a broker
// whose authorizer is on, in the phases of scen.RunACLPhase (-acl-phase create | delete |
// describe), each its own run, so the caller can look at the bindings with another client in
// between.  Every principal and resource name starts with -prefix, so runs do not see each
// other's bindings.  The report: scen.ACLResult.

import (
	"context"
	"flag"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/pykbroker/compat/go/internal/scen"
)

var aclPhase = flag.String("acl-phase", "create", "acls: create | delete | describe")

func runACLs(ctx context.Context) any {
	p := *common.Prefix
	alice, bob := scen.ACLPrincipals(p)
	cl := newClient()
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// any permission, principal and host: the MATCH filters narrow by resource only
	anyWho := func(b *kadm.ACLBuilder) *kadm.ACLBuilder {
		return b.Allow().AllowHosts().Deny().DenyHosts().Operations()
	}
	filters := map[string]*kadm.ACLBuilder{
		"alice_allow":             kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Allow(alice).AllowHosts().Operations(),
		"topic_match":             anyWho(kadm.NewACLs().Topics(p + "-t").ResourcePatternType(kadm.ACLPatternMatch)),
		"group_match":             anyWho(kadm.NewACLs().Groups(p + "-g").ResourcePatternType(kadm.ACLPatternMatch)),
		"group_prefixed_deny_bob": kadm.NewACLs().Groups().ResourcePatternType(kadm.ACLPatternPrefixed).Deny(bob).DenyHosts().Operations(),
		"alice_bob": kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).
			Allow(alice, bob).AllowHosts().Deny(alice, bob).DenyHosts().Operations(),
	}
	key := func(t fmt.Stringer, name string, pattern fmt.Stringer, principal, host string, op, perm fmt.Stringer) string {
		return scen.ACLKey(t.String(), name, pattern.String(), principal, host, op.String(), perm.String())
	}
	res, err := scen.RunACLPhase(*aclPhase, scen.ACLCalls{
		Describe: func(name string) []string {
			rs, err := adm.DescribeACLs(ctx, filters[name])
			if err != nil {
				fail("describe %s: %v", name, err)
			}
			got := []string{}
			for _, r := range rs {
				if r.Err != nil {
					fail("describe %s: %v %s", name, r.Err, r.ErrMessage)
				}
				for _, d := range r.Described {
					got = append(got, key(d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission))
				}
			}
			return got
		},
		Create: func() (created, errs []string) {
			for _, b := range []*kadm.ACLBuilder{
				kadm.NewACLs().Topics(p+"-t").ResourcePatternType(kadm.ACLPatternLiteral).Allow(alice).
					Operations(kadm.OpRead, kadm.OpWrite),
				kadm.NewACLs().Topics(p + "-").ResourcePatternType(kadm.ACLPatternPrefixed).Deny(bob).
					DenyHosts("127.0.0.1").Operations(kadm.OpWrite),
				kadm.NewACLs().Groups(p + "-g").ResourcePatternType(kadm.ACLPatternLiteral).Allow(alice).
					Operations(kadm.OpRead),
				kadm.NewACLs().Groups(p + "-").ResourcePatternType(kadm.ACLPatternPrefixed).Deny(bob).
					Operations(kadm.OpDescribe),
			} {
				rs, err := adm.CreateACLs(ctx, b)
				if err != nil {
					fail("create: %v", err)
				}
				for _, r := range rs {
					k := key(r.Type, r.Name, r.Pattern, r.Principal, r.Host, r.Operation, r.Permission)
					if r.Err != nil {
						errs = append(errs, k+": "+r.Err.Error())
					} else {
						created = append(created, k)
					}
				}
			}
			return created, errs
		},
		CreateInvalid: func() string {
			switch rs, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics(p+"-bad").Allow(scen.ACLInvalidPrincipal(p)).
				Operations(kadm.OpRead)); {
			case err != nil:
				return err.Error()
			case len(rs) == 1 && rs[0].Err != nil:
				return rs[0].Err.Error() + ": " + rs[0].ErrMessage
			}
			return ""
		},
		Delete: func(name string) (deleted, errs []string) {
			rs, err := adm.DeleteACLs(ctx, filters[name])
			if err != nil {
				fail("delete %s: %v", name, err)
			}
			for _, r := range rs {
				if r.Err != nil {
					errs = append(errs, r.Err.Error())
				}
				for _, d := range r.Deleted {
					if d.Err != nil {
						errs = append(errs, d.Err.Error())
					}
					deleted = append(deleted, key(d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission))
				}
			}
			return deleted, errs
		},
	})
	if err != nil {
		fail("%v", err)
	}
	return res
}
