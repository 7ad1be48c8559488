package packaging

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/config"
)

// commandFlags are the flags each command takes, from its help text.
func commandFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, cmd := range config.Commands() {
		var help bytes.Buffer
		if _, err := config.Parse(cmd, []string{"--help"}, nil, &help); err == nil {
			t.Fatalf("%s --help returned no ErrHelp", cmd)
		}
		out[cmd] = map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^  --([a-z0-9-]+)(?: |\n +)\(env `).FindAllStringSubmatch(help.String(), -1) {
			out[cmd][m[1]] = true
		}
		if len(out[cmd]) == 0 {
			t.Fatalf("no flags in the help of %s", cmd)
		}
	}
	return out
}

// codeSpans returns the text of every inline code span and every line of
// every fenced block of a Markdown document, a span broken over lines
// joined by spaces.
func codeSpans(doc string) []string {
	var spans []string
	var prose strings.Builder
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inFence = !inFence
		case inFence:
			spans = append(spans, line)
		default:
			prose.WriteString(line + "\n")
		}
	}
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(prose.String(), -1) {
		spans = append(spans, strings.Join(strings.Fields(m[1]), " "))
	}
	return spans
}

// TestRunbook holds docs/operations.md to the binary and to the alert
// rules: every `outbox-cdc COMMAND --flag …` names a command and flags that
// command takes, a `--flag` on its own is one some command takes, and every
// alert of
// deploy/prometheus/alerts.yml has its section (and no section names an
// alert the file lacks).
func TestRunbook(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	flags := commandFlags(t)
	anyFlag := map[string]bool{}
	for _, fs := range flags {
		for f := range fs {
			anyFlag[f] = true
		}
	}
	commandLine := regexp.MustCompile(`^(?:kubectl exec \S+ -- /)?outbox-cdc (dlq [a-z]+|[a-z]+)((?: [^ ]+)*)$`)
	flagWord := regexp.MustCompile(`(?:^| )--([a-z0-9-]+)`)
	commands := 0
	for _, span := range codeSpans(doc) {
		if m := commandLine.FindStringSubmatch(span); m != nil {
			cmd := m[1]
			if cmd == "version" {
				continue
			}
			if flags[cmd] == nil {
				t.Errorf("%q: outbox-cdc has no command %q", span, cmd)
				continue
			}
			commands++
			for _, f := range flagWord.FindAllStringSubmatch(m[2], -1) {
				if !flags[cmd][f[1]] && f[1] != "help" {
					t.Errorf("%q: outbox-cdc %s has no flag --%s", span, cmd, f[1])
				}
			}
			continue
		}
		if !strings.HasPrefix(span, "--") {
			continue // another program's command line, or no flag
		}
		for _, f := range flagWord.FindAllStringSubmatch(span, -1) {
			if !anyFlag[f[1]] {
				t.Errorf("%q: no outbox-cdc command has a flag --%s", span, f[1])
			}
		}
	}
	if commands < 10 {
		t.Errorf("found %d outbox-cdc command lines in docs/operations.md", commands)
	}
	t.Logf("%d outbox-cdc command lines checked", commands)

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, filepath.Join(root(t), "deploy", "prometheus", "alerts.yml"), &rules)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	var sections []string
	for _, m := range regexp.MustCompile(`(?m)^### (OutboxCDC[A-Za-z]+)`).FindAllStringSubmatch(doc, -1) {
		sections = append(sections, m[1])
	}
	for _, a := range alerts {
		if !slices.Contains(sections, a) {
			t.Errorf("docs/operations.md has no section for the alert %s", a)
		}
	}
	for _, s := range sections {
		if !slices.Contains(alerts, s) {
			t.Errorf("docs/operations.md has a section for %s, which deploy/prometheus/alerts.yml does not define", s)
		}
	}
}
