package fleet

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

func TestInitAuthMakesOneMemberPerRole(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	made, err := InitAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(made) != 3 {
		t.Fatalf("made %d members, want 3", len(made))
	}
	for i, r := range Roles {
		if made[i].Name != string(r) || made[i].Role != r {
			t.Errorf("member %d: %+v, want %s", i, made[i], r)
		}
		fi, err := os.Stat(CredsPath(dir, string(r)))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s's credentials: %v, %v; want a 0600 file", r, fi, err)
		}
		if _, err := CredsOption(CredsPath(dir, string(r))); err != nil {
			t.Errorf("%s's credentials do not sign in: %v", r, err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("fleet directory %v, %v; want 0700", fi, err)
	}
	if fi, err := os.Stat(FleetKeyPath(dir)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("fleet key %v, %v; want a 0600 file", fi, err)
	}
	again, err := InitAuth(dir)
	if err != nil || len(again) != 0 {
		t.Errorf("a second start made %v (%v); want the members kept", again, err)
	}
}

func TestAddAndRevokeMembers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	if _, err := InitAuth(dir); err != nil {
		t.Fatal(err)
	}
	m, err := AddMember(dir, "laptop", RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AddMember(dir, "laptop", RoleWorker); err == nil || !strings.Contains(err.Error(), "already has a member laptop (viewer)") {
		t.Errorf("a second laptop: %v", err)
	}
	if _, err := AddMember(dir, "../x", RoleWorker); err == nil || !strings.Contains(err.Error(), "is not a member name") {
		t.Errorf("a path as a name: %v", err)
	}
	ms, _ := LoadMembers(dir)
	if len(ms) != 4 || ms[3] != m {
		t.Errorf("members %+v, want the laptop last", ms)
	}
	if err := RevokeMember(dir, "laptop"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(CredsPath(dir, "laptop")); !os.IsNotExist(err) {
		t.Errorf("a revoked member's credentials are still there: %v", err)
	}
	if err := RevokeMember(dir, "laptop"); err == nil || !strings.Contains(err.Error(), `has no member "laptop" (it has worker, submitter, viewer)`) {
		t.Errorf("revoke of an unknown member: %v", err)
	}
	if _, err := ParseRole("admin"); err == nil || err.Error() != `"admin" is not a role; pass --role worker, submitter, viewer or keeper` {
		t.Errorf("ParseRole(admin): %v", err)
	}
	os.WriteFile(filepath.Join(dir, "users.json"), []byte("{"), 0o600)
	if _, err := LoadMembers(dir); err == nil || !strings.Contains(err.Error(), "users.json: not the fleet's users") {
		t.Errorf("a broken users file: %v", err)
	}
}

// A server without users, or beyond loopback without TLS, is refused.
func TestStartServerRefusesAnOpenServer(t *testing.T) {
	_, err := StartServer(ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "has no users") {
		t.Errorf("a server without users: %v", err)
	}
	ms := []Member{{Name: "w", Role: RoleWorker, Key: "UAIHRAWQRZBAAUGWVUZBGAPPS5VACJDITEJUDEOLGEPWHUDTSNPLN667"}}
	_, err = StartServer(ServerOptions{Dir: t.TempDir(), Listen: "0.0.0.0:0", Members: ms})
	if err == nil || !strings.Contains(err.Error(), "reachable from other machines, which needs TLS; pass --tls-cert FILE and --tls-key FILE") {
		t.Errorf("a server on 0.0.0.0 without TLS: %v", err)
	}
}

// docs/fleet.md gives the roles as a stock nats-server configuration: it
// parses, and its permissions are exactly RolePermissions.
func TestDocsRolesAreTheServersRoles(t *testing.T) {
	doc, err := os.ReadFile("../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```\n# ralph-users.conf\n")
	if !ok {
		t.Fatal("docs/fleet.md has no ralph-users.conf block")
	}
	conf, _, _ := strings.Cut(rest, "```")
	f := filepath.Join(t.TempDir(), "ralph-users.conf")
	os.WriteFile(f, []byte(conf), 0o600)
	o, err := server.ProcessConfigFile(f)
	if err != nil {
		t.Fatalf("the documented configuration: %v", err)
	}
	roles := append(Roles[:len(Roles):len(Roles)], RoleKeeper)
	if len(o.Nkeys) != len(roles) {
		t.Fatalf("%d users, want one per role", len(o.Nkeys))
	}
	for i, r := range roles {
		want := RolePermissions(r, o.Nkeys[i].Nkey)
		got := o.Nkeys[i].Permissions
		if !reflect.DeepEqual(got.Publish.Allow, want.Publish.Allow) || !reflect.DeepEqual(got.Subscribe.Allow, want.Subscribe.Allow) ||
			!reflect.DeepEqual(got.Response, want.Response) {
			t.Errorf("the documented %s role differs from the server's", r)
		}
	}
}
