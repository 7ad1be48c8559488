// Package harness starts the real servers the integration tests need, a
// throwaway PostgreSQL cluster and a single-node Apache Kafka broker, through
// the same scripts the demo uses (scripts/pg.sh, scripts/kafka.sh), and stops
// them by PID.
package harness

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Root returns the repository root: the nearest directory above the working
// directory that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// script runs scripts/NAME with args and returns its key=value output lines.
func script(env []string, name string, args ...string) (map[string]string, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", name), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	kv := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	return kv, nil
}

// Postgres is a running throwaway cluster with wal_level=logical.
type Postgres struct {
	Dir  string
	URL  string // superuser, trust auth, 127.0.0.1
	Port int
	PID  int
}

func newPostgres(kv map[string]string) *Postgres {
	pid, _ := strconv.Atoi(kv["pid"])
	port, _ := strconv.Atoi(kv["port"])
	return &Postgres{Dir: kv["dir"], URL: kv["url"], Port: port, PID: pid}
}

// StartPostgres initdbs and starts a new cluster on a free loopback port,
// of the major version PG_VERSION names (scripts/pg.sh's default if unset).
func StartPostgres() (*Postgres, error) {
	kv, err := script(nil, "pg.sh", "start")
	if err != nil {
		return nil, err
	}
	return newPostgres(kv), nil
}

// StartPostgresVersion is StartPostgres for PostgreSQL major (say "13"),
// whatever PG_VERSION says.
func StartPostgresVersion(major string) (*Postgres, error) {
	kv, err := script([]string{"PG_VERSION=" + major}, "pg.sh", "start")
	if err != nil {
		return nil, err
	}
	return newPostgres(kv), nil
}

// StartStandby starts a physical standby of primary streaming through the
// physical slot named slot (created on primary), with hot_standby_feedback
// and, on PostgreSQL 17 and newer, sync_replication_slots on: the
// primary's failover-enabled logical slots are kept in step on it. The
// standby is a cold copy: primary is restarted (same port, new PID).
func StartStandby(primary *Postgres, slot string) (*Postgres, error) {
	kv, err := script(nil, "pg.sh", "standby", primary.Dir, slot)
	if err != nil {
		return nil, err
	}
	primary.PID, _ = strconv.Atoi(kv["primary_pid"])
	return newPostgres(kv), nil
}

// Crash stops the cluster as a crash does (immediate shutdown, no
// checkpoint), keeping its directory.
func (p *Postgres) Crash() error {
	_, err := script(nil, "pg.sh", "crash", p.Dir)
	return err
}

// Promote ends a standby's recovery: it becomes a primary.
func (p *Postgres) Promote() error {
	_, err := script(nil, "pg.sh", "promote", p.Dir)
	return err
}

// Stop stops the cluster and removes its directory.
func (p *Postgres) Stop() error {
	_, err := script(nil, "pg.sh", "stop", p.Dir)
	return err
}

// Kafka is a running single-node KRaft broker.
type Kafka struct {
	Dir     string
	Brokers string // host:port
	PID     int
}

// StartKafka formats and starts a new broker on free loopback ports; props
// are extra server.properties lines (key=value).
func StartKafka(props ...string) (*Kafka, error) {
	return StartKafkaWith(KafkaOptions{Props: props})
}

// KafkaOptions shape a broker beyond the defaults of scripts/kafka.sh.
type KafkaOptions struct {
	Props      []string // extra server.properties lines without spaces (key=value)
	PropsFile  string   // a file appended to server.properties, for values with spaces
	Listeners  []string // extra listeners, NAME://127.0.0.1:PORT, named after their security protocol
	FormatArgs []string // extra storage-format arguments (--add-scram …)
}

// StartKafkaWith is StartKafka with options.
func StartKafkaWith(o KafkaOptions) (*Kafka, error) {
	kv, err := script([]string{
		"KAFKA_EXTRA_PROPS=" + strings.Join(o.Props, " "),
		"KAFKA_EXTRA_PROPS_FILE=" + o.PropsFile,
		"KAFKA_EXTRA_LISTENERS=" + strings.Join(o.Listeners, " "),
		"KAFKA_FORMAT_ARGS=" + strings.Join(o.FormatArgs, " "),
	}, "kafka.sh", "start")
	if err != nil {
		return nil, err
	}
	pid, _ := strconv.Atoi(kv["pid"])
	return &Kafka{Dir: kv["dir"], Brokers: kv["brokers"], PID: pid}, nil
}

// Pause freezes the broker's JVM (SIGSTOP): connections stay open, nothing
// is answered, as with a hung broker.
func (k *Kafka) Pause() error { return syscall.Kill(k.PID, syscall.SIGSTOP) }

// Resume undoes Pause.
func (k *Kafka) Resume() error { return syscall.Kill(k.PID, syscall.SIGCONT) }

// Stop stops the broker and removes its directory.
func (k *Kafka) Stop() error {
	_, err := script(nil, "kafka.sh", "stop", k.Dir)
	return err
}

// Restart stops the cluster with a fast shutdown and starts it again on the
// same port and data.
func (p *Postgres) Restart() error {
	if _, err := script(nil, "pg.sh", "stop-server", p.Dir); err != nil {
		return err
	}
	kv, err := script(nil, "pg.sh", "restart", p.Dir)
	if err != nil {
		return err
	}
	p.PID, _ = strconv.Atoi(kv["pid"])
	return nil
}

// Kill stops the broker with SIGKILL, keeping its data for Restart.
func (k *Kafka) Kill() error {
	_, err := script(nil, "kafka.sh", "stop-server", k.Dir)
	return err
}

// Restart starts a killed broker again on the same port and data.
func (k *Kafka) Restart() error {
	kv, err := script(nil, "kafka.sh", "restart", k.Dir)
	if err != nil {
		return err
	}
	k.PID, _ = strconv.Atoi(kv["pid"])
	return nil
}

// StopBeforeTimeout runs stops 20 s before go test's -timeout would end the
// process, which runs no deferred function: servers started by TestMain are
// stopped all the same. The returned func cancels it.
func StopBeforeTimeout(stops ...func() error) (cancel func()) {
	d := testTimeout()
	if d == 0 {
		return func() {}
	}
	t := time.AfterFunc(d-20*time.Second, func() {
		fmt.Fprintln(os.Stderr, "near the test timeout; stopping servers")
		for _, stop := range stops {
			_ = stop()
		}
	})
	return func() { t.Stop() }
}

func testTimeout() time.Duration {
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 30*time.Second {
			return d
		}
	}
	return 0
}

// KafkaCluster is a running three-node KRaft cluster (scripts/kafka-cluster.sh):
// replication factor 3, min.insync.replicas=2, auto-creation off.
type KafkaCluster struct {
	Dir     string
	Brokers string // the three EXTERNAL listeners, comma-separated
	Ports   [3]int
	PIDs    [3]int
}

// StartKafkaCluster formats and starts a cluster; advertise, when given,
// are the three host:port the nodes advertise to clients (a proxy's).
func StartKafkaCluster(advertise ...string) (*KafkaCluster, error) {
	kv, err := script([]string{"KAFKA_CLUSTER_ADVERTISE=" + strings.Join(advertise, " ")}, "kafka-cluster.sh", "start")
	if err != nil {
		return nil, err
	}
	c := &KafkaCluster{Dir: kv["dir"], Brokers: kv["brokers"]}
	c.read(kv)
	return c, nil
}

func (c *KafkaCluster) read(kv map[string]string) {
	for i := range 3 {
		c.Ports[i], _ = strconv.Atoi(kv[fmt.Sprintf("port%d", i+1)])
		c.PIDs[i], _ = strconv.Atoi(kv[fmt.Sprintf("pid%d", i+1)])
	}
}

// Kill ends node n (1-3) with SIGKILL, keeping its data.
func (c *KafkaCluster) Kill(n int) error {
	_, err := script(nil, "kafka-cluster.sh", "kill", c.Dir, strconv.Itoa(n))
	return err
}

// StopNode stops node n cleanly (SIGTERM), as a rolling restart does.
func (c *KafkaCluster) StopNode(n int) error {
	_, err := script(nil, "kafka-cluster.sh", "stop-node", c.Dir, strconv.Itoa(n))
	return err
}

// StartNode starts node n again, on its ports and data.
func (c *KafkaCluster) StartNode(n int) error {
	kv, err := script(nil, "kafka-cluster.sh", "start-node", c.Dir, strconv.Itoa(n))
	if err == nil {
		c.read(kv)
	}
	return err
}

// Stop stops every node and removes the cluster's directory.
func (c *KafkaCluster) Stop() error {
	_, err := script(nil, "kafka-cluster.sh", "stop", c.Dir)
	return err
}
