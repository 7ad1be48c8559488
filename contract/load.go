package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	neturl "net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// IndexNames are the index file's possible names, in a directory's root; at
// most one may be there. An index maps event types to contract files:
//
//	contracts:
//	  OrderPlaced: orders/placed.v2.json
//	  order.paid: orders/paid.json
//
// (index.json: {"contracts": {"OrderPlaced": "orders/placed.v2.json"}}).
// Paths are relative to the directory and stay inside it. With an index,
// its entries alone are contracts; without one, each *.json file in the
// directory's root is the contract of the event type its name gives
// (OrderPlaced.json: OrderPlaced). Either way every *.json file below the
// directory can be named by a $ref.
var IndexNames = []string{"index.yaml", "index.yml", "index.json"}

// index is an index file's content.
type index struct {
	Contracts map[string]string `yaml:"contracts" json:"contracts"`
}

// LoadError lists every file of a contracts directory that cannot be used,
// each named: a file that is not JSON, a schema that does not compile, a
// $ref refused, a bad index.
type LoadError struct {
	Dir      string
	Problems []Problem
}

// Problem is one file that cannot be used.
type Problem struct {
	File string // its path: the directory joined with its name
	Err  error
}

func (p Problem) Error() string { return p.File + ": " + p.Err.Error() }

func (e *LoadError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "; ")
}

// Load reads the contracts of dir and compiles each once, with unknown
// deciding the fate of event types without one (empty: UnknownAllow). It
// reads local files only. A *LoadError lists every file that cannot be
// used; then no Set is returned.
func Load(dir string, unknown Unknown) (*Set, error) {
	if unknown == "" {
		unknown = UnknownAllow
	}
	if unknown != UnknownAllow && unknown != UnknownDeadLetter {
		return nil, fmt.Errorf("unknown event types: %q: want allow or dead-letter", unknown)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("contracts directory %s: %w", dir, err)
	}
	l := &loading{dir: dir, abs: abs, base: fileURL(abs) + "/", docs: map[string]any{}, raw: map[string][]byte{}, unread: map[string]bool{}}
	if err := l.read(); err != nil {
		return nil, err
	}
	types := l.contractFiles()
	set := &Set{dir: dir, base: l.base, unknown: unknown, contracts: map[string]contract{}}
	if len(l.problems) == 0 && len(types) == 0 {
		l.fail("", errors.New("no contract: want EVENT_TYPE.json files, or an index file (index.yaml) naming them"))
	}
	// Every contract is compiled, even after a problem, so that check
	// lists them all.
	c := l.compiler()
	for _, t := range slices.Sorted(maps.Keys(types)) {
		url := l.url(types[t])
		sch, err := c.Compile(url)
		if err != nil {
			l.fail(types[t], fmt.Errorf("contract of %s: %w", t, compileError(err)))
			continue
		}
		set.contracts[t] = contract{file: types[t], url: url, schema: sch, screen: newScreen(sch), doc: l.raw[types[t]]}
	}
	if len(l.problems) > 0 {
		return nil, &LoadError{Dir: dir, Problems: l.problems}
	}
	return set, nil
}

// compileError is err, a compiler's, on one line: a schema's mistakes each
// as "at POINTER: what", a refused $ref as the refusal says it.
func compileError(err error) error {
	var lue *jsonschema.LoadURLError
	if errors.As(err, &lue) {
		return lue.Err // the refusal, which names the $ref itself
	}
	var sve *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if !errors.As(err, &sve) || !errors.As(sve.Err, &verr) {
		return err
	}
	var leaves []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		for _, c := range u.Errors {
			walk(c)
		}
		if len(u.Errors) == 0 && u.Error != nil {
			leaves = append(leaves, fmt.Sprintf("at %q: %s", u.InstanceLocation, u.Error))
		}
	}
	walk(*verr.DetailedOutput())
	return fmt.Errorf("not valid against its meta-schema %s: %s", strings.TrimSuffix(verr.SchemaURL, "#"), strings.Join(leaves, "; "))
}

// loading is one Load's state.
type loading struct {
	dir, abs, base string
	real           string            // abs with no symbolic link left in it
	docs           map[string]any    // every *.json file, by path relative to abs
	raw            map[string][]byte // docs' bytes as read, registered as they are (Set.Document)
	unread         map[string]bool   // *.json files not read or not JSON (a problem already)
	index          *index
	indexName      string
	problems       []Problem
}

func (l *loading) fail(rel string, err error) {
	name := l.dir
	if rel != "" {
		name = filepath.Join(l.dir, filepath.FromSlash(rel))
	}
	msg := strings.Join(strings.Fields(l.short(err.Error())), " ") // one line, for logs and check
	l.problems = append(l.problems, Problem{File: name, Err: errors.New(msg)})
}

// short writes file URLs in an error as paths, the directory's as users
// gave it.
func (l *loading) short(msg string) string {
	return strings.ReplaceAll(strings.ReplaceAll(msg, l.base, filepath.ToSlash(l.dir)+"/"), "file://", "")
}

// read parses every *.json file below the directory, and the index. Hidden
// files and directories (Kubernetes' ..data among them) are skipped; a
// symbolic link is followed to a file inside the directory (as Kubernetes
// links a ConfigMap's files through ..data), refused when it leads out of
// it, and one to a directory is not walked.
func (l *loading) read() error {
	info, err := os.Stat(l.abs)
	if err != nil {
		return fmt.Errorf("contracts directory: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("contracts directory %s is not a directory", l.dir)
	}
	if l.real, err = filepath.EvalSymlinks(l.abs); err != nil {
		return fmt.Errorf("contracts directory: %w", err)
	}
	return filepath.WalkDir(l.abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read contracts directory: %w", err)
		}
		rel, _ := filepath.Rel(l.abs, p)
		rel = filepath.ToSlash(rel)
		index := slices.Contains(IndexNames, rel)
		switch {
		case rel == ".":
			return nil
		case strings.HasPrefix(d.Name(), "."):
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.IsDir(), !index && !strings.HasSuffix(rel, ".json"):
			return nil
		}
		real, err := l.resolve(p, d)
		switch {
		case err != nil:
			l.fail(rel, err)
		case real == "":
		case index:
			l.readIndex(real, rel)
		default:
			l.readSchema(real, rel)
		}
		return nil
	})
}

func (l *loading) readSchema(p, rel string) {
	b, err := readFile(p)
	if err != nil {
		l.fail(rel, err)
		l.unread[rel] = true // an index naming it says no more
		return
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		l.fail(rel, fmt.Errorf("not JSON: %w", err))
		l.unread[rel] = true
		return
	}
	l.docs[rel] = doc
	l.raw[rel] = b
}

func (l *loading) readIndex(p, rel string) {
	if l.index != nil {
		l.fail(rel, fmt.Errorf("a second index beside %s: keep one", l.indexName))
		return
	}
	b, err := readFile(p)
	if err != nil {
		l.fail(rel, err)
		return
	}
	var ix index
	if strings.HasSuffix(rel, ".json") {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(&ix)
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		err = dec.Decode(&ix)
	}
	if err != nil {
		l.fail(rel, fmt.Errorf("index: %w (want contracts: a map of event types to files)", err))
		return
	}
	l.index, l.indexName = &ix, rel
}

// contractFiles maps each event type to its contract file: the index's
// entries, or each *.json file in the root.
func (l *loading) contractFiles() map[string]string {
	types := map[string]string{}
	if l.index == nil {
		for rel := range l.docs {
			if !strings.Contains(rel, "/") {
				types[strings.TrimSuffix(rel, ".json")] = rel
			}
		}
		return types
	}
	for t, file := range l.index.Contracts {
		rel := path.Clean(filepath.ToSlash(file))
		_, read := l.docs[rel]
		switch {
		case t == "":
			l.fail(l.indexName, errors.New("index: an empty event type"))
		case path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../"):
			l.fail(l.indexName, fmt.Errorf("index: %s: %s is outside the directory", t, file))
		case l.unread[rel]:
			// reported as not JSON
		case !read:
			l.fail(l.indexName, fmt.Errorf("index: %s: no JSON file %s in the directory", t, file))
		default:
			types[t] = rel
		}
	}
	return types
}

// compiler holds every file as a resource, under its file URL and, when it
// declares an absolute $id of its own, under that too: a $ref resolves to
// a file of the directory by relative path or by $id, and to nothing else.
func (l *loading) compiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusal{l})
	ids := map[string]string{} // $id → file
	for _, rel := range slices.Sorted(maps.Keys(l.docs)) {
		doc := l.docs[rel]
		url := l.url(rel)
		if err := c.AddResource(url, doc); err != nil {
			l.fail(rel, err)
			continue
		}
		id := ownID(url, doc)
		if id == "" || id == url {
			continue
		}
		if other, ok := ids[id]; ok {
			l.fail(rel, fmt.Errorf("$id %s is also %s's", id, other))
			continue
		}
		ids[id] = rel
		if err := c.AddResource(id, doc); err != nil {
			l.fail(rel, fmt.Errorf("$id %s: %w", id, err))
		}
	}
	return c
}

// ownID is doc's top-level $id resolved against url, without its fragment;
// empty when it has none.
func ownID(url string, doc any) string {
	obj, ok := doc.(map[string]any)
	if !ok {
		return ""
	}
	id, ok := obj["$id"].(string)
	if !ok || id == "" {
		return ""
	}
	base, err := neturl.Parse(url)
	if err != nil {
		return ""
	}
	ref, err := neturl.Parse(id)
	if err != nil {
		return ""
	}
	u := base.ResolveReference(ref)
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// refusal is the compiler's loader: it is asked only for what is not in
// the directory (the meta-schemas are built in), and refuses it, saying
// why.
type refusal struct{ l *loading }

func (r refusal) Load(url string) (any, error) {
	u, err := neturl.Parse(url)
	if err != nil {
		return nil, fmt.Errorf("$ref %s: %w", url, err)
	}
	if u.Scheme != "file" {
		return nil, fmt.Errorf("remote $ref %s refused: outbox-cdc loads no schema over the network; put the schema in %s (it may keep that URL as its $id)", url, r.l.dir)
	}
	rel, err := filepath.Rel(r.l.abs, filepath.FromSlash(u.Path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("$ref %s is outside %s: a contract may refer only to files in its directory", u.Path, r.l.dir)
	}
	return nil, fmt.Errorf("$ref %s: no such *.json file in %s", filepath.Join(r.l.dir, rel), r.l.dir)
}

// url is the file URL of rel, a path relative to the directory.
func (l *loading) url(rel string) string {
	return fileURL(filepath.Join(l.abs, filepath.FromSlash(rel)))
}

// fileURL is path's file:// URL, as the compiler writes it.
func fileURL(p string) string {
	return (&neturl.URL{Scheme: "file", Path: filepath.ToSlash(p)}).String()
}

// regularTarget reports whether p leads to a file.
func regularTarget(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular()
}
