package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/plugins/grant"
)

// Grants: what an operator allows a plugin (plugins/grant). The CLI reads
// and changes them through the API; `weft serve` applies grants_file at
// start; `weft plugin call` builds them from its flags.

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// pairFlag is a repeatable KEY=VALUE flag; a later value for a key
// replaces an earlier one.
type pairFlag struct {
	what  string // "KEY=VALUE", for messages
	keys  []string
	value map[string]string
}

func newPairFlag(what string) *pairFlag { return &pairFlag{what: what, value: map[string]string{}} }

func (p *pairFlag) String() string {
	if p == nil {
		return ""
	}
	return strings.Join(p.keys, ",")
}

func (p *pairFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		// Not quoted back: the value may be a secret given by mistake.
		return fmt.Errorf("want %s", p.what)
	}
	if _, seen := p.value[k]; !seen {
		p.keys = append(p.keys, k)
	}
	p.value[k] = v
	return nil
}

// rateFlag is --rate N/PERIOD: 10/1s, 600/1m, and with a unit alone
// one of it, 10/s.
type rateFlag struct {
	text  string
	count int
	per   time.Duration
}

func (r *rateFlag) String() string {
	if r == nil {
		return ""
	}
	return r.text
}

func (r *rateFlag) Set(s string) error {
	n, per, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(n)
	if !ok || err != nil {
		return fmt.Errorf("want N/PERIOD, such as 10/1s or 600/1m, got %q", s)
	}
	if per != "" && (per[0] < '0' || per[0] > '9') && per[0] != '.' {
		per = "1" + per // "10/s"
	}
	d, err := time.ParseDuration(per)
	if err != nil {
		return fmt.Errorf("want N/PERIOD, such as 10/1s or 600/1m: %q is not a period such as 1s or 1m", per)
	}
	r.text, r.count, r.per = s, count, d
	return nil
}

// grantFlags are the flags that name grant entries.
type grantFlags struct {
	hosts   listFlag
	private bool
	// rate, burst, maxWait and rateKey give the --host rules of the
	// command a rate limit (grant.RateLimit).
	rate    rateFlag
	burst   int
	maxWait time.Duration
	rateKey string
	config  *pairFlag
	secrets *pairFlag
}

func (f *grantFlags) add(fs *flag.FlagSet) {
	f.config = newPairFlag("KEY=VALUE")
	f.secrets = newPairFlag("NAME=REF, REF being env:VARIABLE or file:/path")
	fs.Var(&f.hosts, "host", "a host `PATTERN` the plugin's requests may reach: [http://]host[:port], *.example.com, an IP (repeatable)")
	fs.BoolVar(&f.private, "private-networks", false, "let the --host rules of this command reach loopback and private addresses")
	fs.Var(&f.rate, "rate", "limit the --host rules of this command to `N/PERIOD` requests (10/1s, 600/1m), on a budget shared across plugins and nodes")
	fs.IntVar(&f.burst, "burst", 0, "with --rate: how many `requests` may go at once after a quiet period (default 1)")
	fs.DurationVar(&f.maxWait, "max-wait", 0, "with --rate: how long a request may wait for its turn before the plugin gets a 429 instead, 0 to 5m (default 0)")
	fs.StringVar(&f.rateKey, "rate-key", "", "with --rate: the `KEY` of the budget, which every rule with the same key shares (default: each rule's pattern)")
	fs.Var(f.config, "config", "a configuration value `KEY=VALUE` (repeatable)")
	fs.Var(f.secrets, "secret", "a secret `NAME=REF`, REF being env:VARIABLE or file:/path: where each node finds the value (repeatable)")
}

// set builds the grant document of the flags alone.
func (f *grantFlags) set() *grant.Set {
	s := &grant.Set{}
	for _, h := range f.hosts {
		s.Hosts = append(s.Hosts, grant.Host{Pattern: h, PrivateNetworks: f.private, RateLimit: f.rateLimit()})
	}
	if len(f.config.value) > 0 {
		s.Config = maps.Clone(f.config.value)
	}
	if len(f.secrets.value) > 0 {
		s.Secrets = maps.Clone(f.secrets.value)
	}
	return s
}

// rateLimit is the rate limit of the flags, nil without --rate; a new
// one each call.
func (f *grantFlags) rateLimit() *grant.RateLimit {
	if f.rate.text == "" {
		return nil
	}
	rl := &grant.RateLimit{MaxWait: f.maxWait, Key: f.rateKey}
	rl.Limit.Count, rl.Limit.Per, rl.Limit.Burst = f.rate.count, f.rate.per, f.burst
	return rl
}

// rateFlagOf names the flag of each field of a rate limit.
var rateFlagOf = map[string]string{"limit": "--rate", "per": "--rate", "burst": "--burst", "max_wait": "--max-wait", "key": "--rate-key"}

// check returns what is wrong with how the flags go together, naming
// them: what the grant document's check would say of a field, it says of
// its flag.
func (f *grantFlags) check() error {
	switch {
	case f.private && len(f.hosts) == 0:
		return errors.New("--private-networks applies to the --host rules of the same command; give at least one")
	case f.rate.text == "" && (f.burst != 0 || f.maxWait != 0 || f.rateKey != ""):
		return errors.New("--burst, --max-wait and --rate-key go with --rate, which gives the --host rules of the command a rate limit")
	case f.rate.text != "" && len(f.hosts) == 0:
		return errors.New("--rate applies to the --host rules of the same command; give at least one")
	}
	if rl := f.rateLimit(); rl != nil {
		var re *grant.RateLimitError
		if err := rl.Check(); errors.As(err, &re) {
			flag := rateFlagOf[re.Field]
			if flag == "--rate" || flag == "" {
				return fmt.Errorf("--rate %s: %s %s", f.rate.text, strings.ReplaceAll(re.Field, "limit", "N"), re.Problem)
			}
			return fmt.Errorf("%s: %s", flag, re.Problem)
		}
	}
	return nil
}

func (f *grantFlags) empty() bool {
	return len(f.hosts) == 0 && len(f.config.keys) == 0 && len(f.secrets.keys) == 0
}

// merge adds the flags' entries to cur: a host rule with the same
// pattern, a config value or secret of the same name is replaced.
func (f *grantFlags) merge(cur grant.Set) grant.Set {
	out := grant.Set{Hosts: slices.Clone(cur.Hosts), Config: maps.Clone(cur.Config), Secrets: maps.Clone(cur.Secrets)}
	for _, h := range f.set().Hosts {
		if i := slices.IndexFunc(out.Hosts, func(r grant.Host) bool { return r.Pattern == h.Pattern }); i >= 0 {
			out.Hosts[i] = h
		} else {
			out.Hosts = append(out.Hosts, h)
		}
	}
	for _, k := range f.config.keys {
		if out.Config == nil {
			out.Config = map[string]string{}
		}
		out.Config[k] = f.config.value[k]
	}
	for _, k := range f.secrets.keys {
		if out.Secrets == nil {
			out.Secrets = map[string]string{}
		}
		out.Secrets[k] = f.secrets.value[k]
	}
	return out
}

func (a *app) pluginGrant(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("plugin grant")
	var f grantFlags
	f.add(cmd.fs)
	file := cmd.fs.String("f", "", "a grant document `FILE` (JSON) to PUT as it is, replacing everything granted; - reads stdin")
	const what = "NAME [--host PATTERN]... [--private-networks] [--rate N/PERIOD [--burst N] [--max-wait D] [--rate-key KEY]] [--config KEY=VALUE]... [--secret NAME=REF]... | NAME -f FILE.json|-"
	pos, ok := cmd.parse(args, 1, 1, what)
	if !ok {
		return cmd.usageExit()
	}
	name := pos[0]
	switch {
	case *file != "" && !f.empty():
		cmd.errorf("plugin grant: -f replaces everything granted; give the entries in the file or as flags, not both")
		return exitUsage
	case *file == "" && f.empty():
		cmd.errorf("plugin grant: nothing to grant: give --host, --config or --secret, or -f FILE\nusage: weft plugin grant %s", what)
		return exitUsage
	}
	if err := f.check(); err != nil {
		cmd.errorf("plugin grant: %v", err)
		return exitUsage
	}
	var (
		g   *apiv1.Grants
		err error
	)
	if *file != "" {
		var doc []byte
		if *file == "-" {
			doc, err = io.ReadAll(cmd.stdin)
		} else {
			doc, err = os.ReadFile(*file)
		}
		if err != nil {
			cmd.errorf("plugin grant: -f: %v", err)
			return exitUsage
		}
		g, err = cmd.c.PutGrantsDocument(ctx, name, doc)
	} else {
		g, err = editGrants(ctx, cmd.c, name, func(cur grant.Set) (grant.Set, error) { return f.merge(cur), nil })
	}
	if err != nil {
		return cmd.fail(err)
	}
	cmd.printGrants(g)
	return exitOK
}

// errNotGranted: a revoke names something not granted.
var errNotGranted = errors.New("not granted")

// editAttempts is how many times editGrants reads and writes before it
// gives up on grants that others keep changing.
const editAttempts = 5

// editGrants applies edit to the grants of plugin name as read, and writes
// the result only if nobody changed them since (PutGrantsAt); if somebody
// did, it reads them again and applies edit again, so that two edits at
// once (a grant and a revoke, say) both take effect.
func editGrants(ctx context.Context, c *client.Client, name string, edit func(grant.Set) (grant.Set, error)) (*apiv1.Grants, error) {
	for i := 1; ; i++ {
		cur, err := c.Grants(ctx, name)
		if err != nil {
			return nil, err
		}
		set, err := edit(grantSet(cur))
		if err != nil {
			return nil, err
		}
		g, err := c.PutGrantsAt(ctx, name, grantDocument(set), cur.Revision)
		if !errors.Is(err, client.ErrStale) || i == editAttempts {
			return g, err
		}
	}
}

func (a *app) pluginRevoke(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("plugin revoke")
	var hosts, config, secrets listFlag
	cmd.fs.Var(&hosts, "host", "a host rule's `PATTERN`, as granted (repeatable)")
	cmd.fs.Var(&config, "config", "a configuration `KEY` (repeatable)")
	cmd.fs.Var(&secrets, "secret", "a secret's `NAME` (repeatable)")
	all := cmd.fs.Bool("all", false, "revoke everything granted to the plugin")
	const what = "NAME [--host PATTERN]... [--config KEY]... [--secret NAME]... | NAME --all"
	pos, ok := cmd.parse(args, 1, 1, what)
	if !ok {
		return cmd.usageExit()
	}
	name := pos[0]
	some := len(hosts)+len(config)+len(secrets) > 0
	switch {
	case *all && some:
		cmd.errorf("plugin revoke: --all revokes everything; give it alone")
		return exitUsage
	case !*all && !some:
		cmd.errorf("plugin revoke: nothing to revoke: give --host, --config or --secret, or --all\nusage: weft plugin revoke %s", what)
		return exitUsage
	}
	if *all {
		if err := cmd.c.DeleteGrants(ctx, name); err != nil {
			return cmd.fail(err)
		}
		if cmd.output == "json" {
			cmd.json(map[string]any{"revoked": name})
		} else {
			fmt.Fprintf(cmd.stdout, "plugin %s: everything revoked; it reaches no host and reads no configuration or secret\n", name)
		}
		return exitOK
	}
	var absent []string
	g, err := editGrants(ctx, cmd.c, name, func(cur grant.Set) (grant.Set, error) {
		set := grant.Set{Hosts: slices.Clone(cur.Hosts), Config: maps.Clone(cur.Config), Secrets: maps.Clone(cur.Secrets)}
		absent = nil
		for _, h := range hosts {
			i := slices.IndexFunc(set.Hosts, func(r grant.Host) bool { return r.Pattern == h })
			if i < 0 {
				absent = append(absent, "host "+h)
				continue
			}
			set.Hosts = slices.Delete(set.Hosts, i, i+1)
		}
		for _, k := range config {
			if _, ok := set.Config[k]; !ok {
				absent = append(absent, "config "+k)
			}
			delete(set.Config, k)
		}
		for _, k := range secrets {
			if _, ok := set.Secrets[k]; !ok {
				absent = append(absent, "secret "+k)
			}
			delete(set.Secrets, k)
		}
		if len(absent) > 0 {
			return grant.Set{}, errNotGranted
		}
		return set, nil
	})
	if errors.Is(err, errNotGranted) {
		cmd.errorf("plugin %s: not granted, so not revoked: %s; nothing was changed (weft plugin show %s lists what is granted)", name, strings.Join(absent, ", "), name)
		return exitNotFound
	}
	if err != nil {
		return cmd.fail(err)
	}
	cmd.printGrants(g)
	return exitOK
}

// printGrants writes grants for scripts (-o json) or for people.
func (cmd *clientCmd) printGrants(g *apiv1.Grants) {
	if cmd.output == "json" {
		cmd.json(g)
		return
	}
	set := grantSet(g)
	if set.Empty() {
		fmt.Fprintf(cmd.stdout, "plugin %s: nothing granted (revision %d)\n", g.Plugin, g.Revision)
		return
	}
	fmt.Fprintf(cmd.stdout, "plugin %s: grants revision %d\n", g.Plugin, g.Revision)
	tw := cmd.table()
	writeGranted(tw, &set, "  ")
	tw.Flush()
}

// grantSet is the grant document of g as the grant package reads it, for
// the edits and the listings that package's rules and formats serve.
func grantSet(g *apiv1.Grants) grant.Set {
	s := grant.Set{Config: g.Config, Secrets: g.Secrets}
	for _, h := range g.Hosts {
		r := grant.Host{Pattern: h.Pattern, PrivateNetworks: h.PrivateNetworks}
		if h.RateLimit != nil {
			r.RateLimit = &grant.RateLimit{}
			copyRateLimit(h.RateLimit, r.RateLimit)
		}
		s.Hosts = append(s.Hosts, r)
	}
	return s
}

// grantDocument is s as the API takes it.
func grantDocument(s grant.Set) apiv1.GrantDocument {
	d := apiv1.GrantDocument{Config: s.Config, Secrets: s.Secrets}
	for _, h := range s.Hosts {
		r := apiv1.GrantHost{Pattern: h.Pattern, PrivateNetworks: h.PrivateNetworks}
		if h.RateLimit != nil {
			r.RateLimit = &apiv1.GrantRateLimit{}
			copyRateLimit(h.RateLimit, r.RateLimit)
		}
		d.Hosts = append(d.Hosts, r)
	}
	return d
}

// copyRateLimit copies a host rule's rate limit between the grant package's
// form and the API's, which the grant document writes alike. What the
// API answered always decodes; what the flags built, too.
func copyRateLimit(from, to any) {
	b, err := json.Marshal(from)
	if err == nil {
		err = json.Unmarshal(b, to)
	}
	if err != nil {
		panic(fmt.Sprintf("a rate limit's grant document and API forms differ: %v", err))
	}
}

// writeGranted writes one line per entry of s: kind, then what.
func writeGranted(w io.Writer, s *grant.Set, indent string) {
	for _, h := range s.Hosts {
		fmt.Fprintf(w, "%shost\t%s\n", indent, h)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Config)) {
		fmt.Fprintf(w, "%sconfig\t%s = %s\n", indent, k, s.Config[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Secrets)) {
		fmt.Fprintf(w, "%ssecret\t%s = %s\n", indent, k, s.Secrets[k])
	}
}

// writeNeeds writes what a plugin asks for against what is granted, and
// the commands that grant what is missing.
func writeNeeds(cmd *clientCmd, p *apiv1.PluginDetail) {
	w := cmd.stdout
	needs, missing := p.Needs, p.Missing
	tw := cmd.table()
	if len(needs.Hosts)+len(needs.Config)+len(needs.Secrets) == 0 {
		fmt.Fprintln(tw, "needs:\tnone (the manifest asks for no host, configuration or secret)")
	} else {
		fmt.Fprintln(tw, "needs (asked for by the manifest):")
		mark := func(kind, name string, miss []string) {
			state := "granted"
			if slices.Contains(miss, name) {
				state = "MISSING"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", kind, name, state)
		}
		for _, h := range needs.Hosts {
			mark("host", h, missing.Hosts)
		}
		for _, k := range needs.Config {
			mark("config", k, missing.Config)
		}
		for _, k := range needs.Secrets {
			mark("secret", k, missing.Secrets)
		}
	}
	if granted := grantSet(&p.Granted); granted.Empty() {
		fmt.Fprintln(tw, "granted:\tnothing")
	} else {
		fmt.Fprintf(tw, "granted (revision %d):\n", p.Granted.Revision)
		writeGranted(tw, &granted, "  ")
	}
	tw.Flush()
	if len(missing.Hosts)+len(missing.Config)+len(missing.Secrets) == 0 {
		return
	}
	// One command for what needs no private networks, one for what does:
	// --private-networks applies to every --host of a command.
	var public, private []string
	for _, h := range missing.Hosts {
		if privateHost(h) {
			private = append(private, "--host "+h)
		} else {
			public = append(public, "--host "+h)
		}
	}
	for _, k := range missing.Config {
		public = append(public, "--config "+k+"=VALUE")
	}
	for _, k := range missing.Secrets {
		public = append(public, "--secret "+k+"=env:VARIABLE")
	}
	fmt.Fprintln(w, "to grant what is missing:")
	if len(public) > 0 {
		fmt.Fprintf(w, "  weft plugin grant %s %s\n", p.Name, strings.Join(public, " "))
	}
	if len(private) > 0 {
		fmt.Fprintf(w, "  weft plugin grant %s %s --private-networks\n", p.Name, strings.Join(private, " "))
	}
}

// privateHost reports whether a host pattern names a loopback or private
// address (an IP literal, or localhost), which only a rule with
// private_networks reaches.
func privateHost(pattern string) bool {
	host := pattern
	if _, rest, ok := strings.Cut(host, "://"); ok {
		host = rest
	}
	if strings.HasPrefix(host, "[") {
		if end := strings.IndexByte(host, ']'); end > 0 {
			host = host[1:end]
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && grant.CheckAddr(a, false) != nil && grant.CheckAddr(a, true) == nil
}
