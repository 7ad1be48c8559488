package contract

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxFileBytes caps the size of each file Load reads (a contract, a file
// a $ref may name, the index): contracts are a few kilobytes, and a file
// that is not one (a log, /dev/zero behind a link) must not take memory.
const MaxFileBytes = 1 << 20

// resolve is the path of p's file with no symbolic link left in it, or
// "" when p is not a regular file nor a link to one (a dangling link
// included): not read. A link whose target is outside the directory is
// an error, whatever it leads to: a contract is what the directory holds,
// not a file elsewhere that a link exposes (a key, /dev/zero).
func (l *loading) resolve(p string, d fs.DirEntry) (string, error) {
	if d.Type().IsRegular() {
		return p, nil
	}
	if d.Type()&fs.ModeSymlink == 0 {
		return "", nil
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", nil
	}
	if rel, err := filepath.Rel(l.real, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("symbolic link to %s, outside %s: a contract file must be in the directory (a link may lead only to a file in it)", real, l.dir)
	}
	if !regularTarget(real) {
		return "", nil
	}
	return real, nil
}

// readFile reads the file at p, refusing one over MaxFileBytes.
func readFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readCapped(f)
}

// readCapped reads r to its end, but no further than one byte past
// MaxFileBytes: an endless file takes no more memory than that.
func readCapped(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("larger than %d MiB: not a contract", MaxFileBytes>>20)
	}
	return b, nil
}
