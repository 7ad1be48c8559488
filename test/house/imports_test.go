package house

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// kafkaClients are the import path prefixes of the Kafka clients the module
// depends on.
var kafkaClients = []string{"github.com/segmentio/kafka-go", "github.com/twmb/franz-go"}

const kafkaRule = `STYLE.md, The house: "producer/ is the only room that imports a Kafka client"; ` +
	`relay "never touches a Kafka client"; outbox and inbox "import ... no Kafka client they do not need".`

// kafkaAllowed lists the packages, by directory from the module root (a
// trailing /... takes the directories below), that may import a Kafka
// client, each with why. An entry that matches no importing package fails
// the test, so an exception that ended cannot come back unnoticed.
var kafkaAllowed = map[string]string{
	"producer/...":       "the producer room: the only Kafka client of the pipeline",
	"internal/kwire":     "the producer room's guard of kafka-go's decoder",
	"internal/testkit":   "test tooling: starts Kafka for the test packages",
	"cmd/outbox-bench":   "bench tooling: reads and writes Kafka to measure the relay",
	"internal/tools/...": "developer tooling (tail reads a topic)",
	"inbox/kafkago":      "consumer-side adapter for services on kafka-go",
	"inbox/franz":        "consumer-side adapter for services on franz-go",
}

// TestOnlyTheProducerRoomImportsAKafkaClient parses the import specs of
// every non-test Go file of the module (whatever its build constraints; no
// go list) and fails on a package outside kafkaAllowed that imports
// kafka-go or franz-go.
func TestOnlyTheProducerRoomImportsAKafkaClient(t *testing.T) {
	root, _, err := moduleRoot()
	if err != nil {
		t.Fatalf("find the module: %v", err)
	}
	imports, err := kafkaImports(root)
	if err != nil {
		t.Fatalf("read the module's imports: %v", err)
	}
	used := map[string]bool{}
	var bad []string
	for _, imp := range imports {
		if entry, ok := allowedKafkaEntry(imp.dir); ok {
			used[entry] = true
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: package %s imports %s", imp.at, imp.dir, imp.path))
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d Kafka client import(s) outside the producer room:\n\t%s\nRule: %s\n"+
			"Ask producer/ (or the delivery seam) for what you need instead.",
			len(bad), strings.Join(bad, "\n\t"), kafkaRule)
	}
	for entry := range kafkaAllowed {
		if !used[entry] {
			t.Errorf("kafkaAllowed[%q]: no package there imports a Kafka client any more: delete the entry so it cannot come back", entry)
		}
	}
	if !used["producer/..."] {
		t.Errorf("found no Kafka import in producer/: the check reads nothing")
	}
}

// kafkaImport is one import spec of a Kafka client.
type kafkaImport struct {
	dir  string // the package's directory from the module root
	at   string // path:line of the spec
	path string // the imported path
}

// kafkaImports walks the module (testdata, hidden and underscore
// directories and nested modules aside) and reads each non-test file's
// imports only.
func kafkaImports(root string) ([]kafkaImport, error) {
	fset := token.NewFileSet()
	var out []kafkaImport
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && skipDir(p, name) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("parse %s: %w", p, err)
		}
		rel, _ := filepath.Rel(root, p)
		for _, spec := range f.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			if err != nil || !isKafkaClient(path) {
				continue
			}
			out = append(out, kafkaImport{
				dir:  filepath.ToSlash(filepath.Dir(rel)),
				at:   fmt.Sprintf("%s:%d", filepath.ToSlash(rel), fset.Position(spec.Pos()).Line),
				path: path,
			})
		}
		return nil
	})
	return out, err
}

func isKafkaClient(path string) bool {
	for _, c := range kafkaClients {
		if path == c || strings.HasPrefix(path, c+"/") {
			return true
		}
	}
	return false
}

// allowedKafkaEntry returns the kafkaAllowed entry covering dir.
func allowedKafkaEntry(dir string) (string, bool) {
	for entry := range kafkaAllowed {
		if base, ok := strings.CutSuffix(entry, "/..."); ok {
			if dir == base || strings.HasPrefix(dir, base+"/") {
				return entry, true
			}
		} else if dir == entry {
			return entry, true
		}
	}
	return "", false
}
