package redistest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseClusterNodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want []clusterNode
		err  string
	}{
		{"Master", "a1 127.0.0.1:7000@17000 myself,master - 0 1795975858000 1 connected 0-5460 5462\n",
			[]clusterNode{{id: "a1", addr: "127.0.0.1:7000", flags: []string{"master"}, myself: true, slots: []slotRange{{0, 5460}, {5462, 5462}}}}, ""},
		{"Replica", "b2 127.0.0.1:7001@17001 slave a1 0 1795975858634 1 connected",
			[]clusterNode{{id: "b2", addr: "127.0.0.1:7001", flags: []string{"slave"}, of: "a1"}}, ""},
		{"FailedWithHostname", "c3 127.0.0.1:7002@17002,redis-3 master,fail - 1795975859303 1795975859000 3 disconnected",
			[]clusterNode{{id: "c3", addr: "127.0.0.1:7002", flags: []string{"master", "fail"}}}, ""},
		{"MigratingSlotsLeftOut", "d4 127.0.0.1:7003@17003 master,fail? - 0 0 4 connected 100-200 [201->-e5] [202-<-e5]",
			[]clusterNode{{id: "d4", addr: "127.0.0.1:7003", flags: []string{"master", "fail?"}, slots: []slotRange{{100, 200}}}}, ""},
		{"NoFlags", "e5 :7004@17004 noflags - 0 0 0 connected",
			[]clusterNode{{id: "e5", addr: ":7004"}}, ""},
		{"TwoLines", "a1 127.0.0.1:7000@17000 master - 0 0 1 connected 0-16383\r\nb2 127.0.0.1:7001@17001 myself,slave a1 0 0 1 connected\r\n",
			[]clusterNode{
				{id: "a1", addr: "127.0.0.1:7000", flags: []string{"master"}, slots: []slotRange{{0, 16383}}},
				{id: "b2", addr: "127.0.0.1:7001", flags: []string{"slave"}, myself: true, of: "a1"},
			}, ""},
		{"TooFewFields", "a1 127.0.0.1:7000@17000 master - 0 0 1", nil, "7 fields, want at least 8"},
		{"Empty", "", nil, "0 fields"},
		{"SlotTooHigh", "a1 127.0.0.1:7000@17000 master - 0 0 1 connected 0-16384", nil, `slot "0-16384"`},
		{"SlotsReversed", "a1 127.0.0.1:7000@17000 master - 0 0 1 connected 10-9", nil, `slot "10-9"`},
		{"SlotNotANumber", "a1 127.0.0.1:7000@17000 master - 0 0 1 connected x", nil, `slot "x"`},
		{"NegativeSlot", "a1 127.0.0.1:7000@17000 master - 0 0 1 connected -1", nil, `slot "-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseClusterNodes(tt.text)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseClusterNodes = %+v, %v; want an error saying %q", got, err, tt.err)
				}
				return
			}
			if err != nil || !slices.EqualFunc(got, tt.want, clusterNode.equal) {
				t.Fatalf("parseClusterNodes = %+v, %v\nwant %+v", got, err, tt.want)
			}
		})
	}
}

// FuzzParseClusterNodes: whatever CLUSTER NODES says, the parser does not
// panic, and what it accepts is well formed: slots in range, addresses
// without bus port or hostname, and a view that normalizes to itself.
func FuzzParseClusterNodes(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string) {
		nodes, err := parseClusterNodes(text)
		if err != nil {
			return
		}
		for _, n := range nodes {
			if n.id == "" || strings.ContainsAny(n.addr, "@,") || n.has("myself") {
				t.Errorf("node %+v: empty id, bus port or hostname in the address, or myself among the flags", n)
			}
			for _, r := range n.slots {
				if r.first < 0 || r.last < r.first || r.last >= hashSlots {
					t.Errorf("node %s: slots %d-%d", n.id, r.first, r.last)
				}
			}
		}
		norm := normalize(nodes)
		if len(norm) != len(nodes) || !slices.EqualFunc(norm, normalize(norm), clusterNode.equal) {
			t.Errorf("normalize is not idempotent on %+v", nodes)
		}
	})
}

// TestNormalizeAgrees: two nodes that see the same cluster agree once who
// answered and their own suspicions are set aside; a different owner of a
// slot or a failure they agree on is a different cluster.
func TestNormalizeAgrees(t *testing.T) {
	t.Parallel()
	const fromA = "a 127.0.0.1:1@11 myself,master - 0 0 1 connected 0-16383\nb 127.0.0.1:2@12 slave a 0 0 1 connected\n"
	tests := []struct {
		name  string
		fromB string
		agree bool
	}{
		{"Same", "b 127.0.0.1:2@12 myself,slave a 0 5 1 connected\na 127.0.0.1:1@11 master - 0 7 1 connected 0-16383\n", true},
		{"OwnSuspicion", "b 127.0.0.1:2@12 myself,slave a 0 5 1 connected\na 127.0.0.1:1@11 master,fail? - 9 7 1 disconnected 0-16383\n", true},
		{"AgreedFailure", "b 127.0.0.1:2@12 myself,slave a 0 5 1 connected\na 127.0.0.1:1@11 master,fail - 9 7 1 disconnected 0-16383\n", false},
		{"OtherOwner", "b 127.0.0.1:2@12 myself,master - 0 5 2 connected 0-16383\na 127.0.0.1:1@11 master - 0 7 1 connected\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, errA := parseClusterNodes(fromA)
			b, errB := parseClusterNodes(tt.fromB)
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			if got := slices.EqualFunc(normalize(a), normalize(b), clusterNode.equal); got != tt.agree {
				t.Errorf("agree = %t, want %t", got, tt.agree)
			}
		})
	}
}

// formedNodes is a cluster of three masters (a, b, c) with one replica
// each (d, e, f), as CLUSTER NODES says it.
const formedNodes = `a 127.0.0.1:1@11 master - 0 0 1 connected 0-5460
b 127.0.0.1:2@12 master - 0 0 2 connected 5461-10922
c 127.0.0.1:3@13 master - 0 0 3 connected 10923-16383
d 127.0.0.1:4@14 slave a 0 0 1 connected
e 127.0.0.1:5@15 slave b 0 0 2 connected
f 127.0.0.1:6@16 slave c 0 0 3 connected`

// failedOverNodes is formedNodes after c died and f took its slots over.
const failedOverNodes = `a 127.0.0.1:1@11 master - 0 0 1 connected 0-5460
b 127.0.0.1:2@12 master - 0 0 2 connected 5461-10922
c 127.0.0.1:3@13 master,fail - 0 0 3 disconnected
d 127.0.0.1:4@14 slave a 0 0 1 connected
e 127.0.0.1:5@15 slave b 0 0 2 connected
f 127.0.0.1:6@16 master - 0 0 7 connected 10923-16383`

// observed is an observation of a cluster as CLUSTER NODES says it, every
// node answering with its cluster ok and its link up but those named.
type observed struct {
	nodes    string
	down     []string          // the ids of the nodes that do not answer
	state    map[string]string // cluster_state by id, "ok" when absent
	linkDown []string          // the ids of the replicas out of sync
}

// build returns the observation and the servers by id.
func (x observed) build(t *testing.T) (*observation, map[string]*Server) {
	t.Helper()
	view, err := parseClusterNodes(x.nodes)
	if err != nil {
		t.Fatal(err)
	}
	o := &observation{view: normalize(view), servers: map[string]*Server{}, state: map[*Server]string{}, linkUp: map[*Server]bool{}}
	for i, n := range o.view {
		s := &Server{port: i + 1}
		o.servers[n.id] = s
		if slices.Contains(x.down, n.id) {
			continue
		}
		o.answering = append(o.answering, s)
		o.state[s] = "ok"
		if st, ok := x.state[n.id]; ok {
			o.state[s] = st
		}
		o.linkUp[s] = n.has("slave") && !slices.Contains(x.linkDown, n.id)
	}
	return o, o.servers
}

func TestObservationHealthy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		obs  observed
		want string // "" for healthy
	}{
		{"Formed", observed{nodes: formedNodes}, ""},
		{"StateNotOK", observed{nodes: formedNodes, state: map[string]string{"e": "fail"}}, "127.0.0.1:5 says cluster_state:fail"},
		{"MasterDown", observed{nodes: formedNodes, down: []string{"c"}}, "127.0.0.1:3, which is down, still serves slots 10923-16383"},
		{"ReplicaDown", observed{nodes: formedNodes, down: []string{"f"}}, ""},
		{"ReplicaOutOfSync", observed{nodes: formedNodes, linkDown: []string{"d"}}, "replica 127.0.0.1:4 is not in sync with its master 127.0.0.1:1"},
		{"FailedOver", observed{nodes: failedOverNodes, down: []string{"c"}}, ""},
		{"RestartedStillFlagged", observed{nodes: failedOverNodes}, "127.0.0.1:3 runs but is still flagged as failed"},
		{"ReplicaOfTheDead", observed{nodes: failedOverNodes + "\ng 127.0.0.1:7@17 slave c 0 0 3 connected", down: []string{"c"}},
			"replica 127.0.0.1:7 follows node c, which is down"},
		{"Uncovered", observed{nodes: strings.Replace(formedNodes, "0-5460", "0-5000", 1)}, "running masters serve 15924 of 16384 slots"},
		{"Joining", observed{nodes: formedNodes + "\nz 127.0.0.1:9@19 handshake - 0 0 0 connected"}, "node z (127.0.0.1:9) is still joining"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, _ := tt.obs.build(t)
			err := o.healthy()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("healthy() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestClusterFormed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		obs      observed
		nodes    int
		replicas int
		want     string // "" for formed
	}{
		{"Formed", observed{nodes: formedNodes}, 6, 1, ""},
		{"NotHealthy", observed{nodes: formedNodes, down: []string{"a"}}, 6, 1, "which is down"},
		{"NodeMissing", observed{nodes: formedNodes}, 7, 1, "the nodes know 6 nodes (6 of ours), want 7"},
		{"ReplicaMissing", observed{nodes: failedOverNodes, down: []string{"c"}}, 6, 1, "master 127.0.0.1:6 has 0 replicas, want 1"},
		{"TooManyReplicas", observed{nodes: formedNodes}, 6, 0, "has 1 replicas, want 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, servers := tt.obs.build(t)
			c := &Cluster{masters: 3, replicas: tt.replicas}
			for _, s := range servers {
				c.nodes = append(c.nodes, s)
			}
			for len(c.nodes) < tt.nodes {
				c.nodes = append(c.nodes, &Server{})
			}
			err := c.formed(o)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("formed() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestObservationMasterOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		obs   observed
		slot  int
		want  string // the master's id, or an error's text
		isErr bool
	}{
		{"First", observed{nodes: formedNodes}, 0, "a", false},
		{"Last", observed{nodes: formedNodes}, 16383, "c", false},
		{"Boundary", observed{nodes: formedNodes}, 5461, "b", false},
		{"DeadMasterBeforeFailover", observed{nodes: formedNodes, down: []string{"c"}}, 16383, "c", false},
		{"AfterFailover", observed{nodes: failedOverNodes, down: []string{"c"}}, 16383, "f", false},
		{"Unserved", observed{nodes: strings.Replace(formedNodes, "0-5460", "1-5460", 1)}, 0, "no master serves slot 0", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, servers := tt.obs.build(t)
			got, err := o.masterOf(tt.slot)
			switch {
			case tt.isErr && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("masterOf(%d) = %v, %v; want an error saying %q", tt.slot, got, err, tt.want)
			case !tt.isErr && (err != nil || got != servers[tt.want]):
				t.Errorf("masterOf(%d) = %v, %v; want node %s", tt.slot, got, err, tt.want)
			}
		})
	}
}

func TestStartClusterOfFailsClearly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		masters, replicas int
		opts              []Option
		want              string
	}{
		{"MissingCLI", 3, 1, []Option{func(c *config) { c.cli = filepath.Join(t.TempDir(), "redis-cli") }},
			"install redis-tools (make deps)"},
		{"TwoMasters", 2, 1, nil, "StartClusterOf(2 masters): Redis Cluster needs at least 3"},
		{"NegativeReplicas", 3, -1, nil, "StartClusterOf(-1 replicas per master): want 0 or more"},
		{"ZeroNodeTimeout", 3, 1, []Option{WithClusterNodeTimeout(0)}, "WithClusterNodeTimeout(0s): want a positive number of milliseconds"},
		{"SubMillisecondNodeTimeout", 3, 1, []Option{WithClusterNodeTimeout(1500 * time.Microsecond)}, "WithClusterNodeTimeout(1.5ms)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &fatalRecorder{TB: t}
			done := make(chan *Cluster)
			go func() {
				defer close(done)
				done <- StartClusterOf(rec, tt.masters, tt.replicas, tt.opts...)
			}()
			if c, ok := <-done; ok {
				t.Fatalf("StartClusterOf returned a cluster of %v", c.Addrs())
			}
			if !strings.Contains(rec.msg, tt.want) {
				t.Errorf("StartClusterOf failed with %q, want it to say %q", rec.msg, tt.want)
			}
		})
	}
}
