package gitsync

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// The index is read and written here rather than by go-git's codec, which
// decodes every field through reflection: on a 10,000-entry index, decoding
// was most of a sync that found nothing to do, and encoding most of the
// finish of a one-file change. Versions 2 and 3, the ones git and sluice
// write by default, are read; any other version is left to go-git.

const (
	indexEntryHeader = 62 // the fixed part of an entry, up to and with its flags
	indexNameMask    = 0xfff
	indexExtended    = 0x4000
	indexSkipTree    = 1 << 14 // in the extended flags
	indexIntentToAdd = 1 << 13
)

var errIndexVersion = errors.New("index version not read here")

// readIndex reads .git/index of gitDir; a missing one is an empty index, as
// for go-git. Its extensions are not kept: sluice writes none back, and the
// entries are what a checkout compares. ModTime is the file's, as go-git sets
// it, for the racy-entry check. errIndexVersion says to ask go-git.
func readIndex(gitDir string) (*index.Index, error) {
	name := filepath.Join(gitDir, "index")
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return &index.Index{Version: 2}, nil
	}
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	idx, err := decodeIndex(data)
	if err != nil {
		return nil, err
	}
	idx.ModTime = fi.ModTime()
	return idx, nil
}

func decodeIndex(data []byte) (*index.Index, error) {
	if len(data) < 12+sha1.Size || !bytes.Equal(data[:4], []byte("DIRC")) {
		return nil, errors.New("index: not an index file")
	}
	body, sum := data[:len(data)-sha1.Size], data[len(data)-sha1.Size:]
	if got := sha1.Sum(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("index: checksum mismatch")
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version != 2 && version != 3 {
		return nil, errIndexVersion
	}
	n := int(binary.BigEndian.Uint32(data[8:12]))
	if n > len(body)/indexEntryHeader {
		return nil, errors.New("index: entry count beyond the file")
	}
	idx := &index.Index{Version: version, Entries: make([]*index.Entry, n)}
	all := make([]index.Entry, n) // one allocation for every entry
	off := 12
	for i := range n {
		if off+indexEntryHeader > len(body) {
			return nil, errors.New("index: truncated entry")
		}
		b := body[off:]
		e := &all[i]
		if sec, nsec := binary.BigEndian.Uint32(b[0:]), binary.BigEndian.Uint32(b[4:]); sec != 0 || nsec != 0 {
			e.CreatedAt = time.Unix(int64(sec), int64(nsec))
		}
		if sec, nsec := binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:]); sec != 0 || nsec != 0 {
			e.ModifiedAt = time.Unix(int64(sec), int64(nsec))
		}
		e.Dev = binary.BigEndian.Uint32(b[16:])
		e.Inode = binary.BigEndian.Uint32(b[20:])
		e.Mode = filemode.FileMode(binary.BigEndian.Uint32(b[24:]))
		e.UID = binary.BigEndian.Uint32(b[28:])
		e.GID = binary.BigEndian.Uint32(b[32:])
		e.Size = binary.BigEndian.Uint32(b[36:])
		copy(e.Hash[:], b[40:60])
		flags := binary.BigEndian.Uint16(b[60:])
		e.Stage = index.Stage(flags>>12) & 0x3
		read := indexEntryHeader
		if flags&indexExtended != 0 {
			if version < 3 || len(b) < read+2 {
				return nil, errors.New("index: extended flags in a version 2 entry")
			}
			ext := binary.BigEndian.Uint16(b[read:])
			e.SkipWorktree = ext&indexSkipTree != 0
			e.IntentToAdd = ext&indexIntentToAdd != 0
			read += 2
		}
		nameLen := int(flags & indexNameMask)
		if nameLen == indexNameMask {
			end := bytes.IndexByte(b[read:], 0)
			if end < 0 {
				return nil, errors.New("index: unterminated name")
			}
			nameLen = end
		}
		if len(b) < read+nameLen {
			return nil, errors.New("index: truncated name")
		}
		e.Name = string(b[read : read+nameLen])
		read += nameLen
		off += read + (8 - read%8)
		idx.Entries[i] = e
	}
	if off > len(body) {
		return nil, errors.New("index: truncated entry")
	}
	return idx, nil
}

// encodeIndex writes idx's entries (no extensions), sorted as git wants
// them, as a version 2 index, or 3 when an entry needs extended flags, with
// its checksum.
func encodeIndex(w *bufio.Writer, idx *index.Index) error {
	slices.SortFunc(idx.Entries, func(a, b *index.Entry) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Stage, b.Stage))
	})
	version := uint32(2)
	for _, e := range idx.Entries {
		if e.SkipWorktree || e.IntentToAdd {
			version = 3
		}
	}
	h := sha1.New()
	out := bufio.NewWriterSize(multiWriter{w, h}, 64<<10)
	var buf [indexEntryHeader + 2 + 8]byte
	copy(buf[:4], "DIRC")
	binary.BigEndian.PutUint32(buf[4:], version)
	binary.BigEndian.PutUint32(buf[8:], uint32(len(idx.Entries)))
	out.Write(buf[:12])
	var zeros [8]byte
	for _, e := range idx.Entries {
		b := buf[:indexEntryHeader]
		putTime(b[0:], e.CreatedAt)
		putTime(b[8:], e.ModifiedAt)
		binary.BigEndian.PutUint32(b[16:], e.Dev)
		binary.BigEndian.PutUint32(b[20:], e.Inode)
		binary.BigEndian.PutUint32(b[24:], uint32(e.Mode))
		binary.BigEndian.PutUint32(b[28:], e.UID)
		binary.BigEndian.PutUint32(b[32:], e.GID)
		binary.BigEndian.PutUint32(b[36:], e.Size)
		copy(b[40:60], e.Hash[:])
		flags := uint16(e.Stage&0x3) << 12
		flags |= uint16(min(len(e.Name), indexNameMask))
		if version == 3 && (e.SkipWorktree || e.IntentToAdd) {
			flags |= indexExtended
			var ext uint16
			if e.SkipWorktree {
				ext |= indexSkipTree
			}
			if e.IntentToAdd {
				ext |= indexIntentToAdd
			}
			b = buf[:indexEntryHeader+2]
			binary.BigEndian.PutUint16(b[indexEntryHeader:], ext)
		}
		binary.BigEndian.PutUint16(b[60:], flags)
		out.Write(b)
		out.WriteString(e.Name)
		wrote := len(b) + len(e.Name)
		out.Write(zeros[:8-wrote%8])
	}
	if err := out.Flush(); err != nil {
		return err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}

// putTime writes t as git does: seconds and nanoseconds, zero for the zero
// time.
func putTime(b []byte, t time.Time) {
	if t.IsZero() || t.Unix() < 0 {
		binary.BigEndian.PutUint64(b, 0)
		return
	}
	binary.BigEndian.PutUint32(b, uint32(t.Unix()))
	binary.BigEndian.PutUint32(b[4:], uint32(t.Nanosecond()))
}

type multiWriter struct {
	w *bufio.Writer
	h interface{ Write([]byte) (int, error) }
}

func (m multiWriter) Write(p []byte) (int, error) {
	m.h.Write(p)
	return m.w.Write(p)
}

// indexMode is the mode git records in the index for a tree entry's mode.
func indexMode(m filemode.FileMode) filemode.FileMode {
	if m == filemode.Deprecated {
		return filemode.Regular
	}
	return m
}

// writeIndex replaces .git/index atomically: a sync stopped half way leaves
// either index whole.
func writeIndex(gitDir string, idx *index.Index) error {
	tmp := filepath.Join(gitDir, "sluice-index.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	err = encodeIndex(w, idx)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(gitDir, "index"))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}
