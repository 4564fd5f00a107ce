package scen

// The ACL admin scenario of every client (cmd/*/acls.go): its phases (RunACLPhase) and its report
// (ACLResult), one shape for every client, judged by tests/client_acls.py.

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// ACLResult is what an ACL scenario read back.  A binding is
// "TYPE|name|PATTERN|principal|host|OPERATION|PERMISSION", in Kafka's enum names (TOPIC, PREFIXED,
// DESCRIBE_CONFIGS...).
type ACLResult struct {
	Created   []string            `json:"created"`
	CreateErr []string            `json:"create_errors"`
	Described map[string][]string `json:"described"` // filter name -> bindings
	Deleted   map[string][]string `json:"deleted"`   // filter name -> bindings reported deleted
	DeleteErr []string            `json:"delete_errors"`
	// a creation the broker must refuse (a principal without its type: INVALID_REQUEST), as the
	// client reports it; "" when the client reported no error
	InvalidCreate string `json:"invalid_create_error"`
}

// ACLPrincipals are the run's two principals, alice and bob, named after prefix.
func ACLPrincipals(prefix string) (alice, bob string) {
	return "User:" + prefix + "-alice", "User:" + prefix + "-bob"
}

// ACLInvalidPrincipal is the principal of that creation: no "User:" (Kafka cannot parse it).
func ACLInvalidPrincipal(prefix string) string { return prefix + "-nocolon" }

func NewACLResult() ACLResult {
	return ACLResult{Created: []string{}, CreateErr: []string{}, Described: map[string][]string{},
		Deleted: map[string][]string{}, DeleteErr: []string{}}
}

var camelHump = regexp.MustCompile(`([a-z])([A-Z])`)

// ACLName turns a client's enum name (Topic, ClusterAction, TRANSACTIONAL_ID) into Kafka's.
func ACLName(s string) string { return strings.ToUpper(camelHump.ReplaceAllString(s, "${1}_${2}")) }

// ACLKey is one binding's report form.
func ACLKey(t, name, pattern, principal, host, op, perm string) string {
	return strings.Join([]string{ACLName(t), name, ACLName(pattern), principal, host, ACLName(op), ACLName(perm)}, "|")
}

// Sorted returns s sorted (never nil: the report says [] rather than null).
func Sorted(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

// ACLSettleBound is how long ACLSettle waits for the broker to show a phase's bindings.
const ACLSettleBound = 15 * time.Second

// ACLSettle calls look (a describe of every binding of the run's principals, sorted) until it
// answers want or ACLSettleBound has passed, every 50 ms.  Apache Kafka answers CreateAcls and
// DeleteAcls once its controller committed the change, and its broker's authorizer applies it
// from the metadata log a moment later: a describe right after may not see it yet.  pykbroker
// answers after applying, so its first look settles.  The scenarios describe (and report) only
// after this, identically against either broker; a phase that never settles reports what the
// broker shows at the bound.
func ACLSettle(want []string, look func() []string) {
	deadline := time.Now().Add(ACLSettleBound)
	for !slices.Equal(look(), Sorted(want)) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// ACLCalls are one client's ACL calls, each made with the client's own API.  A filter name
// stands for one filter the client builds (p: -prefix; alice, bob: ACLPrincipals(p)):
//
//	alice_allow:             alice's ALLOW bindings of every resource type and pattern
//	topic_match:             every binding that applies to topic <p>-t: its LITERAL ones and the PREFIXED <p>-
//	group_match:             the same for group <p>-g
//	group_prefixed_deny_bob: bob's PREFIXED DENY group bindings
//	alice_bob:               everything of the two principals (the emptiness check after the deletes)
//
// The bindings created (tests/client_acls.py expected_bindings): topic <p>-t LITERAL alice
// READ and WRITE ALLOW, topic <p>- PREFIXED bob WRITE DENY from 127.0.0.1, group <p>-g LITERAL
// alice READ ALLOW, group <p>- PREFIXED bob DESCRIBE DENY; every other host "*".
type ACLCalls struct {
	// Describe answers the bindings the filter matches, as ACLKey, in any order.
	Describe func(filter string) []string
	// Create creates the bindings and answers those created and the errors of the others.
	Create func() (created, errs []string)
	// CreateInvalid creates topic <p>-bad LITERAL ACLInvalidPrincipal(p) READ ALLOW, which the
	// broker must refuse, and answers the client's error ("" when it reported none).
	CreateInvalid func() string
	// Delete deletes the bindings the filter matches and answers those the broker reported
	// deleted and the errors it reported.
	Delete func(filter string) (deleted, errs []string)
}

// The filters each phase reports: described (every phase), deleted (the delete phase).
var (
	ACLDescribeFilters = []string{"alice_allow", "topic_match", "group_prefixed_deny_bob", "alice_bob"}
	ACLDeleteFilters   = []string{"topic_match", "group_match"}
)

// RunACLPhase runs one phase of the ACL scenario with c and reports what it read back:
//
//	create:   create the bindings and the invalid one, then describe with every filter;
//	delete:   delete with the MATCH filters, then describe again;
//	describe: only the describes (on a cluster the test first waits for every broker to learn
//	          the change, then describes in a run of its own).
//
// The create and delete phases describe only once the broker shows the run's bindings as the
// phase left them (ACLSettle).  An unknown phase is an error.
func RunACLPhase(phase string, c ACLCalls) (ACLResult, error) {
	res := NewACLResult()
	describeAll := func() {
		for _, name := range ACLDescribeFilters {
			res.Described[name] = Sorted(c.Describe(name))
		}
	}
	settled := func(want []string) {
		ACLSettle(want, func() []string { return Sorted(c.Describe("alice_bob")) })
		describeAll()
	}
	switch phase {
	case "create":
		created, errs := c.Create()
		res.Created, res.CreateErr = Sorted(created), append(res.CreateErr, errs...)
		res.InvalidCreate = c.CreateInvalid()
		settled(res.Created)
	case "delete":
		for _, name := range ACLDeleteFilters {
			deleted, errs := c.Delete(name)
			for _, e := range errs {
				res.DeleteErr = append(res.DeleteErr, name+": "+e)
			}
			res.Deleted[name] = Sorted(deleted)
		}
		settled(nil)
	case "describe":
		describeAll()
	default:
		return res, fmt.Errorf("unknown -acl-phase %q", phase)
	}
	return res, nil
}
