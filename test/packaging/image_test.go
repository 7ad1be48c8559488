package packaging

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// buildah runs buildah on the test's own storage (vfs: no overlay mounts
// to leave behind).
type buildah struct{ root string }

func (b buildah) run(args ...string) (string, error) {
	full := append([]string{"--storage-driver", "vfs", "--root", b.root, "--runroot", filepath.Join(b.root, "run")}, args...)
	var stderr bytes.Buffer
	cmd := exec.Command("buildah", full...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("buildah %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// imageConfig is the part of `buildah inspect --type image` the test reads.
type imageConfig struct {
	OCIv1 struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Config       struct {
			User       string            `json:"User"`
			Env        []string          `json:"Env"`
			Entrypoint []string          `json:"Entrypoint"`
			Cmd        []string          `json:"Cmd"`
			Labels     map[string]string `json:"Labels"`
		} `json:"config"`
	} `json:"OCIv1"`
}

// TestImageRelaysEvents builds the image of this machine's architecture as
// make image does (scripts/release.sh, the Dockerfile, buildah, FROM
// scratch), checks its configuration and the OCI archive, then mounts it and
// runs its entrypoint under chroot, as the image's user and with the image's
// environment, against a test Postgres and Kafka: the outbox table of
// sql/publication.sql, `setup`, rows inserted, `run`, and every event read
// back from Kafka. No container runtime works in this sandbox (podman run is
// refused), so chroot stands in for one; it needs root.
func TestImageRelaysEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and starts Postgres and Kafka")
	}
	if runtime.GOOS != "linux" {
		t.Skip("buildah and chroot: linux only")
	}
	tool(t, "buildah", "apt-get install -y buildah", "builds the image from the Dockerfile")
	if os.Geteuid() != 0 {
		t.Skip("TestImageRelaysEvents needs root (buildah's storage, chroot); CI runs it as root")
	}
	mount, cfg := buildImage(t)
	pg, err := testkit.StartPostgres()
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	broker, err := testkit.StartKafka()
	if err != nil {
		t.Fatalf("start kafka (needs java and mvn; see scripts/kafka.sh): %v", err)
	}
	t.Cleanup(func() { _ = broker.Stop() })
	servers := []string{"--postgres-url", pg.URL, "--kafka-brokers", broker.Brokers}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ddl, err := os.ReadFile(filepath.Join(root(t), "sql", "publication.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, string(ddl)); err != nil { // the documented DDL, as is
		t.Fatalf("sql/publication.sql: %v", err)
	}
	if out, err := entrypoint(mount, cfg, append([]string{"setup"}, servers...)...).CombinedOutput(); err != nil {
		t.Fatalf("setup in the image: %v\n%s", err, out)
	}
	want := insertEvents(ctx, t, conn, 20)

	var log bytes.Buffer
	relay := entrypoint(mount, cfg, append(append([]string{"run"}, servers...), "--http-addr", "127.0.0.1:0")...)
	relay.Stdout, relay.Stderr = &log, &log
	relay.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := relay.Start(); err != nil {
		t.Fatalf("start the image's entrypoint: %v", err)
	}
	exited := make(chan struct{})
	var exit error
	go func() { exit = relay.Wait(); close(exited) }()
	t.Cleanup(func() { // before the container, the servers and the image go
		_ = relay.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("the relay's log:\n%s", log.String())
		}
	})

	if missing := consume(ctx, t, broker.Brokers, want); len(missing) > 0 {
		t.Fatalf("%d of %d events did not arrive in Kafka: %v", len(missing), len(want), missing)
	}
	_ = relay.Process.Signal(syscall.SIGTERM)
	<-exited
	if exit != nil {
		t.Errorf("the relay did not stop cleanly on SIGTERM: %v", exit)
	}
}

// buildImage builds the image with scripts/release.sh into the test's own
// buildah storage, checks it, and returns the mounted root of a working
// container made from it and the image's configuration. Containers and
// images are removed when the test ends, failed or not.
func buildImage(t *testing.T) (string, imageConfig) {
	t.Helper()
	tmp := t.TempDir()
	b := buildah{root: filepath.Join(tmp, "storage")}
	const name, version = "localhost/outbox-cdc-test", "v0.0.0-imagetest"
	arch := runtime.GOARCH
	tag := name + ":" + version + "-linux-" + arch
	t.Cleanup(func() {
		if _, err := b.run("manifest", "rm", name+":"+version); err != nil {
			t.Errorf("remove the test's manifest list: %v", err)
		}
		if _, err := b.run("rmi", "--force", tag); err != nil {
			t.Errorf("remove the test's image: %v", err)
		}
	})
	cmd := exec.Command(filepath.Join(root(t), "scripts", "release.sh"), "image")
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), "VERSION="+version, "COMMIT=abc1234", "IMAGE="+name, "IMAGE_PLATFORMS=linux/"+arch,
		"DIST="+filepath.Join(tmp, "dist"), "IMAGE_CONTEXT="+filepath.Join(tmp, "context"), "BUILDAH_ROOT="+b.root)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh image: %v\n%s", err, out)
	}
	t.Logf("image built in %s", time.Since(start).Round(100*time.Millisecond))
	checkOCIArchive(t, filepath.Join(tmp, "dist", "outbox-cdc_"+version+"_oci.tar"), arch)

	out, err := b.run("inspect", "--type", "image", tag)
	if err != nil {
		t.Fatal(err)
	}
	var cfg imageConfig
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("buildah inspect: %v", err)
	}
	checkImageConfig(t, cfg, version, arch)

	container, err := b.run("from", "--pull-never", tag)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := b.run("rm", container); err != nil {
			t.Errorf("remove the working container: %v", err)
		}
	})
	mount, err := b.run("mount", container)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"outbox-cdc", "etc/ssl/certs/ca-certificates.crt"} {
		if _, err := os.Stat(filepath.Join(mount, f)); err != nil {
			t.Errorf("the image has no /%s: %v", f, err)
		}
	}
	return mount, cfg
}

func checkImageConfig(t *testing.T, cfg imageConfig, version, arch string) {
	t.Helper()
	c := cfg.OCIv1.Config
	if cfg.OCIv1.OS != "linux" || cfg.OCIv1.Architecture != arch {
		t.Errorf("platform %s/%s; want linux/%s", cfg.OCIv1.OS, cfg.OCIv1.Architecture, arch)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q; want 65532:65532", c.User)
	}
	if strings.Join(c.Entrypoint, " ") != "/outbox-cdc" || strings.Join(c.Cmd, " ") != "run" {
		t.Errorf("entrypoint %q, cmd %q", c.Entrypoint, c.Cmd)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": "abc1234",
		"org.opencontainers.image.source":   "https://github.com/outbox-cdc/outbox-cdc",
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if c.Labels[k] != v {
			t.Errorf("label %s %q; want %q", k, c.Labels[k], v)
		}
	}
	if _, err := time.Parse(time.RFC3339, c.Labels["org.opencontainers.image.created"]); err != nil {
		t.Errorf("label org.opencontainers.image.created: %v", err)
	}
}

// checkOCIArchive reads the archive make image writes: its index names one
// image index (the multi-arch manifest list) that lists linux/arch.
func checkOCIArchive(t *testing.T, path, arch string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the OCI archive: %v", err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		if h.Size < 1<<16 {
			files[h.Name], _ = io.ReadAll(tr)
		}
	}
	type index struct {
		MediaType string `json:"mediaType"`
		Manifests []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
			Platform  struct{ OS, Architecture string }
		} `json:"manifests"`
	}
	var top, list index
	if err := json.Unmarshal(files["index.json"], &top); err != nil || len(top.Manifests) != 1 ||
		top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json: %v %s", err, files["index.json"])
	}
	blob := "blobs/sha256/" + strings.TrimPrefix(top.Manifests[0].Digest, "sha256:")
	if err := json.Unmarshal(files[blob], &list); err != nil || len(list.Manifests) != 1 ||
		list.Manifests[0].Platform.OS != "linux" || list.Manifests[0].Platform.Architecture != arch {
		t.Errorf("the manifest list: %v %s; want one image, linux/%s", err, files[blob], arch)
	}
}

// entrypoint is the image's entrypoint with args, as a container runtime
// would start it: inside the image's root, as its user, with its
// environment only.
func entrypoint(mount string, cfg imageConfig, args ...string) *exec.Cmd {
	c := cfg.OCIv1.Config
	argv := append([]string{"--userspec=" + c.User, mount}, c.Entrypoint...)
	cmd := exec.Command("chroot", append(argv, args...)...)
	cmd.Env = c.Env
	return cmd
}

type event struct{ aggregateType, aggregateID, payload string }

// insertEvents commits n outbox rows in two transactions, over two aggregate
// types, and returns them by id.
func insertEvents(ctx context.Context, t *testing.T, conn *pgx.Conn, n int) map[string]event {
	t.Helper()
	want := map[string]event{}
	for tx := 0; tx < 2; tx++ {
		batch := &pgx.Batch{}
		for i := tx * n / 2; i < (tx+1)*n/2; i++ {
			e := event{[]string{"order", "payment"}[i%2], fmt.Sprintf("agg-%d", i%5), fmt.Sprintf(`{"n": %d}`, i)}
			id := uuid.NewString()
			want[id] = e
			batch.Queue(`INSERT INTO public.outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, $3, 'Happened', $4)`,
				id, e.aggregateType, e.aggregateID, e.payload)
		}
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return tx.SendBatch(ctx, batch).Close() }); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
	return want
}

// consume reads the relay's default topics (outbox.event.{aggregate_type})
// until every wanted event has arrived, with its key and payload, or ctx
// ends; it returns the ids that did not arrive.
func consume(ctx context.Context, t *testing.T, brokers string, want map[string]event) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics("outbox.event.order", "outbox.event.payment"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	left := map[string]event{}
	for id, e := range want {
		left[id] = e
	}
	for len(left) > 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var id string
			for _, h := range r.Headers {
				if h.Key == "id" {
					id = string(h.Value)
				}
			}
			e, ok := left[id]
			if !ok {
				return
			}
			if r.Topic != "outbox.event."+e.aggregateType || string(r.Key) != e.aggregateID || !jsonEqual(r.Value, e.payload) {
				t.Errorf("event %s: topic %s key %s value %s; want %+v", id, r.Topic, r.Key, r.Value, e)
			}
			delete(left, id)
		})
	}
	var missing []string
	for id := range left {
		missing = append(missing, id)
	}
	return missing
}

func jsonEqual(a []byte, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}
