package scen

// The report of the ACL admin scenarios (cmd/*/acls.go): one shape for every client, judged by
// tests/client_acls.py.

import (
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
