package config

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// parser fills one Config from its sources, lowest first.
type parser struct {
	c    *Config
	fl   *flags
	env  map[string]string // the OUTBOX_CDC_ variables
	file *file             // nil: no --config
	set  map[string]bool   // the flags some source set
	path string            // --config on the command line
}

// layers applies the config file, then the environment, then the command
// line, to the flags of groups.
func (p *parser) layers(groups group, args []string) error {
	fs := p.fl.command(groups)
	p.fl.layer = 1
	path, err := p.configPath(fs)
	if err != nil {
		return err
	}
	if path != "" {
		if p.file, err = readFile(path); err != nil {
			return err
		}
		if p.file.root != nil {
			set, err := p.file.apply(p.file.root, p.fl, "", "tables")
			if err != nil {
				return err
			}
			for _, name := range set {
				p.set[name] = true
			}
		}
	}
	p.fl.layer = 2
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if envErr == nil {
			var ok bool
			ok, envErr = setFromEnv(f, p.env)
			p.set[f.Name] = p.set[f.Name] || ok
		}
	})
	if envErr != nil {
		return envErr
	}
	p.c.Warnings = append(p.c.Warnings, unknownVariables(p.fl, p.env)...)
	p.fl.layer = 3
	if err := fs.Parse(args); err != nil {
		return &UsageError{Msg: err.Error()}
	}
	fs.Visit(func(f *flag.Flag) { p.set[f.Name] = true })
	return nil
}

// configPath is --config's value, from the command line (as Parse's
// first reading found it) or else the environment, read before both are
// applied: the file is below them.
func (p *parser) configPath(fs *flag.FlagSet) (string, error) {
	if p.path != "" || fs.Lookup("config") == nil {
		return p.path, nil
	}
	if _, err := setFromEnv(fs.Lookup("config"), p.env); err != nil {
		return "", err
	}
	return p.fl.raw.config, nil
}

// finish fills what follows from the settings read: the tables, TLS when
// a TLS setting implies it, and the deprecations.
func (p *parser) finish() error {
	r := &p.c.Relay
	r.Kafka.TLS = r.Kafka.UsesTLS()
	if err := p.tables(); err != nil {
		return err
	}
	if p.set["kafka-auto-create-topics"] {
		p.c.Deprecations = append(p.c.Deprecations, "--kafka-auto-create-topics is deprecated: outbox-cdc creates missing topics itself "+
			"(--create-topics, with --topic-partitions, --topic-replication-factor and --topic-config); it only applies with --create-topics=false")
	}
	return nil
}

// setFromEnv sets f from its environment variable, or from the file its
// _FILE variable names, and reports whether either was set.
func setFromEnv(f *flag.Flag, env map[string]string) (bool, error) {
	name := EnvName(f.Name)
	v, ok := env[name]
	path, fromFile := env[name+fileSuffix]
	switch {
	case ok && fromFile:
		return false, usagef("both %s and %s%s are set; keep one", name, name, fileSuffix)
	case fromFile:
		b, err := os.ReadFile(path)
		if err != nil {
			return false, usagef("%s%s: %v", name, fileSuffix, err)
		}
		v = strings.TrimRight(string(b), "\r\n")
		if err := f.Value.Set(v); err != nil {
			return false, usagef("%s%s (%s): %v", name, fileSuffix, path, err)
		}
	case ok:
		if err := f.Value.Set(v); err != nil {
			return false, usagef("%s=%q: %v", name, v, err)
		}
	}
	return ok || fromFile, nil
}

func environMap(environ []string) map[string]string {
	m := make(map[string]string)
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envPrefix) {
			m[k] = v
		}
	}
	return m
}

// otherVariables are OUTBOX_CDC_ variables read by something else than a
// flag: the binary's CPU profile, the project's scripts' download cache.
var otherVariables = []string{"OUTBOX_CDC_CPUPROFILE", "OUTBOX_CDC_CACHE"}

// unknownVariables warns of each OUTBOX_CDC_ variable no flag of any
// command reads (a misspelt one is otherwise silently ignored), with the
// nearest known name.
func unknownVariables(f *flags, env map[string]string) []string {
	var known []string // without the prefix, which every name has
	for _, v := range otherVariables {
		known = append(known, strings.TrimPrefix(v, envPrefix))
	}
	for _, name := range f.order {
		v := strings.TrimPrefix(EnvName(name), envPrefix)
		known = append(known, v, v+fileSuffix)
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if slices.Contains(known, strings.TrimPrefix(name, envPrefix)) {
			continue
		}
		w := fmt.Sprintf("%s is set, but no outbox-cdc setting has that name; it is ignored", name)
		if s := nearest(strings.TrimPrefix(name, envPrefix), known); s != "" {
			w += fmt.Sprintf(" (did you mean %s%s?)", envPrefix, s)
		}
		out = append(out, w)
	}
	return out
}

// nearest is the candidate closest to s by edit distance, when close
// enough to be a slip (a third of s's length, at least 2); else "".
func nearest(s string, candidates []string) string {
	best, bestD := "", max(2, len(s)/3)+1
	for _, c := range candidates {
		if d := distance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
