package testkit

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

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
