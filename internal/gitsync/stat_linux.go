package gitsync

import (
	"io/fs"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// fillSysStat copies the inode data git keeps in an index entry, so that the
// git CLI, run by an operator, trusts the entries sluice writes.
func fillSysStat(e *index.Entry, fi fs.FileInfo) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.CreatedAt = time.Unix(st.Ctim.Unix())
		e.Dev = uint32(st.Dev)
		e.Inode = uint32(st.Ino)
		e.UID = st.Uid
		e.GID = st.Gid
	}
}

// sameInode reports whether fi is the file e was recorded from, as far as the
// inode number tells; an entry without one matches.
func sameInode(e *index.Entry, fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || e.Inode == 0 || e.Inode == uint32(st.Ino)
}
