package packaging

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// The tags of an .rpm's main header that the tests read (rpm's
// include/rpm/rpmtag.h).
const (
	rpmTagName          = 1000
	rpmTagVersion       = 1001
	rpmTagRelease       = 1002
	rpmTagSummary       = 1004
	rpmTagBuildTime     = 1006
	rpmTagBuildHost     = 1007
	rpmTagLicense       = 1014
	rpmTagArch          = 1022
	rpmTagPreIn         = 1023
	rpmTagPostIn        = 1024
	rpmTagPreUn         = 1025
	rpmTagPostUn        = 1026
	rpmTagFileModes     = 1030
	rpmTagFileMTimes    = 1034
	rpmTagFileDigests   = 1035
	rpmTagFileFlags     = 1037
	rpmTagFileUserName  = 1039
	rpmTagFileGroupName = 1040
	rpmTagRequireName   = 1049
	rpmTagDirIndexes    = 1116
	rpmTagBaseNames     = 1117
	rpmTagDirNames      = 1118
)

// The file flags of rpm's %config(noreplace) and %license.
const (
	rpmFileConfig    = 1 << 0
	rpmFileNoReplace = 1 << 4
	rpmFileLicense   = 1 << 7
)

// rpmHeader holds the main header of an .rpm: each tag's value as a
// string, a []string or a []int64. No rpm is needed to read it (CI has
// none), so this reads the format as rpm's lib/header.c writes it: a 96-byte
// lead, the signature header padded to 8 bytes, then the main header, each
// header a magic, an index of (tag, type, offset, count) and a data store.
type rpmHeader map[int32]any

func readRPM(path string) (rpmHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(96, io.SeekStart); err != nil {
		return nil, err
	}
	if _, err := readRPMHeader(f, true); err != nil {
		return nil, fmt.Errorf("%s: signature: %w", path, err)
	}
	h, err := readRPMHeader(f, false)
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	return h, nil
}

func readRPMHeader(r io.Reader, padded bool) (rpmHeader, error) {
	var intro struct {
		Magic    [8]byte
		Count    uint32
		StoreLen uint32
	}
	if err := binary.Read(r, binary.BigEndian, &intro); err != nil {
		return nil, err
	}
	if !bytes.Equal(intro.Magic[:4], []byte{0x8e, 0xad, 0xe8, 0x01}) {
		return nil, errors.New("no header magic")
	}
	if intro.Count > 1<<16 || intro.StoreLen > 1<<28 {
		return nil, fmt.Errorf("implausible header: %d entries, %d bytes", intro.Count, intro.StoreLen)
	}
	index := make([]struct{ Tag, Type, Offset, Count uint32 }, intro.Count)
	if err := binary.Read(r, binary.BigEndian, index); err != nil {
		return nil, err
	}
	storeLen := int(intro.StoreLen)
	if padded {
		storeLen += (8 - storeLen%8) % 8
	}
	store := make([]byte, storeLen)
	if _, err := io.ReadFull(r, store); err != nil {
		return nil, err
	}
	h := rpmHeader{}
	for _, e := range index {
		v, err := rpmValue(store[:intro.StoreLen], e.Type, e.Offset, e.Count)
		if err != nil {
			return nil, fmt.Errorf("tag %d: %w", e.Tag, err)
		}
		h[int32(e.Tag)] = v
	}
	return h, nil
}

// rpmValue decodes count values of type typ at off in the store.
func rpmValue(store []byte, typ, off, count uint32) (any, error) {
	if int(off) > len(store) {
		return nil, fmt.Errorf("offset %d past the store's %d bytes", off, len(store))
	}
	b := store[off:]
	width := map[uint32]int{2: 1, 3: 2, 4: 4, 5: 8}[typ]
	switch {
	case typ == 6: // STRING
		s, _, _ := bytes.Cut(b, []byte{0})
		return string(s), nil
	case typ == 8 || typ == 9: // STRING_ARRAY, I18NSTRING
		var out []string
		for range count {
			s, rest, ok := bytes.Cut(b, []byte{0})
			if !ok {
				return nil, errors.New("unterminated string")
			}
			out, b = append(out, string(s)), rest
		}
		return out, nil
	case width > 0:
		if len(b) < width*int(count) {
			return nil, errors.New("short integer array")
		}
		out := make([]int64, count)
		for i := range out {
			switch w := b[i*width:]; width {
			case 1:
				out[i] = int64(w[0])
			case 2:
				out[i] = int64(binary.BigEndian.Uint16(w))
			case 4:
				out[i] = int64(binary.BigEndian.Uint32(w))
			case 8:
				out[i] = int64(binary.BigEndian.Uint64(w))
			}
		}
		return out, nil
	}
	return b[:min(int(count), len(b))], nil // BIN, CHAR, NULL: the raw bytes
}

func (h rpmHeader) str(tag int32) string {
	s, _ := h[tag].(string)
	return s
}

func (h rpmHeader) strs(tag int32) []string {
	s, _ := h[tag].([]string)
	return s
}

func (h rpmHeader) ints(tag int32) []int64 {
	n, _ := h[tag].([]int64)
	return n
}

// rpmFile is one file an .rpm installs.
type rpmFile struct {
	Mode         int64
	User, Group  string
	Flags, MTime int64
	SHA256       string
}

// files are the package's files by path, or an error when its file tags
// disagree in length.
func (h rpmHeader) files() (map[string]rpmFile, error) {
	base, dirs, idx := h.strs(rpmTagBaseNames), h.strs(rpmTagDirNames), h.ints(rpmTagDirIndexes)
	modes, flags, mtimes := h.ints(rpmTagFileModes), h.ints(rpmTagFileFlags), h.ints(rpmTagFileMTimes)
	users, groups, digests := h.strs(rpmTagFileUserName), h.strs(rpmTagFileGroupName), h.strs(rpmTagFileDigests)
	n := len(base)
	for _, l := range []int{len(idx), len(modes), len(flags), len(mtimes), len(users), len(groups), len(digests)} {
		if l != n {
			return nil, fmt.Errorf("file tags of %d and %d entries", n, l)
		}
	}
	out := map[string]rpmFile{}
	for i := range base {
		if int(idx[i]) >= len(dirs) {
			return nil, fmt.Errorf("%s: directory index %d of %d", base[i], idx[i], len(dirs))
		}
		out[dirs[idx[i]]+base[i]] = rpmFile{Mode: modes[i], User: users[i], Group: groups[i], Flags: flags[i], MTime: mtimes[i], SHA256: digests[i]}
	}
	return out, nil
}
