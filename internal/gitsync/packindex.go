package gitsync

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// indexPack reads the pack in f and returns its index and checksum, with
// memory that does not grow with the pack's largest object. It does what
// go-git's packfile.Parser does for a received pack, which in v5.19.3
// inflates every object whole into a buffer in resolveDeltas, even one that
// no delta is based on (a 100 MiB blob took 100 MiB of heap); here:
//
//   - a whole object is inflated once, as a stream through its hash;
//   - a delta is applied as a stream from its base, read at random from
//     memory when the base is small and from a temporary file in tmpDir
//     when it is larger than StreamAbove or the bases held already take
//     maxHeldBases.
//
// Like go-git's, it refuses a delta whose base the pack lacks (go-git asks
// for no thin pack), and checks the pack's trailing checksum.
//
// When c is not nil, each object of up to StreamAbove bytes, whole or
// made from a delta, goes into it as it is hashed: the object cache go-git
// looks in before it inflates an object from a pack, and puts every object
// of that size it inflates in (see openRepo). The checkout that follows a
// fetch then reads each file from the cache instead of inflating it (and
// applying its deltas) a second time; the cache's own bound, not the pack,
// limits what is held, as it does for go-git's reads.
func indexPack(f *os.File, tmpDir string, c cache.Object) (*idxfile.MemoryIndex, plumbing.Hash, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	sc := packfile.NewScanner(f)
	_, count, err := sc.Header()
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}

	// Every object in pack order: a whole one hashed as it is read, a
	// delta noted with its base for the second pass. The CRC, which the
	// index holds for each object, is of its compressed bytes.
	objs := make([]*packObject, 0, min(count, 1<<16))
	r := &resolver{
		sc: sc, tmpDir: tmpDir, cache: c,
		ofs: make(map[int64][]*packObject), ref: make(map[plumbing.Hash][]*packObject),
		buf: make([]byte, 32<<10),
	}
	for range count {
		oh, err := sc.NextObjectHeader()
		if err != nil {
			return nil, plumbing.ZeroHash, err
		}
		o := &packObject{offset: oh.Offset, typ: oh.Type}
		var w io.Writer = io.Discard
		var h plumbing.Hasher
		var kept *keptObject
		switch oh.Type {
		case plumbing.OFSDeltaObject:
			r.ofs[oh.OffsetReference] = append(r.ofs[oh.OffsetReference], o)
			o.delta = true
		case plumbing.REFDeltaObject:
			r.ref[oh.Reference] = append(r.ref[oh.Reference], o)
			o.delta = true
		case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
			h = plumbing.NewHasher(oh.Type, oh.Length)
			w = h
			if kept = r.keeper(oh.Type, oh.Length); kept != nil {
				w = io.MultiWriter(h, kept)
			}
		default:
			return nil, plumbing.ZeroHash, fmt.Errorf("%w: object at offset %d has type %d", packfile.ErrMalformedPackFile, oh.Offset, oh.Type)
		}
		n, crc, err := sc.NextObject(w)
		if err != nil {
			return nil, plumbing.ZeroHash, fmt.Errorf("read object at offset %d: %w", oh.Offset, err)
		}
		if n != oh.Length {
			return nil, plumbing.ZeroHash, fmt.Errorf("%w: object at offset %d holds %d bytes, not %d", packfile.ErrMalformedPackFile, oh.Offset, n, oh.Length)
		}
		o.crc, o.size = crc, oh.Length
		if !o.delta {
			o.hash = h.Sum()
		}
		r.keep(kept, o.hash)
		objs = append(objs, o)
	}
	sum, err := sc.Checksum()
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}

	// Then each whole object that deltas are based on, with its deltas
	// and theirs, depth first.
	for _, o := range objs {
		if o.delta || !r.hasChildren(o) {
			continue
		}
		src, err := r.inflate(o)
		if err != nil {
			return nil, plumbing.ZeroHash, err
		}
		err = r.resolve(o, src, 1)
		src.release(r)
		if err != nil {
			return nil, plumbing.ZeroHash, err
		}
	}

	w := new(idxfile.Writer)
	if err := w.OnHeader(count); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	for _, o := range objs {
		if o.delta && !o.resolved {
			return nil, plumbing.ZeroHash, fmt.Errorf("delta at offset %d: its base is not in the pack: %w", o.offset, packfile.ErrReferenceDeltaNotFound)
		}
		w.Add(o.hash, uint64(o.offset), o.crc)
	}
	if err := w.OnFooter(sum); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	idx, err := w.Index()
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	return idx, sum, nil
}

// keptObject is an object indexPack puts in the object cache: written
// once as it is hashed, then only read, like the plumbing.MemoryObject
// go-git caches (whose Hash would hash the content again).
type keptObject struct {
	typ  plumbing.ObjectType
	hash plumbing.Hash
	data []byte
}

func (o *keptObject) Hash() plumbing.Hash           { return o.hash }
func (o *keptObject) Type() plumbing.ObjectType     { return o.typ }
func (o *keptObject) SetType(t plumbing.ObjectType) { o.typ = t }
func (o *keptObject) Size() int64                   { return int64(len(o.data)) }
func (o *keptObject) SetSize(int64)                 {}
func (o *keptObject) Writer() (io.WriteCloser, error) {
	return nil, errors.New("a cached object is read only")
}
func (o *keptObject) Reader() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(o.data)), nil
}

// Write appends p, up to the size the object was made for: an object longer
// than its header says fails its read (indexPack) before it is kept.
func (o *keptObject) Write(p []byte) (int, error) {
	if len(o.data)+len(p) > cap(o.data) {
		return 0, fmt.Errorf("%w: an object is longer than it says", packfile.ErrMalformedPackFile)
	}
	o.data = append(o.data, p...)
	return len(p), nil
}

// packObject is one object of a pack being indexed.
type packObject struct {
	offset   int64
	size     int64               // inflated: the object's, or for a delta the target's once resolved
	typ      plumbing.ObjectType // for a delta, its base's once resolved
	crc      uint32
	hash     plumbing.Hash // zero for a delta until resolved
	delta    bool
	resolved bool
}

// maxDeltaDepth is the longest chain of deltas accepted, git's own bound
// (pack-objects' OE_DEPTH_BITS), as go-git's parser has it.
const maxDeltaDepth = 4095

// maxHeldBases bounds the bytes of delta bases held in memory at once
// along a chain; a base past it goes to a temporary file.
const maxHeldBases = 16 << 20

// resolver resolves the deltas of one pack.
type resolver struct {
	sc     *packfile.Scanner
	tmpDir string
	ofs    map[int64][]*packObject         // the deltas of a base, by the base's offset
	ref    map[plumbing.Hash][]*packObject // the deltas of a base, by its hash
	held   int64                           // bytes of bases in memory
	cache  cache.Object                    // where objects are kept for the checkout; nil: nowhere
	buf    []byte                          // for copies
	br     *bufio.Reader
}

func (r *resolver) hasChildren(o *packObject) bool {
	return len(r.ofs[o.offset]) > 0 || len(r.ref[o.hash]) > 0
}

// children takes the deltas based on o, which are resolved once.
func (r *resolver) children(o *packObject) []*packObject {
	kids := append(r.ofs[o.offset], r.ref[o.hash]...)
	delete(r.ofs, o.offset)
	delete(r.ref, o.hash)
	return kids
}

// inflate returns the content of whole object o.
func (r *resolver) inflate(o *packObject) (*content, error) {
	if _, err := r.sc.SeekObjectHeader(o.offset); err != nil {
		return nil, fmt.Errorf("read object at offset %d: %w", o.offset, err)
	}
	c, err := r.newContent(o.size)
	if err != nil {
		return nil, err
	}
	if _, _, err := r.sc.NextObject(c); err != nil {
		c.release(r)
		return nil, fmt.Errorf("read object at offset %d: %w", o.offset, err)
	}
	if err := c.done(); err != nil {
		c.release(r)
		return nil, err
	}
	return c, nil
}

// resolve hashes every delta based on o, whose content src holds, and
// then, depth first, the deltas based on each of them.
func (r *resolver) resolve(o *packObject, src *content, depth int) error {
	if depth > maxDeltaDepth {
		return fmt.Errorf("%w: delta chain depth exceeds %d", packfile.ErrMalformedPackFile, maxDeltaDepth)
	}
	for _, d := range r.children(o) {
		if d.resolved {
			continue
		}
		if _, err := r.sc.SeekObjectHeader(d.offset); err != nil {
			return fmt.Errorf("read delta at offset %d: %w", d.offset, err)
		}
		rc, err := r.sc.ReadObject()
		if err != nil {
			return fmt.Errorf("read delta at offset %d: %w", d.offset, err)
		}
		// A delta's content is kept only for the deltas based on it. One
		// based on its hash is known only once that is computed, so while
		// any is unresolved, every content is kept.
		keep := len(r.ofs[d.offset]) > 0 || len(r.ref) > 0
		dc, err := r.applyDelta(d, o.typ, src, rc, keep)
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("delta at offset %d: %w", d.offset, err)
		}
		if dc == nil {
			continue
		}
		if r.hasChildren(d) {
			err = r.resolve(d, dc, depth+1)
		}
		dc.release(r)
		if err != nil {
			return err
		}
	}
	return nil
}

// applyDelta applies the delta that rc inflates to base, hashing the result
// as a typ object: d's type, size and hash. When keep, the result is also
// returned as content.
func (r *resolver) applyDelta(d *packObject, typ plumbing.ObjectType, base *content, rc io.Reader, keep bool) (*content, error) {
	if r.br == nil {
		r.br = bufio.NewReaderSize(rc, 64<<10)
	} else {
		r.br.Reset(rc)
	}
	delta := r.br
	baseSize, err := readDeltaSize(delta)
	if err != nil {
		return nil, err
	}
	if baseSize != base.size {
		return nil, fmt.Errorf("%w: it names a base of %d bytes, not %d", packfile.ErrInvalidDelta, baseSize, base.size)
	}
	size, err := readDeltaSize(delta)
	if err != nil {
		return nil, err
	}
	h := plumbing.NewHasher(typ, size)
	var (
		dst io.Writer = h
		out *content
	)
	kept := r.keeper(typ, size)
	if kept != nil {
		dst = io.MultiWriter(h, kept)
	}
	if keep {
		if out, err = r.newContent(size); err != nil {
			return nil, err
		}
		dst = io.MultiWriter(dst, out)
	}
	if err := r.patch(dst, base, delta, size); err != nil {
		out.release(r)
		return nil, err
	}
	if out != nil {
		if err := out.done(); err != nil {
			out.release(r)
			return nil, err
		}
	}
	d.typ, d.size, d.hash, d.resolved = typ, size, h.Sum(), true
	r.keep(kept, d.hash)
	return out, nil
}

// keeper returns an object to write a typ object of size bytes to, as it
// is hashed, for keep: nil when there is no cache or the object is larger
// than StreamAbove, above which go-git's reads keep nothing either.
func (r *resolver) keeper(typ plumbing.ObjectType, size int64) *keptObject {
	if r.cache == nil || size > StreamAbove {
		return nil
	}
	return &keptObject{typ: typ, data: make([]byte, 0, size)}
}

// keep puts o, whose content was hashed as h, in the cache; a nil o is a
// no-op.
func (r *resolver) keep(o *keptObject, h plumbing.Hash) {
	if o != nil {
		o.hash = h
		r.cache.Put(o)
	}
}

// patch writes the size bytes that the instructions in delta make of base
// to dst: copies from base, read where they lie, and literal bytes. It is
// git's delta format, which go-git's packfile.ReaderFromDelta also reads,
// but that one reads its base as a stream, again from the start for every
// copy that goes back.
func (r *resolver) patch(dst io.Writer, base *content, delta *bufio.Reader, size int64) error {
	invalid := func(what string) error { return fmt.Errorf("%w: %s", packfile.ErrInvalidDelta, what) }
	for left := size; left > 0; {
		cmd, err := delta.ReadByte()
		if err != nil {
			return invalid("it ends before its target")
		}
		switch {
		case cmd&0x80 != 0:
			var off, n int64
			for i := range 4 {
				if cmd&(1<<i) != 0 {
					b, err := delta.ReadByte()
					if err != nil {
						return invalid("it ends in a copy")
					}
					off |= int64(b) << (8 * i)
				}
			}
			for i := range 3 {
				if cmd&(0x10<<i) != 0 {
					b, err := delta.ReadByte()
					if err != nil {
						return invalid("it ends in a copy")
					}
					n |= int64(b) << (8 * i)
				}
			}
			if n == 0 {
				n = 0x10000
			}
			if n > left || off+n > base.size {
				return invalid("a copy lies outside its base or target")
			}
			if _, err := io.CopyBuffer(dst, io.NewSectionReader(base, off, n), r.buf); err != nil {
				return err
			}
			left -= n
		case cmd != 0:
			n := int64(cmd)
			if n > left {
				return invalid("an insert lies outside its target")
			}
			if c, err := io.CopyBuffer(dst, io.LimitReader(delta, n), r.buf); err != nil || c != n {
				return orErr(err, invalid("it ends in an insert"))
			}
			left -= n
		default:
			return invalid("it holds the reserved instruction 0")
		}
	}
	if _, err := delta.ReadByte(); !errors.Is(err, io.EOF) {
		return orErr(err, invalid("it goes on past its target"))
	}
	return nil
}

// orErr returns err when it is set, else def.
func orErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// readDeltaSize reads one of the two sizes that open a delta.
func readDeltaSize(r io.ByteReader) (int64, error) {
	var n int64
	for shift := 0; shift < 63; shift += 7 {
		b, err := r.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("%w: it ends in its header", packfile.ErrInvalidDelta)
		}
		n |= int64(b&0x7f) << shift
		if b&0x80 == 0 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: a size in its header overflows", packfile.ErrInvalidDelta)
}

// content holds an object's bytes for the deltas based on it: in memory,
// or in a temporary file when large. It is written once, then read at
// random.
type content struct {
	size int64
	mem  []byte
	file *os.File
	w    *bufio.Writer // buffers the writes to file
	n    int64         // bytes written
}

func (r *resolver) newContent(size int64) (*content, error) {
	c := &content{size: size}
	if size <= StreamAbove && r.held+size <= maxHeldBases {
		c.mem = make([]byte, 0, size)
		r.held += size
		return c, nil
	}
	f, err := os.CreateTemp(r.tmpDir, "tmp_pack_base_")
	if err != nil {
		return nil, fmt.Errorf("hold a delta base: %w", err)
	}
	c.file, c.w = f, bufio.NewWriterSize(f, 64<<10)
	return c, nil
}

func (c *content) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.size {
		return 0, fmt.Errorf("%w: an object is longer than it says", packfile.ErrMalformedPackFile)
	}
	c.n += int64(len(p))
	if c.file == nil {
		c.mem = append(c.mem, p...)
		return len(p), nil
	}
	return c.w.Write(p)
}

// done ends the writes.
func (c *content) done() error {
	if c.n != c.size {
		return fmt.Errorf("%w: an object is shorter than it says", packfile.ErrMalformedPackFile)
	}
	if c.file != nil {
		return c.w.Flush()
	}
	return nil
}

func (c *content) ReadAt(p []byte, off int64) (int, error) {
	if c.file != nil {
		return c.file.ReadAt(p, off)
	}
	if off >= int64(len(c.mem)) {
		return 0, io.EOF
	}
	n := copy(p, c.mem[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// release frees c; a nil c is a no-op.
func (c *content) release(r *resolver) {
	if c == nil {
		return
	}
	if c.file != nil {
		name := c.file.Name()
		_ = c.file.Close()
		_ = os.Remove(name)
		return
	}
	r.held -= c.size
	c.mem = nil
}
