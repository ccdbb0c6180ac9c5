package jail

import "path/filepath"

// Egress mode: the hook's network is a list of names. The jail keeps its
// empty network namespace (bwrap brings loopback up in it), seccomp lets
// the hook make AF_INET/AF_INET6 sockets (there is no route anywhere but
// the jail's own loopback, so the namespace is the boundary), and the
// jail's first program is `warden hook egress-bridge`, which opens
// listeners on 127.0.0.1:3128 and :1080, hands them to the run's proxy
// over its socket, and execs the hook.

// EgressSocketName is the proxy's socket in the run dir;
// EgressSocketTarget is the same socket seen inside the jail.
const (
	EgressSocketName   = "egress.sock"
	EgressSocketTarget = RunTarget + "/" + EgressSocketName
)

// Egress switches the spawner to egress mode, its proxy listening on
// socket in the run dir (handed to the hook's uid, as the broker's is).
func (s *Spawner) Egress(socket string) error {
	if err := s.j.HandOver(filepath.Dir(socket), socket); err != nil {
		return err
	}
	s.egress = true
	return nil
}

// bridgeArgv puts the bridge before the hook's own argv.
func bridgeArgv(argv []string) []string {
	return append([]string{WardenTarget, "hook", "egress-bridge", "--socket", EgressSocketTarget, "--"}, argv...)
}
