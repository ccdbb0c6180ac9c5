package storage

import (
	"errors"
	"syscall"
)

const noFollow = syscall.O_NOFOLLOW

// IsNoSpace reports whether err is the filesystem being full (or the
// user's quota spent): a condition that frees itself when space does,
// unlike a broken store.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// FreeSpace reports the bytes available to this user and the total size
// of the filesystem holding path.
func FreeSpace(path string) (avail, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
