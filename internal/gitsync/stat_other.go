//go:build !linux

package gitsync

import (
	"io/fs"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

func fillSysStat(*index.Entry, fs.FileInfo) {}

func sameInode(*index.Entry, fs.FileInfo) bool { return true }
