// Command sbom writes an SPDX 2.3 JSON software bill of materials of a Go
// binary from the build information the Go toolchain embeds in it (what
// `go version -m BINARY` prints): the main module, every module linked in
// with its version and go.sum hash, and the Go standard library. It needs
// no network; make release runs it for each archive.
//
//	go run ./internal/tools/sbom -name outbox-cdc_v0.1.0_linux_amd64 \
//	    -version v0.1.0 -o outbox-cdc_v0.1.0_linux_amd64.spdx.json BINARY
//
// The creation time is SOURCE_DATE_EPOCH's when set, so that a rebuild of
// the same commit writes the same document.
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Getenv("SOURCE_DATE_EPOCH"), os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "sbom: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, sourceDateEpoch string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	var a artifact
	fs.StringVar(&a.Name, "name", "", "the document's name (default: the binary's file name)")
	fs.StringVar(&a.Version, "version", "", "the release's version (default: the main module's version in the binary)")
	fs.StringVar(&a.Source, "source", "https://github.com/outbox-cdc/outbox-cdc", "the project's address")
	fs.StringVar(&a.License, "license", "Apache-2.0", "the project's SPDX license expression")
	fs.StringVar(&a.Supplier, "supplier", "Organization: The outbox-cdc authors", "the supplier, as SPDX writes it")
	out := fs.String("o", "", "write the document to this file (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one binary, got %d arguments", fs.NArg())
	}
	bin := fs.Arg(0)
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read build information of %s: %w", bin, err)
	}
	if a.SHA256, err = fileSHA256(bin); err != nil {
		return err
	}
	a.File = filepath.Base(bin)
	if a.Name == "" {
		a.Name = a.File
	}
	if a.CreatedAt, err = createdAt(sourceDateEpoch); err != nil {
		return err
	}
	b, err := json.MarshalIndent(newDocument(a, bi), "", "  ")
	if err != nil {
		return fmt.Errorf("encode the document: %w", err)
	}
	b = append(b, '\n')
	if *out == "" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return fmt.Errorf("write the document: %w", err)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash the binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash the binary: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// createdAt is SOURCE_DATE_EPOCH (seconds since 1970) when set, else now.
func createdAt(epoch string) (time.Time, error) {
	if epoch == "" {
		return time.Now().UTC().Truncate(time.Second), nil
	}
	s, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	return time.Unix(s, 0).UTC(), nil
}
