package main

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"

	"github.com/wardenhq/warden/engine"
)

// learnedProfile is what `warden run --learn` prints at the end: the
// profile that would have allowed what the session tried, as a diff
// against the one it ran with. Learning grants nothing.
type learnedProfile struct {
	Profile string   `json:"profile"`
	Hosts   []string `json:"hosts"` // the profile's, and --allow-host's
	Add     []string `json:"add"`   // asked for and refused: what would allow them
	// Paths says what this backend can tell of refused paths.
	Paths string `json:"paths"`
}

func learn(cr *engine.CommandRun, o engine.Outcome) *learnedProfile {
	l := &learnedProfile{Profile: cr.Profile, Hosts: append([]string{}, cr.Hosts...), Add: []string{},
		Paths: "not learned: neither backend reports the paths a command was refused (bwrap's are simply absent, Landlock's are EACCES inside the command); add them with --ro or the profile's ro: list"}
	if l.Profile == "" {
		l.Profile = engine.NoProfile
	}
	for _, p := range cr.Loopback {
		l.Hosts = append(l.Hosts, "localhost:"+strconv.Itoa(int(p)))
	}
	for _, dest := range o.Refused {
		entry := profileEntry(dest)
		if !slices.Contains(l.Hosts, entry) && !slices.Contains(l.Add, entry) {
			l.Add = append(l.Add, entry)
		}
	}
	return l
}

// profileEntry is a refused host:port as a profile's hosts (and
// --allow-host) name it: an address as ip:A:PORT, the host's loopback as
// localhost:PORT.
func profileEntry(dest string) string {
	ap, err := netip.ParseAddrPort(dest)
	switch {
	case err != nil:
		return dest
	case ap.Addr().IsLoopback():
		return "localhost:" + strconv.Itoa(int(ap.Port()))
	}
	return "ip:" + dest
}

func (l *learnedProfile) print(w io.Writer) {
	fmt.Fprintf(w, "learned (nothing is granted by learning): profile %s would have allowed this session with\n  hosts:\n", safe(l.Profile))
	for _, h := range l.Hosts {
		fmt.Fprintf(w, "     - %s\n", safe(h))
	}
	for _, h := range l.Add {
		fmt.Fprintf(w, "  +  - %s   (asked for, refused)\n", safe(h))
	}
	if len(l.Add) == 0 {
		fmt.Fprintln(w, "  (no host beyond the profile's was asked for)")
	}
	fmt.Fprintf(w, "  paths: %s\n", l.Paths)
}
