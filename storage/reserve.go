package storage

import (
	"os"
	"path/filepath"
)

// ReserveFile holds disk space back for the writes that record an
// outcome: when the disk fills up (a flood of stream lines, another
// program), a run's verdict and its end receipt must still land, or the
// operator is left with a run that says "running" forever.
const ReserveFile = "warden.reserve"

// ReserveSize is the reserve's size: a verdict commit touches a few
// pages; this is room for a few hundred of them.
const ReserveSize = 1 << 20

// ensureReserve makes the reserve file when it is missing or short, best
// effort: on a disk too full for it, there is simply no reserve.
func (s *Store) ensureReserve() {
	path := filepath.Join(s.dir, ReserveFile)
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() >= ReserveSize {
		return
	}
	os.Remove(path)
	// Written, not truncated: a sparse file would hold nothing back.
	if err := WriteFileAtomic(path, make([]byte, ReserveSize), 0o600); err != nil {
		os.Remove(path)
	}
}

// releaseReserve gives the reserve's space back to the filesystem; it
// reports whether there was any to give.
func (s *Store) releaseReserve() bool {
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	path := filepath.Join(s.dir, ReserveFile)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return false
	}
	return os.Remove(path) == nil
}

// UpdateReserved is Update for the writes that record an outcome (a run's
// verdict, its end receipt, its token's revocation). When the disk is
// full it gives up the store's reserve and tries once more; the reserve
// is made again at the next Open.
func (s *Store) UpdateReserved(fn func(*Tx) error) ([]Receipt, error) {
	rs, err := s.Update(fn)
	if err == nil || !IsNoSpace(err) || !s.releaseReserve() {
		return rs, err
	}
	return s.Update(fn)
}
