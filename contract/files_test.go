package contract

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// link makes name, in dir, a symbolic link to target.
func link(t *testing.T, dir, target, name string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// TestLoadRefusesLinksOut: a contract, a file a $ref may name or an index
// that is a symbolic link leading out of the directory is refused, the
// link named; a link to a file inside the directory is read, as
// Kubernetes mounts a ConfigMap (name -> ..data/name).
func TestLoadRefusesLinksOut(t *testing.T) {
	elsewhere := writeDir(t, map[string]string{"key.json": `{"private": "not a contract"}`, "index.yaml": "contracts: {A: A.json}"})
	for _, tc := range []struct {
		name string
		// name in the directory → target; OUT is another directory, and
		// "REL " makes the target relative to the link's directory
		links map[string]string
		want  string // in the error; "" loads
	}{
		{name: "contract out", links: map[string]string{"OrderShipped.json": "OUT/key.json"}, want: "OrderShipped.json: symbolic link to"},
		{name: "relative link out", links: map[string]string{"common/x.json": "REL OUT/key.json"}, want: "common/x.json: symbolic link to"},
		{name: "index out", links: map[string]string{"index.yaml": "OUT/index.yaml"}, want: "index.yaml: symbolic link to"},
		{name: "link through a directory out", links: map[string]string{"sub": "OUT", "Sub.json": "sub/key.json"}, want: "Sub.json: symbolic link to"},
		{name: "link inside", links: map[string]string{"Alias.json": "A.json"}},
		{name: "configmap", links: map[string]string{"..data": "..2024_01_01", "Mounted.json": "..data/Mounted.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDir(t, map[string]string{"A.json": `{"type": "object"}`, "..2024_01_01/Mounted.json": `{"type": "string"}`})
			for name, target := range tc.links {
				target = strings.Replace(target, "OUT", elsewhere, 1)
				if abs, ok := strings.CutPrefix(target, "REL "); ok {
					target, _ = filepath.Rel(filepath.Dir(filepath.Join(dir, name)), abs)
				}
				link(t, dir, target, name)
			}
			set, err := Load(dir, UnknownAllow)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if types := set.EventTypes(); len(types) != 2 {
					t.Errorf("event types %q, want A and the link's", types)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load read a link out of the directory: event types %q, want an error with %q", set.EventTypes(), tc.want)
			}
			if !strings.Contains(filepath.ToSlash(err.Error()), tc.want) || !strings.Contains(err.Error(), "outside") {
				t.Errorf("Load: %v; want %q and why", err, tc.want)
			}
		})
	}
}

// TestLoadCapsFileSize: a file over MaxFileBytes is refused, named, and
// read no further than the cap; one at the cap is read.
func TestLoadCapsFileSize(t *testing.T) {
	pad := func(n int) string { // a schema of n bytes
		s := `{"description": "`
		return s + strings.Repeat("x", n-len(s)-2) + `"}`
	}
	dir := writeDir(t, map[string]string{"Big.json": pad(MaxFileBytes + 1), "Fits.json": pad(MaxFileBytes), "index.yaml": "contracts: {Big: Big.json, Fits: Fits.json}\n" + strings.Repeat("#", MaxFileBytes)})
	_, err := Load(dir, UnknownAllow)
	if err == nil {
		t.Fatal("Load read a file over the cap")
	}
	msg := filepath.ToSlash(err.Error())
	for _, want := range []string{"Big.json: larger than 1 MiB", "index.yaml: larger than 1 MiB"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Load: %v; want %q", err, want)
		}
	}
	if strings.Contains(msg, "Fits.json") {
		t.Errorf("Load: %v; a file at the cap was refused", err)
	}
	if err := os.Remove(filepath.Join(dir, "index.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "Big.json")); err != nil {
		t.Fatal(err)
	}
	set, err := Load(dir, UnknownAllow)
	if err != nil || !slices.Equal(set.EventTypes(), []string{"Fits"}) {
		t.Fatalf("Load: %v; want Fits read", err)
	}
}

// TestReadCappedStopsEarly: an endless file (/dev/zero) is read no further
// than the cap.
func TestReadCappedStopsEarly(t *testing.T) {
	f, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip("no /dev/zero:", err)
	}
	defer f.Close()
	b, err := readCapped(f)
	if err == nil || len(b) > MaxFileBytes+1 || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Errorf("readCapped(/dev/zero): %d bytes, %v; want at most %d and an error", len(b), err, MaxFileBytes+1)
	}
}
