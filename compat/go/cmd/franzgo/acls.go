package main

// kadm's ACL calls (CreateACLs / DescribeACLs / DeleteACLs with an ACLBuilder) against a broker
// whose authorizer is on.  Two phases, each its own run, so the caller can look at the bindings
// with another client in between:
//
//	-acl-phase create: create LITERAL and PREFIXED topic and group bindings, ALLOW and DENY, then
//	                   describe them with three filters;
//	-acl-phase delete: delete them with MATCH filters, then describe again.
//	-acl-phase describe: only the describes (on a cluster the test first waits for every broker
//	                     to learn the change, then describes in a run of its own).
//
// Each phase describes only once the broker shows the run's bindings as the phase left them
// (scen.ACLSettle: Apache Kafka applies ACL changes a moment after answering).
// Every principal and resource name starts with -prefix, so runs do not see each other's bindings.
// The report: scen.ACLResult.

import (
	"context"
	"flag"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/pykbroker/compat/go/internal/scen"
)

var aclPhase = flag.String("acl-phase", "create", "acls: create | delete | describe")

func runACLs(ctx context.Context) any {
	p := *common.Prefix
	alice, bob := "User:"+p+"-alice", "User:"+p+"-bob"
	cl := newClient()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res := scen.NewACLResult()

	// any permission, principal and host: the filters below narrow by resource only
	anyWho := func(b *kadm.ACLBuilder) *kadm.ACLBuilder {
		return b.Allow().AllowHosts().Deny().DenyHosts().Operations()
	}
	filters := map[string]*kadm.ACLBuilder{
		// alice's ALLOW bindings of every resource type and pattern
		"alice_allow": kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Allow(alice).AllowHosts().Operations(),
		// every binding that applies to topic <p>-t: its LITERAL ones and the PREFIXED <p>-
		"topic_match": anyWho(kadm.NewACLs().Topics(p + "-t").ResourcePatternType(kadm.ACLPatternMatch)),
		// bob's PREFIXED DENY group bindings
		"group_prefixed_deny_bob": kadm.NewACLs().Groups().ResourcePatternType(kadm.ACLPatternPrefixed).Deny(bob).DenyHosts().Operations(),
		// everything of the run's two principals (the emptiness check after the deletes)
		"alice_bob": kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).
			Allow(alice, bob).AllowHosts().Deny(alice, bob).DenyHosts().Operations(),
	}
	describeOne := func(name string) []string {
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
				got = append(got, scen.ACLKey(d.Type.String(), d.Name, d.Pattern.String(), d.Principal, d.Host,
					d.Operation.String(), d.Permission.String()))
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
				k := scen.ACLKey(r.Type.String(), r.Name, r.Pattern.String(), r.Principal, r.Host, r.Operation.String(),
					r.Permission.String())
				if r.Err != nil {
					res.CreateErr = append(res.CreateErr, k+": "+r.Err.Error())
				} else {
					res.Created = append(res.Created, k)
				}
			}
		}
		res.Created = scen.Sorted(res.Created)
		switch rs, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics(p+"-bad").Allow(scen.ACLInvalidPrincipal(p)).
			Operations(kadm.OpRead)); {
		case err != nil:
			res.InvalidCreate = err.Error()
		case len(rs) == 1 && rs[0].Err != nil:
			res.InvalidCreate = rs[0].Err.Error() + ": " + rs[0].ErrMessage
		}
		describe(res.Created)
	case "delete":
		for name, f := range map[string]*kadm.ACLBuilder{
			"topic_match": filters["topic_match"],
			"group_match": anyWho(kadm.NewACLs().Groups(p + "-g").ResourcePatternType(kadm.ACLPatternMatch)),
		} {
			rs, err := adm.DeleteACLs(ctx, f)
			if err != nil {
				fail("delete %s: %v", name, err)
			}
			got := []string{}
			for _, r := range rs {
				if r.Err != nil {
					res.DeleteErr = append(res.DeleteErr, name+": "+r.Err.Error())
				}
				for _, d := range r.Deleted {
					if d.Err != nil {
						res.DeleteErr = append(res.DeleteErr, name+": "+d.Err.Error())
					}
					got = append(got, scen.ACLKey(d.Type.String(), d.Name, d.Pattern.String(), d.Principal, d.Host,
						d.Operation.String(), d.Permission.String()))
				}
			}
			res.Deleted[name] = scen.Sorted(got)
		}
		describe(nil)
	case "describe":
		describeAll()
	default:
		fail("unknown -acl-phase %q", *aclPhase)
	}
	return res
}
