package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/testplugins"
)

// TestClientGrants: read, replace, show against the plugin's needs,
// revoke; the errors a caller tests for.
func TestClientGrants(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	ctx := context.Background()
	admin, reader := newClient(t, url, adminToken), newClient(t, url, readerToken)
	manifest := `{"activities":[{"name":"go"}],"needs":{"hosts":["hooks.example.com"],"config":["url"],"secrets":["token"]}}`
	if _, _, err := admin.PutPlugin(ctx, "hook", testplugins.Manifested(t, manifest)); err != nil {
		t.Fatal(err)
	}

	g, err := reader.Grants(ctx, "hook")
	if err != nil || g.Plugin != "hook" || g.Revision != 0 || g.UpdatedAt != nil || len(g.Hosts)+len(g.Config)+len(g.Secrets) != 0 {
		t.Fatalf("Grants before any: %+v, %v", g, err)
	}
	d, err := reader.Plugin(ctx, "hook")
	want := apiv1.Needs{Hosts: []string{"hooks.example.com"}, Config: []string{"url"}, Secrets: []string{"token"}}
	if err != nil || !reflect.DeepEqual(d.Needs, want) || !reflect.DeepEqual(d.Missing, want) || d.Granted.Revision != 0 {
		t.Fatalf("Plugin before any grant: %+v, %v", d, err)
	}

	set := apiv1.GrantDocument{
		Hosts:   []apiv1.GrantHost{{Pattern: "*.example.com"}},
		Config:  map[string]string{"url": "https://hooks.example.com/in"},
		Secrets: map[string]string{"token": "env:HOOK_TOKEN"},
	}
	g, err = admin.PutGrants(ctx, "hook", set)
	if err != nil || g.Revision != 1 || g.UpdatedAt == nil || len(g.Hosts) != 1 || g.Hosts[0].Pattern != "*.example.com" ||
		g.Config["url"] != "https://hooks.example.com/in" || g.Secrets["token"] != "env:HOOK_TOKEN" {
		t.Fatalf("PutGrants: %+v, %v", g, err)
	}
	if again, err := admin.PutGrants(ctx, "hook", set); err != nil || again.Revision != 1 {
		t.Fatalf("PutGrants unchanged: %+v, %v", again, err)
	}
	// What was read, put back as it is, is the same document.
	if again, err := admin.PutGrantsAt(ctx, "hook", g.Document(), g.Revision); err != nil || again.Revision != 1 {
		t.Fatalf("PutGrantsAt of the document read: %+v, %v", again, err)
	}
	d, err = reader.Plugin(ctx, "hook")
	if err != nil || d.Granted.Revision != 1 || len(d.Missing.Hosts)+len(d.Missing.Config)+len(d.Missing.Secrets) != 0 {
		t.Fatalf("Plugin after the grant: %+v, %v", d, err)
	}

	// Errors: a reader may not; an invalid entry names its field; an
	// unknown field of a raw document is refused, not dropped.
	if _, err := reader.PutGrants(ctx, "hook", apiv1.GrantDocument{}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("reader PutGrants: %v, want ErrForbidden", err)
	}
	if err := reader.DeleteGrants(ctx, "hook"); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("reader DeleteGrants: %v, want ErrForbidden", err)
	}
	_, err = admin.PutGrants(ctx, "hook", apiv1.GrantDocument{Hosts: []apiv1.GrantHost{{Pattern: "ftp://x"}}, Secrets: map[string]string{"token": "plain"}})
	var p *client.Error
	if !errors.As(err, &p) || p.Status != 422 || !errors.Is(err, client.ErrInvalid) || len(p.Errors) != 2 ||
		p.Errors[0].Path != "hosts[0].pattern" || p.Errors[1].Path != "secrets.token" {
		t.Errorf("invalid PutGrants: %v", err)
	}
	_, err = admin.PutGrantsDocument(ctx, "hook", json.RawMessage(`{"hostz": []}`))
	if !errors.As(err, &p) || p.Status != 400 || len(p.Errors) != 1 || p.Errors[0].Path != "hostz" {
		t.Errorf("unknown field: %v", err)
	}
	if g, err := admin.PutGrantsDocument(ctx, "hook", json.RawMessage(`{"config": {"url": "u2"}}`)); err != nil || g.Revision != 2 || len(g.Hosts) != 0 {
		t.Errorf("PutGrantsDocument: %+v, %v", g, err)
	}
	// An edit of what was read at revision 1 is stale now; one of
	// revision 2 goes through.
	if _, err := admin.PutGrantsAt(ctx, "hook", apiv1.GrantDocument{}, 1); !errors.Is(err, client.ErrStale) || !errors.As(err, &p) || p.Status != 412 {
		t.Errorf("PutGrantsAt a stale revision: %v, want ErrStale", err)
	}
	if g, err := admin.PutGrantsAt(ctx, "hook", apiv1.GrantDocument{Config: map[string]string{"url": "u3"}}, 2); err != nil || g.Revision != 3 {
		t.Errorf("PutGrantsAt the stored revision: %+v, %v", g, err)
	}

	if err := admin.DeleteGrants(ctx, "hook"); err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteGrants(ctx, "hook"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("DeleteGrants twice: %v, want ErrNotFound", err)
	}
	if g, err := reader.Grants(ctx, "hook"); err != nil || g.Revision != 0 {
		t.Errorf("Grants after the revoke: %+v, %v", g, err)
	}
}
