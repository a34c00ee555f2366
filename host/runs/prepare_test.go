package runs

import (
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Section 14's pattern, run for real against a fossil server: the
// directory beneath the run root (0700), a fresh password set on the
// server for the run user, a clone as that user remembering it, and a
// checkout of trunk resolved once to its full hash; every value set, as it
// was, and the process mapped with its default cwd, $$workspace$$.
func TestPrepareSeedWorkspace(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	pw := "fresh-1-0123456789"
	f.p.NewPassword = func() string { return pw }
	run := echoRun(t, runUser, seedPattern)
	got, err := f.p.Make(ctx, run, runHash)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(f.root, runUser, "projects", "demo", runHash)
	want := runmsg.RunValues{
		"root": f.root, "project": "demo", "user": runUser, "run": runHash, "node": nodeUser,
		"server": f.srv.URL, "release": f.release,
		"workspace": ws, "clone": ws + "/clone", "tree": ws + "/tree", "checkout": f.trunk,
	}
	if !maps.Equal(got.Values, want) {
		t.Errorf("values:\n got %v\nwant %v", got.Values, want)
	}
	if len(f.trunk) != 64 {
		t.Errorf("trunk %q is not a full SHA3 hash", f.trunk)
	}
	st, err := os.Lstat(ws)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("workspace %s: %v %v, want a directory of mode 0700", ws, st.Mode(), err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "tree", "README.txt")); err != nil || string(b) != "hello from trunk\n" {
		t.Errorf("the tree's README.txt: %q %v", b, err)
	}
	// The clone remembers the server, the run user and its password, as
	// the shared secret, which the server now takes.
	rem, err := fossilio.Remembered(ctx, ws+"/clone")
	if err != nil {
		t.Fatal(err)
	}
	if rem.Login != runUser || strings.TrimSuffix(rem.URL, "/") != strings.TrimSuffix(f.srv.URL, "/") ||
		rem.Password != fossilio.SharedSecret(f.srv.ProjectCode, runUser, pw) {
		t.Errorf("the clone remembers %s as %q (password the shared secret: %v)", rem.URL, rem.Login,
			rem.Password == fossilio.SharedSecret(f.srv.ProjectCode, runUser, pw))
	}
	fsl := &fossilio.Fossil{Home: ws, User: runUser}
	if err := fsl.Pull(ctx, ws+"/clone"); err != nil {
		t.Errorf("the clone cannot pull with the password it remembers: %v", err)
	}
	// The tree is at the check-in, and the process starts in the workspace.
	out, err := (&fossilio.Fossil{Home: ws, User: runUser, Dir: ws + "/tree"}).Run(ctx, []string{"info"})
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := infoHash(strings.ReplaceAll(out, "checkout:", "hash:")); !ok || !strings.HasPrefix(f.trunk, h) {
		t.Errorf("the tree is at %q, want %s:\n%s", h, f.trunk, out)
	}
	if got.Spec.Dir != ws || !slices.Equal(got.Spec.Command, []string{"echo", "hello"}) ||
		!slices.Equal(got.Spec.Env, []string{"PATH=/usr/bin:/bin"}) || got.Spec.Sandbox != nil || got.Spec.Limits != (host.RunLimits{}) {
		t.Errorf("spec %+v", got.Spec)
	}
	if got.Run.Process.Cwd != ws || got.Run.Workspace[3].Into != ws+"/tree" {
		t.Errorf("the expanded run: cwd %q, checkout into %q", got.Run.Process.Cwd, got.Run.Workspace[3].Into)
	}
	if got.Limits.Wall != "" || got.Limits.CPU != nil || got.Limits.Processes != nil || got.Limits.Memory != "" {
		t.Errorf("limits %+v, want none", got.Limits)
	}

	// Made again (the node restored it in care): the directory step
	// removes what was there, and the password is fresh again, so the first
	// clone's no longer opens the server.
	if err := os.WriteFile(filepath.Join(ws, "stray"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ws+"/clone", f.base+"/old-clone"); err != nil {
		t.Fatal(err)
	}
	pw = "fresh-2-0123456789"
	if _, err := f.p.Make(ctx, run, runHash); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(ws, "stray")) {
		t.Error("the directory step left what was there")
	}
	if err := fsl.Pull(ctx, f.base+"/old-clone"); err == nil {
		t.Error("the old password still opens the server")
	}
	if err := fsl.Pull(ctx, ws+"/clone"); err != nil {
		t.Errorf("the new clone cannot pull: %v", err)
	}
}

// A node on another host takes the password from its file of passwords
// and clones with it.
func TestPrepareOtherHost(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	pwFile := filepath.Join(f.base, "node", PasswordsFileName)
	if err := os.MkdirAll(filepath.Dir(pwFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pwFile, []byte(otherUser+" "+otherPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.p.Repository, f.p.Passwords = "", pwFile
	got, err := f.p.Make(ctx, echoRun(t, otherUser, seedPattern), runHash)
	if err != nil {
		t.Fatal(err)
	}
	if got.Values["checkout"] != f.trunk {
		t.Errorf("checkout %q, want %s", got.Values["checkout"], f.trunk)
	}
	rem, err := fossilio.Remembered(ctx, got.Values["clone"])
	if err != nil || rem.Login != otherUser || rem.Password != otherPW {
		t.Errorf("the clone remembers %q (the file's password: %v): %v", rem.Login, rem.Password == otherPW, err)
	}

	// Row 6: the file holds no password for the user; its note is
	// RunRefusal's, and nothing is made.
	run := echoRun(t, runUser, seedPattern)
	_, err = f.p.Make(ctx, run, runHash)
	pe := mustRefuse(t, err, runmsg.RefusedNoPassword, -1, `"`+runUser+`"`)
	r := runmsg.RunRefusal(run, nil, runmsg.RefusalFacts{SenderPrivileged: true, NodeUser: nodeUser})
	if r == nil || r.Row != runmsg.RefusedNoPassword || r.Note != pe.Note {
		t.Errorf("RunRefusal says %v, Prepare %q", r, pe.Note)
	}
	if exists(filepath.Join(f.root, runUser)) {
		t.Error("a run refused for row 6 had its directory made")
	}
	// No file at all: row 6 too.
	f.p.Passwords = filepath.Join(f.base, "node", "none")
	_, err = f.p.Make(ctx, run, runHash)
	mustRefuse(t, err, runmsg.RefusedNoPassword, -1, `"`+runUser+`"`)
}

// Each step's failure ends the run refused (row 10), the note naming the
// step and why; what the failing step was making is gone.
func TestPrepareStepFailures(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	outside := filepath.Join(f.base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(outside, "keep")
	if err := os.WriteFile(keep, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	stillThere := func(t *testing.T) {
		t.Helper()
		if names, _ := os.ReadDir(outside); len(names) != 1 || !exists(keep) {
			t.Errorf("outside the root: %v", names)
		}
	}

	t.Run("user missing on the server", func(t *testing.T) {
		_, err := f.p.Make(ctx, echoRun(t, "ghost", seedPattern), runHash)
		mustRefuse(t, err, runmsg.RefusedStepFailed, 1, "workspace[1], a password step, failed", `"ghost" does not exist on the server`)
		if exists(filepath.Join(f.root, "ghost")) {
			t.Error("the directory was made for a run whose password step could not be taken")
		}
	})
	t.Run("user holding admin", func(t *testing.T) {
		// Row 4, as RunRefusal says it, should the two ever disagree.
		_, err := f.p.Make(ctx, echoRun(t, f.srv.AdminLogin, seedPattern), runHash)
		mustRefuse(t, err, runmsg.RefusedUser, -1, `process.user "`+f.srv.AdminLogin+`" holds admin or setup`)
	})
	t.Run("checkout of a name Fossil cannot resolve", func(t *testing.T) {
		steps := strings.Replace(seedPattern, `"of": "trunk"`, `"of": "no-such-branch"`, 1)
		_, err := f.p.Make(ctx, echoRun(t, runUser, steps), runHash)
		mustRefuse(t, err, runmsg.RefusedStepFailed, 3, "workspace[3], a checkout step, failed", `cannot resolve "no-such-branch"`)
		ws := filepath.Join(f.root, runUser, "projects", "demo", runHash)
		if exists(ws + "/tree") {
			t.Error("a tree was left by the failed checkout")
		}
		if !exists(ws + "/clone") {
			t.Error("the clone, which the step before made, is gone")
		}
	})
	t.Run("directory outside the root", func(t *testing.T) {
		steps := `[{"step": "directory", "at": "` + outside + `/$$run$$"}]`
		_, err := f.p.Make(ctx, echoRun(t, runUser, steps), runHash)
		mustRefuse(t, err, runmsg.RefusedStepFailed, 0, "workspace[0], a directory step, failed", "not beneath the node's run root")
		stillThere(t)
		steps = `[{"step": "directory", "at": "$$root$$/../outside"}]`
		_, err = f.p.Make(ctx, echoRun(t, runUser, steps), runHash)
		mustRefuse(t, err, runmsg.RefusedMalformed, -1, "workspace[0].at")
		steps = `[{"step": "directory", "at": "$$root$$"}]`
		_, err = f.p.Make(ctx, echoRun(t, runUser, steps), runHash)
		mustRefuse(t, err, runmsg.RefusedStepFailed, 0, "not beneath the node's run root")
	})
	t.Run("a link in the way", func(t *testing.T) {
		if err := os.Symlink(outside, filepath.Join(f.root, "linked")); err != nil {
			t.Fatal(err)
		}
		steps := `[{"step": "directory", "at": "$$root$$/linked/$$run$$"}]`
		_, err := f.p.Make(ctx, echoRun(t, runUser, steps), runHash)
		mustRefuse(t, err, runmsg.RefusedStepFailed, 0, "workspace[0], a directory step, failed", "/linked/")
		stillThere(t)
	})
	t.Run("a link at the directory", func(t *testing.T) {
		at := filepath.Join(f.root, "at-link")
		if err := os.Symlink(outside, at); err != nil {
			t.Fatal(err)
		}
		steps := `[{"step": "directory", "at": "$$root$$/at-link"}]`
		got, err := f.p.Make(ctx, echoRun(t, runUser, steps), runHash)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Lstat(at)
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 || got.Values["workspace"] != at {
			t.Errorf("%s: %v %v: the link is not replaced by a directory of mode 0700", at, st.Mode(), err)
		}
		stillThere(t)
	})
	t.Run("clone into a link", func(t *testing.T) {
		steps := `[{"step": "directory", "at": "$$root$$/c/$$run$$"}, {"step": "password"},
  {"step": "clone", "into": "$$workspace$$/sub/clone"}]`
		ws := filepath.Join(f.root, "c", runHash)
		f.p.NewPassword = func() string { return "fresh-link-0123456789" }
		defer func() { f.p.NewPassword = nil }()
		// The clone's directory is made through no link: root/linked
		// leads outside.
		steps2 := strings.Replace(steps, "$$workspace$$/sub/clone", "$$root$$/linked/clone", 1)
		_, err := f.p.Make(ctx, echoRun(t, runUser, steps2), runHash)
		pe := mustRefuse(t, err, runmsg.RefusedStepFailed, 2, "workspace[2], a clone step, failed")
		if strings.Contains(pe.Note, "fresh-link-0123456789") {
			t.Error("the note holds the password")
		}
		stillThere(t)
		if _, err := f.p.Make(ctx, echoRun(t, runUser, steps), runHash); err != nil {
			t.Fatal(err)
		}
		if !exists(ws + "/sub/clone") {
			t.Error("no clone beneath a directory the step made")
		}
	})
	t.Run("clone fails, the password is not in the note", func(t *testing.T) {
		pw := "fresh-3-0123456789"
		f.p.NewPassword = func() string { return pw }
		defer func() { f.p.NewPassword = nil }()
		q := *f.p
		q.Values.Server = "http://127.0.0.1:1/"
		_, err := q.Make(ctx, echoRun(t, runUser, seedPattern), runHash)
		pe := mustRefuse(t, err, runmsg.RefusedStepFailed, 2, "workspace[2], a clone step, failed")
		for _, s := range []string{pw, fossilio.SharedSecret(f.srv.ProjectCode, runUser, pw)} {
			if strings.Contains(pe.Note, s) || strings.Contains(pe.Err.Error(), s) && !strings.Contains(pe.Note, "****") {
				t.Errorf("the note holds a secret: %s", pe.Note)
			}
		}
		if exists(filepath.Join(f.root, runUser, "projects", "demo", runHash, "clone")) {
			t.Error("the failed clone left a file")
		}
	})
}

// Rows 8 and 9 are checked before any step (nothing is made) and again
// once the steps are done.
func TestPrepareRows8And9(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	// Its tmp is not /tmp, above the test server's repository, which it
	// would hide (row 8, TestPrepareTmpHidesTheWorkspace) before row 9.
	sandbox := func(readOnly string) string {
		return `"sandbox": {"uid": 1000, "gid": 1000, "capabilities": [], "network": false, "own_session": true,
    "ends_with_node": false, "read_only": ["/usr", ` + readOnly + `], "read_write": ["$$workspace$$"], "homes": [],
    "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/scratch"},`
	}
	runWith := func(extra string) *runmsg.Run {
		return readRun(t, `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "workspace": `+seedPattern+`, `+extra+`
  "process": {"user": "`+runUser+`", "command": ["/bin/true"]}}`)
	}
	ws := filepath.Join(f.root, runUser)
	// Row 9: the node's repository, and its file of passwords through a link.
	_, err := f.p.Make(ctx, runWith(sandbox(`"`+f.srv.Repo+`"`)), runHash)
	mustRefuse(t, err, runmsg.RefusedNodeFiles, -1, f.srv.Repo, "repository")
	if err := os.MkdirAll(filepath.Join(f.base, "node"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.p.Files.Passwords, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(f.base, "innocent")
	if err := os.Symlink(f.p.Files.Passwords, link); err != nil {
		t.Fatal(err)
	}
	_, err = f.p.Make(ctx, runWith(sandbox(`"`+link+`"`)), runHash)
	mustRefuse(t, err, runmsg.RefusedNodeFiles, -1, link, "file of passwords")
	// Row 8: memory where the host can make no cgroup, named with its
	// reason; an unknown capability.
	f.p.Support.Memory = "no cgroup v1 memory or pids hierarchy is mounted"
	_, err = f.p.Make(ctx, runWith(sandbox(`"/bin"`)+`"limits": {"memory": "1G"},`), runHash)
	mustRefuse(t, err, runmsg.RefusedUnprovided, -1, "limits.memory is not provided by this node: no cgroup v1 memory")
	// Row 8: a disk where the host can make none, named with its reason;
	// a disk and no one workspace to give it to (D82).
	f.p.Support.Disk = "the host has no loop devices: /dev/loop-control: no such file or directory"
	_, err = f.p.Make(ctx, runWith(sandbox(`"/bin"`)+`"limits": {"disk": "1G"},`), runHash)
	mustRefuse(t, err, runmsg.RefusedUnprovided, -1, "limits.disk is not provided by this node: the host has no loop devices")
	f.p.Support.Disk = ""
	twice := readRun(t, `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "workspace": [{"step": "directory", "at": "$$root$$/a"}, {"step": "directory", "at": "$$root$$/b"}],
  "limits": {"disk": "1G"}, "process": {"user": "`+runUser+`", "command": ["/bin/true"]}}`)
	_, err = f.p.Make(ctx, twice, runHash)
	mustRefuse(t, err, runmsg.RefusedUnprovided, -1, "limits.disk is not provided by this node", "2 directory steps")
	if exists(filepath.Join(f.root, "a")) {
		t.Error("a run refused for its disk had its directory made")
	}
	bad := strings.Replace(sandbox(`"/bin"`), `"capabilities": []`, `"capabilities": ["CAP_NO_SUCH"]`, 1)
	_, err = f.p.Make(ctx, runWith(bad), runHash)
	mustRefuse(t, err, runmsg.RefusedUnprovided, -1, "sandbox.capabilities[0]", "CAP_NO_SUCH")
	if exists(ws) {
		t.Error("a run refused for rows 8 or 9 had its workspace made")
	}
	// Section 11's order: a run for which rows 9 and 10 both hold (its
	// sandbox reads the repository, its directory lies outside the root)
	// is refused for 9; one for which 6 and 9 hold, for 6.
	outside := strings.Replace(seedPattern, `"at": "$$root$$/`, `"at": "/var/`, 1)
	r := readRun(t, `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "workspace": `+outside+`, `+sandbox(`"`+f.srv.Repo+`"`)+`
  "process": {"user": "`+runUser+`", "command": ["/bin/true"]}}`)
	_, err = f.p.Make(ctx, r, runHash)
	mustRefuse(t, err, runmsg.RefusedNodeFiles, -1, f.srv.Repo)
	repo, pws := f.p.Repository, f.p.Passwords
	f.p.Repository, f.p.Passwords = "", ""
	_, err = f.p.Make(ctx, runWith(sandbox(`"`+f.srv.Repo+`"`)), runHash)
	mustRefuse(t, err, runmsg.RefusedNoPassword, -1, `"`+runUser+`"`)
	f.p.Repository, f.p.Passwords = repo, pws
	// Row 8: a read_only path this host lacks (D83), named, nothing made;
	// one the steps make ($$tree$$) is there once they are done; one in
	// the workspace the steps do not make is refused after them.
	_, err = f.p.Make(ctx, runWith(sandbox(`"/bin", "/opt/no-such-tool"`)), runHash)
	mustRefuse(t, err, runmsg.RefusedUnprovided, -1, "sandbox.read_only[2] cannot be provided: /opt/no-such-tool is not on this node")
	if exists(ws) {
		t.Error("a run refused for a missing read_only path had its workspace made")
	}
	if _, err := f.p.Make(ctx, runWith(sandbox(`"$$tree$$"`)), runHash); err != nil {
		t.Errorf("a read_only $$tree$$: %v", err)
	}
	_, err = f.p.Make(ctx, runWith(sandbox(`"$$workspace$$/none"`)), runHash)
	mustRefuse(t, err, runmsg.RefusedUnprovided, -1, "sandbox.read_only[1] cannot be provided: "+filepath.Join(ws, "projects", "demo", runHash, "none")+" is not on this node")
	// Unconfined, cpu cannot be held: row 8.
	_, err = f.p.Make(ctx, runWith(`"limits": {"cpu": 10},`), runHash)
	mustRefuse(t, err, runmsg.RefusedUnprovided, -1, "limits.cpu")
}

// TestPrepareKeepFilter: the filter the holder is handed (D98) holds
// keep.mask with its values in place, keep.match as written, and the run's
// own secrets, listed or not: the password its step took, its URL
// escapes, its shared secret, and both as a clone remembers them, in
// each of the 256 obscured forms.
func TestPrepareKeepFilter(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	pw := "fresh/2+0123456789"
	f.p.NewPassword = func() string { return pw }
	run := readRun(t, `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "Keep errors.", "workspace": `+seedPattern+`,
  "process": {"user": "`+runUser+`", "command": ["true"], "keep": {"mask": ["$$user$$-token", "plain"], "match": "^ERROR$$"}}}`)
	got, err := f.p.Prepare(ctx, run, runHash, f.p.Values)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(f.root, runUser, "projects", "demo", runHash)
	repo, err := fossilio.OpenClone(ws+"/clone", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	obscured, ok, err := repo.Config(ctx, "last-sync-pw")
	if err != nil || !ok || obscured == "" {
		t.Fatalf("the clone remembers no password: %q %v %v", obscured, ok, err)
	}
	shared := fossilio.SharedSecret(f.srv.ProjectCode, runUser, pw)
	want := []string{runUser + "-token", "plain", pw, url.QueryEscape(pw), url.PathEscape(pw), shared}
	if n := len(want) + 2*256; len(got.Filter.Mask) != n || !slices.Equal(got.Filter.Mask[:len(want)], want) || got.Filter.Match != "^ERROR$$" {
		t.Fatalf("filter %q (%d masks) match %q, want mask %q, then the 512 obscured forms, and the match as written", got.Filter.Mask[:min(8, len(got.Filter.Mask))], len(got.Filter.Mask), got.Filter.Match, want)
	}
	// Every form a clone may remember the password in (Fossil picks the
	// salt afresh at each sync), the one this clone holds among them.
	for salt := range 256 {
		for _, s := range []string{pw, shared} {
			if !slices.Contains(got.Filter.Mask, fossilio.Obscure(s, byte(salt))) {
				t.Errorf("%q with salt %d is not masked", s, salt)
			}
		}
	}
	if !slices.Contains(got.Filter.Mask, obscured) || fossilio.Unobscure(obscured) != shared {
		t.Errorf("the clone's %q (%q) is not masked", obscured, fossilio.Unobscure(obscured))
	}
	// Without keep, the secrets all the same.
	f.p.NewPassword = func() string { return pw + "x" }
	got, err = f.p.Prepare(ctx, echoRun(t, runUser, seedPattern), runHash, f.p.Values)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Filter.Mask) != 4+2*256 || got.Filter.Mask[0] != pw+"x" || got.Filter.Match != "" {
		t.Errorf("filter without keep %+v", got.Filter)
	}
	// No password step: nothing to mask, no filter.
	if got, err := f.p.Prepare(ctx, echoRun(t, runUser, ""), runHash, f.p.Values); err != nil || len(got.Filter.Mask) != 0 {
		t.Errorf("a run without a password step: %+v, %v", got.Filter, err)
	}
}
