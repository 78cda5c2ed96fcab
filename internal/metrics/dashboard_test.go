package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/metrics"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/plugins"
)

// The documents the operators load, checked against the metrics the
// host registers, so that renaming a metric or a label fails here rather
// than leave an empty graph or an alert that never fires.
const (
	dashboardFile = "../../docs/grafana-dashboard.json"
	alertsFile    = "../../docs/prometheus-alerts.yml"
)

// recorder is a Registerer that keeps what is registered with it.
type recorder struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

// noPools reports no plugin pool.
type noPools struct{}

func (noPools) Stats(string) plugins.PoolStats { return plugins.PoolStats{} }

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: ".*", unit: ".*", constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// registered returns every metric the host's metrics register, New and
// every Watch, with the labels each has.
func registered(t *testing.T) map[string][]string {
	t.Helper()
	rec := &recorder{Registerer: prometheus.NewRegistry()}
	m, err := metrics.New(rec)
	if err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"WatchQueue":       m.WatchQueue(memqueue.New(1)),
		"WatchPools":       m.WatchPools(noPools{}),
		"WatchHeartbeats":  m.WatchHeartbeats(func() heartbeat.Stats { return heartbeat.Stats{} }),
		"WatchConcurrency": m.WatchConcurrency(func(context.Context, string, string, int) ([]weft.ConcurrencyKey, string, error) { return nil, "", nil }),
		"WatchStore":       m.WatchStore(&countingStore{}, metrics.GaugeConfig{}),
	} {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	out := map[string][]string{}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			sm := descRE.FindStringSubmatch(d.String())
			if sm == nil {
				t.Fatalf("cannot read the metric's name in %s", d)
			}
			var labels []string
			for _, l := range regexp.MustCompile(`(\w+)="`).FindAllStringSubmatch(sm[2], -1) {
				labels = append(labels, l[1])
			}
			if sm[3] != "" {
				labels = append(labels, strings.Split(sm[3], ",")...)
			}
			out[sm[1]] = labels
		}
	}
	if len(out) < 40 {
		t.Fatalf("found %d metrics; the host registers more", len(out))
	}
	return out
}

var (
	metricRE   = regexp.MustCompile(`\bweft_[a-z_]+`)
	selectorRE = regexp.MustCompile(`\b(weft_[a-z_]+)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`(\w+)\s*(?:=~|!~|!=|=)`)
	byRE       = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// targetLabels are the labels Prometheus adds to every series it scrapes.
var targetLabels = []string{"instance", "job"}

// baseMetric returns the registered metric name refers to: name itself, or
// the histogram of a _bucket, _sum or _count series; "" when none.
func baseMetric(reg map[string][]string, name string) string {
	if _, ok := reg[name]; ok {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suffix); ok {
			if _, ok := reg[b]; ok {
				return b
			}
		}
	}
	return ""
}

// checkExpr checks that every metric expr names is registered, with the
// labels its selectors and its by clauses use. where names expr in the
// errors.
func checkExpr(t *testing.T, reg map[string][]string, where, expr string) (names []string) {
	t.Helper()
	known := slices.Clone(targetLabels)
	for _, name := range metricRE.FindAllString(expr, -1) {
		base := baseMetric(reg, name)
		if base == "" {
			t.Errorf("%s: %s is not a metric the host registers", where, name)
			continue
		}
		names = append(names, base)
		known = append(known, reg[base]...)
		if strings.HasSuffix(name, "_bucket") {
			known = append(known, "le")
		}
	}
	for _, sel := range selectorRE.FindAllStringSubmatch(expr, -1) {
		base := baseMetric(reg, sel[1])
		if base == "" {
			continue
		}
		for _, mt := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
			if l := mt[1]; !slices.Contains(reg[base], l) && !slices.Contains(targetLabels, l) {
				t.Errorf("%s: %s has no label %q (it has %v)", where, sel[1], l, reg[base])
			}
		}
	}
	for _, by := range byRE.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(by[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(known, l) {
				t.Errorf("%s: aggregates by %q, a label of none of its metrics", where, l)
			}
		}
	}
	if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
		t.Errorf("%s: unbalanced brackets in %s", where, expr)
	}
	return names
}

// globalGauges are read from the store: every node reports the same
// values, so that a sum() across nodes would multiply them.
var globalGauges = []string{"weft_instances", "weft_stimuli", "weft_queue_depth", "weft_concurrency_running", "weft_concurrency_waiting"}

func checkGlobalGauges(t *testing.T, where, expr string, names []string) {
	t.Helper()
	for _, g := range globalGauges {
		if slices.Contains(names, g) && strings.Contains(expr, "sum") {
			t.Errorf("%s: sums %s, which every node reports alike (use max): %s", where, g, expr)
		}
	}
}

// TestDashboard: the Grafana dashboard parses, picks its Prometheus with
// a variable, and every expression refers to registered metrics and
// labels; it graphs what an operator looks at first.
func TestDashboard(t *testing.T) {
	t.Parallel()
	reg := registered(t)
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr       string `json:"expr"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	}
	type panel struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			Type, UID string
		} `json:"datasource"`
		GridPos struct{ H, W, X, Y int } `json:"gridPos"`
		Targets []target                 `json:"targets"`
	}
	var dash struct {
		SchemaVersion int     `json:"schemaVersion"`
		UID           string  `json:"uid"`
		Title         string  `json:"title"`
		Panels        []panel `json:"panels"`
		Templating    struct {
			List []struct {
				Name, Type string
				Query      any
			} `json:"list"`
		} `json:"templating"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if dash.SchemaVersion < 36 || dash.UID == "" || dash.Title == "" {
		t.Errorf("%s: schemaVersion %d, uid %q, title %q", dashboardFile, dash.SchemaVersion, dash.UID, dash.Title)
	}
	hasDatasource := false
	for _, v := range dash.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			hasDatasource = true
		}
	}
	if !hasDatasource {
		t.Errorf("%s: no datasource variable of type prometheus", dashboardFile)
	}
	ids := map[int]bool{}
	var used []string
	for _, p := range dash.Panels {
		where := dashboardFile + ": panel " + p.Title
		if ids[p.ID] {
			t.Errorf("%s: id %d taken", where, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W <= 0 || p.GridPos.H <= 0 {
			t.Errorf("%s: gridPos %+v outside the 24 columns", where, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("%s: datasource %q, %d targets; want ${datasource} and a query", where, p.Datasource.UID, len(p.Targets))
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != "${datasource}" {
				t.Errorf("%s: a target's datasource is %q", where, tg.Datasource.UID)
			}
			names := checkExpr(t, reg, where, tg.Expr)
			checkGlobalGauges(t, where, tg.Expr, names)
			used = append(used, names...)
		}
	}
	// The variables' queries and the descriptions name metrics too.
	for _, name := range metricRE.FindAllString(string(raw), -1) {
		if baseMetric(reg, name) == "" {
			t.Errorf("%s: names %s, which the host does not register", dashboardFile, name)
		}
	}
	for _, want := range []string{
		"weft_instance_transitions_total", "weft_instance_duration_seconds", "weft_instances",
		"weft_step_duration_seconds", "weft_activity_duration_seconds", "weft_activity_attempts_total",
		"weft_timer_lateness_seconds", "weft_instance_takeovers_total", "weft_attempts_abandoned_total",
		"weft_stimuli", "weft_store_operation_duration_seconds", "weft_store_operation_errors_total",
		"weft_lock_acquisitions_total", "weft_http_requests_total", "weft_http_request_duration_seconds",
		"weft_plugin_http_requests_total", "weft_rate_limit_turns_total", "weft_schedule_fires_total",
		"weft_schedule_fire_lateness_seconds", "weft_concurrency_slot_wait_seconds", "weft_build_info",
	} {
		if !slices.Contains(used, want) {
			t.Errorf("%s: no panel graphs %s", dashboardFile, want)
		}
	}
}

// TestAlerts: the alert rules parse as a Prometheus rules file, each with
// a duration, a severity, a summary and a description, and their
// expressions refer to registered metrics and labels.
func TestAlerts(t *testing.T) {
	t.Parallel()
	reg := registered(t)
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("%s: group %q without a name or rules", alertsFile, g.Name)
		}
		for _, r := range g.Rules {
			where := filepath.Base(alertsFile) + ": " + r.Alert
			if r.Alert == "" || slices.Contains(alerts, r.Alert) {
				t.Errorf("%s: empty or repeated alert name", where)
			}
			alerts = append(alerts, r.Alert)
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", where, r.For, err)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q, want critical, warning or info", where, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: summary or description missing", where)
			}
			if strings.TrimSpace(r.Expr) == "" {
				t.Errorf("%s: no expr", where)
			}
			names := checkExpr(t, reg, where, r.Expr)
			checkGlobalGauges(t, where, r.Expr, names)
			for _, a := range r.Annotations {
				for _, name := range metricRE.FindAllString(a, -1) {
					if baseMetric(reg, name) == "" {
						t.Errorf("%s: an annotation names %s, which the host does not register", where, name)
					}
				}
			}
		}
	}
	sort.Strings(alerts)
	for _, want := range []string{"WeftDeadLetteredStimuli", "WeftHTTP5xx", "WeftInstancesFailing", "WeftNoNodeUp", "WeftNodeDown", "WeftStoreErrors", "WeftTakeoversSustained", "WeftTimerLatenessHigh"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("%s: no alert %s (have %v)", alertsFile, want, alerts)
		}
	}
}
