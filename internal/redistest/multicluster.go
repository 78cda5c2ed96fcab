package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// CLI is where the Debian package redis-tools (which redis-server depends
// on) installs redis-cli, which forms the clusters of [StartClusterOf].
const CLI = "/usr/bin/redis-cli"

const (
	// clusterPatience bounds the wait for a cluster to form, to fail over
	// or to settle: several processes on a loaded two-core machine.
	clusterPatience = 2 * startPatience
	// defaultNodeTimeout is StartClusterOf's cluster-node-timeout: a
	// failover begins about a second after a master dies.
	defaultNodeTimeout = time.Second
	// pollEvery is how often a wait asks the nodes again.
	pollEvery = 50 * time.Millisecond
	// hashSlots is the number of hash slots of a Redis Cluster.
	hashSlots = 16384
)

// Cluster is a Redis Cluster of redis-server processes owned by a test:
// masters that share the hash slots, and replicas that take over when their
// master dies. Each node is a [Server], with its controls (Kill, Restart,
// Pause). Roles change with failovers, so the methods that name masters and
// replicas ask the running nodes each time. Its methods are safe for
// concurrent use.
type Cluster struct {
	nodes    []*Server
	masters  int
	replicas int                       // per master
	admin    map[*Server]*redis.Client // plain clients, for CLUSTER NODES and INFO

	mu      sync.Mutex
	clients map[*redis.ClusterClient]struct{} // from Client: refreshed by the waits
}

// StartClusterOf starts a Redis Cluster of masters*(1+replicasPerMaster)
// redis-servers on free loopback ports, each as [Start] starts one (its own
// directory, the same options, stopped when the test ends), in cluster mode
// with a cluster-node-timeout of 1s unless [WithClusterNodeTimeout] says
// otherwise. It forms the cluster with `redis-cli --cluster create` and
// returns once every node says the cluster is ok, the masters serve all
// 16384 slots and every replica is in sync with its master.
//
// # Errors
//
// It fails the test with "install redis-tools (make deps)" when redis-cli
// is missing, when masters < 3 (Redis Cluster's minimum) or
// replicasPerMaster < 0, and, with each node's view of itself and the end
// of its log, when the cluster does not form within a minute.
func StartClusterOf(t testing.TB, masters, replicasPerMaster int, opts ...Option) *Cluster {
	t.Helper()
	cfg := config{cli: CLI}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case masters < 3:
		t.Fatalf("redistest: StartClusterOf(%d masters): Redis Cluster needs at least 3", masters)
	case replicasPerMaster < 0:
		t.Fatalf("redistest: StartClusterOf(%d replicas per master): want 0 or more", replicasPerMaster)
	}
	if _, err := os.Stat(cfg.cli); err != nil {
		t.Fatalf("redistest: %s not found: install redis-tools (make deps): %v", cfg.cli, err)
	}
	nodeOpts := make([]Option, 0, len(opts)+2)
	nodeOpts = append(nodeOpts, WithClusterNodeTimeout(defaultNodeTimeout))
	nodeOpts = append(nodeOpts, opts...)
	nodeOpts = append(nodeOpts, func(c *config) { c.cluster = true })
	c := &Cluster{
		masters:  masters,
		replicas: replicasPerMaster,
		admin:    map[*Server]*redis.Client{},
		clients:  map[*redis.ClusterClient]struct{}{},
	}
	for range masters * (1 + replicasPerMaster) {
		s := Start(t, nodeOpts...)
		a := redis.NewClient(s.Options())
		t.Cleanup(func() { _ = a.Close() })
		c.nodes, c.admin[s] = append(c.nodes, s), a
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterPatience)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	cmd := exec.CommandContext(ctx, cfg.cli, args...)
	cmd.SysProcAttr = sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: %s %s: %v\n%s%s", cfg.cli, strings.Join(args, " "), err, out, c.describe())
	}
	c.wait(t, "form", func(_ context.Context, o *observation) error { return c.formed(o) })
	return c
}

// Addrs returns every node's address, masters and replicas: the seed
// addresses of a cluster client. They stay the same across restarts.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Nodes returns every node, whatever its role and whether it runs, in the
// order they were started.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Options returns go-redis options for a cluster client of c, as
// [Server.Options] does for one server: context deadlines bound every call,
// a refused dial is not retried within a command (a killed master would
// otherwise cost seconds per command), up to 8 redirections (MOVED, ASK) or
// retries per command, and a slot map at most a second old once traffic
// flows, so that a client finds a promoted replica soon after a failover
// without waiting for go-redis's default minute. Each call returns a fresh
// copy to adjust.
//
// As go-redis does by default, a command whose reply did not come within
// the read timeout (5s) is sent again: on a very loaded machine a script
// may then run twice.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                      c.Addrs(),
		ContextTimeoutEnabled:      true,
		DialerRetries:              1,
		DialTimeout:                time.Second,
		ReadTimeout:                5 * time.Second,
		WriteTimeout:               5 * time.Second,
		MaxRedirects:               8,
		ClusterStateReloadInterval: time.Second,
	}
}

// Client returns a go-redis cluster client with [Cluster.Options], closed
// when the test ends. [Cluster.WaitFailover] and [Cluster.WaitHealthy]
// reload its slot map before they return, so that its next command goes
// to the new master at once.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(c.Options())
	c.mu.Lock()
	c.clients[cc] = struct{}{}
	c.mu.Unlock()
	t.Cleanup(func() {
		c.mu.Lock()
		delete(c.clients, cc)
		c.mu.Unlock()
		_ = cc.Close()
	})
	return cc
}

// Masters returns the running masters that serve slots, as the running
// nodes agree they are now, in the order the nodes were started.
func (c *Cluster) Masters(t testing.TB) []*Server {
	t.Helper()
	o := c.wait(t, "agree on its masters", nil)
	return c.pick(o, func(n clusterNode) bool { return n.has("master") && len(n.slots) > 0 })
}

// Replicas returns the running replicas, as the running nodes agree they
// are now, in the order the nodes were started.
func (c *Cluster) Replicas(t testing.TB) []*Server {
	t.Helper()
	o := c.wait(t, "agree on its replicas", nil)
	return c.pick(o, func(n clusterNode) bool { return n.has("slave") })
}

// ReplicasOf returns the running replicas of master, as the running nodes
// agree they are now: the candidates for its promotion.
func (c *Cluster) ReplicasOf(t testing.TB, master *Server) []*Server {
	t.Helper()
	o := c.wait(t, "agree on the replicas of "+master.Addr(), nil)
	id, ok := o.id(master)
	if !ok {
		t.Fatalf("redistest: %s is not in the cluster's view%s", master.Addr(), c.describe())
	}
	return c.pick(o, func(n clusterNode) bool { return n.has("slave") && n.of == id })
}

// MasterOf returns the node that serves key's slot now, as the running
// nodes agree: right after its master was killed, and until a replica
// takes over, that is the dead master.
func (c *Cluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	slot := c.keySlot(t, key)
	var m *Server
	c.wait(t, fmt.Sprintf("agree on the master of slot %d", slot), func(_ context.Context, o *observation) error {
		var err error
		m, err = o.masterOf(slot)
		return err
	})
	return m
}

// KillMasterOf kills the master of key's slot with SIGKILL, a crash, and
// returns it, for a later Restart. Follow it with [Cluster.WaitFailover].
func (c *Cluster) KillMasterOf(t testing.TB, key string) *Server {
	t.Helper()
	m := c.MasterOf(t, key)
	m.Kill(t)
	return m
}

// WaitFailover waits until key's slot is served by a running master again
// (after its master was killed: until a replica has been promoted) and the
// cluster is healthy again in the running nodes' view (see
// [Cluster.WaitHealthy]), and returns the slot's master. The clients from
// [Cluster.Client] then send the slot to it. With the slot's master alive
// it returns that master once the cluster is healthy.
func (c *Cluster) WaitFailover(t testing.TB, key string) *Server {
	t.Helper()
	slot := c.keySlot(t, key)
	var m *Server
	c.wait(t, fmt.Sprintf("fail slot %d over", slot), func(ctx context.Context, o *observation) error {
		if err := o.healthy(); err != nil {
			return err
		}
		var err error
		if m, err = o.masterOf(slot); err != nil {
			return err
		}
		return c.refreshClients(ctx, key, m)
	})
	return m
}

// WaitHealthy waits until every running node says the cluster is ok, they
// agree on who serves which slot, every slot is served by a running
// master, and every running replica (a restarted old master among them) is
// in sync with a running master; then it reloads the slot maps of the
// clients from [Cluster.Client].
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	c.wait(t, "become healthy", func(ctx context.Context, o *observation) error {
		if err := o.healthy(); err != nil {
			return err
		}
		return c.refreshClients(ctx, "", nil)
	})
}

// pick returns the running servers whose node in o's view satisfies
// keep, in the order the nodes were started.
func (c *Cluster) pick(o *observation, keep func(clusterNode) bool) []*Server {
	var out []*Server
	for _, s := range c.nodes {
		if !slices.Contains(o.answering, s) {
			continue
		}
		if id, ok := o.id(s); ok {
			if n, ok := o.node(id); ok && keep(n) {
				out = append(out, s)
			}
		}
	}
	return out
}

// keySlot asks a running node for key's hash slot.
func (c *Cluster) keySlot(t testing.TB, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterPatience)
	defer cancel()
	var errs []error
	for _, s := range c.nodes {
		if !s.answering() {
			continue
		}
		slot, err := c.admin[s].ClusterKeySlot(ctx, key).Result()
		if err == nil {
			return int(slot)
		}
		errs = append(errs, fmt.Errorf("%s: %w", s.Addr(), err))
	}
	t.Fatalf("redistest: CLUSTER KEYSLOT %q: no running node answered: %v", key, errors.Join(errs...))
	return 0
}

// refreshClients reloads the slot map of every client from Client (its
// ForEachMaster reloads it first, synchronously), and, with a key, checks
// that each sends the key to master.
func (c *Cluster) refreshClients(ctx context.Context, key string, master *Server) error {
	c.mu.Lock()
	clients := make([]*redis.ClusterClient, 0, len(c.clients))
	for cc := range c.clients {
		clients = append(clients, cc)
	}
	c.mu.Unlock()
	for _, cc := range clients {
		if err := cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil }); err != nil {
			return fmt.Errorf("reloading a cluster client's slot map: %w", err)
		}
		if master == nil {
			continue
		}
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return fmt.Errorf("a cluster client's master for %q: %w", key, err)
		}
		if got := m.Options().Addr; got != master.Addr() {
			return fmt.Errorf("a cluster client still sends %q to %s, not %s", key, got, master.Addr())
		}
	}
	return nil
}

// wait polls the running nodes until they agree on the cluster and check,
// if any, accepts what they say, and returns that observation; it fails
// the test after clusterPatience, saying what it waited for and why not.
func (c *Cluster) wait(t testing.TB, what string, check func(context.Context, *observation) error) *observation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterPatience)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last error
	for {
		o, err := c.observe(ctx)
		if err == nil && check != nil {
			err = check(ctx, o)
		}
		if err == nil {
			return o
		}
		if last == nil || ctx.Err() == nil { // keep the reason, not the deadline
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("redistest: the cluster did not %s within %s: %v%s", what, clusterPatience, last, c.describe())
			return nil
		case <-tick.C:
		}
	}
}

// observation is what the running nodes said of the cluster at one moment,
// when they agreed.
type observation struct {
	view      []clusterNode      // the nodes, as every answering node sees them
	servers   map[string]*Server // node id → its server
	answering []*Server          // the running nodes, which answered
	state     map[*Server]string // cluster_state, per answering node
	linkUp    map[*Server]bool   // master_link_status:up, per answering node
}

// observe asks every running node for its view of the cluster (CLUSTER
// NODES), its state (CLUSTER INFO) and its replication link (INFO
// replication). It fails when a node does not answer or two nodes' views
// differ: gossip has not settled yet.
func (c *Cluster) observe(ctx context.Context) (*observation, error) {
	o := &observation{servers: map[string]*Server{}, state: map[*Server]string{}, linkUp: map[*Server]bool{}}
	var first *Server
	for _, s := range c.nodes {
		if !s.answering() {
			continue
		}
		a := c.admin[s]
		text, err := a.ClusterNodes(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES on %s: %w", s.Addr(), err)
		}
		view, err := parseClusterNodes(text)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES on %s: %w", s.Addr(), err)
		}
		for _, n := range view {
			if n.myself {
				o.servers[n.id] = s
			}
		}
		view = normalize(view)
		if first == nil {
			first, o.view = s, view
		} else if !slices.EqualFunc(o.view, view, clusterNode.equal) {
			return nil, fmt.Errorf("%s and %s do not see the same cluster yet", first.Addr(), s.Addr())
		}
		info, err := a.ClusterInfo(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("CLUSTER INFO on %s: %w", s.Addr(), err)
		}
		repl, err := a.Info(ctx, "replication").Result()
		if err != nil {
			return nil, fmt.Errorf("INFO replication on %s: %w", s.Addr(), err)
		}
		o.answering = append(o.answering, s)
		o.state[s] = infoField(info, "cluster_state")
		o.linkUp[s] = infoField(repl, "master_link_status") == "up"
	}
	if first == nil {
		return nil, errors.New("no node of the cluster is running")
	}
	for _, n := range o.view { // the nodes that are down, by address
		if _, ok := o.servers[n.id]; ok {
			continue
		}
		for _, s := range c.nodes {
			if s.Addr() == n.addr {
				o.servers[n.id] = s
			}
		}
	}
	return o, nil
}

// formed reports nil once the cluster is healthy with every node known
// and the shape StartClusterOf was asked for.
func (c *Cluster) formed(o *observation) error {
	if err := o.healthy(); err != nil {
		return err
	}
	if len(o.view) != len(c.nodes) || len(o.servers) != len(c.nodes) {
		return fmt.Errorf("the nodes know %d nodes (%d of ours), want %d", len(o.view), len(o.servers), len(c.nodes))
	}
	masters := 0
	for _, n := range o.view {
		if !n.has("master") || len(n.slots) == 0 {
			continue
		}
		masters++
		replicas := 0
		for _, r := range o.view {
			if r.has("slave") && r.of == n.id {
				replicas++
			}
		}
		if replicas != c.replicas {
			return fmt.Errorf("master %s has %d replicas, want %d", n.addr, replicas, c.replicas)
		}
	}
	if masters != c.masters {
		return fmt.Errorf("%d masters serve slots, want %d", masters, c.masters)
	}
	return nil
}

// healthy reports nil when the cluster serves every slot: every answering
// node says it is ok, every slot is served by a master that runs, and
// every running replica is in sync with a master that runs.
func (o *observation) healthy() error {
	for _, s := range o.answering {
		if st := o.state[s]; st != "ok" {
			return fmt.Errorf("%s says cluster_state:%s", s.Addr(), st)
		}
	}
	var served [hashSlots]bool
	count := 0
	for _, n := range o.view {
		if n.has("handshake") || n.has("noaddr") {
			return fmt.Errorf("node %s (%s) is still joining", n.id, n.addr)
		}
		up := o.up(n)
		if up && n.has("fail") {
			return fmt.Errorf("%s runs but is still flagged as failed", n.addr)
		}
		if len(n.slots) > 0 && (!up || n.has("fail")) {
			return fmt.Errorf("%s, which is down, still serves slots %s", n.addr, n.slotList())
		}
		for _, r := range n.slots {
			for slot := r.first; slot <= r.last; slot++ {
				if !served[slot] {
					served[slot] = true
					count++
				}
			}
		}
		if !n.has("slave") || !up {
			continue
		}
		m, ok := o.node(n.of)
		if !ok || !o.up(m) || m.has("fail") {
			return fmt.Errorf("replica %s follows node %s, which is down", n.addr, n.of)
		}
		if !o.linkUp[o.servers[n.id]] {
			return fmt.Errorf("replica %s is not in sync with its master %s yet", n.addr, m.addr)
		}
	}
	if count != hashSlots {
		return fmt.Errorf("running masters serve %d of %d slots", count, hashSlots)
	}
	return nil
}

// up reports whether n is one of the nodes that answered.
func (o *observation) up(n clusterNode) bool {
	s, ok := o.servers[n.id]
	return ok && slices.Contains(o.answering, s)
}

// node returns the node of the view with this id.
func (o *observation) node(id string) (clusterNode, bool) {
	for _, n := range o.view {
		if n.id == id {
			return n, true
		}
	}
	return clusterNode{}, false
}

// id returns the node id of s.
func (o *observation) id(s *Server) (string, bool) {
	for id, x := range o.servers {
		if x == s {
			return id, true
		}
	}
	return "", false
}

// masterOf returns the server of the master that serves slot.
func (o *observation) masterOf(slot int) (*Server, error) {
	for _, n := range o.view {
		if !n.has("master") || !n.serves(slot) {
			continue
		}
		if s, ok := o.servers[n.id]; ok {
			return s, nil
		}
		return nil, fmt.Errorf("slot %d is served by %s, none of this cluster's nodes", slot, n.addr)
	}
	return nil, fmt.Errorf("no master serves slot %d", slot)
}

// describe says what each node says of itself, with the end of its log,
// for failure messages.
func (c *Cluster) describe() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	for _, s := range c.nodes {
		fmt.Fprintf(&b, "\n--- node %s: ", s.Addr())
		if !s.answering() {
			b.WriteString("not running (stopped, killed or paused)\n")
		} else {
			a := c.admin[s]
			nodes, err1 := a.ClusterNodes(ctx).Result()
			info, err2 := a.ClusterInfo(ctx).Result()
			repl, err3 := a.Info(ctx, "replication").Result()
			if err := errors.Join(err1, err2, err3); err != nil {
				fmt.Fprintf(&b, "does not answer: %v\n", err)
			} else {
				myself := "(no myself line)"
				for line := range strings.SplitSeq(nodes, "\n") {
					if strings.Contains(line, "myself") {
						myself = strings.TrimSpace(line)
					}
				}
				fmt.Fprintf(&b, "cluster_state:%s role:%s master_link_status:%s\n%s\n",
					infoField(info, "cluster_state"), infoField(repl, "role"), infoField(repl, "master_link_status"), myself)
			}
		}
		b.WriteString(s.logTail())
	}
	return b.String()
}

// answering reports whether the server runs and is not paused, so that it
// answers commands.
func (s *Server) answering() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil && !s.paused
}

// infoField returns the value of one field of an INFO or CLUSTER INFO
// answer, "" when it is absent.
func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), name+":"); ok {
			return v
		}
	}
	return ""
}

// clusterNode is one line of CLUSTER NODES: a node of the cluster as the
// node that answered sees it.
type clusterNode struct {
	id     string
	addr   string   // host:port, without the bus port and hostname
	flags  []string // master, slave, fail, fail?, handshake…, without myself
	myself bool     // the node that answered
	of     string   // a replica's master's id; "" for a master
	slots  []slotRange
}

// slotRange is a range of hash slots, first and last included.
type slotRange struct{ first, last int }

// has reports whether n carries flag.
func (n clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

// serves reports whether slot is one of n's.
func (n clusterNode) serves(slot int) bool {
	return slices.ContainsFunc(n.slots, func(r slotRange) bool { return r.first <= slot && slot <= r.last })
}

// equal reports whether two nodes are described alike.
func (n clusterNode) equal(m clusterNode) bool {
	return n.id == m.id && n.addr == m.addr && n.myself == m.myself && n.of == m.of &&
		slices.Equal(n.flags, m.flags) && slices.Equal(n.slots, m.slots)
}

// slotList writes n's slots as CLUSTER NODES does, for messages.
func (n clusterNode) slotList() string {
	parts := make([]string, len(n.slots))
	for i, r := range n.slots {
		parts[i] = strconv.Itoa(r.first)
		if r.last != r.first {
			parts[i] += "-" + strconv.Itoa(r.last)
		}
	}
	return strings.Join(parts, " ")
}

// normalize returns view as every node sees it alike: sorted by id,
// without who answered, and without the suspicions (fail?) that each node
// forms on its own before the others agree that a node failed.
func normalize(view []clusterNode) []clusterNode {
	out := make([]clusterNode, len(view))
	for i, n := range view {
		n.myself = false
		n.flags = slices.DeleteFunc(slices.Clone(n.flags), func(f string) bool { return f == "fail?" })
		out[i] = n
	}
	slices.SortFunc(out, func(a, b clusterNode) int { return strings.Compare(a.id, b.id) })
	return out
}

// parseClusterNodes parses the answer of CLUSTER NODES: one node a line,
//
//	<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state> <slot>...
//
// where a slot is N or N-M; the slots being migrated ([N->-id], [N-<-id])
// are left out: they still belong to the node listed for them.
func parseClusterNodes(text string) ([]clusterNode, error) {
	var nodes []clusterNode
	for i, line := range strings.Split(strings.TrimSpace(text), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 8 {
			return nil, fmt.Errorf("line %d %q: %d fields, want at least 8", i+1, line, len(fields))
		}
		n := clusterNode{id: fields[0], of: fields[3]}
		if n.of == "-" {
			n.of = ""
		}
		addr, _, _ := strings.Cut(fields[1], ",")
		n.addr, _, _ = strings.Cut(addr, "@")
		for f := range strings.SplitSeq(fields[2], ",") {
			switch f {
			case "myself":
				n.myself = true
			case "noflags", "":
			default:
				n.flags = append(n.flags, f)
			}
		}
		for _, f := range fields[8:] {
			if strings.HasPrefix(f, "[") {
				continue
			}
			r, err := parseSlotRange(f)
			if err != nil {
				return nil, fmt.Errorf("line %d %q: %w", i+1, line, err)
			}
			n.slots = append(n.slots, r)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// parseSlotRange parses "N" or "N-M", 0 <= N <= M < 16384.
func parseSlotRange(s string) (slotRange, error) {
	a, b, isRange := strings.Cut(s, "-")
	first, err := strconv.Atoi(a)
	if err != nil {
		return slotRange{}, fmt.Errorf("slot %q: %w", s, err)
	}
	last := first
	if isRange {
		if last, err = strconv.Atoi(b); err != nil {
			return slotRange{}, fmt.Errorf("slot %q: %w", s, err)
		}
	}
	if first < 0 || last < first || last >= hashSlots {
		return slotRange{}, fmt.Errorf("slot %q: want N or N-M with 0 <= N <= M < %d", s, hashSlots)
	}
	return slotRange{first, last}, nil
}
